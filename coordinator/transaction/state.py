"""One transactional id's state: Kafka's ``TransactionState`` and ``TransactionMetadata``.

Theory of operation
-------------------
A transactional id is in one ``TransactionState`` (``TransactionMetadata.scala``; the id is the
``TransactionStatus`` byte of ``__transaction_state``, the name what DescribeTransactions and
ListTransactions show):

* ``EMPTY`` (0): no transaction open. -> ONGOING on AddPartitionsToTxn / AddOffsetsToTxn;
  -> EMPTY again on InitProducerId (epoch bump or a new producer id); -> DEAD when expired.
* ``ONGOING`` (1): a transaction is open. -> ONGOING as partitions are added; ->
  PREPARE_COMMIT / PREPARE_ABORT on EndTxn; -> PREPARE_EPOCH_FENCE when InitProducerId or the
  transaction timeout must abort it.
* ``PREPARE_COMMIT`` (2) / ``PREPARE_ABORT`` (3): the decision is in the log; markers are being
  written. -> COMPLETE_COMMIT / COMPLETE_ABORT once every partition has its marker.
* ``COMPLETE_COMMIT`` (4) / ``COMPLETE_ABORT`` (5): done. -> ONGOING (next transaction), EMPTY
  (InitProducerId), DEAD (expired).
* ``DEAD`` (6): the id expired and its tombstone is being written; never written itself.
* ``PREPARE_EPOCH_FENCE`` (7): the epoch is being bumped to fence the producer before an abort;
  only ever a pending state (``endTransaction`` replaces it with PREPARE_ABORT at once).

``VALID_PREVIOUS_STATES`` is Kafka's ``validPreviousStates`` table; ``metadata.py``'s
``TransactionMetadata`` moves an id through it, one checked transition at a time.

Epochs are Java shorts: an epoch of ``Short.MaxValue - 1`` or more is exhausted
(``isEpochExhausted``), so the coordinator can always fence a producer by one more bump; a new
InitProducerId then rotates to a new producer id (KIP-360).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

SHORT_MAX = 2**15 - 1
NO_TIMESTAMP = -1


class TransactionState(enum.Enum):
    # Values are Kafka's state names (TransactionState.name).
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def id(self) -> int:
        """The ``TransactionStatus`` byte of the log value."""
        return _STATE_IDS[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state, known in _STATE_IDS.items():
            if known == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """``TransactionState.fromName``: None for a name Kafka does not know."""
        return _BY_NAME.get(name)

    @property
    def is_expiration_allowed(self) -> bool:
        """Only an id with no transaction in progress may expire."""
        return self in _EXPIRABLE


_STATE_IDS: Mapping[TransactionState, int] = {
    state: index for index, state in enumerate(TransactionState)
}
_BY_NAME = {state.value: state for state in TransactionState}
_EXPIRABLE = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)
IN_TRANSACTION = frozenset(
    {TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT}
)

_S = TransactionState
VALID_PREVIOUS_STATES: Mapping[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """``TransactionMetadata.isEpochExhausted``: no client may get ``Short.MaxValue``, so the
    coordinator can always fence the current epoch by one more bump."""
    return producer_epoch >= SHORT_MAX - 1


class IllegalTransactionStateTransition(RuntimeError):
    """A bug: a transition the transaction state machine does not allow, or a completed
    transition that does not match what was prepared (Kafka's ``IllegalStateException``)."""
