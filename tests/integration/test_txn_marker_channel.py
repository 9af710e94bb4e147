"""``broker.txn_marker_channel.TxnMarkerChannel`` over real TCP on 127.0.0.1: WriteTxnMarkers to
a broker's own ``KafkaApis`` behind a ``KafkaListener`` (one process, one event loop), the
leaders it finds in the image, a broker that cannot be reached, and one that moved to a new
endpoint, or left. Listeners and logs are closed in ``finally`` blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.handlers import broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.network import KafkaListener
from pykraft.broker.txn_marker_channel import TxnMarkerChannel
from pykraft.fetcher.broker_connection import ConnectionSettings
from pykraft.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.protocol.errors import Errors
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from tests.broker.replica_harness import (
    LOCAL,
    NOW_MS,
    OTHER,
    PETS0,
    PETS1,
    PETS_ID,
    Cluster,
    partition_record,
    services,
)

pytestmark = pytest.mark.integration

PRODUCER = 7
TIMEOUT_S = 30


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), TIMEOUT_S))


async def eventually(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait for what another task does over the socket (the listener seeing a close)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def registration(broker_id: int, port: int, incarnation: int = 0) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=f"incarnation-{broker_id}-{incarnation}",
        broker_epoch=100 + broker_id + incarnation,
        end_points=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=port),),
    )


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def topics() -> list[MetadataRecord]:
    """pets-0 led here, pets-1 without a leader."""
    return [
        TopicRecord(name="pets", topic_id=PETS_ID),
        partition_record(PETS_ID, 0, (LOCAL,)),
        partition_record(PETS_ID, 1, (LOCAL, OTHER), leader=OTHER, isr=(OTHER,)),
        PartitionChangeRecord(partition_id=1, topic_id=PETS_ID, leader=-1, isr=(OTHER,)),
    ]


@contextlib.asynccontextmanager
async def listening(cluster: Cluster) -> AsyncIterator[KafkaListener]:
    """The broker's Kafka APIs (WriteTxnMarkers among them) on a free 127.0.0.1 port."""
    apis = KafkaApis()
    apis.register_all(broker_handlers(services(cluster)))
    listener = KafkaListener(
        apis.dispatch, metrics=BrokerMetrics(), monotonic_ms=cluster.clock.monotonic_ms
    )
    await listener.start()
    try:
        yield listener
    finally:
        await listener.close()


def channel_of(cluster: Cluster) -> TxnMarkerChannel:
    return TxnMarkerChannel(
        LOCAL,
        lambda: cluster.image,
        "PLAINTEXT",
        ConnectionSettings(client_id="txn-marker-test", socket_timeout_ms=5_000),
        monotonic_ms=cluster.clock.monotonic_ms,
    )


def open_transaction(cluster: Cluster) -> None:
    """PRODUCER's transactional batch in pets-0 (offset 0), its transaction open."""
    data = build_batch(
        [SimpleRecord(value=b"v", timestamp=NOW_MS)],
        producer_id=PRODUCER,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    assert cluster.produce(PETS0, bytearray(data)).error is Errors.NONE


def commit(*partitions: TopicPartition) -> TxnMarker:
    return TxnMarker(
        producer_id=PRODUCER,
        producer_epoch=0,
        coordinator_epoch=0,
        commit=True,
        partitions=partitions,
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    harness = Cluster(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


def test_markers_reach_the_leader_over_tcp(cluster: Cluster) -> None:
    # The coordinator's whole path: negotiation (ApiVersions, WriteTxnMarkers v1), the request,
    # the leader's handler appending the marker, each partition's answer decoded.
    async def test() -> None:
        async with listening(cluster) as listener:
            cluster.publish(registration(LOCAL, listener.port), *topics())
            open_transaction(cluster)
            channel = channel_of(cluster)
            try:
                ghost = TopicPartition("pets", 9)
                answers = await channel.write_txn_markers(LOCAL, [commit(PETS0, ghost)])
                assert answers == {
                    (PRODUCER, PETS0): Errors.NONE,
                    (PRODUCER, ghost): Errors.UNKNOWN_TOPIC_OR_PARTITION,
                }
                log = cluster.replica_manager.partitions[PETS0].log
                assert log.last_stable_offset == log.log_end_offset == 2
                again = await channel.write_txn_markers(LOCAL, [])  # the same connection
                assert again == {}
            finally:
                await channel.close()

    run(test)


def test_leaders_come_from_the_image(cluster: Cluster) -> None:
    # TransactionMarkerChannelManager: a leaderless partition waits (-1), a partition of a
    # deleted (or never created) topic needs no marker (None)
    cluster.publish(registration(LOCAL, closed_port()), *topics())
    channel = channel_of(cluster)
    assert channel.leader_of(PETS0) == LOCAL
    assert channel.leader_of(PETS1) == -1
    assert channel.leader_of(TopicPartition("pets", 9)) is None
    assert channel.leader_of(TopicPartition("ghosts", 0)) is None


def test_an_unreachable_leader_answers_network_exception(cluster: Cluster) -> None:
    # A failed request answers every partition NETWORK_EXCEPTION (retriable): the coordinator
    # looks the leader up again and resends. A broker the image does not know (or not on the
    # inter-broker listener) answers NOT_LEADER_OR_FOLLOWER without a connection.
    async def test() -> None:
        cluster.publish(registration(LOCAL, closed_port()), *topics())
        channel = channel_of(cluster)
        try:
            answers = await channel.write_txn_markers(LOCAL, [commit(PETS0, PETS1)])
            assert answers == {
                (PRODUCER, PETS0): Errors.NETWORK_EXCEPTION,
                (PRODUCER, PETS1): Errors.NETWORK_EXCEPTION,
            }
            unknown = await channel.write_txn_markers(OTHER, [commit(PETS1)])
            assert unknown == {(PRODUCER, PETS1): Errors.NOT_LEADER_OR_FOLLOWER}
        finally:
            await channel.close()

    run(test)


def test_a_broker_that_moved_gets_a_new_connection(cluster: Cluster) -> None:
    # Re-registered on a new port: the old connection is dropped and the next request goes
    # to the new endpoint (the old listener is gone, so only a new connection can answer).
    async def test() -> None:
        channel = channel_of(cluster)
        try:
            async with listening(cluster) as first:
                cluster.publish(registration(LOCAL, first.port), *topics())
                open_transaction(cluster)
                assert await channel.write_txn_markers(LOCAL, []) == {}
            async with listening(cluster) as second:
                cluster.publish(registration(LOCAL, second.port, incarnation=1))
                answers = await channel.write_txn_markers(LOCAL, [commit(PETS0)])
                assert answers == {(PRODUCER, PETS0): Errors.NONE}
        finally:
            await channel.close()

    run(test)


def test_a_broker_that_left_loses_its_connection(cluster: Cluster) -> None:
    # Unregistered (here: registered without the inter-broker listener): the next request
    # answers NOT_LEADER_OR_FOLLOWER without a connection, and the old one is closed.
    async def test() -> None:
        channel = channel_of(cluster)
        try:
            async with listening(cluster) as listener:
                cluster.publish(registration(LOCAL, listener.port), *topics())
                assert await channel.write_txn_markers(LOCAL, []) == {}
                assert listener.connection_count == 1
                elsewhere = RegisterBrokerRecord(
                    broker_id=LOCAL, incarnation_id="incarnation-1-2", broker_epoch=103,
                    end_points=(BrokerEndpoint(name="OTHER", host="127.0.0.1", port=1),),
                )  # fmt: skip
                cluster.publish(elsewhere)
                gone = await channel.write_txn_markers(LOCAL, [commit(PETS0)])
                assert gone == {(PRODUCER, PETS0): Errors.NOT_LEADER_OR_FOLLOWER}
                await eventually(lambda: listener.connection_count == 0)
                cluster.publish(registration(LOCAL, listener.port, incarnation=3))
                back = await channel.write_txn_markers(LOCAL, [])
                assert back == {}
        finally:
            await channel.close()

    run(test)
