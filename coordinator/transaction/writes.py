"""The writes of the transaction coordinator to ``__transaction_state``, and why each was made.

A write is one prepared transition (``PendingWrite``) or a batch of tombstones for expired ids
(``PendingTombstones``). Its ``Purpose`` says what happens once the shell reports the append:
whom to answer (InitProducerId, AddPartitionsToTxn / AddOffsetsToTxn, EndTxn) and what comes
next (the markers after PrepareCommit / PrepareAbort; nothing after CompleteCommit /
CompleteAbort) — Kafka passes these as callbacks to ``appendTransactionToLog``.

A failed append's error is mapped to what the coordinator answers (``coordinator_error``,
Kafka's table in ``appendTransactionToLog``): UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE (the
client retries); NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR -> NOT_COORDINATOR (it looks for
the new coordinator); MESSAGE_TOO_LARGE and RECORD_LIST_TOO_LARGE -> UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import enum

import attrs

from pykraft.coordinator.transaction.metadata import TxnTransitMetadata
from pykraft.protocol.errors import Errors

_APPEND_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    # A timed-out append lets the client retry rather than fail.
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
}


def coordinator_error(append_error: Errors) -> Errors:
    """The error a client gets for a failed ``__transaction_state`` append."""
    return _APPEND_ERRORS.get(append_error, append_error)


@attrs.frozen
class ReplyInit:
    """InitProducerId: answer the new producer id and epoch."""

    request_id: int


@attrs.frozen
class ReplyError:
    """AddPartitionsToTxn / AddOffsetsToTxn: answer the append's error."""

    request_id: int


class EndTxnCaller(enum.Enum):
    CLIENT = "client"  # EndTxn: answer the error
    INIT_FENCE = "init"  # InitProducerId fencing an ongoing transaction: CONCURRENT_TRANSACTIONS
    TIMEOUT = "timeout"  # the transaction timed out: nobody to answer


@attrs.frozen(kw_only=True)
class EndTxnWrite:
    """PrepareCommit / PrepareAbort: once written, the markers go out (``endTransaction``)."""

    caller: EndTxnCaller
    request_id: int | None
    commit: bool
    producer_id: int
    producer_epoch: int
    is_epoch_fence: bool


@attrs.frozen
class CompleteTxnWrite:
    """CompleteCommit / CompleteAbort after every marker is written."""

    commit: bool


Purpose = ReplyInit | ReplyError | EndTxnWrite | CompleteTxnWrite


@attrs.frozen(kw_only=True)
class PendingWrite:
    transactional_id: str
    coordinator_epoch: int
    transit: TxnTransitMetadata
    purpose: Purpose
    # Errors after which the pending state stays: the caller retries the same write.
    retry_on: frozenset[Errors] = frozenset()


@attrs.frozen(kw_only=True)
class PendingTombstones:
    partition: int
    coordinator_epoch: int
    # (transactional id, producer epoch when it was found expired)
    expired: tuple[tuple[str, int], ...]
