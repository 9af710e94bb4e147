"""kafka-python 3.0 transactions against a real pykraft cluster: its transactional producer
(``transactional_id=``: init, begin, commit, abort, ``send_offsets_to_transaction`` with the
consumer's group metadata, KIP-447), its read_committed consumer, and its admin client's KIP-664
calls, which confluent-kafka does not offer: ListTransactions, DescribeTransactions,
DescribeProducers, and an operator's abort of a hanging transaction (WriteTxnMarkers, as
``kafka-transactions.sh abort`` sends it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin._transactions import AbortTransactionSpec, TransactionState
from kafka.errors import TransactionalIdNotFoundError
from kafka.structs import OffsetAndMetadata

from tests.clients.conftest import DevCluster
from tests.clients.support import Message, Placed, keyed_messages, unique_topic
from tests.clients.test_kafka_python import bootstrap, create_topic
from tests.clients.txn_support import (
    check_exactly,
    stored_markers,
    wait_for_transaction_end,
    wait_until,
)

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0


class TransactionalProducer:
    """kafka-python's ``KafkaProducer`` with a transactional id, its transactions initialised."""

    def __init__(self, cluster: DevCluster, transactional_id: str, **config: Any) -> None:
        self.transactional_id = transactional_id
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap(cluster), transactional_id=transactional_id, **config
        )
        self.producer.init_transactions()

    def send(
        self, topic: str, messages: Sequence[Message], partition: int | None = None
    ) -> list[Placed]:
        futures = [
            (message, self.producer.send(
                topic, key=message.key, value=message.value, headers=list(message.headers),
                timestamp_ms=message.timestamp_ms, partition=partition,
            ))
            for message in messages
        ]  # fmt: skip
        self.producer.flush(TIMEOUT_S)  # abort_transaction drops what was never sent
        return [
            Placed(future.get(0).partition, future.get(0).offset, message)
            for message, future in futures
        ]

    def transaction(self, topic: str, messages: Sequence[Message], *, commit: bool) -> list[Placed]:
        self.producer.begin_transaction()
        placed = self.send(topic, messages)
        if commit:
            self.producer.commit_transaction()
        else:
            self.producer.abort_transaction()
        return placed

    def close(self) -> None:
        self.producer.close(timeout=0)


@pytest.fixture
def admin(cluster: DevCluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap(cluster))
    try:
        yield client
    finally:
        client.close()


def read_all(
    cluster: DevCluster, topic: str, partitions: int, isolation_level: str
) -> list[Placed]:
    """Everything below the end offset for ``isolation_level`` (the LSO for read_committed)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap(cluster), group_id=None, isolation_level=isolation_level
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        read: list[Placed] = []
        deadline = time.monotonic() + TIMEOUT_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"positions short of {ends}; read {read}"
            for records in consumer.poll(timeout_ms=500).values():
                read.extend(_placed(record) for record in records)
        return read
    finally:
        consumer.close()


def _placed(record: Any) -> Placed:
    message = Message(record.key, record.value, tuple(record.headers), record.timestamp)
    return Placed(record.partition, record.offset, message)


def lso(cluster: DevCluster, topic: str) -> int:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap(cluster), group_id=None, isolation_level="read_committed"
    )
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def test_committed_and_aborted_transactions_as_each_isolation_level_sees_them(
    cluster: DevCluster,
) -> None:
    """TransactionsTest.testBasicTransactions with kafka-python on both ends."""
    topic = create_topic(cluster)
    producer = TransactionalProducer(cluster, unique_topic("kafka-python-txn"))
    try:
        messages = keyed_messages(24, null_header_values=False)
        first = producer.transaction(topic, messages[:8], commit=True)
        aborted = producer.transaction(topic, messages[8:16], commit=False)
        last = producer.transaction(topic, messages[16:], commit=True)
    finally:
        producer.close()
    check_exactly(first + last, read_all(cluster, topic, 3, "read_committed"))
    check_exactly(first + aborted + last, read_all(cluster, topic, 3, "read_uncommitted"))


def test_send_offsets_to_transaction_with_the_consumers_group_metadata(
    cluster: DevCluster, admin: KafkaAdminClient
) -> None:
    """KIP-447: TxnOffsetCommit carries the consumer's generation and member id. The group's
    offset moves with a committed transaction, stays put through an aborted one, and the retry
    of the aborted work lands once in the sink."""
    source, sink = create_topic(cluster, partitions=1), create_topic(cluster, partitions=1)
    seed = TransactionalProducer(cluster, unique_topic("kafka-python-seed"))
    try:
        seed.transaction(source, keyed_messages(5, null_header_values=False), commit=True)
    finally:
        seed.close()
    group = unique_topic("kafka-python-transform")
    consumer = KafkaConsumer(
        source, bootstrap_servers=bootstrap(cluster), group_id=group,
        isolation_level="read_committed", enable_auto_commit=False, auto_offset_reset="earliest",
    )  # fmt: skip
    producer = TransactionalProducer(cluster, unique_topic("kafka-python-transformer"))
    tp = TopicPartition(source, 0)
    try:
        read = wait_until(
            lambda: [r for records in consumer.poll(timeout_ms=500).values() for r in records],
            TIMEOUT_S,
            "the group consumer reading the source",
        )
        assert [r.offset for r in read] == [0, 1, 2, 3, 4]  # 5 is the commit marker
        # Records 0-2 done and committed; 3-4 done, aborted, then done again and committed.
        rounds = ((read[:3], 3, True, 3), (read[3:], 6, False, 3), (read[3:], 6, True, 6))
        for chunk, next_offset, commit, group_offset in rounds:
            producer.producer.begin_transaction()
            producer.send(sink, [Message(r.key, b"t-" + r.value, (), r.timestamp) for r in chunk])
            offsets = {tp: OffsetAndMetadata(next_offset, "", -1)}
            producer.producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if commit:
                producer.producer.commit_transaction()
            else:
                producer.producer.abort_transaction()
            wait_for_transaction_end(cluster, producer.transactional_id, TIMEOUT_S)
            assert group_offsets(admin, group) == {tp: group_offset}
    finally:
        consumer.close()
        producer.close()
    transformed = read_all(cluster, sink, 1, "read_committed")
    assert [p.message.value for p in transformed] == [b"t-" + (r.value or b"") for r in read]


def group_offsets(admin: KafkaAdminClient, group: str) -> dict[TopicPartition, int]:
    answer = admin.list_group_offsets(group)[group]
    return {tp: meta.offset for tp, meta in answer.items() if meta.offset >= 0}


def test_list_and_describe_transactions_and_producers(
    cluster: DevCluster, admin: KafkaAdminClient
) -> None:
    """KIP-664's views of an open, then a committed transaction: ListTransactions on every
    broker, DescribeTransactions at the coordinator, DescribeProducers at the leader."""
    topic = create_topic(cluster, partitions=2)
    transactional_id = unique_topic("kafka-python-described")
    started_ms = int(time.time() * 1000)
    producer = TransactionalProducer(cluster, transactional_id, transaction_timeout_ms=45_000)
    try:
        producer.producer.begin_transaction()
        placed = producer.send(topic, keyed_messages(2, null_header_values=False), partition=1)
        listed = [
            listing
            for listings in admin.list_transactions(state_filters=["Ongoing"]).values()
            for listing in listings
            if listing.transactional_id == transactional_id
        ]
        assert [listing.state for listing in listed] == [TransactionState.ONGOING]
        producer_id = listed[0].producer_id
        described = admin.describe_transactions([transactional_id])[transactional_id]
        assert (described.state, described.producer_id, described.transaction_timeout_ms) == (
            TransactionState.ONGOING, producer_id, 45_000)  # fmt: skip
        assert described.topic_partitions == {TopicPartition(topic, 1)}
        assert described.transaction_start_time_ms >= started_ms - 1000
        states = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert states[TopicPartition(topic, 0)].active_producers == []
        [active] = states[TopicPartition(topic, 1)].active_producers
        assert (active.producer_id, active.producer_epoch) == (
            producer_id,
            described.producer_epoch,
        )
        assert (active.last_sequence, active.current_transaction_start_offset) == (
            1, placed[0].offset)  # fmt: skip
        producer.producer.commit_transaction()
    finally:
        producer.close()
    assert wait_for_transaction_end(cluster, transactional_id, TIMEOUT_S) == "CompleteCommit"
    completed = admin.describe_transactions([transactional_id])[transactional_id]
    assert completed.topic_partitions == set()
    for state, listed_now in (("Ongoing", False), ("CompleteCommit", True)):
        ids = {
            listing.transactional_id
            for listings in admin.list_transactions(state_filters=[state]).values()
            for listing in listings
        }
        assert (transactional_id in ids) is listed_now, (state, ids)
    [active] = admin.describe_producers([TopicPartition(topic, 1)])[
        TopicPartition(topic, 1)
    ].active_producers
    assert active.current_transaction_start_offset == -1
    with pytest.raises(TransactionalIdNotFoundError):
        admin.describe_transactions([unique_topic("never-used")])


def test_an_operator_aborts_a_hanging_transaction(
    cluster: DevCluster, admin: KafkaAdminClient
) -> None:
    """KIP-664's abortTransaction: with DescribeProducers' producer id, epoch and coordinator
    epoch, WriteTxnMarkers(ABORT) to the leader ends the open transaction there; the LSO moves
    past it long before the transaction's timeout would have."""
    topic = create_topic(cluster, partitions=1)
    producer = TransactionalProducer(cluster, unique_topic("kafka-python-hanging"))
    tp = TopicPartition(topic, 0)
    try:
        producer.producer.begin_transaction()
        hanging = producer.send(topic, keyed_messages(3, null_header_values=False))
        assert lso(cluster, topic) == 0
        [active] = admin.describe_producers([tp])[tp].active_producers
        admin.abort_transaction(AbortTransactionSpec(
            tp, active.producer_id, active.producer_epoch, active.coordinator_epoch
        ))  # fmt: skip
        assert lso(cluster, topic) == 4
        [marker] = stored_markers(cluster.data_dir, topic, 0)
        assert (marker.offset, marker.commit, marker.producer_id) == (3, False, active.producer_id)
        assert read_all(cluster, topic, 1, "read_committed") == []
        check_exactly(hanging, read_all(cluster, topic, 1, "read_uncommitted"))
        # The producer's own abort still completes: a second ABORT marker for a producer with
        # no open transaction is accepted (Kafka's ProducerAppendInfo.appendEndTxnMarker).
        producer.producer.abort_transaction()
    finally:
        producer.close()
    assert read_all(cluster, topic, 1, "read_committed") == []
