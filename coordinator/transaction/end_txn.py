"""Ending a transaction: Kafka's ``TransactionCoordinator.endTransaction`` (transaction
version 1), shared by its three callers.

* a client's EndTxn (``EndTxnCaller.CLIENT``): its epoch must be the current one;
* InitProducerId of a new instance while a transaction is ONGOING (``INIT_FENCE``), and
* the transaction timeout (``TIMEOUT``, ``abortTimedOutTransactions``):
  both abort under an epoch bumped by ``prepare_fence_producer_epoch``; a lower epoch than the
  current one is fenced.

An ONGOING transaction gets PrepareCommit / PrepareAbort appended. Once written
(``on_prepared``) the answer goes out — NONE to the client, CONCURRENT_TRANSACTIONS to the
fencing InitProducerId (it retries for its epoch) — and ``TransactionMarkers`` takes over. A
failed fencing append leaves the epoch bumped in memory (the old producer stays fenced) and
marks ``has_failed_epoch_fence`` so the next attempt does not bump again. A transaction that is
not ONGOING answers a retried decision NONE once complete, CONCURRENT_TRANSACTIONS while its
markers are written, and INVALID_TXN_STATE otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable

from pykraft.coordinator.transaction.effects import Effects, InitProducerIdResult, TxnResult
from pykraft.coordinator.transaction.manager import EpochAndMetadata, TransactionStateManager
from pykraft.coordinator.transaction.markers import TransactionMarkers
from pykraft.coordinator.transaction.state import (
    IllegalTransactionStateTransition,
    TransactionState,
)
from pykraft.coordinator.transaction.writes import (
    EndTxnCaller,
    EndTxnWrite,
    PendingWrite,
    ReplyError,
    ReplyInit,
)
from pykraft.protocol.errors import Errors
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH

_S = TransactionState


def end_transaction(
    manager: TransactionStateManager,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    caller: EndTxnCaller,
    request_id: int | None,
    now_ms: int,
    effects: Effects,
) -> None:
    """Validate, then append PrepareCommit / PrepareAbort (or answer at once)."""
    found = end_state(manager, transactional_id, producer_id, producer_epoch, commit, caller)
    if isinstance(found, Errors):
        answer_end(caller, request_id, found, effects)
        return
    metadata = found.metadata
    is_epoch_fence = metadata.pending_state is _S.PREPARE_EPOCH_FENCE
    if is_epoch_fence:
        # Make way for the abort, and write it under the fencing epoch.
        metadata.pending_state = None
        metadata.producer_epoch = producer_epoch
        metadata.last_producer_epoch = NO_PRODUCER_EPOCH
    target = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
    transit = metadata.prepare_abort_or_commit(target, now_ms)
    purpose = EndTxnWrite(
        caller=caller,
        request_id=request_id,
        commit=commit,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_epoch_fence=is_epoch_fence,
    )
    manager.append_transaction_to_log(
        transactional_id, found.coordinator_epoch, transit, purpose, now_ms, effects
    )


def end_state(
    manager: TransactionStateManager,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    caller: EndTxnCaller,
) -> EpochAndMetadata | Errors:
    """The id's state when its decision may be prepared; else the answer."""
    if not transactional_id:
        return Errors.INVALID_REQUEST
    found = manager.get_transaction_state(transactional_id)
    if isinstance(found, Errors):
        return found
    if found is None or found.metadata.producer_id != producer_id:
        return Errors.INVALID_PRODUCER_ID_MAPPING
    metadata = found.metadata
    # Strict equality for clients (they never bump); the coordinator's own aborts carry a bump.
    from_client = caller is EndTxnCaller.CLIENT
    if (from_client and producer_epoch != metadata.producer_epoch) or (
        producer_epoch < metadata.producer_epoch
    ):
        return Errors.PRODUCER_FENCED
    if metadata.pending_state not in (None, _S.PREPARE_EPOCH_FENCE):
        return Errors.CONCURRENT_TRANSACTIONS
    state = metadata.state
    if state is _S.ONGOING:
        return found
    if state in (_S.DEAD, _S.PREPARE_EPOCH_FENCE):
        raise IllegalTransactionStateTransition(
            f"transactional id {transactional_id!r} found {state.value}, "
            "a state it should never have reached"
        )
    return decided_end(state, commit)


def decided_end(state: TransactionState, commit: bool) -> Errors:
    """EndTxn on a transaction that is not ONGOING."""
    if state is (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
        return Errors.NONE  # a retry of a decision that is complete
    if state is (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
        return Errors.CONCURRENT_TRANSACTIONS  # its markers are being written
    return Errors.INVALID_TXN_STATE


def on_prepared(
    manager: TransactionStateManager,
    markers: TransactionMarkers,
    pending: PendingWrite,
    purpose: EndTxnWrite,
    error: Errors,
    now_ms: int,
    effects: Effects,
) -> None:
    """PrepareCommit / PrepareAbort is written (or not), ``error`` mapped: answer, and send the
    markers (``endTransaction``'s ``sendTxnMarkersCallback``)."""
    found = manager.get_transaction_state(pending.transactional_id)
    same_epoch = (
        isinstance(found, EpochAndMetadata) and found.coordinator_epoch == pending.coordinator_epoch
    )
    if error is not Errors.NONE:
        if purpose.is_epoch_fence and isinstance(found, EpochAndMetadata) and same_epoch:
            # The epoch was bumped in memory but not written: do not bump it again.
            found.metadata.has_failed_epoch_fence = True
        answer_end(purpose.caller, purpose.request_id, error, effects)
        return
    # Invariant: the write was just applied to the id (finish_transition), so it is here.
    assert isinstance(found, EpochAndMetadata) and same_epoch, (pending, found)
    metadata = found.metadata
    if metadata.producer_id != purpose.producer_id:
        error = Errors.INVALID_PRODUCER_ID_MAPPING
    elif metadata.producer_epoch != purpose.producer_epoch:
        error = Errors.PRODUCER_FENCED
    elif metadata.pending_transition_in_progress:
        error = Errors.CONCURRENT_TRANSACTIONS
    elif metadata.state is not (_S.PREPARE_COMMIT if purpose.commit else _S.PREPARE_ABORT):
        error = Errors.INVALID_TXN_STATE
    if error is not Errors.NONE:
        answer_end(purpose.caller, purpose.request_id, error, effects)
        return
    complete = metadata.prepare_complete(now_ms)
    # The decision is durable: answer now; the markers follow.
    answer_end(purpose.caller, purpose.request_id, Errors.NONE, effects)
    markers.add_markers(
        found.coordinator_epoch, purpose.commit, metadata, complete, now_ms, effects
    )


def abort_timed_out_transactions(
    manager: TransactionStateManager, now_ms: int, effects: Effects
) -> None:
    """``abortTimedOutTransactions``: fence the producer of every ongoing transaction past its
    ``transaction.timeout.ms`` and abort."""
    for transactional_id, producer_id, _ in manager.timed_out_transactions(now_ms):
        found = manager.get_transaction_state(transactional_id)
        assert isinstance(found, EpochAndMetadata), found
        metadata = found.metadata
        if metadata.producer_id != producer_id or metadata.pending_transition_in_progress:
            continue
        transit = metadata.prepare_fence_producer_epoch()
        end_transaction(
            manager,
            transactional_id,
            transit.producer_id,
            transit.producer_epoch,
            commit=False,
            caller=EndTxnCaller.TIMEOUT,
            request_id=None,
            now_ms=now_ms,
            effects=effects,
        )


def answer_end(
    caller: EndTxnCaller, request_id: int | None, error: Errors, effects: Effects
) -> None:
    if caller is EndTxnCaller.CLIENT:
        assert request_id is not None
        effects.answer(request_id, TxnResult(error))
    elif caller is EndTxnCaller.INIT_FENCE:
        assert request_id is not None
        # The fence worked: the new instance retries and gets its own epoch then.
        retry = Errors.CONCURRENT_TRANSACTIONS if error is Errors.NONE else error
        effects.answer(request_id, InitProducerIdResult(retry))


def answer_abandoned(abandoned: Iterable[PendingWrite], effects: Effects) -> None:
    """Tell callers whose write was abandoned that this coordinator no longer owns the id."""
    for pending in abandoned:
        purpose = pending.purpose
        if isinstance(purpose, ReplyInit):
            effects.answer(purpose.request_id, InitProducerIdResult(Errors.NOT_COORDINATOR))
        elif isinstance(purpose, ReplyError):
            effects.answer(purpose.request_id, TxnResult(Errors.NOT_COORDINATOR))
        elif isinstance(purpose, EndTxnWrite):
            answer_end(purpose.caller, purpose.request_id, Errors.NOT_COORDINATOR, effects)
