"""InitProducerId's decisions: which producer id and epoch a transactional producer gets
(Kafka's ``TransactionCoordinator.handleInitProducerId`` and ``prepareInitProducerIdTransit``,
KIP-98 and KIP-360).

* no transactional id: a new producer id at epoch 0, nothing written (idempotent producers);
* an empty one: INVALID_REQUEST; a ``transaction.timeout.ms`` of 0 or above
  ``transaction.max.timeout.ms``: INVALID_TRANSACTION_TIMEOUT;
* an id not seen before: a new producer id, created at epoch -1 and bumped to 0 by the write;
* EMPTY / COMPLETE_*: the epoch is bumped (the previous instance is fenced), or, once the epoch
  is exhausted, the id rotates to a new producer id at epoch 0;
* ONGOING: the previous instance's transaction is aborted first under a fencing epoch
  (PREPARE_EPOCH_FENCE, then PREPARE_ABORT), and the caller retries on CONCURRENT_TRANSACTIONS;
* PREPARE_* or a transition pending: CONCURRENT_TRANSACTIONS.

A v3+ request names the producer's current id and epoch (``expected``): it is fenced
(PRODUCER_FENCED) unless it names the current id, a just-created one, or — with an exhausted
epoch — the id it had before a rotation whose answer it never got; a retried bump is answered
with the epoch already bumped. New producer ids are the shell's (``new_producer_id``): None when
none was at hand, which is COORDINATOR_LOAD_IN_PROGRESS as in Kafka's ``RPCProducerIdManager``.
"""

from __future__ import annotations

from pykraft.coordinator.transaction.effects import InitProducerIdResult, ProducerIdAndEpoch
from pykraft.coordinator.transaction.manager import EpochAndMetadata, TransactionStateManager
from pykraft.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from pykraft.coordinator.transaction.state import (
    IllegalTransactionStateTransition,
    TransactionState,
    is_epoch_exhausted,
)
from pykraft.protocol.errors import Errors
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH

_S = TransactionState
RESTARTABLE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
PREPARED = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})


def needs_new_producer_id(
    manager: TransactionStateManager, transactional_id: str | None, transaction_timeout_ms: int
) -> bool:
    """Whether InitProducerId for ``transactional_id`` may take a new producer id now: a
    producer without a transactional id, an id not seen before, or one whose epoch is
    exhausted — never for a request refused anyway (an empty id, a timeout above
    ``transaction.max.timeout.ms``: Kafka checks those before it allocates). At most an id is
    wasted when the state changes before the request is handled."""
    if transactional_id is None:
        return True
    if not transactional_id or not manager.validate_transaction_timeout_ms(transaction_timeout_ms):
        return False
    found = manager.get_transaction_state(transactional_id)
    if found is None:
        return True
    if isinstance(found, Errors):
        return False
    metadata = found.metadata
    return metadata.state in RESTARTABLE and metadata.is_producer_epoch_exhausted


def init_state(
    manager: TransactionStateManager,
    transactional_id: str | None,
    transaction_timeout_ms: int,
    now_ms: int,
    new_producer_id: int | None,
) -> InitProducerIdResult | EpochAndMetadata:
    """The id's state, created when new; or the answer when there is nothing to prepare."""
    if transactional_id is None:
        # Not transactional: "always blindly accept the request" with a new producer id.
        if new_producer_id is None:
            return InitProducerIdResult(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return InitProducerIdResult(Errors.NONE, new_producer_id, 0)
    if not transactional_id:
        return InitProducerIdResult(Errors.INVALID_REQUEST)
    if not manager.validate_transaction_timeout_ms(transaction_timeout_ms):
        return InitProducerIdResult(Errors.INVALID_TRANSACTION_TIMEOUT)
    found = manager.get_transaction_state(transactional_id)
    if found is None:
        if new_producer_id is None:
            return InitProducerIdResult(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        created = TransactionMetadata(
            transactional_id=transactional_id,
            producer_id=new_producer_id,
            producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=transaction_timeout_ms,
            state=_S.EMPTY,
            txn_last_update_timestamp_ms=now_ms,
        )
        found = manager.put_transaction_state_if_not_exists(created)
    if isinstance(found, Errors):
        return InitProducerIdResult(found)
    return found


def prepare_init_transit(
    metadata: TransactionMetadata,
    transaction_timeout_ms: int,
    expected: ProducerIdAndEpoch | None,
    now_ms: int,
    new_producer_id: int | None,
) -> TxnTransitMetadata | Errors:
    """``prepareInitProducerIdTransit``: the transition to write, or the answer."""
    if metadata.pending_transition_in_progress:
        return Errors.CONCURRENT_TRANSACTIONS
    if expected is not None and not is_valid_producer_id(metadata, expected):
        return Errors.PRODUCER_FENCED
    state = metadata.state
    if state in PREPARED:
        return Errors.CONCURRENT_TRANSACTIONS
    if state is _S.ONGOING:
        # Never returned to a client: the abort is written under it, and the caller's retry
        # bumps once more (rotating the producer id if this bump exhausted the epoch).
        return metadata.prepare_fence_producer_epoch()
    if state not in RESTARTABLE:
        raise IllegalTransactionStateTransition(
            f"transactional id {metadata.transactional_id!r} found {state.value}, "
            "a state it should never have reached"
        )
    expected_epoch = None if expected is None else expected.epoch
    if metadata.is_producer_epoch_exhausted:
        if expected_epoch not in (None, metadata.producer_epoch):
            # Kafka's prepareIncrementProducerEpoch throws here (the client would see
            # UNKNOWN_SERVER_ERROR); a stale epoch of an exhausted producer is fenced instead.
            return Errors.PRODUCER_FENCED
        if new_producer_id is None:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        return metadata.prepare_producer_id_rotation(
            new_producer_id, transaction_timeout_ms, now_ms, expected is not None
        )
    transit = metadata.prepare_increment_producer_epoch(
        transaction_timeout_ms, expected_epoch, now_ms
    )
    return Errors.PRODUCER_FENCED if transit is None else transit


def is_valid_producer_id(metadata: TransactionMetadata, expected: ProducerIdAndEpoch) -> bool:
    """KIP-360: a producer naming its id and epoch is not fenced when the id was just created
    (epoch -1: it recovers from UNKNOWN_PRODUCER_ID), when it names the current id (its epoch
    is checked by the bump), or when it names the previous id with an exhausted epoch (a retry
    of a bump that rotated the id and whose answer was lost)."""
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or expected.producer_id == metadata.producer_id
        or (
            expected.producer_id == metadata.last_producer_id and is_epoch_exhausted(expected.epoch)
        )
    )
