"""confluent-kafka (librdkafka) against a real pykraft cluster: CreateTopics, keyed Produce to
several partitions, Fetch by assign/seek, compression, ListOffsets, unknown topics, idempotence.

librdkafka's consumer requires a ``group.id`` even for ``assign()``; offsets are never
committed (``enable.auto.commit=false``) and the positions come from ``assign``/``seek`` only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka import Message as Record
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewTopic

from pykraft.storage.record_batch import CompressionType
from tests.clients.conftest import DevCluster
from tests.clients.support import (
    Message,
    Placed,
    by_partition,
    check_produced,
    check_read_back,
    keyed_messages,
    stored_batches,
    unique_topic,
)

pytestmark = pytest.mark.clients

PARTITIONS = 3
TIMEOUT_S = 30.0


def create_topic(cluster: DevCluster, partitions: int = PARTITIONS) -> str:
    topic = unique_topic("confluent")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=TIMEOUT_S,
        request_timeout=TIMEOUT_S,
    )
    assert futures[topic].result(timeout=TIMEOUT_S) is None
    cluster.wait_for_topic(topic, partitions)
    return topic


def produce(
    cluster: DevCluster, topic: str, messages: Sequence[Message], **config: object
) -> list[Placed]:
    """Produce in order; returns where each landed. Any delivery error fails the test."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "linger.ms": 5,
            "message.timeout.ms": int(TIMEOUT_S * 1000),
            **config,
        }
    )
    placed: list[Placed] = []
    errors: list[KafkaError] = []

    def on_delivery(message: Message) -> Any:
        def delivered(error: KafkaError | None, report: Record) -> None:
            if error is not None:
                errors.append(error)
                return
            placed.append(Placed(_int(report.partition()), _int(report.offset()), message))

        return delivered

    for message in messages:
        producer.produce(
            topic,
            key=message.key,
            value=message.value,
            headers=list(message.headers),
            timestamp=message.timestamp_ms,
            on_delivery=on_delivery(message),
        )
    assert producer.flush(TIMEOUT_S) == 0, "messages still in flight after flush"
    assert not errors, (
        f"{len(errors)} of {len(messages)} deliveries failed: "
        f"{sorted({str(error) for error in errors})}"
    )
    return placed


def _int(value: int | None) -> int:
    assert value is not None
    return value


def _record(record: Record) -> Placed:
    timestamp_type, timestamp = record.timestamp()
    assert timestamp_type == TIMESTAMP_CREATE_TIME
    raw_headers = record.headers() or []
    assert isinstance(raw_headers, list), raw_headers  # consumers return a list of pairs
    headers = tuple((key, _bytes(value)) for key, value in raw_headers)
    message = Message(_bytes(record.key()), _bytes(record.value()), headers, timestamp)
    return Placed(_int(record.partition()), _int(record.offset()), message)


def _bytes(value: object) -> bytes | None:
    assert value is None or isinstance(value, bytes), value
    return value


def new_consumer(cluster: DevCluster) -> Consumer:
    return Consumer({
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": f"assign-only-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    })  # fmt: skip


def consume(cluster: DevCluster, topic: str, starts: dict[int, int], count: int) -> list[Placed]:
    """Read ``count`` messages after ``assign`` at ``starts`` (partition -> offset)."""
    consumer = new_consumer(cluster)
    try:
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
        read: list[Placed] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(read) < count and time.monotonic() < deadline:
            record = consumer.poll(0.5)
            if record is None:
                continue
            assert record.error() is None, f"consumer error: {record.error()}"
            read.append(_record(record))
        assert len(read) == count, f"read {len(read)} of {count} messages in {TIMEOUT_S}s"
        # Nothing more arrives: the high watermark stops at what was produced.
        assert consumer.poll(0.5) is None
        return read
    finally:
        consumer.close()


def test_keyed_messages_round_trip_through_several_partitions(cluster: DevCluster) -> None:
    topic = create_topic(cluster)
    messages = keyed_messages(40)
    produced = produce(cluster, topic, messages)
    check_produced(produced, partitions_at_least=2)
    consumed = consume(cluster, topic, {p: 0 for p in range(PARTITIONS)}, len(messages))
    check_read_back(produced, consumed)
    # Within a partition, messages come back in the order they were produced.
    assert [p.message for p in consumed if p.partition == consumed[0].partition] == [
        p.message for p in by_partition(produced)[consumed[0].partition]
    ]


def test_seek_reads_from_the_offset_asked_for_even_inside_a_batch(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=1)
    messages = keyed_messages(30)
    produced = produce(cluster, topic, messages, **{"linger.ms": 50})
    assert len(stored_batches(cluster.data_dir, topic, 0)) < len(messages), "nothing batched"
    consumer = new_consumer(cluster)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for offset in (17, 3, 29, 0):
            consumer.seek(TopicPartition(topic, 0, offset))
            assert _record(_next(consumer)) == produced[offset]
    finally:
        consumer.close()


def _next(consumer: Consumer) -> Record:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        record = consumer.poll(0.5)
        if record is not None:
            assert record.error() is None, f"consumer error: {record.error()}"
            return record
    raise AssertionError(f"no message within {TIMEOUT_S}s")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_stored_as_sent_and_read_back(
    cluster: DevCluster, codec: str
) -> None:
    topic = create_topic(cluster, partitions=1)
    messages = keyed_messages(50, payload_bytes=200)
    produced = produce(cluster, topic, messages, **{"compression.type": codec, "linger.ms": 50})
    consumed = consume(cluster, topic, {0: 0}, len(messages))
    check_read_back(produced, consumed)
    # The broker stores the client's compressed batches byte for byte (DESIGN.md §3.3).
    batches = stored_batches(cluster.data_dir, topic, 0)
    assert {batch.compression for batch in batches} == {CompressionType[codec.upper()]}
    assert sum(batch.records_count for batch in batches) == len(messages)


def test_list_offsets_earliest_latest_and_by_timestamp(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=2)
    messages = keyed_messages(12)
    produced = produce(cluster, topic, messages)
    counts = {p: len(items) for p, items in by_partition(produced).items()}
    assert set(counts) == {0, 1}, counts
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partitions = [TopicPartition(topic, p) for p in range(2)]
    earliest, latest = OffsetSpec.earliest(), OffsetSpec.latest()  # type: ignore[no-untyped-call]
    for spec, expected in (
        (earliest, dict.fromkeys(range(2), 0)),
        (latest, {p: counts.get(p, 0) for p in range(2)}),
    ):
        answers = admin.list_offsets({tp: spec for tp in partitions}, request_timeout=TIMEOUT_S)
        offsets = {tp.partition: f.result(timeout=TIMEOUT_S).offset for tp, f in answers.items()}
        assert offsets == expected
    # KIP-734 (ListOffsets v7): the offset and timestamp of the record with the largest
    # timestamp — here the last one of each partition, as timestamps grow with the index.
    max_timestamp = OffsetSpec.max_timestamp()  # type: ignore[no-untyped-call]
    answers = admin.list_offsets(
        {tp: max_timestamp for tp in partitions}, request_timeout=TIMEOUT_S
    )
    for tp, future in answers.items():
        last = by_partition(produced)[tp.partition][-1]
        answer = future.result(timeout=TIMEOUT_S)
        assert (answer.offset, answer.timestamp) == (last.offset, last.message.timestamp_ms)
    consumer = new_consumer(cluster)
    try:
        for tp in partitions:
            assert consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S) == (
                0,
                counts.get(tp.partition, 0),
            )
        # ListOffsets by timestamp: the first offset whose timestamp is >= the one asked for.
        third = by_partition(produced)[produced[0].partition][2]
        [found] = consumer.offsets_for_times(
            [TopicPartition(topic, third.partition, third.message.timestamp_ms)], timeout=TIMEOUT_S
        )
        assert found.offset == third.offset
    finally:
        consumer.close()


def test_produce_to_an_unknown_topic_creates_it(cluster: DevCluster) -> None:
    """auto.create.topics.enable is on by default (Kafka's default): librdkafka's producer
    Metadata request creates the topic with num.partitions (1) and the message is delivered."""
    topic = unique_topic("confluent-missing")
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "topic.metadata.propagation.max.ms": 2000,
            "message.timeout.ms": int(TIMEOUT_S * 1000),
        }
    )
    errors: list[KafkaError | None] = []
    producer.produce(
        topic, key=b"k", value=b"v", on_delivery=lambda error, _report: errors.append(error)
    )
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [None]
    described = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(
        topic, timeout=TIMEOUT_S
    )
    assert described.topics[topic].error is None
    assert len(described.topics[topic].partitions) == 1


def test_idempotent_producer_gets_a_producer_id_and_sequences(cluster: DevCluster) -> None:
    """enable.idempotence=true: InitProducerId, then batches carry producer id and sequence."""
    topic = create_topic(cluster)
    messages = keyed_messages(30)
    logs: list[str] = []
    try:
        produced = produce(
            cluster,
            topic,
            messages,
            **{"enable.idempotence": True, "message.timeout.ms": 15_000, "logger": _Collect(logs)},
        )
    except (AssertionError, KafkaException) as error:
        raise AssertionError(f"{error}\nlibrdkafka said:\n" + "\n".join(logs[-10:])) from None
    check_produced(produced, partitions_at_least=2)
    check_read_back(
        produced, consume(cluster, topic, dict.fromkeys(range(PARTITIONS), 0), len(messages))
    )
    producer_ids = set()
    for partition in by_partition(produced):
        batches = stored_batches(cluster.data_dir, topic, partition)
        assert all(b.producer_id >= 0 and b.producer_epoch >= 0 for b in batches), batches
        # Sequences start at 0 per partition and continue batch after batch (KIP-98).
        sequences = [(b.base_sequence, b.records_count) for b in batches]
        expected_next = 0
        for base_sequence, records_count in sequences:
            assert base_sequence == expected_next, sequences
            expected_next += records_count
        producer_ids |= {b.producer_id for b in batches}
    assert len(producer_ids) == 1, producer_ids


class _Collect:
    """A ``logging.Logger`` stand-in for librdkafka's log callback."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def log(self, level: int, message: str, *args: object) -> None:
        self.lines.append(message % args if args else message)
