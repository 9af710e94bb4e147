"""The transaction protocol over every transactional id this broker coordinates (Kafka's
``TransactionCoordinator``: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions, ListTransactions, and the abort of timed-out transactions).

Theory of operation
-------------------
``TransactionCoordinator`` adds the request handling to ``TransactionStateManager`` (placement,
loading, writes) and ``TransactionMarkers`` (markers and completions). Every handler takes the
request's fields, the request id the shell chose and ``now_ms``, and returns ``Effects``; a
request whose answer depends on a ``__transaction_state`` append is answered when the shell
reports it (``on_append_done``). The flow of one transaction (KIP-98):

  InitProducerId     -> EMPTY, epoch bumped (or a new producer id: first use, or the epoch is
                        exhausted); an ONGOING transaction of the previous instance is first
                        aborted under a fencing epoch and the caller told CONCURRENT_TRANSACTIONS
                        until the abort is complete (it retries)
  AddPartitionsToTxn -> ONGOING with the partitions (AddOffsetsToTxn adds the group's
                        ``__consumer_offsets`` partition)
  EndTxn             -> PREPARE_COMMIT / PREPARE_ABORT appended, the client answered, markers
                        sent, then COMPLETE_COMMIT / COMPLETE_ABORT appended

``poll`` runs Kafka's two periodic tasks: every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` an ONGOING transaction past its
``transaction.timeout.ms`` is aborted under a bumped epoch (``abortTimedOutTransactions``), and
every ``transaction.remove.expired.transaction.cleanup.interval.ms`` ids idle for
``transactional.id.expiration.ms`` are tombstoned; it also resends markers whose backoff passed.

New producer ids come from the shell, which asks ``needs_new_producer_id`` first and hands the
id it got (or None when none was at hand) to ``handle_init_producer_id``. This is the
transaction protocol of Kafka 3.x (``transaction.version`` 0/1: one epoch per producer session;
KIP-890 part 1's server-side verification included, part 2's epoch bump per transaction not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pykraft.coordinator.transaction import end_txn, init_producer_id
from pykraft.coordinator.transaction.config import TransactionConfig
from pykraft.coordinator.transaction.effects import (
    Effects,
    InitProducerIdResult,
    ListTransactionsResult,
    ProducerIdAndEpoch,
    TransactionDescription,
    TxnResult,
)
from pykraft.coordinator.transaction.init_producer_id import PREPARED
from pykraft.coordinator.transaction.manager import EpochAndMetadata, TransactionStateManager
from pykraft.coordinator.transaction.markers import TransactionMarkers
from pykraft.coordinator.transaction.metadata import TransactionMetadata
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.coordinator.transaction.writes import (
    EndTxnCaller,
    EndTxnWrite,
    PendingTombstones,
    ReplyError,
    ReplyInit,
)
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

_S = TransactionState


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig) -> None:
        self.config = config
        self.manager = TransactionStateManager(config)
        self.markers = TransactionMarkers(self.manager)
        self._next_abort_scan_ms: int | None = None
        self._next_expiration_scan_ms: int | None = None

    def partition_for(self, transactional_id: str) -> int:
        return self.manager.partition_for(transactional_id)

    # ------------------------------------------------------------------ InitProducerId

    def needs_new_producer_id(
        self, transactional_id: str | None, transaction_timeout_ms: int
    ) -> bool:
        """Whether InitProducerId for ``transactional_id`` may need a new producer id: the
        shell gets one first and passes it to ``handle_init_producer_id``."""
        return init_producer_id.needs_new_producer_id(
            self.manager, transactional_id, transaction_timeout_ms
        )

    def handle_init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
        request_id: int,
        now_ms: int,
        new_producer_id: int | None = None,
    ) -> Effects:
        """``handleInitProducerId``; ``expected`` is InitProducerId v3+'s current producer id
        and epoch (KIP-360), None when the request names none."""
        effects = Effects()
        found = init_producer_id.init_state(
            self.manager, transactional_id, transaction_timeout_ms, now_ms, new_producer_id
        )
        if isinstance(found, InitProducerIdResult):
            effects.answer(request_id, found)
            return effects
        assert transactional_id is not None
        transit = init_producer_id.prepare_init_transit(
            found.metadata, transaction_timeout_ms, expected, now_ms, new_producer_id
        )
        if isinstance(transit, Errors):
            effects.answer(request_id, InitProducerIdResult(transit))
        elif transit.txn_state is _S.PREPARE_EPOCH_FENCE:
            # Abort the previous instance's transaction under the fencing epoch; the caller
            # retries and then gets a further bump (never this epoch).
            end_txn.end_transaction(
                self.manager,
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                commit=False,
                caller=EndTxnCaller.INIT_FENCE,
                request_id=request_id,
                now_ms=now_ms,
                effects=effects,
            )
        else:
            self.manager.append_transaction_to_log(
                transactional_id,
                found.coordinator_epoch,
                transit,
                ReplyInit(request_id),
                now_ms,
                effects,
            )
        return effects

    # ------------------------------------------------------------------ AddPartitionsToTxn

    def handle_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        request_id: int,
        now_ms: int,
    ) -> Effects:
        """``handleAddPartitionsToTransaction`` (AddPartitionsToTxn v0-v3, and v4 entries not
        marked verify-only)."""
        effects = Effects()
        added = frozenset(partitions)
        found = self._owned_transaction(transactional_id, producer_id, producer_epoch)
        if isinstance(found, Errors):
            effects.answer(request_id, TxnResult(found))
            return effects
        metadata = found.metadata
        if metadata.pending_transition_in_progress or metadata.state in PREPARED:
            effects.answer(request_id, TxnResult(Errors.CONCURRENT_TRANSACTIONS))
        elif metadata.state is _S.ONGOING and added <= metadata.topic_partitions:
            # Nothing to write: the partitions are in the transaction already.
            effects.answer(request_id, TxnResult(Errors.NONE))
        else:
            transit = metadata.prepare_add_partitions(added, now_ms)
            self.manager.append_transaction_to_log(
                transactional_id,
                found.coordinator_epoch,
                transit,
                ReplyError(request_id),
                now_ms,
                effects,
            )
        return effects

    def handle_add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets_partition: TopicPartition,
        request_id: int,
        now_ms: int,
    ) -> Effects:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction
        (``KafkaApis.handleAddOffsetsToTxnRequest``)."""
        return self.handle_add_partitions(
            transactional_id, producer_id, producer_epoch, (offsets_partition,), request_id, now_ms
        )

    def handle_verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, Errors]:
        """AddPartitionsToTxn v4 verify-only (KIP-890 part 1): which partitions are in the
        transaction (TRANSACTION_ABORTABLE for one that is not, so a late write cannot open
        a hanging transaction). The pending state is not checked: the append is checked
        again on the partition (``handleVerifyPartitionsInTransaction``)."""
        asked = frozenset(partitions)
        found = self._owned_transaction(transactional_id, producer_id, producer_epoch)
        if isinstance(found, Errors):
            return dict.fromkeys(asked, found)
        metadata = found.metadata
        if metadata.state in PREPARED:
            return dict.fromkeys(asked, Errors.CONCURRENT_TRANSACTIONS)
        return {
            tp: Errors.NONE if tp in metadata.topic_partitions else Errors.TRANSACTION_ABORTABLE
            for tp in asked
        }

    def _owned_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> EpochAndMetadata | Errors:
        """The id's state when the producer id and epoch are its current ones."""
        if not transactional_id:
            return Errors.INVALID_REQUEST
        found = self.manager.get_transaction_state(transactional_id)
        if isinstance(found, Errors):
            return found
        if found is None or found.metadata.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if found.metadata.producer_epoch != producer_epoch:
            return Errors.PRODUCER_FENCED
        return found

    # ------------------------------------------------------------------ EndTxn

    def handle_end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        request_id: int,
        now_ms: int,
    ) -> Effects:
        """``handleEndTransaction`` (transaction version 1: the epoch stays)."""
        effects = Effects()
        end_txn.end_transaction(
            self.manager,
            transactional_id,
            producer_id,
            producer_epoch,
            commit=commit,
            caller=EndTxnCaller.CLIENT,
            request_id=request_id,
            now_ms=now_ms,
            effects=effects,
        )
        return effects

    # ------------------------------------------------------------------ describe, list

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        return self.manager.describe_transaction(transactional_id)

    def list_transactions(
        self, state_filters: Iterable[str], producer_id_filters: Iterable[int]
    ) -> ListTransactionsResult:
        return self.manager.list_transactions(state_filters, producer_id_filters)

    # ------------------------------------------------------------------ appends

    def on_append_done(self, write_id: int, append_error: Errors, now_ms: int) -> Effects:
        """The shell's report on an ``Append``: NONE once written, else the append error."""
        effects = Effects()
        pending = self.manager.pop_write(write_id)
        if pending is None:
            return effects  # abandoned when the partition moved; its caller was answered
        if isinstance(pending, PendingTombstones):
            self.manager.finish_tombstones(pending, append_error)
            return effects
        error = self.manager.finish_transition(pending, append_error)
        purpose = pending.purpose
        if isinstance(purpose, ReplyInit):
            transit = pending.transit
            result = (
                InitProducerIdResult(Errors.NONE, transit.producer_id, transit.producer_epoch)
                if error is Errors.NONE
                else InitProducerIdResult(error)
            )
            effects.answer(purpose.request_id, result)
        elif isinstance(purpose, ReplyError):
            effects.answer(purpose.request_id, TxnResult(error))
        elif isinstance(purpose, EndTxnWrite):
            end_txn.on_prepared(
                self.manager, self.markers, pending, purpose, error, now_ms, effects
            )
        else:
            self.markers.on_completion_appended(pending, error, now_ms)
        return effects

    # ------------------------------------------------------------------ markers

    def on_markers_written(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        errors: Mapping[TopicPartition, Errors],
        deleted: Iterable[TopicPartition],
        now_ms: int,
    ) -> Effects:
        """The shell's report on ``SendMarkers``: an error per partition it reached, and the
        partitions that no longer exist."""
        effects = Effects()
        self.markers.on_markers_written(
            transactional_id, coordinator_epoch, errors, deleted, now_ms, effects
        )
        return effects

    # ------------------------------------------------------------------ time

    def poll(self, now_ms: int) -> Effects:
        """Act on every deadline that has passed: timed-out transactions, expired ids, markers
        and completions to try again."""
        effects = Effects()
        if self._next_abort_scan_ms is not None and self._next_abort_scan_ms <= now_ms:
            self._next_abort_scan_ms = (
                now_ms + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            )
            end_txn.abort_timed_out_transactions(self.manager, now_ms, effects)
        if self._next_expiration_scan_ms is not None and self._next_expiration_scan_ms <= now_ms:
            self._next_expiration_scan_ms = (
                now_ms + self.config.transaction_remove_expired_transaction_cleanup_interval_ms
            )
            self.manager.expire_transactional_ids(now_ms, effects)
        self.markers.poll(now_ms, effects)
        return effects

    def next_deadline_ms(self) -> int | None:
        deadlines = [self.markers.next_deadline_ms()]
        if self.manager.transactions:
            deadlines += [self._next_abort_scan_ms, self._next_expiration_scan_ms]
        return min((d for d in deadlines if d is not None), default=None)

    # ------------------------------------------------------------------ loading

    def begin_loading(
        self, partition: int, coordinator_epoch: int, now_ms: int
    ) -> tuple[bool, Effects]:
        """This broker now leads ``partition`` of ``__transaction_state`` in leader epoch
        ``coordinator_epoch`` (Kafka's ``onElection``): True when its log must be replayed."""
        effects = Effects()
        needed, abandoned = self.manager.begin_loading(partition, coordinator_epoch)
        if needed:
            self.markers.remove_partition_markers(partition)
            end_txn.answer_abandoned(abandoned, effects)
        return needed, effects

    def complete_loading(
        self,
        partition: int,
        coordinator_epoch: int,
        loaded: Mapping[str, TransactionMetadata],
        now_ms: int,
    ) -> Effects:
        """Install the ids replayed from ``partition``; a transaction found prepared gets its
        markers (again) and its completion (``loadTransactionsForTxnTopicPartition``). Nothing
        happens when the partition moved on meanwhile."""
        effects = Effects()
        if not self.manager.complete_loading(partition, coordinator_epoch, loaded):
            return effects
        interval_ms = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        if self._next_abort_scan_ms is None:
            self._next_abort_scan_ms = now_ms + interval_ms
        if self._next_expiration_scan_ms is None:
            self._next_expiration_scan_ms = (
                now_ms + self.config.transaction_remove_expired_transaction_cleanup_interval_ms
            )
        for transactional_id in sorted(loaded):
            metadata = loaded[transactional_id]
            if metadata.state in PREPARED:
                commit = metadata.state is _S.PREPARE_COMMIT
                complete = metadata.prepare_complete(now_ms)
                self.markers.add_markers(
                    coordinator_epoch, commit, metadata, complete, now_ms, effects
                )
        return effects

    def unload(self, partition: int, coordinator_epoch: int | None, now_ms: int) -> Effects:
        """This broker no longer leads ``partition`` (``onResignation``): its ids and markers
        are forgotten, and callers waiting on its writes are told NOT_COORDINATOR."""
        effects = Effects()
        abandoned = self.manager.unload(partition, coordinator_epoch)
        if partition not in self.manager.partitions:
            self.markers.remove_partition_markers(partition)
        end_txn.answer_abandoned(abandoned, effects)
        return effects

    def shutdown(self, now_ms: int) -> Effects:
        effects = Effects()
        end_txn.answer_abandoned(self.manager.shutdown(), effects)
        self.markers.clear()
        return effects
