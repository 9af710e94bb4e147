"""kafka-python 3.0 against a real pykraft cluster, with the client's defaults: its producer is
idempotent out of the box (InitProducerId first, as the Java producer since Kafka 3.0), its
consumer here has no group (``group_id=None``: assign and seek only, nothing committed).

Also the raw Produce of a batch to a topic that does not exist: clients never send one (they wait
for metadata first), so the broker's answer is checked on the wire.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from pykraft.storage.record_batch import CompressionType
from pykraft.storage.records import Header, SimpleRecord, build_batch
from tests.clients.conftest import DevCluster
from tests.clients.support import (
    UNKNOWN_TOPIC_OR_PARTITION,
    Message,
    Placed,
    by_partition,
    check_produced,
    check_read_back,
    client_failure_context,
    keyed_messages,
    metadata,
    now_ms,
    raw_produce,
    stored_batches,
    unique_topic,
)

pytestmark = pytest.mark.clients

PARTITIONS = 3
TIMEOUT_S = 30.0
CREATE_TIME = 0  # kafka-python's ConsumerRecord.timestamp_type


def bootstrap(cluster: DevCluster) -> list[str]:
    return cluster.bootstrap_servers.split(",")


def create_topic(cluster: DevCluster, partitions: int = PARTITIONS) -> str:
    topic = unique_topic("kafka-python")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster))
    try:
        response = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            timeout_ms=int(TIMEOUT_S * 1000),
        )
    finally:
        admin.close()
    # kafka-python 3 raises on a topic error and answers the response as a dict.
    [created] = response["topics"]
    assert (created["name"], created["error_code"], created["num_partitions"]) == (
        topic,
        0,
        partitions,
    )
    cluster.wait_for_topic(topic, partitions)
    return topic


def produce(
    cluster: DevCluster, topic: str, messages: Sequence[Message], **config: Any
) -> list[Placed]:
    producer = KafkaProducer(bootstrap_servers=bootstrap(cluster), **{"linger_ms": 5, **config})
    try:
        with client_failure_context("kafka", f"producing {len(messages)} messages"):
            futures = [
                (
                    message,
                    producer.send(
                        topic,
                        key=message.key,
                        value=message.value,
                        headers=list(message.headers),
                        timestamp_ms=message.timestamp_ms,
                    ),
                )
                for message in messages
            ]
            producer.flush(TIMEOUT_S)
            return [
                Placed(future.get(0).partition, future.get(0).offset, message)
                for message, future in futures
            ]
    finally:
        # Closing waits for nothing: a failed producer has nothing left worth sending.
        producer.close(timeout=0)


def new_consumer(cluster: DevCluster) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap(cluster),
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=int(TIMEOUT_S * 1000),
    )


def consume(cluster: DevCluster, topic: str, starts: dict[int, int], count: int) -> list[Placed]:
    consumer = new_consumer(cluster)
    try:
        partitions = [TopicPartition(topic, p) for p in starts]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, starts[tp.partition])
        read: list[Placed] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(read) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                read.extend(_placed(record) for record in records)
        assert len(read) == count, f"read {len(read)} of {count} messages in {TIMEOUT_S}s"
        assert consumer.poll(timeout_ms=500) == {}, "more messages than were produced"
        return read
    finally:
        consumer.close()


def _placed(record: Any) -> Placed:
    assert record.timestamp_type == CREATE_TIME
    message = Message(record.key, record.value, tuple(record.headers), record.timestamp)
    return Placed(record.partition, record.offset, message)


def test_keyed_messages_round_trip_through_several_partitions(cluster: DevCluster) -> None:
    topic = create_topic(cluster)
    # kafka-python refuses None header values ("must be (str, bytes) tuples").
    messages = keyed_messages(40, null_header_values=False)
    produced = produce(cluster, topic, messages)
    check_produced(produced, partitions_at_least=2)
    check_read_back(
        produced, consume(cluster, topic, dict.fromkeys(range(PARTITIONS), 0), len(messages))
    )


def test_the_consumer_reads_through_incremental_fetch_sessions(cluster: DevCluster) -> None:
    """KIP-227: kafka-python (enable_incremental_fetch_sessions, its default) opens a session
    with its first full fetch of each broker and then fetches incrementally; records produced
    meanwhile arrive through those sessions, none twice."""
    topic = create_topic(cluster)
    first = produce(cluster, topic, keyed_messages(20, null_header_values=False))
    consumer = new_consumer(cluster)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        read: list[Placed] = []

        def poll_until(count: int) -> None:
            deadline = time.monotonic() + TIMEOUT_S
            while len(read) < count and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    read.extend(_placed(record) for record in records)

        poll_until(len(first))
        second = produce(cluster, topic, keyed_messages(20, null_header_values=False))
        poll_until(len(first) + len(second))
        assert consumer.poll(timeout_ms=200) == {}, "more messages than were produced"
        # The client's own session state (FetchSessionHandler.next_metadata): an id the
        # broker handed out, at an epoch past the first incremental fetch.
        sessions = [h.next_metadata for h in consumer._fetcher._session_handlers.values()]
        assert sessions and all(m.session_id > 0 and m.epoch >= 2 for m in sessions), [
            (m.session_id, m.epoch) for m in sessions
        ]
    finally:
        consumer.close()
    check_read_back(first + second, read)


def test_seek_reads_from_the_offset_asked_for_even_inside_a_batch(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=1)
    messages = keyed_messages(30, null_header_values=False)
    produced = produce(cluster, topic, messages, linger_ms=50)
    assert len(stored_batches(cluster.data_dir, topic, 0)) < len(messages), "nothing batched"
    for offset in (17, 3, 29):
        consumed = consume(cluster, topic, {0: offset}, len(messages) - offset)
        check_read_back(produced[offset:], consumed)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_stored_as_sent_and_read_back(
    cluster: DevCluster, codec: str
) -> None:
    topic = create_topic(cluster, partitions=1)
    messages = keyed_messages(50, null_header_values=False, payload_bytes=200)
    produced = produce(cluster, topic, messages, compression_type=codec, linger_ms=50)
    check_read_back(produced, consume(cluster, topic, {0: 0}, len(messages)))
    batches = stored_batches(cluster.data_dir, topic, 0)
    assert {batch.compression for batch in batches} == {CompressionType[codec.upper()]}


def test_list_offsets_earliest_latest_and_by_timestamp(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=2)
    produced = produce(cluster, topic, keyed_messages(12, null_header_values=False))
    grouped = by_partition(produced)
    partitions = [TopicPartition(topic, p) for p in range(2)]
    consumer = new_consumer(cluster)
    try:
        assert consumer.beginning_offsets(partitions) == dict.fromkeys(partitions, 0)
        assert consumer.end_offsets(partitions) == {
            tp: len(grouped.get(tp.partition, [])) for tp in partitions
        }
        third = grouped[produced[0].partition][2]
        third_tp = TopicPartition(topic, third.partition)
        found = consumer.offsets_for_times({third_tp: third.message.timestamp_ms})
        assert found[third_tp].offset == third.offset
        assert found[third_tp].timestamp == third.message.timestamp_ms
        # Later than every record: no offset (Kafka answers -1, the client None).
        assert consumer.offsets_for_times({third_tp: now_ms()}) == {third_tp: None}
    finally:
        consumer.close()


def test_produce_to_an_unknown_topic_creates_it(cluster: DevCluster) -> None:
    """auto.create.topics.enable is on by default (Kafka's default): the producer's Metadata
    request creates the topic with num.partitions (1) and the send succeeds."""
    topic = unique_topic("kafka-python-missing")
    producer = KafkaProducer(bootstrap_servers=bootstrap(cluster), max_block_ms=10_000)
    try:
        sent = producer.send(topic, key=b"k", value=b"v").get(TIMEOUT_S)
    finally:
        producer.close(timeout=TIMEOUT_S)
    assert (sent.topic, sent.partition, sent.offset) == (topic, 0, 0)
    [answer] = metadata(cluster.broker_ports[0], [topic]).topics
    assert (answer.error_code, len(answer.partitions)) == (0, 1)


def test_produce_and_a_metadata_request_refusing_creation_create_nothing(
    cluster: DevCluster,
) -> None:
    """Produce never creates a topic, nor does Metadata v4+ with allow_auto_topic_creation
    false (Kafka's KafkaApis: auto-creation happens only in Metadata and FindCoordinator)."""
    topic = unique_topic("kafka-python-missing")
    batch = build_batch([SimpleRecord(b"v", b"k", now_ms(), (Header("h", b"x"),))])
    for port in cluster.broker_ports:
        assert raw_produce(port, topic, 0, batch) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
        [answer] = metadata(port, [topic]).topics
        assert answer.error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_idempotent_producer_gets_a_producer_id_and_sequences(cluster: DevCluster) -> None:
    topic = create_topic(cluster)
    messages = keyed_messages(30, null_header_values=False)
    produced = produce(cluster, topic, messages, enable_idempotence=True, acks="all")
    check_produced(produced, partitions_at_least=2)
    producer_ids = set()
    for partition in by_partition(produced):
        batches = stored_batches(cluster.data_dir, topic, partition)
        assert all(b.producer_id >= 0 and b.producer_epoch >= 0 for b in batches), batches
        assert batches[0].base_sequence == 0
        producer_ids |= {b.producer_id for b in batches}
    assert len(producer_ids) == 1, producer_ids
