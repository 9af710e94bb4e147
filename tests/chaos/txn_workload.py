"""The bank-transfer workload for the transactions chaos test, over confluent-kafka (librdkafka).

``TransferWorkload`` runs ``producers`` transactional producers (one ``transactional.id``
each) and one read_committed consumer in threads until ``stop()``. Each producer loops:
``begin_transaction``, a debit and a credit on two accounts of different partitions,
then commits or aborts at random (seeded); before an abort it flushes, so the aborted records
are really in the log. It records each transaction's outcome as its producer learnt it
(``txn_checker.Outcome``) following librdkafka's transactional API contract
(``rd_kafka_commit_transaction``'s documentation): a retriable error retries the same call, an
abortable one aborts, a fatal one (fenced, or anything else) ends the instance — its last
transaction stays UNKNOWN and a new instance with the same ``transactional.id`` fences it in
``init_transactions`` (KIP-98: the coordinator bumps the epoch, aborting what was open).

``read_log`` reads a topic back whole, either isolation level; ``offsets`` asks the brokers for
the latest offsets with ListOffsets (read_committed: the last stable offset; read_uncommitted:
the high watermark).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from tests.chaos.checker import Placed
from tests.chaos.history import Op, OpType, Poll, Recorder, Send
from tests.chaos.txn_checker import OP_TYPES, Outcome, Transaction, encode_entry, transfer

# The producers' transaction.timeout.ms (Kafka: 60000): a transaction its producer abandons
# is aborted by the coordinator this long after it began, plus the cluster's check interval.
TRANSACTION_TIMEOUT_MS = 10_000
END_TIMEOUT_S = 10.0  # one commit_transaction / abort_transaction call
INIT_TIMEOUT_S = 10.0  # one init_transactions call
END_ATTEMPTS_MAX = 3  # retriable errors of one commit or abort before giving the instance up
FLUSH_TIMEOUT_S = 10.0
COMMIT_PROBABILITY = 0.7
FENCE_PROBABILITY = 0.03  # a transaction whose producer is replaced mid-way (run_fenced)
AMOUNT_MAX = 100
TRANSACTION_INTERVAL_S = 0.01  # the pace of each producer (the machine has two cores)
RETRY_BACKOFF_S = 0.5  # between init_transactions attempts while a coordinator is away
READ_TIMEOUT_S = 30.0
POLL_S = 0.2
LOG_LEVEL = 2  # librdkafka logs every refused connection of a kill -9; keep only the critical


def producer_config(bootstrap_servers: str, transactional_id: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        "linger.ms": 1,
        "retry.backoff.ms": 50,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 5000,
        "log_level": LOG_LEVEL,
    }


def consumer_config(bootstrap_servers: str, isolation_level: str) -> dict[str, Any]:
    # librdkafka wants a group.id even for assign(); no offset is ever committed.
    return {
        "bootstrap.servers": bootstrap_servers,
        "group.id": "chaos-transactions-reader",
        "isolation.level": isolation_level,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 200,
        "reconnect.backoff.max.ms": 1000,
        "log_level": LOG_LEVEL,
    }


class TransferWorkload:
    """Transfers between ``accounts`` accounts (account ``a`` on partition ``a % partitions``)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        partitions: int,
        accounts: int,
        producers: int,
        seed: int,
    ) -> None:
        assert accounts >= 2 and partitions >= 2
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.partitions = partitions
        self.accounts = accounts
        self.transactional_ids = [f"chaos-bank-{slot}" for slot in range(producers)]
        self.transactions: dict[str, Transaction] = {}
        self.outcomes: dict[str, Outcome] = {}
        # Every transaction (invoked at begin, ok at commit, fail at abort, fencing or timeout,
        # info while unknown) and every poll of the read_committed consumer.
        self.recorder = Recorder(wall=time.time, monotonic=time.monotonic)
        self._invocations: dict[str, Op] = {}
        self.errors: list[str] = []  # what ended producer instances or failed transactions
        self.instances = 0  # producer instances made: one per transactional id, fatal and fence
        self.zombie_commits: list[str] = []  # commits acknowledged to a fenced instance
        self.zombie_errors: Counter[str] = Counter()  # how fenced instances' commits failed
        self._seed = seed
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, args=(tid,), name=f"chaos-{tid}")
            for tid in self.transactional_ids
        ]
        self._threads.append(threading.Thread(target=self._consume, name="chaos-txn-reader"))

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
            assert not thread.is_alive(), f"{thread.name} did not stop"

    def ended(self, outcome: Outcome) -> int:
        with self._lock:
            return sum(o is outcome for o in self.outcomes.values())

    def partition_of(self, account: int) -> int:
        return account % self.partitions

    def run_one(self, producer: Producer, transaction: Transaction, *, commit: bool) -> bool:
        """Write ``transaction`` and end it; records its outcome. False if ``producer`` is
        unusable now (fatal error or retries exhausted): its transaction stays UNKNOWN."""
        if not self._begin(producer, transaction):
            return False
        try:
            self._write(producer, transaction)
            if commit:
                end_with_retries(producer.commit_transaction)
                return self._ended(transaction, Outcome.COMMITTED)
            producer.flush(FLUSH_TIMEOUT_S)  # the aborted records reach the log first
            end_with_retries(producer.abort_transaction)
            return self._ended(transaction, Outcome.ABORTED)
        except KafkaException as exception:
            error: KafkaError = exception.args[0]
            self._error(transaction.transaction_id, error)
            if error.fatal() or not error.txn_requires_abort():
                return False
        try:  # abortable: librdkafka allows only abort_transaction now
            end_with_retries(producer.abort_transaction)
        except KafkaException as exception:
            self._error(transaction.transaction_id, exception.args[0])
            return False
        return self._ended(transaction, Outcome.ABORTED)

    def run_fenced(
        self, zombie: Producer, transaction: Transaction, transactional_id: str
    ) -> Producer | None:
        """A producer that stalls mid-transaction and is replaced (KIP-98 zombie fencing): its
        records are written, then a new instance's ``init_transactions`` must abort them and
        fence ``zombie``, whose commit must then fail. Returns the new instance (None if the
        workload stops first; the transaction stays UNKNOWN then)."""
        if not self._begin(zombie, transaction):
            discard(zombie)
            return self.new_instance(transactional_id)
        try:
            self._write(zombie, transaction)
            zombie.flush(FLUSH_TIMEOUT_S)
        except KafkaException as exception:
            self._error(transaction.transaction_id, exception.args[0])
        successor = self.new_instance(transactional_id)
        if successor is not None:
            self._ended(transaction, Outcome.FENCED)
            try:
                zombie.commit_transaction(END_TIMEOUT_S)
                with self._lock:
                    self.zombie_commits.append(transaction.transaction_id)
            except KafkaException as exception:
                with self._lock:
                    self.zombie_errors[exception.args[0].name()] += 1
        discard(zombie)
        return successor

    def _begin(self, producer: Producer, transaction: Transaction) -> bool:
        try:
            producer.begin_transaction()
        except KafkaException as exception:  # nothing written: not a transaction of the run
            self._error(transaction.transaction_id, exception.args[0])
            return False
        sends = [Send(self.partition_of(e.account), encode_entry(e)) for e in transaction.entries]
        process = transaction.transaction_id.rsplit("-", 1)[0]
        with self._lock:
            self.transactions[transaction.transaction_id] = transaction
            self.outcomes[transaction.transaction_id] = Outcome.UNKNOWN
            self._invocations[transaction.transaction_id] = self.recorder.invoke(
                process, "txn", sends
            )
        return True

    def _write(self, producer: Producer, transaction: Transaction) -> None:
        for entry in transaction.entries:
            producer.produce(
                self.topic,
                encode_entry(entry),
                key=b"%d" % entry.account,
                partition=self.partition_of(entry.account),
            )

    def _ended(self, transaction: Transaction, outcome: Outcome) -> bool:
        with self._lock:
            self.outcomes[transaction.transaction_id] = outcome
            invocation = self._invocations.pop(transaction.transaction_id)
        self.recorder.complete(invocation, OP_TYPES[outcome])
        return True

    def history(self, final_log: Mapping[int, Sequence[Placed]]) -> list[Op]:
        """The run's history: transactions still unknown end as info, and a read of every
        partition's final read_committed log closes it (once: asked again with the same log,
        the same history)."""
        with self._lock:
            still_open, self._invocations = list(self._invocations.values()), {}
        for invocation in still_open:
            self.recorder.complete(invocation, OpType.INFO)
        self.recorder.final_read(
            {k: [Poll(p.partition, p.offset, p.value) for p in log] for k, log in final_log.items()}
        )
        return self.recorder.history()

    def _error(self, transaction_id: str, error: KafkaError) -> None:
        with self._lock:
            self.errors.append(f"{transaction_id}: {error.name()} ({error.str()})")

    def _produce(self, transactional_id: str) -> None:
        rng = random.Random(f"{self._seed}-{transactional_id}")
        producer = self.new_instance(transactional_id)
        sequence = 0
        while producer is not None and not self._stop.is_set():
            debit, credit = self._two_accounts(rng)
            transaction_id = f"{transactional_id}-{sequence}"
            transaction = transfer(transaction_id, debit, credit, rng.randint(1, AMOUNT_MAX))
            sequence += 1
            if rng.random() < FENCE_PROBABILITY:
                producer = self.run_fenced(producer, transaction, transactional_id)
            elif not self.run_one(producer, transaction, commit=rng.random() < COMMIT_PROBABILITY):
                discard(producer)
                producer = self.new_instance(transactional_id)
            time.sleep(TRANSACTION_INTERVAL_S)
        if producer is not None:
            discard(producer)

    def _two_accounts(self, rng: random.Random) -> tuple[int, int]:
        while True:
            debit, credit = rng.sample(range(self.accounts), 2)
            if self.partition_of(debit) != self.partition_of(credit):
                return debit, credit

    def leave_open(self, transactional_id: str, transaction: Transaction) -> Producer:
        """A producer that writes ``transaction`` and then neither commits nor aborts it (a
        client gone for good): the coordinator must abort it once ``transaction.timeout.ms``
        passes (Kafka's ``abortTimedOutTransactions``). Keep the producer until then."""
        producer = Producer(producer_config(self.bootstrap_servers, transactional_id))
        producer.init_transactions(INIT_TIMEOUT_S)
        assert self._begin(producer, transaction)
        self._write(producer, transaction)
        assert producer.flush(FLUSH_TIMEOUT_S) == 0, "the abandoned records were not written"
        return producer

    def mark(self, transaction: Transaction, outcome: Outcome) -> None:
        self._ended(transaction, outcome)

    def new_instance(self, transactional_id: str) -> Producer | None:
        """A producer whose ``init_transactions`` succeeded (retried while its coordinator is
        away; a new instance after a fatal error); None if the workload stops first."""
        while not self._stop.is_set():
            producer = Producer(producer_config(self.bootstrap_servers, transactional_id))
            with self._lock:
                self.instances += 1
            while not self._stop.is_set():
                try:
                    producer.init_transactions(INIT_TIMEOUT_S)
                    return producer
                except KafkaException as exception:
                    error: KafkaError = exception.args[0]
                    if error.fatal() or not error.retriable():
                        self._error(transactional_id, error)
                        break
                    self._stop.wait(RETRY_BACKOFF_S)
            discard(producer)
            self._stop.wait(RETRY_BACKOFF_S)
        return None

    def _consume(self) -> None:
        consumer = Consumer(consumer_config(self.bootstrap_servers, "read_committed"))
        try:
            consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
            )
            while not self._stop.is_set():
                invocation = self.recorder.invoke("consumer", "poll")
                message = consumer.poll(POLL_S)
                read = [] if message is None or message.error() is not None else [placed(message)]
                self.recorder.complete(
                    invocation, OpType.OK, [Poll(p.partition, p.offset, p.value) for p in read]
                )
        finally:
            consumer.close()


def discard(producer: Producer) -> None:
    """Drop what ``producer`` still holds, so destroying it does not wait on it (a fenced or
    failed transactional producer raises its fatal error here again: it is known already)."""
    try:
        producer.purge()
        producer.flush(0)
    except KafkaException:
        pass


def placed(message: Message) -> Placed:
    """A consumed record's partition, offset and value."""
    partition, offset, value = message.partition(), message.offset(), message.value()
    assert partition is not None and offset is not None and value is not None
    return Placed(partition, offset, value)


def end_with_retries(end: Callable[[float], None]) -> None:
    """``commit_transaction`` or ``abort_transaction``, called again on a retriable error
    (librdkafka: "the application may call it again"), at most ``END_ATTEMPTS_MAX`` times."""
    for attempt in range(END_ATTEMPTS_MAX):
        try:
            end(END_TIMEOUT_S)
            return
        except KafkaException as exception:
            error: KafkaError = exception.args[0]
            if not error.retriable() or attempt == END_ATTEMPTS_MAX - 1:
                raise


def offsets(
    bootstrap_servers: str, topic: str, partitions: int, isolation_level: str
) -> dict[int, int]:
    """The latest offset of each partition by ListOffsets at ``isolation_level``; a partition
    whose leader did not answer is left out."""
    consumer = Consumer(consumer_config(bootstrap_servers, isolation_level))
    out = {}
    try:
        for partition in range(partitions):
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=2, cached=False
                )
            except KafkaException:
                continue
            out[partition] = high
    finally:
        consumer.close()
    return out


def read_log(
    bootstrap_servers: str,
    topic: str,
    ends: Mapping[int, int],
    isolation_level: str,
    timeout_s: float = READ_TIMEOUT_S,
) -> dict[int, list[Placed]]:
    """Every record of each partition below ``ends[partition]``, from the log start."""
    consumer = Consumer(consumer_config(bootstrap_servers, isolation_level))
    log: dict[int, list[Placed]] = {p: [] for p in ends}
    reached = {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        while len(reached) < len(ends):
            assert time.monotonic() < deadline, f"could not read {topic} to {ends}: {reached}"
            message = consumer.poll(POLL_S)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    partition, offset = message.partition(), message.offset()
                    assert partition is not None and offset is not None
                    if offset >= ends[partition]:
                        reached.add(partition)
                continue
            record = placed(message)
            if record.offset < ends[record.partition]:
                log[record.partition].append(record)
            if record.offset >= ends[record.partition] - 1:
                reached.add(record.partition)
    finally:
        consumer.close()
    return log
