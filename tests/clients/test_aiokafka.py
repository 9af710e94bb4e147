"""aiokafka against a real pykraft cluster: its admin client creates the topic, its producer
sends keyed messages (ApiVersions v0 first, as aiokafka always does), its group-less consumer
reads them back by assign/seek; compression, ListOffsets, unknown topics and the idempotent
producer (InitProducerId v0).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from pykraft.storage.record_batch import CompressionType
from tests.clients.conftest import DevCluster
from tests.clients.support import (
    Message,
    Placed,
    by_partition,
    check_produced,
    check_read_back,
    client_failure_context,
    keyed_messages,
    now_ms,
    stored_batches,
    unique_topic,
)

pytestmark = pytest.mark.clients

PARTITIONS = 3
TIMEOUT_S = 30.0
CREATE_TIME = 0  # aiokafka's ConsumerRecord.timestamp_type
T = TypeVar("T")


def run(coroutine: Awaitable[T]) -> T:
    """One event loop per step, bounded so a hung client fails the test instead of the run."""

    async def bounded() -> T:
        return await asyncio.wait_for(coroutine, 2 * TIMEOUT_S)

    return asyncio.run(bounded())


async def create_topic(cluster: DevCluster, partitions: int = PARTITIONS) -> str:
    topic = unique_topic("aiokafka")
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            timeout_ms=int(TIMEOUT_S * 1000),
        )
    finally:
        await admin.close()
    assert [(name, error) for name, error, *_ in response.topic_errors] == [(topic, 0)], response
    await asyncio.to_thread(cluster.wait_for_topic, topic, partitions)
    return topic


async def produce(
    cluster: DevCluster, topic: str, messages: Sequence[Message], **config: Any
) -> list[Placed]:
    producer = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, **{"linger_ms": 5, **config}
    )
    try:
        with client_failure_context("aiokafka", f"producing {len(messages)} messages"):
            # With enable_idempotence, start() waits for InitProducerId.
            await asyncio.wait_for(producer.start(), TIMEOUT_S)
            return await asyncio.wait_for(_send_all(producer, topic, messages), TIMEOUT_S)
    finally:
        await producer.stop()


async def _send_all(
    producer: AIOKafkaProducer, topic: str, messages: Sequence[Message]
) -> list[Placed]:
    pending = [
        (
            message,
            await producer.send(
                topic,
                key=message.key,
                value=message.value,
                headers=list(message.headers),
                timestamp_ms=message.timestamp_ms,
            ),
        )
        for message in messages
    ]
    placed = []
    for message, future in pending:
        metadata = await future
        placed.append(Placed(metadata.partition, metadata.offset, message))
    return placed


def new_consumer(cluster: DevCluster) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False
    )


async def consume(
    cluster: DevCluster, topic: str, starts: dict[int, int], count: int
) -> list[Placed]:
    consumer = new_consumer(cluster)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in starts]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, starts[tp.partition])
        read: list[Placed] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(read) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                read.extend(_placed(record) for record in records)
        assert len(read) == count, f"read {len(read)} of {count} messages in {TIMEOUT_S}s"
        assert await consumer.getmany(timeout_ms=500) == {}, "more messages than were produced"
        return read
    finally:
        await consumer.stop()


def _placed(record: Any) -> Placed:
    assert record.timestamp_type == CREATE_TIME
    message = Message(record.key, record.value, tuple(record.headers), record.timestamp)
    return Placed(record.partition, record.offset, message)


def test_keyed_messages_round_trip_through_several_partitions(cluster: DevCluster) -> None:
    async def scenario() -> None:
        topic = await create_topic(cluster)
        messages = keyed_messages(40)
        produced = await produce(cluster, topic, messages)
        check_produced(produced, partitions_at_least=2)
        check_read_back(
            produced,
            await consume(cluster, topic, dict.fromkeys(range(PARTITIONS), 0), len(messages)),
        )

    run(scenario())


def test_seek_reads_from_the_offset_asked_for_even_inside_a_batch(cluster: DevCluster) -> None:
    async def scenario() -> None:
        topic = await create_topic(cluster, partitions=1)
        messages = keyed_messages(30)
        produced = await produce(cluster, topic, messages, linger_ms=50)
        assert len(stored_batches(cluster.data_dir, topic, 0)) < len(messages), "nothing batched"
        for offset in (17, 3, 29):
            consumed = await consume(cluster, topic, {0: offset}, len(messages) - offset)
            check_read_back(produced[offset:], consumed)

    run(scenario())


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_stored_as_sent_and_read_back(
    cluster: DevCluster, codec: str
) -> None:
    async def scenario() -> None:
        topic = await create_topic(cluster, partitions=1)
        messages = keyed_messages(50, payload_bytes=200)
        produced = await produce(cluster, topic, messages, compression_type=codec, linger_ms=50)
        check_read_back(produced, await consume(cluster, topic, {0: 0}, len(messages)))
        batches = stored_batches(cluster.data_dir, topic, 0)
        assert {batch.compression for batch in batches} == {CompressionType[codec.upper()]}

    run(scenario())


def test_list_offsets_earliest_latest_and_by_timestamp(cluster: DevCluster) -> None:
    async def scenario() -> None:
        topic = await create_topic(cluster, partitions=2)
        produced = await produce(cluster, topic, keyed_messages(12))
        grouped = by_partition(produced)
        partitions = [TopicPartition(topic, p) for p in range(2)]
        consumer = new_consumer(cluster)
        await consumer.start()
        try:
            assert await consumer.beginning_offsets(partitions) == dict.fromkeys(partitions, 0)
            assert await consumer.end_offsets(partitions) == {
                tp: len(grouped.get(tp.partition, [])) for tp in partitions
            }
            third = grouped[produced[0].partition][2]
            third_tp = TopicPartition(topic, third.partition)
            found = await consumer.offsets_for_times({third_tp: third.message.timestamp_ms})
            assert (found[third_tp].offset, found[third_tp].timestamp) == (
                third.offset,
                third.message.timestamp_ms,
            )
            assert await consumer.offsets_for_times({third_tp: now_ms()}) == {third_tp: None}
        finally:
            await consumer.stop()

    run(scenario())


def test_produce_to_an_unknown_topic_creates_it(cluster: DevCluster) -> None:
    """auto.create.topics.enable is on by default (Kafka's default): aiokafka's Metadata request
    for the topic creates it with num.partitions (1) and the send succeeds."""

    async def scenario() -> None:
        topic = unique_topic("aiokafka-missing")
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000
        )
        await producer.start()
        try:
            sent = await producer.send_and_wait(topic, key=b"k", value=b"v")
            assert (sent.topic, sent.partition, sent.offset) == (topic, 0, 0)
            metadata = await producer.client.fetch_all_metadata()
            assert metadata.partitions_for_topic(topic) == {0}
        finally:
            await producer.stop()

    run(scenario())


def test_idempotent_producer_gets_a_producer_id_and_sequences(cluster: DevCluster) -> None:
    async def scenario() -> None:
        topic = await create_topic(cluster)
        messages = keyed_messages(30)
        produced = await produce(cluster, topic, messages, enable_idempotence=True)
        check_produced(produced, partitions_at_least=2)
        producer_ids = set()
        for partition in by_partition(produced):
            batches = stored_batches(cluster.data_dir, topic, partition)
            assert all(b.producer_id >= 0 and b.producer_epoch >= 0 for b in batches), batches
            assert batches[0].base_sequence == 0
            producer_ids |= {b.producer_id for b in batches}
        assert len(producer_ids) == 1, producer_ids

    run(scenario())
