"""One transactional id's state as the coordinator holds it: Kafka's ``TransactionMetadata`` and
``TxnTransitMetadata``.

Every change is two steps, as in Kafka: a ``prepare_*`` method checks the transition against
``state.VALID_PREVIOUS_STATES``, sets ``pending_state`` and returns the target as a
``TxnTransitMetadata`` (the value appended to ``__transaction_state``); once that append
succeeds, ``complete_transition_to`` applies it after Kafka's sanity checks (the epoch is the
same, one more, or 0 under a new producer id; partitions only grow while ONGOING; ...). While a
transition is pending every other request for the id gets CONCURRENT_TRANSACTIONS (the
coordinator checks ``pending_transition_in_progress``); a failed append clears the pending
state (``TransactionStateManager.finish_transition``). An illegal transition is a bug, as in
Kafka (an ``IllegalStateException``): ``IllegalTransactionStateTransition``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NoReturn

import attrs

from pykraft.coordinator.transaction.state import (
    IN_TRANSACTION,
    NO_TIMESTAMP,
    SHORT_MAX,
    VALID_PREVIOUS_STATES,
    IllegalTransactionStateTransition,
    TransactionState,
    is_epoch_exhausted,
)
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from pykraft.storage.topic_partition import TopicPartition


@attrs.frozen(kw_only=True)
class TxnTransitMetadata:
    """Kafka's ``TxnTransitMetadata``: the target of a prepared transition, and the value that
    is appended to ``__transaction_state`` for it."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int


@attrs.define(kw_only=True, eq=False)
class TransactionMetadata:
    """Kafka's ``TransactionMetadata`` (one per transactional id, mutable, one owner: the pure
    coordinator, so it needs no lock)."""

    transactional_id: str
    producer_id: int
    # The producer id before the last rotation (KIP-360: a retried InitProducerId may name it).
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = attrs.Factory(set)
    # When the first partition was added; -1 with no transaction.
    txn_start_timestamp_ms: int = NO_TIMESTAMP
    txn_last_update_timestamp_ms: int
    # Invariant: set exactly while an append of the matching TxnTransitMetadata is in flight
    # (or markers are being written, for COMPLETE_*); cleared by completion or failure.
    pending_state: TransactionState | None = None
    # A fencing bump whose append failed: the epoch in memory was bumped already, so the next
    # fence must not bump it again (Kafka's hasFailedEpochFence).
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in IN_TRANSACTION

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        self.topic_partitions.update(partitions)

    def remove_partition(self, topic_partition: TopicPartition) -> None:
        """Its marker is written (or it needs none): it no longer holds the transaction open."""
        if self.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalTransactionStateTransition(
                f"transactional id {self.transactional_id!r} is {self.state.value} (pending "
                f"{_name(self.pending_state)}) while removing a partition whose marker was sent"
            )
        self.topic_partitions.discard(topic_partition)

    # ------------------------------------------------------------------ prepare

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit, without a pending state (tests, and the abort of an
        ongoing transaction, which Kafka builds from it)."""
        return self._transit(
            self.state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch (once, even across failed attempts) to fence the producer before the
        coordinator aborts its ongoing transaction."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransactionStateTransition(
                "cannot fence a producer whose epoch is Short.MaxValue: it would overflow"
            )
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(
            TransactionState.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata | None:
        """InitProducerId on an id with no transaction in progress; None when the expected
        epoch (KIP-360) is neither the current nor the previous one: the caller is fenced."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionStateTransition(
                f"cannot allocate any more producer epochs for producer id {self.producer_id}"
            )
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            # A new producer (epoch -1 -> 0) or a new instance: the last epoch is forgotten.
            epochs = (bumped, NO_PRODUCER_EPOCH)
        elif self.producer_epoch in (NO_PRODUCER_EPOCH, expected_producer_epoch):
            # The producer continues after an error and nobody else initialized meanwhile.
            epochs = (bumped, self.producer_epoch)
        elif expected_producer_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: answer the current epoch again.
            epochs = (self.producer_epoch, self.last_producer_epoch)
        else:
            return None
        return self._prepare_transition_to(
            TransactionState.EMPTY,
            self.producer_id,
            epochs[0],
            epochs[1],
            new_txn_timeout_ms,
            frozenset(),
            NO_TIMESTAMP,
            now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """The epoch is exhausted: continue under a new producer id at epoch 0."""
        if self.has_pending_transaction:
            raise IllegalTransactionStateTransition(
                "cannot rotate producer ids while a transaction is still pending"
            )
        return self._prepare_transition_to(
            TransactionState.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            new_txn_timeout_ms,
            frozenset(),
            NO_TIMESTAMP,
            now_ms,
        )

    def prepare_add_partitions(
        self, added: Iterable[TopicPartition], now_ms: int
    ) -> TxnTransitMetadata:
        starts = self.state in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_ABORT,
            TransactionState.COMPLETE_COMMIT,
        )
        return self._prepare_transition_to(
            TransactionState.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions).union(added),
            now_ms if starts else self.txn_start_timestamp_ms,
            now_ms,
        )

    def prepare_abort_or_commit(
        self, new_state: TransactionState, now_ms: int
    ) -> TxnTransitMetadata:
        return self._prepare_transition_to(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp_ms,
            now_ms,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        commit = self.state is TransactionState.PREPARE_COMMIT
        # The decision reached the log, so an earlier failed fence is behind us.
        self.has_failed_epoch_fence = False
        return self._prepare_transition_to(
            TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp_ms,
            now_ms,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare_transition_to(
            TransactionState.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )

    def _prepare_transition_to(
        self,
        new_state: TransactionState,
        producer_id: int,
        producer_epoch: int,
        last_producer_epoch: int,
        txn_timeout_ms: int,
        topic_partitions: frozenset[TopicPartition],
        txn_start_timestamp_ms: int,
        now_ms: int,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionStateTransition(
                f"preparing a transition to {new_state.value} while {self.pending_state.value} "
                "is pending"
            )
        if producer_id < 0:
            raise IllegalTransactionStateTransition(f"illegal new producer id {producer_id}")
        # An id created a moment ago has epoch -1 until its first InitProducerId completes.
        if new_state is not TransactionState.DEAD and producer_epoch < 0:
            raise IllegalTransactionStateTransition(f"illegal new producer epoch {producer_epoch}")
        if self.state not in VALID_PREVIOUS_STATES[new_state]:
            allowed = ", ".join(sorted(s.value for s in VALID_PREVIOUS_STATES[new_state]))
            raise IllegalTransactionStateTransition(
                f"transactional id {self.transactional_id!r} must be in one of {{{allowed}}} "
                f"to move to {new_state.value}, but it is {self.state.value}"
            )
        self.pending_state = new_state
        return self._transit(
            new_state,
            producer_id,
            producer_epoch,
            last_producer_epoch,
            txn_timeout_ms,
            topic_partitions,
            txn_start_timestamp_ms,
            now_ms,
        )

    def _transit(
        self,
        state: TransactionState,
        producer_id: int,
        producer_epoch: int,
        last_producer_epoch: int,
        txn_timeout_ms: int,
        topic_partitions: frozenset[TopicPartition],
        txn_start_timestamp_ms: int,
        now_ms: int,
    ) -> TxnTransitMetadata:
        return TxnTransitMetadata(
            producer_id=producer_id,
            # Kafka records the id being replaced (the current one) as the last producer id.
            last_producer_id=self.producer_id,
            producer_epoch=producer_epoch,
            last_producer_epoch=last_producer_epoch,
            txn_timeout_ms=txn_timeout_ms,
            txn_state=state,
            topic_partitions=topic_partitions,
            txn_start_timestamp_ms=txn_start_timestamp_ms,
            txn_last_update_timestamp_ms=now_ms,
        )

    # ------------------------------------------------------------------ complete

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """The append of ``transit`` succeeded: apply it (``completeTransitionTo``)."""
        target = self.pending_state
        if target is None or target is not transit.txn_state:
            self._fail(transit)
        if target is TransactionState.EMPTY:  # InitProducerId
            bump_ok = self.producer_epoch == transit.producer_epoch or self._valid_bump(transit)
            if not bump_ok or transit.topic_partitions or transit.txn_start_timestamp_ms != -1:
                self._fail(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif target is TransactionState.ONGOING:  # AddPartitionsToTxn
            if (
                not self._same_producer(transit)
                or not self.topic_partitions <= transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._fail(transit)
            self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
            self.add_partitions(transit.topic_partitions)
        elif target in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            if (
                not self._same_producer(transit)
                or self.topic_partitions != transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or self.txn_start_timestamp_ms != transit.txn_start_timestamp_ms
            ):
                self._fail(transit)
        elif target in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            if (
                not self._same_producer(transit)
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp_ms == -1
            ):
                self._fail(transit)
            self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
            self.topic_partitions.clear()
        else:
            # PREPARE_EPOCH_FENCE is replaced by PREPARE_ABORT before anything is appended; DEAD
            # ends with the id removed from the cache, never with DEAD applied.
            self._fail(transit)
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms
        self.pending_state = None
        self.state = target

    def _same_producer(self, transit: TxnTransitMetadata) -> bool:
        return (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )

    def _valid_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _fail(self, transit: TxnTransitMetadata) -> NoReturn:
        raise IllegalTransactionStateTransition(
            f"transactional id {self.transactional_id!r} ({self.state.value}, pending "
            f"{_name(self.pending_state)}) cannot complete the transition to {transit}"
        )


def _name(state: TransactionState | None) -> str:
    return "none" if state is None else state.value
