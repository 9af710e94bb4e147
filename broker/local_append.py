"""The leader's append of one produce request, partition by partition (Kafka's
``ReplicaManager.appendToLocalLog``), and the waiting for its answer.

``append_to_local_log`` checks ``acks`` (-1, 0, 1, else INVALID_REQUIRED_ACKS for every partition,
``isValidRequiredAcks``), refuses internal topics to clients and appends each partition through
``Partition.append_records_to_leader``; every failure becomes that partition's Kafka error code.
With transaction verification on (KIP-890 part 1: the broker has a verifier,
``broker.transactional_appends``) every client append asks the log for it, carrying the
partition's guard from ``verification_guards`` or ``SENTINEL`` — so a transactional write that
did not go through verification cannot open a transaction (INVALID_TXN_STATE). Coordinator
appends (markers, offset commits) never ask.

``start_append`` is ``ReplicaManager.start_append_records`` with a future for its answer, and
``answer`` awaits it (forgetting the waiting produce if the wait is cancelled): the append itself
happens in ``start_append``, before any ``await``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from pykraft.replica.data_path import AppendResult, append_refusal, invalid_acks
from pykraft.replica.partition_state import PartitionError
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.verification_guard import SENTINEL, VerificationGuard

if TYPE_CHECKING:
    from pykraft.broker.replica_manager import ReplicaManager

Entries = Mapping[TopicPartition, bytearray | memoryview | None]
Guards = Mapping[TopicPartition, VerificationGuard]
NO_GUARDS: Guards = {}


@attrs.frozen
class StartedAppend:
    """An append done, its answer to come (``waiter_id`` while it waits for the ISR)."""

    future: asyncio.Future[dict[TopicPartition, AppendResult]]
    waiter_id: int | None


def start_append(
    replica_manager: ReplicaManager,
    entries: Entries,
    *,
    required_acks: int,
    timeout_ms: int,
    now_ms: int,
    internal_topics_allowed: bool = False,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    verification_guards: Guards = NO_GUARDS,
) -> StartedAppend:
    """Append now (``ReplicaManager.start_append_records``); the future gets the answer."""
    future: asyncio.Future[dict[TopicPartition, AppendResult]] = (
        asyncio.get_running_loop().create_future()
    )

    def respond(results: dict[TopicPartition, AppendResult]) -> None:
        if not future.done():
            future.set_result(results)

    waiter_id = replica_manager.start_append_records(
        entries,
        required_acks=required_acks,
        timeout_ms=timeout_ms,
        now_ms=now_ms,
        response_callback=respond,
        internal_topics_allowed=internal_topics_allowed,
        origin=origin,
        verification_guards=verification_guards,
    )
    return StartedAppend(future, waiter_id)


async def answer(
    replica_manager: ReplicaManager, started: StartedAppend
) -> dict[TopicPartition, AppendResult]:
    """The answer of a started append; a cancelled wait forgets the waiting produce."""
    if started.waiter_id is None:
        return started.future.result()
    try:
        return await started.future
    finally:
        replica_manager.delayed_produces.forget(started.waiter_id)  # a no-op once answered


def append_to_local_log(
    replica_manager: ReplicaManager,
    entries: Entries,
    *,
    required_acks: int,
    now_ms: int,
    internal_topics_allowed: bool = False,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    verification_guards: Guards = NO_GUARDS,
) -> dict[TopicPartition, AppendResult]:
    """Append each partition's records as leader; every partition gets a result."""
    refused = invalid_acks(entries.keys(), required_acks)
    if refused is not None:
        return refused
    # Without verification the log is asked for none (None); with it, a partition whose write
    # started no verification carries SENTINEL.
    verifying = replica_manager.transactional_appends is not None and origin is AppendOrigin.CLIENT
    unguarded = SENTINEL if verifying else None
    results = {}
    for topic_partition, records in entries.items():
        guard = verification_guards.get(topic_partition, unguarded)
        results[topic_partition] = _append_one(
            replica_manager,
            topic_partition,
            records,
            required_acks,
            now_ms,
            internal_topics_allowed,
            origin,
            guard,
        )
    return results


def _append_one(
    replica_manager: ReplicaManager,
    topic_partition: TopicPartition,
    records: bytearray | memoryview | None,
    required_acks: int,
    now_ms: int,
    internal_topics_allowed: bool,
    origin: AppendOrigin,
    verification_guard: VerificationGuard | None,
) -> AppendResult:
    refused = append_refusal(topic_partition, bool(records), internal_topics_allowed)
    if refused is not None:
        return refused
    assert records, "append_refusal answers an append without a batch"
    try:
        partition = replica_manager.partition_or_error(topic_partition)
        info = partition.append_records_to_leader(
            _writable(records),
            required_acks=required_acks,
            now_ms=now_ms,
            origin=origin,
            verification_guard=verification_guard,
        )
    except PartitionError as error:
        replica_manager.offline_storage.maybe_fail_log_dir(topic_partition, error)
        return AppendResult(
            error=error.error, error_message=error.message, record_errors=error.record_errors
        )
    appended = 0 if info.duplicate else info.valid_bytes
    replica_manager.broker_topic_stats.record_append(
        topic_partition.topic, len(records), 0 if info.duplicate else info.records_count
    )
    if appended:
        replica_manager.delayed_fetches.on_bytes_appended(topic_partition, appended)
    return AppendResult(
        base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time_ms,
        log_start_offset=partition.log_start_offset,
        appended_bytes=appended,
        last_offset=info.last_offset,
    )


def _writable(records: bytearray | memoryview) -> bytearray | memoryview:
    """The append stamps offsets in place; a read-only buffer is copied first."""
    if isinstance(records, memoryview) and records.readonly:
        return bytearray(records)
    return records
