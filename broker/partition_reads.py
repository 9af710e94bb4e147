"""What a partition's reads return, from its log (the read half of Kafka's ``Partition``).

``read_records`` is Kafka's ``Partition.readRecords``: the log's offsets are sampled first (so
appends racing the read cannot make a follower count as caught up), a follower's
``last_fetched_epoch`` is checked for divergence (KIP-320), then whole batches are read up to
the bound of the reader's isolation — the log end for followers, the high watermark for
READ_UNCOMMITTED consumers, the last stable offset for READ_COMMITTED ones, who also get the
aborted transactions overlapping what they read (``LocalLog.read`` with
``includeAbortedTxns``). ``offset_for_timestamp`` is ``Partition.fetchOffsetForTimestamp``
(ListOffsets), bounded the same way. The caller (``broker.partition.Partition``) has checked
the request's leader epoch; failures are ``PartitionError``s with Kafka's error code.
"""

from __future__ import annotations

import attrs

from pykraft.protocol.errors import Errors
from pykraft.replica.partition_core import diverging_epoch
from pykraft.replica.partition_state import (
    FetchIsolation,
    LogReadInfo,
    PartitionError,
    PartitionState,
    error_for,
)
from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.fetch_data import FetchDataInfo, LogOffsetMetadata
from pykraft.storage.log_reader import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from pykraft.storage.log_validator import OffsetOutOfRangeError
from pykraft.storage.partition_log import OffsetAndTimestamp, PartitionLog
from pykraft.storage.record_batch import CorruptRecordError
from pykraft.storage.topic_partition import TopicPartition


def read_records(
    topic_partition: TopicPartition,
    log: PartitionLog,
    *,
    fetch_offset: int,
    max_bytes: int,
    isolation: FetchIsolation,
    min_one_batch: bool,
    last_fetched_epoch: int,
) -> LogReadInfo:
    """Kafka ``readRecords`` (see the module docstring)."""
    high_watermark, log_end_offset = log.high_watermark, log.log_end_offset
    log_start_offset, last_stable_offset = log.log_start_offset, log.last_stable_offset
    diverging = diverging_epoch(
        topic_partition,
        log.leader_epoch_cache.entries,
        last_fetched_epoch=last_fetched_epoch,
        fetch_offset=fetch_offset,
        log_start_offset=log_start_offset,
        log_end_offset=log_end_offset,
    )
    if diverging is not None:
        fetched = FetchDataInfo(LogOffsetMetadata(fetch_offset), (), fetch_offset)
    else:
        # Not a dict keyed by the isolation: an Enum hashes in Python, four times per read.
        if isolation is FetchIsolation.LOG_END:
            upper = log_end_offset
        elif isolation is FetchIsolation.HIGH_WATERMARK:
            upper = high_watermark
        else:
            assert isolation is FetchIsolation.TXN_COMMITTED, isolation
            upper = last_stable_offset
        try:
            fetched = log.read(fetch_offset, max_bytes, upper, min_one_batch)
        except (OffsetOutOfRangeError, OSError) as error:
            raise PartitionError(error_for(error), str(error)) from error
        except CorruptRecordError as error:
            # A stored batch failed its CRC (storage.read_verification): a disk fault,
            # answered as one, not as the client's CORRUPT_MESSAGE.
            raise PartitionError(Errors.KAFKA_STORAGE_ERROR, str(error)) from error
        if isolation is FetchIsolation.TXN_COMMITTED:
            fetched = _with_aborted_transactions(log, fetch_offset, fetched)
    return LogReadInfo(
        fetched, diverging, high_watermark, log_start_offset, log_end_offset, last_stable_offset
    )


def _with_aborted_transactions(
    log: PartitionLog, fetch_offset: int, fetched: FetchDataInfo
) -> FetchDataInfo:
    """The aborted transactions overlapping the batches read (none for an empty read). The
    upper bound is the offset after the last batch read; Kafka's, found through the offset
    index (``fetchUpperBoundOffset``), may be a little higher and name a few more."""
    aborted: tuple[AbortedTxn, ...] = ()
    if not fetched.is_empty:
        aborted = tuple(log.collect_aborted_transactions(fetch_offset, fetched.next_offset))
    return attrs.evolve(fetched, aborted_transactions=aborted)


def last_fetchable_offset(log: PartitionLog, isolation: FetchIsolation | None) -> int:
    """Kafka ``fetchOffsetForTimestamp``'s ``lastFetchableOffset``: a replica (no isolation
    level) sees the log end, READ_UNCOMMITTED the high watermark, READ_COMMITTED the LSO."""
    if isolation is None or isolation is FetchIsolation.LOG_END:
        return log.log_end_offset
    if isolation is FetchIsolation.TXN_COMMITTED:
        return log.last_stable_offset
    return log.high_watermark


def offset_for_timestamp(
    topic_partition: TopicPartition,
    log: PartitionLog,
    state: PartitionState,
    timestamp: int,
    *,
    isolation: FetchIsolation | None,
) -> OffsetAndTimestamp | None:
    """ListOffsets (Kafka ``Partition.fetchOffsetForTimestamp``); None = no such offset.

    ``isolation`` is None for requests from replicas, which may see up to the log end.
    """
    last_fetchable = last_fetchable_offset(log, isolation)
    lagging = (
        isolation is not None
        and state.leader_epoch_start_offset is not None
        and state.leader_epoch_start_offset > log.high_watermark
    )
    if timestamp == LATEST_TIMESTAMP:
        _raise_if_lagging(topic_partition, log, state, lagging)
        return OffsetAndTimestamp(last_fetchable, -1, state.leader_epoch)
    try:
        found = log.fetch_offset_for_timestamp(timestamp)
    except ValueError as error:
        raise PartitionError(Errors.INVALID_REQUEST, str(error)) from error
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return found
    if found is not None and found.offset < last_fetchable:
        return found
    _raise_if_lagging(topic_partition, log, state, lagging)
    return None


def _raise_if_lagging(
    topic_partition: TopicPartition, log: PartitionLog, state: PartitionState, lagging: bool
) -> None:
    if lagging:
        raise PartitionError(
            Errors.OFFSET_NOT_AVAILABLE,
            f"{topic_partition}: the high watermark {log.high_watermark} lags behind the start "
            f"of leader epoch {state.leader_epoch} ({state.leader_epoch_start_offset})",
        )
