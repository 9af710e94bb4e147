"""Which replica a scan reads when every broker's log dirs are given (pure; no Spark).

The rule (export.replica_choice): only committed data is read and replicas agree below their
high watermarks (Kafka's replication: a replica's high watermark never passes what the ISR
holds; KIP-101 truncation only removes records above it), so read the replica with the highest
checkpointed high watermark; ties to the larger log end offset, then the first log dir given.
With ignoreHighWatermark: the largest log end offset; ties to the higher high watermark.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pykraft.export.export_topic_job import available_offsets, readable
from pykraft.export.log_dirs import LogScanError, measure_log_end_offset
from pykraft.export.log_scan import LogFilter, discover_partitions, plan_splits
from pykraft.export.manifest import ExportedRange, Manifest, begin_run, commit_run, plan_export
from pykraft.export.replica_choice import ReplicaCandidate, choose_replica, same_broker_duplicate
from pykraft.storage.checkpoints import REPLICATION_CHECKPOINT, write_offset_checkpoint
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition
from tests.export.replica_fixtures import (
    Replicas,
    ReplicaSpec,
    append_history,
    build_replicas,
    catch_up,
    three_brokers,
    write_meta_properties,
)

TP = TopicPartition("clicks", 0)


def replica(
    index: int, high_watermark: int, log_end_offset: int, node_id: int | None = None
) -> ReplicaCandidate:
    return ReplicaCandidate(
        TP,
        Path(f"/logs-{index}/clicks-0"),
        index,
        index + 1 if node_id is None else node_id,
        0,
        high_watermark,
        log_end_offset,
    )


def check(
    replicas: list[tuple[int, int, int]],
    expected_index: int,
    *,
    ignore_high_watermark: bool = False,
) -> None:
    """``replicas``: (log dir index, high watermark, log end offset), in the order found."""
    candidates = [replica(*r) for r in replicas]
    chosen = choose_replica(candidates, ignore_high_watermark=ignore_high_watermark)
    assert chosen.log_dir_index == expected_index, (replicas, ignore_high_watermark)


def test_committed_rule_highest_high_watermark() -> None:
    # RF=3, three brokers' log dirs, different high watermarks: the highest wins whatever
    # the log end offsets (the deposed leader at index 2 holds the most uncommitted records).
    check([(0, 10, 12), (1, 14, 14), (2, 12, 20)], 1)
    check([(0, 14, 14), (1, 10, 12), (2, 12, 20)], 0)
    check([(0, 10, 12), (1, 12, 20), (2, 14, 14)], 2)
    # Ties on the high watermark: the larger log end offset (it is the likelier leader, and
    # any replica reads the same committed records).
    check([(0, 14, 15), (1, 14, 18), (2, 10, 20)], 1)
    check([(0, 14, 18), (1, 14, 15), (2, 14, 16)], 0)
    # Ties on both: the log dir given first, whatever order the replicas were found in.
    check([(0, 14, 18), (1, 14, 18), (2, 14, 18)], 0)
    check([(2, 14, 18), (1, 14, 18)], 1)
    # A replica whose checkpoint lacks the partition counts as high watermark 0: it loses to
    # any replica that has committed something, even with a longer log.
    check([(0, 0, 40), (1, 3, 5)], 1)
    # No replica has committed anything: all 0, so the longest log (nothing is read anyway).
    check([(0, 0, 4), (1, 0, 9), (2, 0, 9)], 1)
    check([(0, 7, 9)], 0)  # one replica: nothing to choose


def test_ignore_high_watermark_rule_largest_log_end_offset() -> None:
    check([(0, 10, 12), (1, 14, 14), (2, 12, 20)], 2, ignore_high_watermark=True)
    check([(0, 0, 40), (1, 3, 5)], 0, ignore_high_watermark=True)
    # Ties on the log end offset: the higher high watermark, then the first log dir.
    check([(0, 10, 20), (1, 12, 20), (2, 11, 20)], 1, ignore_high_watermark=True)
    check([(1, 12, 20), (0, 12, 20)], 0, ignore_high_watermark=True)


def test_same_broker_duplicates_are_found_unknown_brokers_are_not() -> None:
    a, b, c = replica(0, 1, 1, node_id=5), replica(1, 1, 1, node_id=6), replica(2, 1, 1, 5)
    assert same_broker_duplicate([a, b]) is None
    assert same_broker_duplicate([a, b, c]) == (a, c)
    # No meta.properties (node_id None): cannot be placed on a broker, never a duplicate.
    unknown = [ReplicaCandidate(TP, Path(f"/d{i}"), i, None, 0, 1, 1) for i in range(2)]
    assert same_broker_duplicate(unknown) is None
    assert same_broker_duplicate([*unknown, a]) is None


# ------------------------------------------------------------------- from the log dirs


def chosen_dirs(
    replicas: Replicas, *, ignore_high_watermark: bool = False
) -> dict[TopicPartition, tuple[int, int]]:
    """partition -> (index of the log dir read, high watermark it is read up to)."""
    located = discover_partitions(replicas.log_dirs, ignore_high_watermark=ignore_high_watermark)
    return {
        p.topic_partition: (replicas.log_dirs.index(p.directory.parent), p.high_watermark)
        for p in located
    }


def test_discovery_reads_one_replica_per_partition(tmp_path: Path) -> None:
    replicas = three_brokers(tmp_path)
    hw = {key: value[1] for key, value in replicas.replicas.items()}
    leo = {key: value[2] for key, value in replicas.replicas.items()}
    tp1 = TopicPartition("clicks", 1)
    assert hw[(TP, 0)] < hw[(TP, 1)] and hw[(TP, 2)] == 0 and leo[(TP, 0)] > leo[(TP, 1)]
    assert hw[(tp1, 0)] == hw[(tp1, 1)] < hw[(tp1, 2)]
    assert chosen_dirs(replicas) == {TP: (1, hw[(TP, 1)]), tp1: (2, hw[(tp1, 2)])}
    # ignoreHighWatermark: the longest log, read to its end (the deposed leader's tail too).
    assert chosen_dirs(replicas, ignore_high_watermark=True) == {
        TP: (0, hw[(TP, 0)]),
        tp1: (1, hw[(tp1, 1)]),
    }
    # The read never goes above the chosen replica's high watermark.
    splits = plan_splits(discover_partitions(replicas.log_dirs), LogFilter())
    # (A split ends at the next segment's base offset, the last one at the high watermark.)
    last = {s.partition: s.end_offset for s in splits}
    assert last == {0: hw[(TP, 1)], 1: hw[(tp1, 2)]}
    assert all((s.end_offset or 0) <= (last[s.partition] or 0) for s in splits)
    assert None not in last.values() and all(s.end_offset is not None for s in splits)
    assert all(Path(s.path).parent.parent == replicas.log_dirs[1 + s.partition] for s in splits)


def test_high_watermark_tie_goes_to_the_longer_log_then_the_first_dir(tmp_path: Path) -> None:
    tp1 = TopicPartition("clicks", 1)
    replicas = build_replicas(
        tmp_path,
        {
            TP: (ReplicaSpec(6, committed=5), ReplicaSpec(8, committed=5), ReplicaSpec(7, 5)),
            tp1: (ReplicaSpec(6, committed=5), ReplicaSpec(6, committed=5), ReplicaSpec(6, 5)),
        },
    )
    assert {tp: index for tp, (index, _) in chosen_dirs(replicas).items()} == {TP: 1, tp1: 0}
    # The order of --log-dirs decides the last tie, and only it.
    located = discover_partitions(replicas.log_dirs[::-1])
    assert {p.topic_partition: p.directory.parent.name for p in located} == {
        TP: "broker-2",
        tp1: "broker-3",
    }


def test_log_end_offset_is_measured_from_batch_headers(tmp_path: Path) -> None:
    replicas = three_brokers(tmp_path)
    for directory, _, leo in replicas.replicas.values():
        assert measure_log_end_offset(directory, 0) == leo
    directory, _, leo = replicas.replicas[(TP, 0)]
    last = sorted(directory.glob("*.log"))[-1]
    with last.open("ab") as segment:
        segment.write(b"\x00" * 30)  # a torn tail: the log ends after the last whole batch
    assert measure_log_end_offset(directory, 0) == leo
    empty = tmp_path / "empty-0"
    empty.mkdir()
    assert measure_log_end_offset(empty, 42) == 42


def test_log_end_offset_walks_from_the_last_index_entry_and_survives_a_bad_index(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "clicks-0"
    log = PartitionLog.open(directory, LogConfig(index_interval_bytes=200))
    append_history(log, TP, 0, 40)
    leo = log.log_end_offset
    log.flush()
    log.close()
    (segment,) = directory.glob("*.log")
    index = segment.with_suffix(".index")
    entries = index.read_bytes().rstrip(b"\0")
    assert len(entries) > 8 * 5  # several entries, then the preallocated zeros
    assert measure_log_end_offset(directory, 0) == leo
    # The walk starts at the last indexed batch: a damaged first batch is never read.
    original = segment.read_bytes()
    segment.write_bytes(original[:16] + b"\x07" + original[17:])  # magic 7
    assert measure_log_end_offset(directory, 0) == leo
    segment.write_bytes(original)
    # An index that names no batch boundary (stale after a crash, or damaged) is only a
    # hint: the walk starts over from the segment's first batch.
    for bad in (struct.pack(">ii", 3, 7), struct.pack(">ii", 999, 5_000_000), b"\xff" * 8):
        index.write_bytes(entries + bad)
        assert measure_log_end_offset(directory, 0) == leo, bad
    index.unlink()
    assert measure_log_end_offset(directory, 0) == leo


def test_same_broker_twice_is_refused_unknown_brokers_use_the_rule(tmp_path: Path) -> None:
    replicas = three_brokers(tmp_path)
    write_meta_properties(replicas.log_dirs[2], 2)  # dir 2 now also says broker 2
    with pytest.raises(LogScanError, match=r"clicks-0 is in two log dirs of broker 2: "):
        discover_partitions(replicas.log_dirs)
    for log_dir in replicas.log_dirs:
        (log_dir / "meta.properties").unlink()  # brokers unknown: the replica rule applies
    assert {tp: i for tp, (i, _) in chosen_dirs(replicas).items()} == {
        TP: 1,
        TopicPartition("clicks", 1): 2,
    }
    with pytest.raises(LogScanError, match="is given twice"):
        discover_partitions([replicas.log_dirs[0], replicas.log_dirs[0] / ".." / "broker-1"])


def test_log_dirs_of_two_clusters_are_refused(tmp_path: Path) -> None:
    replicas = three_brokers(tmp_path)
    write_meta_properties(replicas.log_dirs[1], 2, cluster_id="another-cluster")
    with pytest.raises(LogScanError, match="belong to different clusters"):
        discover_partitions(replicas.log_dirs)
    (replicas.log_dirs[1] / "meta.properties").write_text("node.id=two\n")
    with pytest.raises(LogScanError, match=r"node\.id 'two' is not a non-negative integer"):
        discover_partitions(replicas.log_dirs)


def test_rerun_on_another_replica_plans_only_new_offsets(tmp_path: Path) -> None:
    # The manifest is keyed by partition offsets, not by log dir: when a lagging replica
    # catches up and is chosen the second time, the plan starts where the first run ended.
    replicas = three_brokers(tmp_path)
    first_hw = replicas.replicas[(TP, 1)][1]
    available = readable(available_offsets(replicas.log_dirs_option, "clicks"))
    assert available[0] == (0, first_hw)
    first = plan_export(Manifest("clicks"), available)
    manifest = commit_run(begin_run(Manifest("clicks"), 1, first.ranges, 0), 1)
    new_hw = catch_up(replicas, TP, 2, 14)  # broker 3 rejoins and passes broker 2
    assert new_hw > first_hw
    assert chosen_dirs(replicas)[TP] == (2, new_hw)
    second = plan_export(manifest, readable(available_offsets(replicas.log_dirs_option, "clicks")))
    assert second.ranges == (ExportedRange(0, first_hw, new_hw),)
    # And when the replica chosen now is behind what was exported: nothing, never a rewind.
    write_offset_checkpoint(replicas.log_dirs[2] / REPLICATION_CHECKPOINT, {})
    assert (
        plan_export(
            commit_run(begin_run(manifest, 2, second.ranges, 0), 2),
            readable(available_offsets(replicas.log_dirs_option, "clicks")),
        ).ranges
        == ()
    )
