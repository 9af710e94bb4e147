"""The values ReplicaManager takes and returns, its hand-off to replication, and the pure rules
of its produce and fetch paths.

``InitialFetchState`` / ``FetcherManager`` are what ``ReplicaManager`` hands a follower partition
to (Kafka's ``ReplicaFetcherManager``; ``fetcher/`` implements it, ``RecordedFetcherManager``
stands in where no fetchers run). ``AppendResult``, ``PartitionFetch``, ``FetchParams`` and
``LogReadResult`` are Kafka's ``PartitionResponse``, ``FetchRequest.PartitionData``,
``FetchParams`` and ``LogReadResult``; the values are re-exported by ``broker.replica_manager``.
The rules: which acks are valid and who may append where (``append_refusal``,
``isValidRequiredAcks``), and when a Fetch answers without waiting (``respond_now``, Kafka's
``fetchMessages``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

import attrs

from pykraft.metadata.records import BrokerEndpoint
from pykraft.protocol.errors import Errors
from pykraft.replica.isr import NO_BROKER_EPOCH
from pykraft.replica.partition_state import FetchIsolation, LogReadInfo
from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.fetch_data import RecordSlice
from pykraft.storage.leader_epoch_cache import OffsetAndEpoch
from pykraft.storage.log_validator import RecordError
from pykraft.storage.topic_partition import TopicPartition

UNKNOWN_OFFSET = -1


# ---------------------------------------------------------------------------- fetcher hand-off


@attrs.frozen
class InitialFetchState:
    """Where a follower starts fetching (Kafka's ``InitialFetchState``)."""

    topic_id: str
    leader_id: int
    # The leader's inter-broker endpoint; None when the image does not know it (yet).
    leader_endpoint: BrokerEndpoint | None
    current_leader_epoch: int
    init_offset: int


class FetcherManager(Protocol):
    """What ReplicaManager needs from replication (Kafka's ``ReplicaFetcherManager``)."""

    def add_fetcher_for_partitions(
        self, partitions: Mapping[TopicPartition, InitialFetchState]
    ) -> None: ...

    def remove_fetcher_for_partitions(self, partitions: Collection[TopicPartition]) -> None: ...


class RecordedFetcherManager:
    """The hand-off to replication, recorded: the partitions to follow, their leader and epoch.

    It stands where ``fetcher.ReplicaFetcherManager`` will (the replication issue); it fetches
    nothing, and its ``assignments`` are what the fetchers would be running.
    """

    def __init__(self) -> None:
        self.assignments: dict[TopicPartition, InitialFetchState] = {}

    def add_fetcher_for_partitions(
        self, partitions: Mapping[TopicPartition, InitialFetchState]
    ) -> None:
        self.assignments.update(partitions)

    def remove_fetcher_for_partitions(self, partitions: Collection[TopicPartition]) -> None:
        for topic_partition in partitions:
            self.assignments.pop(topic_partition, None)


# ---------------------------------------------------------------------------- results


@attrs.frozen(kw_only=True)
class AppendResult:
    """One partition's produce outcome (Kafka's ``PartitionResponse``)."""

    error: Errors = Errors.NONE
    base_offset: int = UNKNOWN_OFFSET
    log_append_time_ms: int = -1
    log_start_offset: int = UNKNOWN_OFFSET
    error_message: str | None = None
    # KIP-467: the records that made an append fail (Kafka's PartitionResponse.recordErrors).
    record_errors: tuple[RecordError, ...] = ()
    # The bytes appended (0 for a duplicate retry or an error).
    appended_bytes: int = 0
    # The last offset of the batch (the original one for a duplicate); acks=-1 waits for the
    # high watermark to pass it.
    last_offset: int = UNKNOWN_OFFSET


@attrs.frozen(kw_only=True)
class PartitionFetch:
    """One partition of a Fetch request (Kafka's ``FetchRequest.PartitionData``)."""

    topic_partition: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@attrs.frozen(kw_only=True)
class FetchParams:
    """A Fetch request's shared parameters (Kafka's ``FetchParams``)."""

    replica_id: int  # -1 for consumers, else the follower's broker id
    # The follower's broker epoch (v15 ReplicaState, KIP-903); -1 when not sent.
    replica_epoch: int = NO_BROKER_EPOCH
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0  # 0 READ_UNCOMMITTED, 1 READ_COMMITTED
    partitions: tuple[PartitionFetch, ...]
    # Worked out once: each partition's read and the purgatory ask it.
    isolation: FetchIsolation = attrs.field(init=False, repr=False)

    @isolation.default
    def _isolation(self) -> FetchIsolation:
        return FetchIsolation.of(self.replica_id, self.isolation_level)


@attrs.frozen(kw_only=True)
class LogReadResult:
    """One partition's read (Kafka's ``LogReadResult``); offsets are -1 on an error."""

    topic_partition: TopicPartition
    error: Errors = Errors.NONE
    error_message: str | None = None
    slices: tuple[RecordSlice, ...] = ()
    high_watermark: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    last_stable_offset: int = UNKNOWN_OFFSET
    diverging_epoch: OffsetAndEpoch | None = None
    # READ_COMMITTED only: the aborted transactions overlapping ``slices`` (Kafka's
    # ``FetchPartitionData.abortedTransactions``); None otherwise.
    aborted_transactions: tuple[AbortedTxn, ...] | None = None
    # The bytes of ``slices``, summed once: a fetch asks it about five times per partition.
    size_in_bytes: int = attrs.field(init=False, repr=False)

    @size_in_bytes.default
    def _size_in_bytes(self) -> int:
        return sum(piece.length for piece in self.slices)

    @classmethod
    def of(cls, topic_partition: TopicPartition, info: LogReadInfo) -> LogReadResult:
        return cls(
            topic_partition=topic_partition,
            slices=info.fetched_data.slices,
            high_watermark=info.high_watermark,
            log_start_offset=info.log_start_offset,
            log_end_offset=info.log_end_offset,
            last_stable_offset=info.last_stable_offset,
            diverging_epoch=info.diverging_epoch,
            aborted_transactions=info.fetched_data.aborted_transactions,
        )


# ---------------------------------------------------------------------------- rules

# Kafka's Topic.INTERNAL_TOPICS: clients may not produce to them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
VALID_REQUIRED_ACKS = (-1, 0, 1)


def invalid_acks(
    partitions: Collection[TopicPartition], required_acks: int
) -> dict[TopicPartition, AppendResult] | None:
    """Kafka ``isValidRequiredAcks``: acks other than -1, 0, 1 fail every partition."""
    if required_acks in VALID_REQUIRED_ACKS:
        return None
    message = f"acks must be -1, 0 or 1, not {required_acks}"
    return {
        tp: AppendResult(error=Errors.INVALID_REQUIRED_ACKS, error_message=message)
        for tp in partitions
    }


def append_refusal(
    topic_partition: TopicPartition, has_records: bool, internal_topics_allowed: bool
) -> AppendResult | None:
    """The checks before a partition's append is tried: internal topics are not for clients,
    and an append needs a batch."""
    if topic_partition.topic in INTERNAL_TOPICS and not internal_topics_allowed:
        return AppendResult(
            error=Errors.INVALID_TOPIC_EXCEPTION,
            error_message=f"Cannot append to internal topic {topic_partition.topic}",
        )
    if not has_records:
        return AppendResult(
            error=Errors.INVALID_RECORD,
            error_message=f"the append to {topic_partition} has no record batch",
        )
    return None


def respond_now(params: FetchParams, results: Sequence[LogReadResult]) -> bool:
    """Kafka's ``fetchMessages`` conditions for answering without waiting."""
    return (
        params.max_wait_ms <= 0
        or not params.partitions
        or sum(result.size_in_bytes for result in results) >= params.min_bytes
        or any(result.error is not Errors.NONE for result in results)
        or any(result.diverging_epoch is not None for result in results)
    )
