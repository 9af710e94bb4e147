"""aiokafka transactions against a real pykraft cluster: its transactional producer (``start()``
runs InitProducerId v0 for the transactional id; ``transaction()`` commits, or aborts on an
exception), ``send_offsets_to_transaction`` by group id (TxnOffsetCommit without KIP-447's
member fields), fencing by a second instance, and its read_committed consumer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import ProducerFenced

from tests.clients.conftest import DevCluster
from tests.clients.support import Message, Placed, keyed_messages, unique_topic
from tests.clients.test_aiokafka import create_topic, run
from tests.clients.txn_support import check_exactly, stored_markers, wait_for_transaction_end

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0


class Rollback(Exception):
    """Raised inside ``producer.transaction()`` to have aiokafka abort it."""


@asynccontextmanager
async def transactional_producer(
    cluster: DevCluster, transactional_id: str
) -> AsyncIterator[AIOKafkaProducer]:
    producer = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, transactional_id=transactional_id
    )
    await asyncio.wait_for(producer.start(), TIMEOUT_S)  # InitProducerId
    try:
        yield producer
    finally:
        await producer.stop()


async def send(producer: AIOKafkaProducer, topic: str, messages: Sequence[Message]) -> list[Placed]:
    """Send and wait for every acknowledgement (an abort would drop what is still unsent)."""
    placed = []
    for message in messages:
        metadata = await producer.send_and_wait(
            topic, key=message.key, value=message.value, headers=list(message.headers),
            timestamp_ms=message.timestamp_ms,
        )  # fmt: skip
        placed.append(Placed(metadata.partition, metadata.offset, message))
    return placed


async def transaction(
    producer: AIOKafkaProducer, topic: str, messages: Sequence[Message], *, commit: bool
) -> list[Placed]:
    placed: list[Placed] = []
    try:
        async with producer.transaction():
            placed = await send(producer, topic, messages)
            if not commit:
                raise Rollback
    except Rollback:
        pass
    return placed


async def read_all(
    cluster: DevCluster, topic: str, partitions: int, isolation_level: str
) -> list[Placed]:
    """Everything below the end offset for ``isolation_level`` (the LSO for read_committed)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id=None,
        enable_auto_commit=False, isolation_level=isolation_level,
    )  # fmt: skip
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        read: list[Placed] = []
        deadline = time.monotonic() + TIMEOUT_S
        while any([await consumer.position(tp) < ends[tp] for tp in tps]):
            assert time.monotonic() < deadline, f"positions short of {ends}; read {read}"
            for records in (await consumer.getmany(timeout_ms=500)).values():
                read.extend(_placed(record) for record in records)
        return read
    finally:
        await consumer.stop()


def _placed(record: Any) -> Placed:
    message = Message(record.key, record.value, tuple(record.headers), record.timestamp)
    return Placed(record.partition, record.offset, message)


def test_committed_and_aborted_transactions_as_each_isolation_level_sees_them(
    cluster: DevCluster,
) -> None:
    """TransactionsTest.testBasicTransactions with aiokafka on both ends."""

    async def scenario() -> None:
        topic = await create_topic(cluster)
        messages = keyed_messages(24)
        async with transactional_producer(cluster, unique_topic("aiokafka-txn")) as producer:
            first = await transaction(producer, topic, messages[:8], commit=True)
            aborted = await transaction(producer, topic, messages[8:16], commit=False)
            last = await transaction(producer, topic, messages[16:], commit=True)
        check_exactly(first + last, await read_all(cluster, topic, 3, "read_committed"))
        check_exactly(first + aborted + last, await read_all(cluster, topic, 3, "read_uncommitted"))

    run(scenario())


def test_a_zombie_is_fenced_by_a_second_instance(cluster: DevCluster) -> None:
    """TransactionsTest.testFencingOnSend: the first instance's transaction is aborted by the
    second's InitProducerId, and its next send fails with ProducerFenced."""

    async def scenario() -> None:
        topic = await create_topic(cluster, partitions=1)
        transactional_id = unique_topic("aiokafka-zombie")
        messages = keyed_messages(5)
        async with transactional_producer(cluster, transactional_id) as zombie:
            await zombie.begin_transaction()
            doomed = await send(zombie, topic, messages[:2])
            async with transactional_producer(cluster, transactional_id) as successor:
                committed = await transaction(successor, topic, messages[2:4], commit=True)
            with pytest.raises(ProducerFenced):
                await send(zombie, topic, messages[4:])
        check_exactly(committed, await read_all(cluster, topic, 1, "read_committed"))
        check_exactly(doomed + committed, await read_all(cluster, topic, 1, "read_uncommitted"))
        assert [m.commit for m in stored_markers(cluster.data_dir, topic, 0)] == [False, True]

    run(scenario())


def test_send_offsets_to_transaction_commits_the_groups_offsets(cluster: DevCluster) -> None:
    """Consume-transform-produce: the group's offset moves with a committed transaction and
    stays put through an aborted one; the sink holds each record once."""

    async def scenario() -> None:
        source, sink = await create_topic(cluster, partitions=1), await create_topic(cluster)
        group = unique_topic("aiokafka-group")
        async with transactional_producer(cluster, unique_topic("aiokafka-seed")) as seed:
            await transaction(seed, source, keyed_messages(4), commit=True)  # marker at 4
        read = await read_all(cluster, source, 1, "read_committed")
        tp = TopicPartition(source, 0)
        transactional_id = unique_topic("aiokafka-etl")
        # Records 0-1 done and committed; 2-3 done, aborted, then done again and committed.
        rounds = ((read[:2], 2, True, 2), (read[2:], 5, False, 2), (read[2:], 5, True, 5))
        async with transactional_producer(cluster, transactional_id) as producer:
            for chunk, next_offset, commit, group_offset in rounds:
                try:
                    async with producer.transaction():
                        await send(producer, sink, [p.message for p in chunk])
                        await producer.send_offsets_to_transaction({tp: next_offset}, group)
                        if not commit:
                            raise Rollback
                except Rollback:
                    pass
                await asyncio.to_thread(
                    wait_for_transaction_end, cluster, transactional_id, TIMEOUT_S
                )
                assert await committed_offset(cluster, group, tp) == group_offset
        sunk = await read_all(cluster, sink, 3, "read_committed")
        assert sorted(p.message.value or b"" for p in sunk) == sorted(
            p.message.value or b"" for p in read
        )

    run(scenario())


async def committed_offset(cluster: DevCluster, group: str, tp: TopicPartition) -> int | None:
    """The group's committed offset (OffsetFetch; aiokafka never asks for stable offsets)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        offset: int | None = await consumer.committed(tp)
        return offset
    finally:
        await consumer.stop()
