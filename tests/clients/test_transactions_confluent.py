"""confluent-kafka (librdkafka) transactions against a real pykraft cluster (KIP-98, KIP-447).

The scenarios are Kafka's own ``TransactionsTest`` (core/src/test/scala/integration/kafka/api/):
commit and abort seen through read_committed and read_uncommitted consumers, fencing of a zombie
on send and on commit, consume-transform-produce with ``send_offsets_to_transaction``, a
read_committed consumer held at the last stable offset by an undecided transaction, and the
coordinator aborting a transaction that outlived ``transaction.timeout.ms``.

confluent-kafka 2.16 has no admin call for ListTransactions, DescribeTransactions or
DescribeProducers; kafka-python's admin client drives those (test_transactions_kafka_python.py).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence

import pytest
from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka import Message as Record
from confluent_kafka._model import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from tests.clients.conftest import DevCluster
from tests.clients.support import Message, Placed, keyed_messages
from tests.clients.test_confluent_kafka import create_topic
from tests.clients.txn_support import check_exactly, stored_markers, wait_until

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0
OFFSET_INVALID = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID: nothing committed
FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)


class TrackedProducer:
    """A ``Producer`` remembering where each of its records landed."""

    def __init__(self, cluster: DevCluster, **config: object) -> None:
        self.producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, **config}
        )
        self.placed: list[Placed] = []
        self.errors: list[KafkaError] = []

    def send(self, topic: str, messages: Sequence[Message], partition: int = -1) -> list[Placed]:
        """Produce and flush; returns where these messages landed."""
        first = len(self.placed)
        for message in messages:
            self.producer.produce(
                topic, key=message.key, value=message.value, headers=list(message.headers),
                timestamp=message.timestamp_ms, partition=partition,
                on_delivery=self._on_delivery(message),
            )  # fmt: skip
        assert self.producer.flush(TIMEOUT_S) == 0, "records still in flight after flush"
        assert not self.errors, [str(error) for error in self.errors]
        return self.placed[first:]

    def _on_delivery(self, message: Message) -> Callable[[KafkaError | None, Record], None]:
        def delivered(error: KafkaError | None, report: Record) -> None:
            if error is not None:
                self.errors.append(error)
            else:
                self.placed.append(Placed(_int(report.partition()), _int(report.offset()), message))

        return delivered


class TransactionalProducer(TrackedProducer):
    """A ``TrackedProducer`` with a ``transactional.id``, its transactions initialised."""

    def __init__(self, cluster: DevCluster, transactional_id: str, **config: object) -> None:
        super().__init__(cluster, **{"transactional.id": transactional_id, **config})
        self.producer.init_transactions(TIMEOUT_S)

    def transaction(self, topic: str, messages: Sequence[Message], *, commit: bool) -> list[Placed]:
        """begin, send, flush, then commit or abort: one whole transaction."""
        self.producer.begin_transaction()
        placed = self.send(topic, messages)
        if commit:
            self.producer.commit_transaction(TIMEOUT_S)
        else:
            self.producer.abort_transaction(TIMEOUT_S)
        return placed


def _int(value: int | None) -> int:
    assert value is not None
    return value


def _placed(record: Record) -> Placed:
    _, timestamp = record.timestamp()
    raw_headers = record.headers() or []
    assert isinstance(raw_headers, list), raw_headers  # consumers return a list of pairs
    headers = tuple((key, _bytes(value)) for key, value in raw_headers)
    message = Message(_bytes(record.key()), _bytes(record.value()), headers, timestamp)
    return Placed(_int(record.partition()), _int(record.offset()), message)


def _bytes(value: object) -> bytes | None:
    assert value is None or isinstance(value, bytes), value
    return value


def new_consumer(cluster: DevCluster, isolation_level: str, **config: object) -> Consumer:
    return Consumer({
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": f"txn-{uuid.uuid4().hex[:8]}",
        "isolation.level": isolation_level,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        **config,
    })  # fmt: skip


def read_to_end(consumer: Consumer, partitions: int) -> list[Placed]:
    """Poll until every assigned partition reports its end (for read_committed, the last stable
    offset, as librdkafka takes it from each Fetch answer)."""
    read: list[Placed] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT_S
    while len(at_end) < partitions:
        assert time.monotonic() < deadline, f"ends of {sorted(at_end)} only; read {read}"
        record = consumer.poll(0.5)
        if record is None:
            continue
        error = record.error()
        if error is not None and error.code() == KafkaError._PARTITION_EOF:
            at_end.add(_int(record.partition()))
            continue
        assert error is None, f"consumer error: {error}"
        at_end.discard(_int(record.partition()))
        read.append(_placed(record))
    return read


def read_all(
    cluster: DevCluster, topic: str, partitions: int, isolation_level: str
) -> list[Placed]:
    consumer = new_consumer(cluster, isolation_level)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        return read_to_end(consumer, partitions)
    finally:
        consumer.close()


def test_committed_and_aborted_transactions_as_each_isolation_level_sees_them(
    cluster: DevCluster,
) -> None:
    """TransactionsTest.testBasicTransactions: a read_committed consumer sees exactly the
    committed records, in order per partition; read_uncommitted sees the aborted ones too."""
    topic = create_topic(cluster)
    producer = TransactionalProducer(cluster, unique_id())
    messages = keyed_messages(30)
    first = producer.transaction(topic, messages[:10], commit=True)
    aborted = producer.transaction(topic, messages[10:20], commit=False)
    last = producer.transaction(topic, messages[20:], commit=True)
    check_exactly(first + last, read_all(cluster, topic, 3, "read_committed"))
    check_exactly(first + aborted + last, read_all(cluster, topic, 3, "read_uncommitted"))
    # Each transaction ended with one marker on every partition it wrote to, right after its
    # records there: COMMIT, ABORT, COMMIT.
    for partition in range(3):
        markers = stored_markers(cluster.data_dir, topic, partition)
        outcomes = [
            commit
            for placed, commit in ((first, True), (aborted, False), (last, True))
            if any(p.partition == partition for p in placed)
        ]
        assert [marker.commit for marker in markers] == outcomes, markers
        assert len({(m.producer_id, m.producer_epoch) for m in markers}) == 1, markers


@pytest.mark.parametrize("send_before_commit", [True, False], ids=["on-send", "on-commit"])
def test_a_zombie_is_fenced_by_a_second_instance(
    cluster: DevCluster, send_before_commit: bool
) -> None:
    """TransactionsTest.testFencingOnSend / testFencingOnCommit: a second producer with the same
    transactional.id bumps the epoch and aborts the first one's open transaction; the first
    one's next send or commit fails fatally, and nothing it wrote is ever committed."""
    topic = create_topic(cluster, partitions=1)
    transactional_id = unique_id()
    messages = keyed_messages(6)
    zombie = TransactionalProducer(cluster, transactional_id)
    zombie.producer.begin_transaction()
    doomed = zombie.send(topic, messages[:2])
    successor = TransactionalProducer(cluster, transactional_id)
    committed = successor.transaction(topic, messages[2:4], commit=True)
    with pytest.raises(KafkaException) as raised:
        if send_before_commit:
            zombie.producer.produce(topic, key=b"late", value=b"late")
            zombie.producer.flush(TIMEOUT_S)
        zombie.producer.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal() and error.code() in FENCED, error
    check_exactly(committed, read_all(cluster, topic, 1, "read_committed"))
    check_exactly(doomed + committed, read_all(cluster, topic, 1, "read_uncommitted"))
    aborted, commit = stored_markers(cluster.data_dir, topic, 0)
    assert (aborted.commit, commit.commit) == (False, True)
    # The abort was written under the successor's bumped epoch (KIP-360's fencing epoch).
    assert aborted.producer_epoch > 0 and commit.producer_epoch >= aborted.producer_epoch


def test_consume_transform_produce_commits_the_offsets_with_the_transaction(
    cluster: DevCluster,
) -> None:
    """TransactionsTest.testSendOffsetsWithGroupMetadata (KIP-447): the group's offsets sent in a
    transaction are invisible while it is open, committed with it, and dropped by an abort."""
    source, sink = create_topic(cluster, partitions=2), create_topic(cluster, partitions=2)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for index in range(12):
        plain.produce(source, key=b"key-%d" % index, value=b"%d" % index)
    assert plain.flush(TIMEOUT_S) == 0
    group = f"transform-{uuid.uuid4().hex[:8]}"
    consumer = new_consumer(cluster, "read_committed", **{"group.id": group})
    producer = TransactionalProducer(cluster, unique_id())
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        consumer.subscribe([source])
        read = read_to_end(consumer, 2)
        assert len(read) == 12
        positions = transform(producer, consumer, read, sink)
        assert committed_offsets(admin, group, source) == {0: OFFSET_INVALID, 1: OFFSET_INVALID}
        producer.producer.commit_transaction(TIMEOUT_S)
        assert stable_offsets(consumer, source) == positions
        assert committed_offsets(admin, group, source) == positions
        # A second batch, transformed then aborted: the group's offsets stay where they were.
        for index in range(12, 16):
            plain.produce(source, key=b"key-%d" % index, value=b"%d" % index)
        assert plain.flush(TIMEOUT_S) == 0
        more = read_to_end(consumer, 2)
        assert len(more) == 4
        transform(producer, consumer, more, sink)
        producer.producer.abort_transaction(TIMEOUT_S)
        assert stable_offsets(consumer, source) == positions
    finally:
        consumer.close()
    transformed = read_all(cluster, sink, 2, "read_committed")
    assert sorted(p.message.value or b"" for p in transformed) == sorted(
        b"transformed-" + (p.message.value or b"") for p in read
    )


def transform(
    producer: TransactionalProducer, consumer: Consumer, read: Sequence[Placed], sink: str
) -> dict[int, int]:
    """One transaction's work: the records transformed into ``sink`` and the consumer's
    positions sent as the group's offsets; returns those positions (partition -> offset)."""
    producer.producer.begin_transaction()
    transformed = [
        dataclasses.replace(p.message, value=b"transformed-" + (p.message.value or b""))
        for p in read
    ]
    producer.send(sink, transformed)
    positions = consumer.position(consumer.assignment())
    producer.producer.send_offsets_to_transaction(
        positions, consumer.consumer_group_metadata(), TIMEOUT_S
    )
    return {tp.partition: tp.offset for tp in positions}


def stable_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    """The group's committed offsets once no transaction has them pending: a read_committed
    librdkafka consumer sends OffsetFetch with require_stable (KIP-447) and retries while the
    coordinator answers UNSTABLE_OFFSET_COMMIT, i.e. until the transaction's marker landed."""
    answer = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], TIMEOUT_S)
    return {tp.partition: tp.offset for tp in answer}


def committed_offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as OffsetFetch answers them (require_stable=false: a
    pending transactional offset is simply not there yet)."""
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    )
    [future] = admin.list_consumer_group_offsets([request], request_timeout=TIMEOUT_S).values()
    answer = future.result(timeout=TIMEOUT_S)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def test_a_read_committed_consumer_stops_at_the_last_stable_offset(cluster: DevCluster) -> None:
    """TransactionsTest.testReadCommittedConsumerShouldNotSeeUndecidedData: an open transaction
    holds read_committed readers (and ListOffsets READ_COMMITTED) at its first offset, even
    for records written after it by others, until it ends."""
    topic = create_topic(cluster, partitions=1)
    messages = keyed_messages(6)
    producer = TransactionalProducer(cluster, unique_id())
    before = producer.transaction(topic, messages[:2], commit=True)  # offsets 0, 1; marker 2
    producer.producer.begin_transaction()
    undecided = producer.send(topic, messages[2:4])  # offsets 3, 4
    after = TrackedProducer(cluster).send(
        topic, messages[4:], partition=0
    )  # offsets 5, 6: not transactional
    assert [p.offset for p in before + undecided + after] == [0, 1, 3, 4, 5, 6]
    assert list_offsets(cluster, topic, IsolationLevel.READ_COMMITTED) == 3  # the LSO
    assert list_offsets(cluster, topic, IsolationLevel.READ_UNCOMMITTED) == 7  # high watermark
    committed = new_consumer(cluster, "read_committed")
    try:
        assert committed.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S) == (0, 3)
        committed.assign([TopicPartition(topic, 0, 0)])
        check_exactly(before, read_to_end(committed, 1))
        producer.producer.commit_transaction(TIMEOUT_S)  # marker at 7
        check_exactly(undecided + after, read_to_end(committed, 1))
        assert committed.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S) == (0, 8)
    finally:
        committed.close()
    assert list_offsets(cluster, topic, IsolationLevel.READ_COMMITTED) == 8


def list_offsets(cluster: DevCluster, topic: str, isolation_level: IsolationLevel) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    tp = TopicPartition(topic, 0)
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    [future] = admin.list_offsets(
        {tp: latest}, isolation_level=isolation_level, request_timeout=TIMEOUT_S
    ).values()
    return int(future.result(timeout=TIMEOUT_S).offset)


def test_the_coordinator_aborts_a_transaction_past_its_timeout(cluster: DevCluster) -> None:
    """TransactionsTest.testFencingOnTransactionExpiration: a transaction open longer than its
    transaction.timeout.ms is aborted by the coordinator (every
    transaction.abort.timed.out.transaction.cleanup.interval.ms, 500 ms in this cluster) under a
    bumped epoch, and the stalled producer is fenced when it tries to commit."""
    topic = create_topic(cluster, partitions=1)
    producer = TransactionalProducer(cluster, unique_id(), **{"transaction.timeout.ms": 2000})
    producer.producer.begin_transaction()
    stalled = producer.send(topic, keyed_messages(3))
    # Bounded by the timeout (2 s) and one cleanup interval: 500 ms here, 10 s at most.
    wait_until(
        lambda: list_offsets(cluster, topic, IsolationLevel.READ_COMMITTED) == 4,
        timeout_s=15.0,
        what="the timed-out transaction's abort marker moving the LSO to 4",
    )
    [marker] = stored_markers(cluster.data_dir, topic, 0)
    assert (marker.offset, marker.commit) == (3, False)
    assert read_all(cluster, topic, 1, "read_committed") == []
    check_exactly(stalled, read_all(cluster, topic, 1, "read_uncommitted"))
    with pytest.raises(KafkaException) as raised:
        producer.producer.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal() and error.code() in FENCED, error


def unique_id() -> str:
    return f"txn-{uuid.uuid4().hex[:10]}"
