"""Every broker's log dirs, as an operator hands them to export: one replica of each partition
per broker, written by ``storage.partition_log.PartitionLog`` with checkpoints by
``storage.checkpoints`` and ``meta.properties`` as ``pykraft broker`` writes it.

Replicas share one history (the same batches, offsets and leader epochs) up to where each
stopped; a deposed leader's replica may continue with records of its own in an older leader
epoch that no other replica has (the KIP-101 divergence), which only truncation would remove.
Expected rows come from ``tests.export.fixtures.expected_log_rows`` (storage's own reader).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import CompressionType
from pykraft.storage.records import Header, SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.export.fixtures import BASE_MS, LogFixture

CLUSTER_ID = "pykraft-replicas-test-cluster"
SEGMENT_BYTES = 700  # several segments per replica
# The shared history's leader epochs: (first batch, leader epoch). A replica whose history
# ends at batch 6 can hold a stale tail of epoch 3's leader, which epoch 5's leader replaced.
EPOCH_STARTS = ((0, 0), (4, 3), (6, 5))


@attrs.frozen
class ReplicaSpec:
    """One broker's replica: ``batches`` batches of the shared history, then ``stale``
    batches of a deposed leader's own; the high watermark after ``committed`` batches, or no
    checkpoint entry at all when ``committed`` is None."""

    batches: int
    committed: int | None
    stale: int = 0


@attrs.frozen
class Replicas:
    log_dirs: tuple[Path, ...]  # log dir i belongs to broker node_ids[i]
    node_ids: tuple[int, ...]
    # (partition, log dir index) -> (directory, high watermark, log end offset)
    replicas: dict[tuple[TopicPartition, int], tuple[Path, int, int]]

    @property
    def log_dirs_option(self) -> str:
        return ",".join(str(d) for d in self.log_dirs)

    def as_read_from(self, chosen: dict[TopicPartition, int]) -> LogFixture:
        """The single-replica fixture a scan reading log dir ``chosen[tp]`` should equal."""
        partitions = {}
        for tp, index in chosen.items():
            directory, hw, leo = self.replicas[(tp, index)]
            partitions[tp] = (directory, 0, hw, leo)
        return LogFixture(self.log_dirs, partitions)


def batch_records(tp: TopicPartition, batch: int, *, stale: bool) -> list[SimpleRecord]:
    """1-4 records; a deposed leader's differ in value, so reading them shows in the rows."""
    origin = "deposed leader" if stale else "history"
    return [
        SimpleRecord(
            value=f"{tp} {origin} batch {batch} record {i}".encode(),
            key=None if i == 0 else f"k{batch}-{i}".encode(),
            timestamp=BASE_MS + batch * 10 + i,
            headers=(Header("n", str(i).encode()),) if i % 2 else (),
        )
        for i in range(1 + batch % 4)
    ]


def history_epoch(batch: int) -> int:
    return max(epoch for first, epoch in EPOCH_STARTS if first <= batch)


def append_history(
    log: PartitionLog, tp: TopicPartition, first: int, last: int, *, stale: bool = False
) -> None:
    """Append batches ``first..last-1`` of the shared history, or of a deposed leader's
    tail after batch ``first - 1``: same offsets, other records, its own older epoch."""
    codecs = tuple(CompressionType)
    # A stale tail was written by the leader of the epoch the replica's history ended in.
    for batch in range(first, last):
        epoch = history_epoch(first - 1) if stale else history_epoch(batch)
        data = build_batch(
            batch_records(tp, batch, stale=stale), compression=codecs[batch % len(codecs)]
        )
        log.append_as_leader(bytearray(data), epoch, BASE_MS + batch)


def write_replica(directory: Path, tp: TopicPartition, spec: ReplicaSpec) -> tuple[int, int]:
    """The replica's ``(high watermark, log end offset)``; 0 for a missing checkpoint entry."""
    log = PartitionLog.open(directory, LogConfig(segment_bytes=SEGMENT_BYTES))
    hw = 0
    if spec.committed is not None:
        assert spec.committed <= spec.batches
        append_history(log, tp, 0, spec.committed)
        hw = log.log_end_offset
    append_history(log, tp, spec.committed or 0, spec.batches)
    # Invariant: a stale tail diverges from the history (a new leader epoch starts there).
    assert not spec.stale or history_epoch(spec.batches) > history_epoch(spec.batches - 1)
    append_history(log, tp, spec.batches, spec.batches + spec.stale, stale=True)
    leo = log.log_end_offset
    log.update_high_watermark(hw)
    log.flush()
    log.close()
    return hw, leo


def write_meta_properties(log_dir: Path, node_id: int | None, cluster_id: str = CLUSTER_ID) -> None:
    """What ``pykraft broker`` writes at first start (pykraft/broker_cmd.py)."""
    node = "" if node_id is None else f"node.id={node_id}\n"
    (log_dir / "meta.properties").write_text(
        f"#\n#Written by pykraft\nversion=1\ncluster.id={cluster_id}\n{node}", encoding="utf-8"
    )


def build_replicas(
    root: Path,
    layout: dict[TopicPartition, tuple[ReplicaSpec, ...]],
    node_ids: tuple[int, ...] = (1, 2, 3),
) -> Replicas:
    """Log dir i (broker ``node_ids[i]``) holds replica i of every partition in ``layout``."""
    log_dirs = tuple(root / f"broker-{node}" for node in node_ids)
    replicas: dict[tuple[TopicPartition, int], tuple[Path, int, int]] = {}
    for index, log_dir in enumerate(log_dirs):
        log_dir.mkdir(parents=True)
        write_meta_properties(log_dir, node_ids[index])
        high_watermarks, log_starts = {}, {}
        for tp, specs in layout.items():
            directory = log_dir / tp.dir_name()
            hw, leo = write_replica(directory, tp, specs[index])
            replicas[(tp, index)] = (directory, hw, leo)
            log_starts[tp] = 0
            if specs[index].committed is not None:
                high_watermarks[tp] = hw
        write_offset_checkpoint(log_dir / REPLICATION_CHECKPOINT, high_watermarks)
        write_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, log_starts)
    return Replicas(log_dirs, node_ids, replicas)


def three_brokers(root: Path) -> Replicas:
    """clicks-0: broker 2 has the highest high watermark, broker 1 is a deposed leader with
    the longest log (a stale tail), broker 3 has no checkpoint entry. clicks-1: broker 3 is
    ahead, brokers 1 and 2 tie on the high watermark."""
    return build_replicas(
        root,
        {
            TopicPartition("clicks", 0): (
                ReplicaSpec(6, committed=6, stale=6),
                ReplicaSpec(10, committed=9),
                ReplicaSpec(7, committed=None),
            ),
            TopicPartition("clicks", 1): (
                ReplicaSpec(8, committed=5),
                ReplicaSpec(9, committed=5),
                ReplicaSpec(8, committed=8),
            ),
        },
    )


def catch_up(replicas: Replicas, tp: TopicPartition, index: int, batches: int) -> int:
    """Replica ``index`` fetches the history up to ``batches`` batches and its high watermark
    reaches its new log end (a follower rejoining the ISR); returns that high watermark."""
    directory, _, _ = replicas.replicas[(tp, index)]
    log = PartitionLog.open(directory, LogConfig(segment_bytes=SEGMENT_BYTES))
    first = _batches_in(log)
    append_history(log, tp, first, batches)
    hw = log.update_high_watermark(log.log_end_offset)
    log.flush()
    log.close()
    checkpoint = replicas.log_dirs[index] / REPLICATION_CHECKPOINT
    offsets = read_offset_checkpoint(checkpoint)
    offsets[tp] = hw
    write_offset_checkpoint(checkpoint, offsets)
    replicas.replicas[(tp, index)] = (directory, hw, hw)
    return hw


def _batches_in(log: PartitionLog) -> int:
    """How many history batches a (non-stale) replica holds: batch b has 1 + b % 4 records."""
    batches, offset = 0, 0
    while offset < log.log_end_offset:
        offset += 1 + batches % 4
        batches += 1
    assert offset == log.log_end_offset, "catch_up is for replicas without a stale tail"
    return batches
