"""The decisions of Kafka's ``AddPartitionsToTxnManager``, pure: where a transaction's
verification goes, how verifications are batched per coordinator broker, and what each
producer's partitions learn from the answer (KIP-890 part 1).

Theory of operation
-------------------
A transactional id's coordinator is the leader of its ``__transaction_state`` partition, when
that broker is alive and reachable on the inter-broker listener; otherwise the verification
fails at once with COORDINATOR_NOT_AVAILABLE (``getTransactionCoordinator``; no topic yet means
no transaction was ever started).

Per coordinator broker at most one AddPartitionsToTxn request is in flight; verifications that
arrive meanwhile wait in that broker's next batch, one per transactional id
(``TransactionDataAndCallbacks``). A second verification of an id already waiting replaces it
by epoch (``addTxnData``): a higher epoch fences the waiting one (INVALID_PRODUCER_EPOCH), the
same epoch is a retry that supersedes it (NETWORK_EXCEPTION, retriable), and a lower epoch is
itself fenced at once and never sent.

The answer (``AddPartitionsToTxnHandler.onComplete``), per waiting producer, is the set of its
partitions that were *not* verified, each with its error: a lost connection or timeout is
NETWORK_EXCEPTION for all; a coordinator broker that speaks no v4 means verification is skipped
(nothing unverified, "this suggests verification is not supported"); a top-level error goes to
every partition, CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE (the client should not see
the brokers' authorization failing); a partition's PRODUCER_FENCED is INVALID_PRODUCER_EPOCH,
which producers expect here. A transaction or partition the answer leaves out is
NETWORK_EXCEPTION (retried) — Kafka would treat a missing partition as verified; a coordinator
that forgets to answer must not let a write open a transaction. TRANSACTION_ABORTABLE is passed
on; what a producer is told of it depends on its Produce version
(``broker.transaction_verification.produce_error``).
"""

from __future__ import annotations

import enum

import attrs

from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.add_partitions_to_txn import AddPartitionsToTxnAnswer, VerifyTransaction
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

# The partitions a waiting verification did not get, with why ({} = all verified).
Unverified = dict[TopicPartition, Errors]
# (waiter id, its unverified partitions): one verification answered.
Answer = tuple[int, Unverified]


class Unanswered(enum.Enum):
    """Why a request has no answer to read."""

    NETWORK = "network"  # disconnected, timed out, unreadable
    VERSION_MISMATCH = "version mismatch"  # the coordinator's broker speaks no v4


Outcome = AddPartitionsToTxnAnswer | Unanswered


def transaction_coordinator(
    image: MetadataImage, partition: int, listener_name: str
) -> int | Errors:
    """The broker id to ask about a transactional id living in ``partition`` of
    ``__transaction_state``, or COORDINATOR_NOT_AVAILABLE."""
    topic = image.topics.by_name.get(TRANSACTION_STATE_TOPIC)
    registration = None if topic is None else topic.partitions.get(partition)
    if registration is None or not registration.has_leader():
        return Errors.COORDINATOR_NOT_AVAILABLE
    broker = image.cluster.broker(registration.leader)
    if broker is None or broker.fenced or broker.endpoint(listener_name) is None:
        return Errors.COORDINATOR_NOT_AVAILABLE
    return registration.leader


@attrs.frozen
class Sent:
    """One AddPartitionsToTxn request to a coordinator broker, and who waits on it."""

    node: int
    transactions: tuple[VerifyTransaction, ...]
    waiters: tuple[int, ...]  # in the order of ``transactions``


class VerificationBatches:
    """Kafka's ``nodesToTransactions`` and ``inflightNodes`` (see the module docstring)."""

    def __init__(self) -> None:
        # node -> transactional id -> (transaction, waiter id), in arrival order.
        # Invariant: one entry per transactional id and node; none for a node being answered
        # is sent before that answer (``_in_flight``).
        self._pending: dict[int, dict[str, tuple[VerifyTransaction, int]]] = {}
        self._in_flight: set[int] = set()

    def add(self, node: int, transaction: VerifyTransaction, waiter: int) -> list[Answer]:
        """Queue ``transaction`` for ``node``; the verifications answered now because of it."""
        waiting = self._pending.setdefault(node, {})
        existing = waiting.get(transaction.transactional_id)
        if existing is not None:
            old, old_waiter = existing
            if old.producer_epoch > transaction.producer_epoch:
                return [(waiter, _all(transaction, Errors.INVALID_PRODUCER_EPOCH))]
            superseded = (
                Errors.NETWORK_EXCEPTION
                if old.producer_epoch == transaction.producer_epoch
                else Errors.INVALID_PRODUCER_EPOCH
            )
            del waiting[transaction.transactional_id]
            waiting[transaction.transactional_id] = (transaction, waiter)
            return [(old_waiter, _all(old, superseded))]
        waiting[transaction.transactional_id] = (transaction, waiter)
        return []

    def next_request(self, node: int) -> Sent | None:
        """The batch to send ``node`` now, if any and none is in flight (``generateRequests``)."""
        if node in self._in_flight or not self._pending.get(node):
            return None
        waiting = self._pending.pop(node)
        self._in_flight.add(node)
        return Sent(
            node,
            tuple(transaction for transaction, _ in waiting.values()),
            tuple(waiter for _, waiter in waiting.values()),
        )

    def on_outcome(self, sent: Sent, outcome: Outcome) -> list[Answer]:
        """``sent`` was answered (or not): every waiter's unverified partitions."""
        self._in_flight.discard(sent.node)
        return [
            (waiter, unverified(transaction, outcome))
            for transaction, waiter in zip(sent.transactions, sent.waiters, strict=True)
        ]

    def waiters(self) -> list[int]:
        """Every verification still queued (not yet sent)."""
        return [waiter for waiting in self._pending.values() for _, waiter in waiting.values()]

    def pending_nodes(self) -> list[int]:
        return [node for node, waiting in self._pending.items() if waiting]


def unverified(transaction: VerifyTransaction, outcome: Outcome) -> Unverified:
    """What ``outcome`` leaves unverified of ``transaction`` (the module docstring's rules)."""
    if outcome is Unanswered.VERSION_MISMATCH:
        return {}
    if outcome is Unanswered.NETWORK:
        return _all(transaction, Errors.NETWORK_EXCEPTION)
    assert isinstance(outcome, AddPartitionsToTxnAnswer)
    if outcome.error is not Errors.NONE:
        top_level = outcome.error
        if top_level is Errors.CLUSTER_AUTHORIZATION_FAILED:
            top_level = Errors.INVALID_TXN_STATE
        return _all(transaction, top_level)
    results = outcome.results.get(transaction.transactional_id, {})
    found: Unverified = {}
    for tp in transaction.partitions:
        error = results.get(tp, Errors.NETWORK_EXCEPTION)
        if error is not Errors.NONE:
            found[tp] = Errors.INVALID_PRODUCER_EPOCH if error is Errors.PRODUCER_FENCED else error
    return found


def _all(transaction: VerifyTransaction, error: Errors) -> Unverified:
    return dict.fromkeys(transaction.partitions, error)
