"""A transactional producer's appends, verified with its transaction coordinator first (KIP-890
part 1; Kafka's ``ReplicaManager.appendRecords`` with a ``transactionalId`` when
``transaction.partition.verification.enable`` is true).

Theory of operation
-------------------
For each partition of the request holding a transactional batch the leader's log says whether
the coordinator must be asked (``Partition.maybe_start_transaction_verification``: ``SENTINEL``
when the producer's transaction is already open there, else the guard of a verification now in
progress; the rules are ``broker.transaction_verification``'s). When none needs asking — every
write of a transaction after its first, on that partition — the append happens at once, before
any ``await``, like any produce. Otherwise the partitions go to the ``TransactionVerifier``
(``broker.add_partitions_to_txn_manager``: AddPartitionsToTxn v4 ``verify_only`` to the
coordinator); the ones it does not vouch for are answered with the translated error
(``produce_error``), and the rest are appended with their guards. The log checks the guard again
(``UnifiedLog.append_as_leader``), so a marker written while the coordinator was being asked
makes the append fail instead of opening a transaction nobody will end.

Order: Kafka answers one request per connection at a time, so a producer's next produce cannot
overtake one being verified. pykraft's listener runs a connection's requests concurrently
(``broker.network``), so this shell keeps the order itself: while one of a producer's appends
waits for verification, the producer's later transactional appends (any partition) queue
behind it, each taking its turn once the one before has appended or failed, and decide again
then (by that time the transaction is usually open, so no more asking). Only the producer
waits; other producers and non-transactional produces never do. A turn is passed on once the
append is done, not after acks=-1 is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs

from pykraft.broker.local_append import Entries, StartedAppend, answer, start_append
from pykraft.broker.transaction_verification import (
    TransactionalProducer,
    TransactionSupportedOperation,
    one_producer,
    produce_error,
    transactional_header,
)
from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import INTERNAL_TOPICS, AppendResult, invalid_acks
from pykraft.replica.partition_state import PartitionError
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.verification_guard import SENTINEL, VerificationGuard

if TYPE_CHECKING:
    from pykraft.broker.replica_manager import ReplicaManager

MIXED_PRODUCERS_MESSAGE = "Transactional records contained more than one producer ID"


class TransactionVerifier(Protocol):
    """Kafka's ``AddPartitionsToTxnManager.verifyTransaction``."""

    async def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        /,
    ) -> Mapping[TopicPartition, Errors]:
        """The partitions the coordinator did not vouch for, each with its error; every other
        partition is in the producer's transaction."""
        ...


@attrs.frozen
class _Request:
    """What every append of the request shares."""

    transactional_id: str
    supported_operation: TransactionSupportedOperation
    required_acks: int
    timeout_ms: int
    now_ms: int


@attrs.frozen
class _Plan:
    # Partitions whose verification started, with their guard.
    guards: dict[TopicPartition, VerificationGuard]
    # Partitions where it could not start (not the leader, not hosted).
    refused: dict[TopicPartition, AppendResult]


class TransactionalAppends:
    """One broker's verified transactional appends (see the module docstring)."""

    def __init__(self, replica_manager: ReplicaManager, verifier: TransactionVerifier) -> None:
        self._replica_manager = replica_manager
        self._verifier = verifier
        # Producer id -> the turn of its latest transactional append: done once that append
        # happened (or failed). Invariant: a producer's appends happen in arrival order.
        self._turns: dict[int, asyncio.Future[None]] = {}

    async def append_records(
        self,
        entries: Entries,
        *,
        transactional_id: str,
        supported_operation: TransactionSupportedOperation,
        required_acks: int,
        timeout_ms: int,
        now_ms: int,
    ) -> dict[TopicPartition, AppendResult]:
        refused_acks = invalid_acks(list(entries), required_acks)
        if refused_acks is not None:
            return refused_acks
        headers = {
            tp: header
            for tp, records in entries.items()
            if tp.topic not in INTERNAL_TOPICS
            and (header := transactional_header(records)) is not None
        }
        producer = one_producer(headers.values())
        if isinstance(producer, Errors):
            result = AppendResult(error=producer, error_message=MIXED_PRODUCERS_MESSAGE)
            return dict.fromkeys(entries, result)
        request = _Request(transactional_id, supported_operation, required_acks, timeout_ms, now_ms)
        previous = None if producer is None else self._turns.get(producer.producer_id)
        plan = None
        if previous is None:
            plan = self._plan(headers, now_ms)
            if not plan.guards:  # nothing to ask: append now, before any await
                started = self._append(entries, plan, {}, request)
                return _merged(entries, plan.refused, await answer(self._replica_manager, started))
        assert producer is not None  # a guard or a turn comes from a transactional batch
        started, refused = await self._verify_and_append(
            entries, headers, producer, request, previous, plan
        )
        return _merged(entries, refused, await answer(self._replica_manager, started))

    async def _verify_and_append(
        self,
        entries: Entries,
        headers: Mapping[TopicPartition, BatchHeader],
        producer: TransactionalProducer,
        request: _Request,
        previous: asyncio.Future[None] | None,
        plan: _Plan | None,
    ) -> tuple[StartedAppend, dict[TopicPartition, AppendResult]]:
        """Take the producer's turn — after ``previous`` (its append before this one), then
        planning anew; or at once with ``plan`` — ask the coordinator what needs asking and
        append; the turn passes on once the append is done."""
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._turns[producer.producer_id] = turn
        try:
            if previous is not None:
                await asyncio.shield(previous)
            if plan is None:
                plan = self._plan(headers, request.now_ms)
            unverified: Mapping[TopicPartition, Errors] = {}
            if plan.guards:
                unverified = await self._verifier.verify_transaction(
                    request.transactional_id,
                    producer.producer_id,
                    producer.producer_epoch,
                    list(plan.guards),
                )
            started = self._append(entries, plan, unverified, request)
        finally:
            self._pass_turn(producer.producer_id, previous, turn)
        return started, _refusals(plan, unverified, request.supported_operation)

    def _plan(self, headers: Mapping[TopicPartition, BatchHeader], now_ms: int) -> _Plan:
        """Kafka ``partitionEntriesForVerification``: each partition's guard, or why not."""
        guards: dict[TopicPartition, VerificationGuard] = {}
        refused: dict[TopicPartition, AppendResult] = {}
        for tp, header in headers.items():
            try:
                partition = self._replica_manager.partition_or_error(tp)
                guard = partition.maybe_start_transaction_verification(
                    header.producer_id, header.base_sequence, header.producer_epoch, now_ms
                )
            except PartitionError as error:
                refused[tp] = AppendResult(error=error.error, error_message=error.message)
                continue
            if guard is not SENTINEL:
                guards[tp] = guard
        return _Plan(guards, refused)

    def _append(
        self,
        entries: Entries,
        plan: _Plan,
        unverified: Mapping[TopicPartition, Errors],
        request: _Request,
    ) -> StartedAppend:
        """Append every partition neither refused nor left unverified, with its guard."""
        appending = {
            tp: records
            for tp, records in entries.items()
            if tp not in plan.refused and tp not in unverified
        }
        return start_append(
            self._replica_manager,
            appending,
            required_acks=request.required_acks,
            timeout_ms=request.timeout_ms,
            now_ms=request.now_ms,
            verification_guards=plan.guards,
        )

    def _pass_turn(
        self, producer_id: int, previous: asyncio.Future[None] | None, turn: asyncio.Future[None]
    ) -> None:
        """The next append of the producer may go once this one is done — and, if this one
        was cancelled while waiting, not before the one it waited for."""
        if previous is None or previous.done():
            self._release(producer_id, turn)
        else:
            previous.add_done_callback(lambda _: self._release(producer_id, turn))

    def _release(self, producer_id: int, turn: asyncio.Future[None]) -> None:
        if not turn.done():
            turn.set_result(None)
        if self._turns.get(producer_id) is turn:
            del self._turns[producer_id]


def _refusals(
    plan: _Plan,
    unverified: Mapping[TopicPartition, Errors],
    supported_operation: TransactionSupportedOperation,
) -> dict[TopicPartition, AppendResult]:
    """The refused partitions' results: verification could not start, or did not vouch."""
    refused = dict(plan.refused)
    for tp, error in unverified.items():
        code, message = produce_error(error, supported_operation)
        refused[tp] = AppendResult(error=code, error_message=message)
    return refused


def _merged(
    entries: Entries,
    refused: Mapping[TopicPartition, AppendResult],
    appended: Mapping[TopicPartition, AppendResult],
) -> dict[TopicPartition, AppendResult]:
    """Every partition's result, in request order."""
    return {tp: refused[tp] if tp in refused else appended[tp] for tp in entries}
