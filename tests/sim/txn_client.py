"""The transaction sim's clients: transactional producers (the client half of KIP-98).

A ``TxnProducer`` is what librdkafka or the Java producer does with a transactional id, reduced
to the requests: find the coordinator (the leader of the id's ``__transaction_state`` partition,
``coordinator.transaction.config.partition_for``), InitProducerId, then transactions one after
another — AddPartitionsToTxn for the partitions it picked, one acks=-1 transactional batch at a
time per partition (idempotent: retried with the same sequence), EndTxn. It commits unless it
drew an abort or a batch failed for good (an abortable error, or the delivery timeout); after
an abortable error it bumps its epoch with a new InitProducerId (KIP-360), as clients do.
Sometimes it restarts mid-transaction (a new instance with the same transactional id: the
coordinator must fence the old one, KIP-98's zombie fencing) or stalls past its
``transaction.timeout.ms`` (the coordinator must abort it). Retriable errors are retried after
``retry.backoff.ms``, doubling to ``retry.backoff.max.ms`` (KIP-580); a lost request or answer
looks like a timeout after ``request.timeout.ms``. What it learns goes to the checker: the
transactions it began, the values acknowledged, and the outcomes EndTxn confirmed.

The producers are clients, outside the code under test: they decide only what a client decides.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import AppendResult
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.sim.replication_net import EventQueue, SimSettings
from tests.sim.txn_checks import TxnChecker
from tests.sim.txn_log import TxnValue

PRODUCER_NODE_BASE = -10
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000
# delivery.timeout.ms, scaled down: a batch not acknowledged by then fails the transaction.
DELIVERY_TIMEOUT_MS = 20_000
MAX_PARTITIONS_PER_TRANSACTION = 3
MAX_BATCHES_PER_PARTITION = 2
MAX_RECORDS_PER_BATCH = 3
ABORT_PROBABILITY = 0.25
RESTART_PROBABILITY = 0.03
STALL_PROBABILITY = 0.03

# Errors after which a coordinator request is sent again (to the coordinator found then).
RETRIABLE_COORDINATOR_ERRORS = frozenset(
    {
        Errors.NOT_COORDINATOR,
        Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.COORDINATOR_LOAD_IN_PROGRESS,
        Errors.CONCURRENT_TRANSACTIONS,
        Errors.REQUEST_TIMED_OUT,
    }
)
# Errors after which a batch is sent again (to the leader found then), within the deadline.
RETRIABLE_PRODUCE_ERRORS = frozenset(
    {
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.KAFKA_STORAGE_ERROR,
        Errors.LEADER_NOT_AVAILABLE,
    }
)
# A newer instance or the coordinator took the producer's epoch: start over as a new instance.
FENCED_ERRORS = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH})


class ClientEnv(Protocol):
    """What a client needs from the simulation around it."""

    queue: EventQueue
    settings: SimSettings
    checker: TxnChecker
    producing: bool
    transaction_timeout_ms: int
    topic: str
    topic_partitions: int

    @property
    def rng(self) -> Any: ...

    @property
    def now_ms(self) -> int: ...

    def client_call(
        self,
        client: int,
        target: int,
        what: str,
        handle: Callable[[Any], Any],
        on_answer: Callable[[Any], None],
    ) -> None: ...

    def coordinator_for(self, transactional_id: str) -> int | None: ...

    def leader_for(self, partition: int) -> int | None: ...


class Phase(enum.Enum):
    INIT = "InitProducerId"
    READY = "between transactions"
    ADDING = "AddPartitionsToTxn"
    PRODUCING = "producing"
    ENDING = "EndTxn"
    IDLE = "stopped"


@attrs.define(eq=False)
class _Transaction:
    number: int
    # partition -> its batches' values, sent in order
    batches: dict[int, list[tuple[str, ...]]]
    commit: bool
    deadline_ms: int
    sent: dict[int, int] = attrs.Factory(dict)
    # Partitions with a request out or a retry due.
    busy: set[int] = attrs.Factory(set)
    failed: bool = False


class TxnProducer:
    def __init__(self, env: ClientEnv, index: int) -> None:
        self.env = env
        self.node = PRODUCER_NODE_BASE - index
        self.transactional_id = f"tx{index}"
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.sequences: dict[int, int] = {}
        self.phase = Phase.INIT
        self.current: _Transaction | None = None
        self._numbers = itertools.count(1)
        # Bumped when what is in flight stops mattering (a new instance, a new epoch).
        self._generation = 0
        self._attempts = 0
        self._transactions = itertools.count()

    def __repr__(self) -> str:
        return (
            f"TxnProducer({self.transactional_id}, {self.phase.name}, producer "
            f"{self.producer_id} epoch {self.producer_epoch}, transaction "
            f"{None if self.current is None else self.current.number})"
        )

    def start(self) -> None:
        self._later(self.env.rng.randint(1000, 3000), self._send_init)

    @property
    def idle(self) -> bool:
        return self.phase is Phase.IDLE

    # ------------------------------------------------------------------ plumbing

    def _later(self, delay_ms: int, action: Callable[[], None]) -> None:
        generation = self._generation

        def run() -> None:
            if generation == self._generation:
                action()

        self.env.queue.after(delay_ms, f"{self.transactional_id} {action.__name__}", run)

    def _backoff(self, action: Callable[[], None]) -> None:
        self._attempts += 1
        delay = min(RETRY_BACKOFF_MS << min(self._attempts - 1, 8), RETRY_BACKOFF_MAX_MS)
        self._later(delay, action)

    def _request(
        self,
        target: int | None,
        what: str,
        handle: Callable[[Any], Any],
        on_answer: Callable[[Any], None],
        timed_out: Any,
        timeout_ms: int | None = None,
    ) -> None:
        """Send to ``target``; ``on_answer`` gets its answer, or ``timed_out`` after
        ``timeout_ms`` (``request.timeout.ms`` by default: a lost request or answer, or no one
        to send to)."""
        generation, number = self._generation, next(self._numbers)
        settled = False

        def settle(value: Any) -> None:
            nonlocal settled
            if not settled and generation == self._generation:
                settled = True
                on_answer(value)

        if target is not None:
            self.env.client_call(
                self.node, target, f"{self.transactional_id} {what}", handle, settle
            )
        self.env.queue.after(
            self.env.settings.request_timeout_ms if timeout_ms is None else timeout_ms,
            f"{self.transactional_id} {what} #{number} timeout",
            lambda: settle(timed_out),
        )

    def _to_coordinator(
        self, what: str, handle: Callable[[Any], Any], on_answer: Callable[[Any], None]
    ) -> None:
        coordinator = self.env.coordinator_for(self.transactional_id)
        self._request(
            coordinator,
            what,
            handle,
            on_answer,
            Errors.REQUEST_TIMED_OUT,
            # The coordinator answers once its append is acknowledged or timed out, after at
            # most the transaction timeout: waiting longer, the client gets that answer.
            timeout_ms=self.env.transaction_timeout_ms + self.env.settings.request_timeout_ms,
        )

    def _restart(self, why: str) -> None:
        """A new instance (or a new epoch): what is in flight no longer matters."""
        self.env.checker.stats[f"producers starting over ({why})"] += 1
        self._generation += 1
        self.current = None
        self._send_init()

    # ------------------------------------------------------------------ InitProducerId

    def _send_init(self) -> None:
        self.phase = Phase.INIT
        tid, timeout_ms = self.transactional_id, self.env.transaction_timeout_ms
        self._to_coordinator(
            "InitProducerId",
            lambda broker: broker.serve_init_producer_id(tid, timeout_ms),
            self._on_init,
        )

    def _on_init(self, answer: Any) -> None:
        error = answer if isinstance(answer, Errors) else answer.error
        if error in RETRIABLE_COORDINATOR_ERRORS:
            self._backoff(self._send_init)
            return
        assert error is Errors.NONE, f"{self.transactional_id}: InitProducerId answered {error}"
        self._attempts = 0
        self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
        self.sequences.clear()
        self.phase = Phase.READY
        self._later(self.env.rng.randint(0, 300), self._begin)

    # ------------------------------------------------------------------ a transaction

    def _begin(self) -> None:
        env, rng = self.env, self.env.rng
        if not env.producing:
            self.phase = Phase.IDLE
            return
        number = next(self._transactions)
        count = rng.randint(1, min(MAX_PARTITIONS_PER_TRANSACTION, env.topic_partitions))
        partitions = sorted(rng.sample(range(env.topic_partitions), count))
        batches: dict[int, list[tuple[str, ...]]] = {}
        for partition in partitions:
            index = itertools.count()
            batches[partition] = [
                tuple(
                    str(TxnValue(self.transactional_id, number, partition, next(index)))
                    for _ in range(rng.randint(1, MAX_RECORDS_PER_BATCH))
                )
                for _ in range(rng.randint(1, MAX_BATCHES_PER_PARTITION))
            ]
        self.current = _Transaction(
            number,
            batches,
            commit=rng.random() >= ABORT_PROBABILITY,
            deadline_ms=env.now_ms + DELIVERY_TIMEOUT_MS,
        )
        env.checker.on_transaction_begun(
            (self.transactional_id, number), self.producer_id, self.producer_epoch, partitions
        )
        self._send_add()

    def _send_add(self) -> None:
        self.phase = Phase.ADDING
        txn = self.current
        assert txn is not None
        tid, producer_id, epoch = self.transactional_id, self.producer_id, self.producer_epoch
        partitions = [TopicPartition(self.env.topic, p) for p in sorted(txn.batches)]
        self._to_coordinator(
            "AddPartitionsToTxn",
            lambda broker: broker.serve_add_partitions(tid, producer_id, epoch, partitions),
            self._on_add,
        )

    def _on_add(self, error: Errors) -> None:
        txn = self.current
        assert txn is not None
        if error in RETRIABLE_COORDINATOR_ERRORS:
            self._backoff(self._send_add)
        elif error is not Errors.NONE:
            self._restart(f"AddPartitionsToTxn {error.name}")
        else:
            self._attempts = 0
            self.phase = Phase.PRODUCING
            for partition in sorted(txn.batches):
                txn.busy.add(partition)
                self._send_batch(partition)

    def _send_batch(self, partition: int) -> None:
        txn = self.current
        assert txn is not None
        if txn.failed:
            txn.busy.discard(partition)
            self._maybe_end()
            return
        values = txn.batches[partition][txn.sent.get(partition, 0)]
        batch = build_batch(
            [SimpleRecord(value=value.encode()) for value in values],
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.sequences.get(partition, 0),
            is_transactional=True,
        )
        topic_partition = TopicPartition(self.env.topic, partition)
        self._request(
            self.env.leader_for(partition),
            f"Produce {values}",
            lambda broker: broker.serve_produce(topic_partition, bytearray(batch)),
            lambda result: self._on_produce(partition, values, result),
            AppendResult(error=Errors.REQUEST_TIMED_OUT),
        )

    def _on_produce(self, partition: int, values: tuple[str, ...], result: AppendResult) -> None:
        txn, env = self.current, self.env
        assert txn is not None
        error = result.error
        if error is Errors.NONE:
            self.sequences[partition] = self.sequences.get(partition, 0) + len(values)
            env.checker.on_produce_acked((self.transactional_id, txn.number), values)
            txn.sent[partition] = txn.sent.get(partition, 0) + 1
            if txn.sent[partition] < len(txn.batches[partition]) and not txn.failed:
                self._send_batch(partition)
                return
        elif error in FENCED_ERRORS:
            self._restart(f"Produce {error.name}")
            return
        elif error in RETRIABLE_PRODUCE_ERRORS and env.now_ms < txn.deadline_ms:
            env.checker.stats[f"produce retries ({error.name})"] += 1
            self._later(RETRY_BACKOFF_MS, lambda: self._send_batch(partition))
            return
        else:
            env.checker.stats[f"transactions failed by a produce error ({error.name})"] += 1
            txn.failed = True
        txn.busy.discard(partition)
        self._maybe_end()

    def _maybe_end(self) -> None:
        txn = self.current
        assert txn is not None
        if txn.busy or self.phase is not Phase.PRODUCING:
            return
        self.phase = Phase.ENDING
        txn.commit = txn.commit and not txn.failed
        draw = self.env.rng.random()
        if draw < RESTART_PROBABILITY:
            self._restart("a new instance mid-transaction")
        elif draw < RESTART_PROBABILITY + STALL_PROBABILITY:
            self.env.checker.stats["producers stalling past the transaction timeout"] += 1
            self._later(self.env.transaction_timeout_ms + 5000, self._send_end)
        else:
            self._send_end()

    def _send_end(self) -> None:
        txn = self.current
        assert txn is not None
        tid, producer_id, epoch = self.transactional_id, self.producer_id, self.producer_epoch
        commit = txn.commit
        self._to_coordinator(
            f"EndTxn({'commit' if commit else 'abort'})",
            lambda broker: broker.serve_end_txn(tid, producer_id, epoch, commit),
            self._on_end,
        )

    def _on_end(self, error: Errors) -> None:
        txn = self.current
        assert txn is not None
        if error in RETRIABLE_COORDINATOR_ERRORS:
            self._backoff(self._send_end)
            return
        if error is not Errors.NONE:
            self._restart(f"EndTxn {error.name}")
            return
        self._attempts = 0
        self.env.checker.on_transaction_ended((self.transactional_id, txn.number), txn.commit)
        self.current = None
        if txn.failed:
            self._restart("an abortable error: a new epoch")  # KIP-360
            return
        self.phase = Phase.READY
        self._later(self.env.rng.randint(0, 500), self._begin)
