"""Shared pieces of the log cleaner's tests: a compacted log on files, appends, a full read,
and one cleaning chosen the way the cleaner manager chooses it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pykraft.storage.cleaner import Cleaner, CleanerStats, segment_summary
from pykraft.storage.cleaner_batches import read_batch
from pykraft.storage.cleaner_offset_map import entry_bytes
from pykraft.storage.cleaner_policy import LogSummary, grab_filthiest_compacted_log
from pykraft.storage.log_config import CleanupPolicy, LogConfig
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import BatchHeader, iter_batches
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

TP = TopicPartition("compacted", 0)
COMPACT = frozenset({CleanupPolicy.COMPACT})
CONFIG = LogConfig(
    segment_bytes=1024,
    index_interval_bytes=128,
    segment_index_bytes=4096,
    cleanup_policy=COMPACT,
    delete_retention_ms=1_000,
    min_cleanable_dirty_ratio=0.0,
)
EPOCH = 0
Row = tuple[int, bytes | None, bytes | None]  # offset, key, value


def open_log(directory: Path, config: LogConfig = CONFIG) -> PartitionLog:
    return PartitionLog.open(directory, config)


def append(
    log: PartitionLog,
    records: Sequence[tuple[bytes | None, bytes | None]],
    now_ms: int,
    **batch: int | bool,
) -> None:
    simple = [SimpleRecord(value, key, timestamp=now_ms) for key, value in records]
    log.append_as_leader(bytearray(build_batch(simple, **batch)), EPOCH, now_ms)  # type: ignore[arg-type]


def append_marker(log: PartitionLog, producer_id: int, *, commit: bool, now_ms: int) -> None:
    marker = TxnMarker(
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        commit=commit,
        partitions=(TP,),
    )
    log.append_as_leader(
        marker.control_batch(now_ms), EPOCH, now_ms, origin=AppendOrigin.COORDINATOR
    )


def batches(log: PartitionLog) -> list[tuple[BatchHeader, bytes]]:
    """Every batch of the log, read through the log's own read path."""
    out: list[tuple[BatchHeader, bytes]] = []
    for segment in log.local_log.segments:
        for location in segment.iter_headers():
            data = segment.read_batch(location)
            out.extend((header, data) for _, header in iter_batches(data))
    return out


def rows(log: PartitionLog) -> list[Row]:
    """Every record of the log that is not a control record, in log order."""
    return [
        (record.offset, record.key, record.value)
        for header, data in batches(log)
        if not header.is_control
        for record in read_batch(data)[1]
    ]


def summary(log: PartitionLog) -> LogSummary:
    return LogSummary(
        topic_partition=TP,
        config=log.config,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        last_stable_offset=log.last_stable_offset,
        segments=tuple(segment_summary(s) for s in log.local_log.segments),
    )


def clean(
    log: PartitionLog,
    now_ms: int,
    checkpoint: int | None = None,
    *,
    capacity: int = 10_000,
    cleaner: Cleaner | None = None,
) -> CleanerStats | None:
    """One cleaning as the manager would choose it (None when the log is not cleanable);
    the high watermark is moved to the log end first, as replication would."""
    log.update_high_watermark(log.log_end_offset)
    checkpoints = {} if checkpoint is None else {TP: checkpoint}
    choice = grab_filthiest_compacted_log([summary(log)], checkpoints, now_ms)
    if choice.chosen is None:
        return None
    # ``capacity`` in keys of up to 3 bytes (b"k10"), the map's budget being in bytes
    budget = capacity * entry_bytes(b"k10")
    return (cleaner or Cleaner(budget)).clean(log, choice.chosen, now_ms)
