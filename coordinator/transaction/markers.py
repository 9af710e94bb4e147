"""Transaction markers in flight, and the completion written once they are all down.

Theory of operation (Kafka's ``TransactionMarkerChannelManager`` and
``TransactionMarkerRequestCompletionHandler``, without their threads and queues)
---------------------------------------------------------------------------------
Once PrepareCommit / PrepareAbort is in the log (or is found there when a partition is loaded),
the transaction's decision is final and ``add_markers`` takes over: it remembers a
``PendingCompletion`` (the id, the coordinator epoch, the prepared CompleteCommit /
CompleteAbort) and asks for a COMMIT / ABORT marker on every partition of the transaction
(``SendMarkers``). The shell finds each partition's leader, sends WriteTxnMarkers and reports
per partition (``on_markers_written``):

* written (NONE), or no longer in need of one (UNSUPPORTED_FOR_MESSAGE_FORMAT,
  UNSUPPORTED_VERSION: the producer could not have written there; a partition whose topic is
  gone): the partition leaves the transaction (``TransactionMetadata.remove_partition``);
* INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED: a newer producer or coordinator owns
  the transaction; nothing more is sent for it;
* anything else (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_
  APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a lost connection...): sent again after a
  backoff (``retry.backoff.ms`` doubling up to ``retry.backoff.max.ms``, KIP-580), to the leader
  the shell finds then. Kafka throws on errors it does not expect (CORRUPT_MESSAGE,
  MESSAGE_TOO_LARGE...); pykraft retries them too, since a transaction must never complete
  without its markers and a crash helps nobody.

When no partition is left, CompleteCommit / CompleteAbort is appended (``writeTxnCompletion``);
a failed append is retried the same way unless the coordinator lost the partition. A report
of another coordinator epoch than the completion's is stale and ignored; when the partition
moves away (``remove_partition_markers``) its completions are dropped, and the next
coordinator finishes them from the log.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import attrs

from pykraft.coordinator.transaction.effects import Effects, SendMarkers
from pykraft.coordinator.transaction.manager import EpochAndMetadata, TransactionStateManager
from pykraft.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from pykraft.coordinator.transaction.writes import CompleteTxnWrite, PendingWrite
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

# retry.backoff.ms and retry.backoff.max.ms (KIP-580): the wait before a marker or a
# completion is tried again, doubling per attempt.
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000

# Errors of the completion append after which it is tried again: all but losing the partition.
_COMPLETION_FINAL = frozenset(
    {Errors.NONE, Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS}
)
COMPLETION_RETRY_ON = frozenset(Errors) - _COMPLETION_FINAL


class MarkerAction(enum.Enum):
    WRITTEN = "written"  # the partition is done
    RETRY = "retry"  # send again, maybe to a new leader
    CANCEL = "cancel"  # stop sending anything for this transaction


_DONE_ERRORS = frozenset(
    {Errors.NONE, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION}
)
_CANCEL_ERRORS = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED})


def marker_action(error: Errors) -> MarkerAction:
    """What one partition's WriteTxnMarkers error means for the transaction."""
    if error in _DONE_ERRORS:
        return MarkerAction.WRITTEN
    if error in _CANCEL_ERRORS:
        return MarkerAction.CANCEL
    return MarkerAction.RETRY


def retry_backoff_ms(attempt: int) -> int:
    """The wait before retry number ``attempt`` (1, 2, ...)."""
    doublings = min(max(attempt - 1, 0), 16)
    return min(RETRY_BACKOFF_MS << doublings, RETRY_BACKOFF_MAX_MS)


@attrs.define(kw_only=True, eq=False)
class PendingCompletion:
    """Kafka's ``PendingCompleteTxn``, plus what the send queues held."""

    transactional_id: str
    coordinator_epoch: int
    commit: bool
    metadata: TransactionMetadata
    complete: TxnTransitMetadata
    # Invariant: in_flight and retry are disjoint subsets of metadata.topic_partitions.
    in_flight: set[TopicPartition] = attrs.Factory(set)
    retry: set[TopicPartition] = attrs.Factory(set)
    # When to send ``retry`` again, or to append the completion again.
    retry_at_ms: int | None = None
    attempts: int = 0
    # The completion append failed and waits for ``retry_at_ms``.
    completion_retry: bool = False


class TransactionMarkers:
    def __init__(self, manager: TransactionStateManager) -> None:
        self.manager = manager
        self.pending: dict[str, PendingCompletion] = {}

    def add_markers(
        self,
        coordinator_epoch: int,
        commit: bool,
        metadata: TransactionMetadata,
        complete: TxnTransitMetadata,
        now_ms: int,
        effects: Effects,
    ) -> None:
        """``addTxnMarkersToSend``: the decision for ``metadata`` is in the log."""
        pending = PendingCompletion(
            transactional_id=metadata.transactional_id,
            coordinator_epoch=coordinator_epoch,
            commit=commit,
            metadata=metadata,
            complete=complete,
        )
        self.pending[metadata.transactional_id] = pending
        if metadata.topic_partitions:
            self._send(pending, metadata.topic_partitions, effects)
        else:
            self._write_completion(pending, now_ms, effects)

    def _send(
        self, pending: PendingCompletion, partitions: Iterable[TopicPartition], effects: Effects
    ) -> None:
        chosen = tuple(sorted(partitions))
        pending.in_flight.update(chosen)
        marker = TxnMarker(
            producer_id=pending.metadata.producer_id,
            producer_epoch=pending.metadata.producer_epoch,
            coordinator_epoch=pending.coordinator_epoch,
            commit=pending.commit,
            partitions=chosen,
        )
        effects.markers.append(SendMarkers(pending.transactional_id, marker))

    def _current(self, transactional_id: str, coordinator_epoch: int) -> PendingCompletion | None:
        """The completion a report is about, if it is still wanted; drops it when this
        coordinator no longer owns the transaction in that epoch."""
        pending = self.pending.get(transactional_id)
        if pending is None or pending.coordinator_epoch != coordinator_epoch:
            return None  # a stale report
        found = self.manager.get_transaction_state(transactional_id)
        if (
            not isinstance(found, EpochAndMetadata)
            or found.coordinator_epoch != coordinator_epoch
            or found.metadata is not pending.metadata
        ):
            del self.pending[transactional_id]
            return None
        return pending

    def on_markers_written(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        errors: Mapping[TopicPartition, Errors],
        deleted: Iterable[TopicPartition],
        now_ms: int,
        effects: Effects,
    ) -> None:
        """The outcome of sending markers: an error per partition, and the partitions found to
        no longer exist (no leader to send to: their topic was deleted)."""
        pending = self._current(transactional_id, coordinator_epoch)
        if pending is None:
            return
        metadata = pending.metadata
        retry: set[TopicPartition] = set()
        cancel = False
        for tp in deleted:
            pending.in_flight.discard(tp)
            metadata.remove_partition(tp)
        for tp, error in errors.items():
            if tp not in pending.in_flight:
                continue  # not asked of this send (or already settled)
            pending.in_flight.discard(tp)
            action = marker_action(error)
            if action is MarkerAction.WRITTEN:
                metadata.remove_partition(tp)
                pending.attempts = 0
            elif action is MarkerAction.RETRY:
                retry.add(tp)
            else:
                cancel = True
        if cancel:
            del self.pending[transactional_id]
            return
        if retry:
            pending.retry |= retry
            if pending.retry_at_ms is None:
                pending.attempts += 1
                pending.retry_at_ms = now_ms + retry_backoff_ms(pending.attempts)
        elif not metadata.topic_partitions:
            self._write_completion(pending, now_ms, effects)

    def _write_completion(self, pending: PendingCompletion, now_ms: int, effects: Effects) -> None:
        """``writeTxnCompletion``: every marker is written; log the Complete state."""
        found = self.manager.get_transaction_state(pending.transactional_id)
        if (
            not isinstance(found, EpochAndMetadata)
            or found.coordinator_epoch != pending.coordinator_epoch
        ):
            # Not ours any more, or loading again: the next loader finishes it.
            self.pending.pop(pending.transactional_id, None)
            return
        self.manager.append_transaction_to_log(
            pending.transactional_id,
            pending.coordinator_epoch,
            pending.complete,
            CompleteTxnWrite(pending.commit),
            now_ms,
            effects,
            retry_on=COMPLETION_RETRY_ON,
        )

    def on_completion_appended(self, write: PendingWrite, error: Errors, now_ms: int) -> None:
        """The completion append is done (``tryAppendToLog``'s callback), ``error`` mapped."""
        pending = self._current(write.transactional_id, write.coordinator_epoch)
        if pending is None:
            return
        if error in COMPLETION_RETRY_ON:
            pending.completion_retry = True
            pending.attempts += 1
            pending.retry_at_ms = now_ms + retry_backoff_ms(pending.attempts)
        else:
            del self.pending[write.transactional_id]

    def poll(self, now_ms: int, effects: Effects) -> None:
        """Send again what waited out its backoff."""
        for pending in list(self.pending.values()):
            if pending.retry_at_ms is None or pending.retry_at_ms > now_ms:
                continue
            pending.retry_at_ms = None
            if pending.completion_retry:
                pending.completion_retry = False
                self._write_completion(pending, now_ms, effects)
                continue
            # A partition may have left the transaction meanwhile (a late success).
            retry = pending.retry & pending.metadata.topic_partitions
            pending.retry.clear()
            if retry:
                self._send(pending, retry, effects)
            elif not pending.metadata.topic_partitions and not pending.in_flight:
                self._write_completion(pending, now_ms, effects)

    def next_deadline_ms(self) -> int | None:
        deadlines = [p.retry_at_ms for p in self.pending.values() if p.retry_at_ms is not None]
        return min(deadlines, default=None)

    def remove_partition_markers(self, partition: int) -> None:
        """``removeMarkersForTxnTopicPartition``: ``partition`` of ``__transaction_state`` moved."""
        for transactional_id in list(self.pending):
            if self.manager.partition_for(transactional_id) == partition:
                del self.pending[transactional_id]

    def clear(self) -> None:
        self.pending.clear()
