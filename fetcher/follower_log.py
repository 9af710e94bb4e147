"""The follower's local log as the fetcher sees it, and the fetcher's actions carried out on it.

``ReplicaLog`` is the small structural interface a ``ReplicaFetcher`` needs from a followed
partition's log; ``storage.partition_log.PartitionLog`` satisfies it, so the broker hands its
logs over without the fetcher importing ``broker/``. The functions below carry out the
``fetcher.responses`` actions on such a log the way Kafka's ``ReplicaFetcherThread`` does:
append with the leader's offsets, then follow the leader's high watermark and log start offset;
truncate; reset after OFFSET_OUT_OF_RANGE. Errors raised here are the caller's to classify
(``local_error_kind``) and hand back to the core (``on_local_error``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs

from pykraft.fetcher.responses import (
    Append,
    FetchOutcome,
    LocalError,
    MarkFailed,
    ResetOffset,
    Truncate,
    follower_high_watermark,
    on_records_appended,
)
from pykraft.fetcher.state import PartitionFetchState
from pykraft.fetcher.truncation import FollowerLog, OffsetResetKind
from pykraft.protocol.segments import Segment
from pykraft.storage.leader_epoch_cache import Entries
from pykraft.storage.log_validator import (
    InvalidRecordError,
    LogAppendInfo,
    UnexpectedAppendOffsetError,
)
from pykraft.storage.record_batch import CorruptRecordError, parse_header
from pykraft.storage.topic_partition import TopicPartition


class EpochHistory(Protocol):
    @property
    def entries(self) -> Entries: ...


class ReplicaLog(Protocol):
    """The local log of a followed partition (``storage.partition_log.PartitionLog``)."""

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def leader_epoch_cache(self) -> EpochHistory: ...

    def append_as_follower(
        self, batches: bytes | bytearray | memoryview, now_ms: int | None = None
    ) -> LogAppendInfo: ...
    def truncate_to(self, offset: int) -> bool: ...
    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None: ...
    def update_high_watermark(self, offset: int) -> int: ...
    def delete_records(self, offset: int) -> int: ...


# How a fetcher finds a partition's log (the broker passes ``LogManager.get_log``).
LogLookup = Callable[[TopicPartition], ReplicaLog | None]


def follower_view(log: ReplicaLog) -> FollowerLog:
    """The immutable snapshot the pure core decides from."""
    return FollowerLog(
        log.log_start_offset,
        log.log_end_offset,
        log.high_watermark,
        log.leader_epoch_cache.entries,
    )


def latest_epoch(log: ReplicaLog) -> int | None:
    entries = log.leader_epoch_cache.entries
    return entries[-1].epoch if entries else None


@attrs.frozen
class Appended:
    """What ``append_fetched`` wrote: the last offset (None if nothing) and the log's epoch."""

    last_offset: int | None
    last_leader_epoch: int | None


def append_fetched(log: ReplicaLog, action: Append) -> Appended:
    """Kafka ``processPartitionData``: append the leader's batches, then set the follower
    high watermark from the leader's and raise the log start offset to the leader's."""
    data = _joined(action.records)
    info = _append_records(log, data) if data else None
    log.update_high_watermark(
        follower_high_watermark(action.high_watermark, log.log_start_offset, log.log_end_offset)
    )
    if action.log_start_offset > log.log_start_offset:
        # DeleteRecords or retention on the leader; never past what is committed here.
        log.delete_records(min(action.log_start_offset, log.high_watermark))
    last_offset = info.last_offset if info is not None and info.valid_bytes > 0 else None
    return Appended(last_offset, latest_epoch(log))


def _joined(records: tuple[Segment, ...]) -> bytes | bytearray | memoryview:
    chunks = []
    for chunk in records:
        assert isinstance(chunk, bytes | bytearray | memoryview), f"fetched a file? {chunk!r}"
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _append_records(log: ReplicaLog, data: bytes | bytearray | memoryview) -> LogAppendInfo:
    """``append_as_follower``, restarting an empty log at the first batch's base offset when
    the leader's log start lies inside that batch (DeleteRecords to a mid-batch offset; Kafka
    ``Partition.appendRecordsToFollowerOrFutureReplica``)."""
    try:
        return log.append_as_follower(data)
    except UnexpectedAppendOffsetError:
        header = parse_header(data, 0)
        end = log.log_end_offset
        if end != log.log_start_offset or not header.base_offset < end <= header.last_offset:
            raise
        log.truncate_fully_and_start_at(header.base_offset)
        return log.append_as_follower(data)


def reset_offset(log: ReplicaLog, action: ResetOffset) -> None:
    """Apply an out-of-range reset (Kafka ``fetchOffsetAndTruncate``)."""
    reset = action.reset
    if reset.kind is OffsetResetKind.TRUNCATE_TO_LEADER_END:
        log.truncate_to(reset.fetch_offset)
    elif reset.kind is OffsetResetKind.TRUNCATE_FULLY_AND_START_AT_LEADER_START:
        log.truncate_fully_and_start_at(reset.fetch_offset)


def after_truncation(state: PartitionFetchState, log: ReplicaLog) -> PartitionFetchState:
    """A batch straddling the truncation offset goes whole, so the log may end below the
    offset the core chose: fetch from where the log really ends, with its latest epoch."""
    if state.fetch_offset <= log.log_end_offset:
        return state
    return state.transition(
        state.state, fetch_offset=log.log_end_offset, last_fetched_epoch=latest_epoch(log)
    )


def carry_out(log: ReplicaLog, outcome: FetchOutcome) -> PartitionFetchState:
    """Carry one decided action out on the local log (Kafka ``ReplicaFetcherThread``): append
    then follow the leader, truncate, or reset; returns the fetch state that follows. A failure
    of the log raises, for the caller to classify (``local_error_kind``)."""
    action, state = outcome.action, outcome.state
    assert not isinstance(action, MarkFailed), "a failed partition has nothing to carry out"
    assert state is not None, f"only MarkFailed removes a partition: {outcome}"
    if isinstance(action, Append):
        appended = append_fetched(log, action)
        return on_records_appended(
            state,
            last_offset=appended.last_offset,
            last_leader_epoch=appended.last_leader_epoch,
            leader_high_watermark=action.high_watermark,
        )
    if isinstance(action, Truncate):
        log.truncate_to(action.truncation.offset)
        state = after_truncation(state, log)
    elif isinstance(action, ResetOffset):
        reset_offset(log, action)
        state = after_truncation(state, log)
    return state


def local_error_kind(error: Exception) -> LocalError:
    """Kafka's split in ``processFetchRequest``: corrupt data is retried, a failed disk
    (``KafkaStorageException``) and anything else isolate the partition."""
    if isinstance(error, CorruptRecordError | InvalidRecordError):
        return LocalError.CORRUPT_RECORD
    if isinstance(error, OSError):
        return LocalError.STORAGE_ERROR
    return LocalError.UNEXPECTED
