"""KafkaLeaderEndpoint over real TCP on 127.0.0.1: against a real leader broker's handlers and
against a scripted server for every way the connection can fail.

The leader is broker 1's ``ReplicaManager`` + ``KafkaApis`` behind a ``KafkaListener`` on a free
port; the follower is broker 2's ``ReplicaManager`` with a real ``ReplicaFetcherManager``; both
are fed the same metadata records, in one process and one event loop. Servers, fetchers and logs
are closed in ``finally`` blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import pytest

from pykraft.broker.handlers import BrokerServices, broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.network import KafkaListener
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.fetcher.broker_connection import ConnectionSettings
from pykraft.fetcher.fetcher_config import FetcherConfig
from pykraft.fetcher.fetcher_manager import ReplicaFetcherManager
from pykraft.fetcher.leader_endpoint import (
    EndpointSettings,
    KafkaLeaderEndpoint,
    LeaderEndpointError,
)
from pykraft.fetcher.responses import LeaderOffsets
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import local_changes
from pykraft.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    encode_api_versions_response,
    encode_unsupported_api_versions_response,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import encode_response_header, parse_request_header
from pykraft.protocol.wire import INT32
from pykraft.replica.data_path import RecordedFetcherManager
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.system_clock import SystemClock
from pykraft.storage.topic_partition import TopicPartition
from tests.fetcher.fake_leader import records_of

pytestmark = pytest.mark.integration

LEADER, FOLLOWER = 1, 2
PETS_ID = "ThIaNwRnSM2Nt9Mx1v0RvA"
PETS0 = TopicPartition("pets", 0)
WAIT_S = 10.0
# Real sockets, real time: the clock a broker process is given.
CLOCK = SystemClock()


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


async def eventually(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def batch(base_offset: int, epoch: int, *values: bytes) -> bytes:
    records = [SimpleRecord(value=v, timestamp=1000 + i) for i, v in enumerate(values)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)


class Broker:
    """One broker's data path (no controller, no heartbeats), fed metadata by the test."""

    def __init__(self, broker_id: int, root: Path, fetcher_manager: Any) -> None:
        self.log_manager = LogManager.open([root / f"broker-{broker_id}"], LogConfig(), now_ms=0)
        self.replica_manager = ReplicaManager(
            broker_id=broker_id,
            log_manager=self.log_manager,
            fetcher_manager=fetcher_manager,
            monotonic_ms=CLOCK.monotonic_ms,
        )
        self.broker_id = broker_id
        self.image = MetadataImage.EMPTY

    def publish(self, *records: MetadataRecord) -> None:
        delta = MetadataDelta(self.image)
        for record in records:
            delta.replay(record)
        self.image = delta.apply()
        self.replica_manager.apply_delta(local_changes(delta, self.broker_id), self.image, 0)

    def close(self) -> None:
        self.replica_manager.shutdown()
        self.log_manager.shutdown()


@contextlib.asynccontextmanager
async def two_brokers(
    tmp_path: Path,
) -> AsyncIterator[tuple[Broker, Broker, ReplicaFetcherManager, int]]:
    """Leader, follower, the follower's fetcher manager, and the leader's listener port."""
    leader = Broker(LEADER, tmp_path, RecordedFetcherManager())
    apis = KafkaApis()
    apis.register_all(
        broker_handlers(
            BrokerServices(
                broker_id=LEADER,
                cluster_id="cluster",
                replica_manager=leader.replica_manager,
                metadata=lambda: leader.image,
                controller=cast(Any, None),
                wall_clock_ms=CLOCK.wall_clock_ms,
            )
        )
    )
    listener = KafkaListener(
        apis.dispatch, metrics=BrokerMetrics(), monotonic_ms=CLOCK.monotonic_ms
    )
    fetchers = ReplicaFetcherManager(
        FetcherConfig(replica_id=FOLLOWER, fetch_wait_max_ms=200, fetch_backoff_ms=50),
        lambda tp: follower.log_manager.get_log(tp),
        clock=CLOCK,
    )
    follower = Broker(FOLLOWER, tmp_path, fetchers)
    try:
        await listener.start()
        yield leader, follower, fetchers, listener.port
    finally:
        await fetchers.shutdown()
        await listener.close()
        leader.close()
        follower.close()


def cluster_records(port: int, leader_epoch: int = 0) -> list[MetadataRecord]:
    brokers: list[MetadataRecord] = [
        RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=f"incarnation-{broker_id}",
            broker_epoch=100 + broker_id,
            fenced=False,
            end_points=(
                BrokerEndpoint(
                    name="PLAINTEXT", host="127.0.0.1", port=port if broker_id == LEADER else 1
                ),
            ),
        )
        for broker_id in (LEADER, FOLLOWER)
    ]
    return [
        *brokers,
        TopicRecord(name="pets", topic_id=PETS_ID),
        PartitionRecord(
            topic_id=PETS_ID,
            partition_id=0,
            replicas=(LEADER, FOLLOWER),
            isr=(LEADER, FOLLOWER),
            leader=LEADER,
            leader_epoch=leader_epoch,
        ),
    ]


def test_a_follower_replicates_acks_all_writes_over_tcp(tmp_path: Path) -> None:
    # The whole path: the follower's fetcher fetches (v16, topic ids, ReplicaState), the
    # leader records its progress, the high watermark moves, acks=-1 completes.
    async def test() -> None:
        async with two_brokers(tmp_path) as (leader, follower, fetchers, port):
            for broker in (leader, follower):
                broker.publish(*cluster_records(port))
            for index in range(5):
                data = bytearray(batch(0, -1, b"a%d" % index, b"b%d" % index))
                results = await leader.replica_manager.append_records(
                    {PETS0: data}, required_acks=-1, timeout_ms=10_000, now_ms=0
                )
                assert results[PETS0].error is Errors.NONE, results
            leader_log = leader.log_manager.get_log(PETS0)
            follower_log = follower.log_manager.get_log(PETS0)
            assert leader_log is not None and follower_log is not None
            assert leader_log.high_watermark == 10
            await eventually(lambda: follower_log.high_watermark == 10)
            assert records_of(follower_log) == records_of(leader_log)
            assert fetchers.failed_partitions == {}

    run(test)


def test_a_divergent_follower_truncates_over_tcp(tmp_path: Path) -> None:
    # KIP-320 over the wire: the follower wrote offset 2 in epoch 1 that never replicated; the
    # leader (epoch 2) answers DivergingEpoch(0, 2) and the follower cuts it off.
    async def test() -> None:
        async with two_brokers(tmp_path) as (leader, follower, fetchers, port):
            assert fetchers.fetchers == {}
            config = LogConfig()
            leader_log = leader.log_manager.get_or_create_log(PETS0, 0, config)
            follower_log = follower.log_manager.get_or_create_log(PETS0, 0, config)
            for log, data in (
                (leader_log, [batch(0, 0, b"m0", b"m1"), batch(2, 2, b"m2"), batch(3, 2, b"m3")]),
                (follower_log, [batch(0, 0, b"m0", b"m1"), batch(2, 1, b"lost")]),
            ):
                for chunk in data:
                    log.append_as_follower(chunk)
            leader.publish(*cluster_records(port, leader_epoch=2))
            follower.publish(*cluster_records(port, leader_epoch=2))
            await eventually(lambda: records_of(follower_log) == records_of(leader_log))
            assert [e.epoch for e in follower_log.leader_epoch_cache.entries] == [0, 2]

            # The other two requests, asked directly.
            endpoint = KafkaLeaderEndpoint(
                LEADER,
                "127.0.0.1",
                port,
                EndpointSettings(FOLLOWER, ConnectionSettings("test-client")),
                monotonic_ms=CLOCK.monotonic_ms,
            )
            try:
                answers = await endpoint.fetch_epoch_end_offsets(
                    {PETS0: LeaderEpochRequest(current_leader_epoch=2, leader_epoch=1)}
                )
                assert answers == {PETS0: LeaderEpochEndOffset(Errors.NONE, 0, 2)}
                offsets = await endpoint.fetch_leader_offsets(PETS0, 2)
                assert offsets == LeaderOffsets(Errors.NONE, log_start_offset=0, log_end_offset=4)
                fenced = await endpoint.fetch_leader_offsets(PETS0, 1)
                assert fenced.error_code == Errors.FENCED_LEADER_EPOCH
            finally:
                await endpoint.close()

    run(test)


# ------------------------------------------------------------------------- a scripted server

Script = Callable[[int, int, int], Awaitable[bytes | None]]  # (api key, version, correlation id)


@contextlib.asynccontextmanager
async def scripted_server(script: Script) -> AsyncIterator[int]:
    """A server answering each request frame with ``script``'s bytes (a whole frame)."""
    connections: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size = INT32.unpack(await reader.readexactly(4))[0]
                header, _ = parse_request_header(await reader.readexactly(size))
                answer = await script(header.api_key, header.api_version, header.correlation_id)
                if answer is not None:
                    writer.write(answer)
                    await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for writer in connections:
            writer.close()
        await server.wait_closed()


def frame(correlation_id: int, body: bytes, *, size: int | None = None) -> bytes:
    payload = encode_response_header(correlation_id, 0) + body
    return INT32.pack(len(payload) if size is None else size) + payload


async def api_versions_only(api_key: int, version: int, correlation_id: int) -> bytes | None:
    if api_key == ApiKey.API_VERSIONS:
        return frame(correlation_id, encode_api_versions_response(version))
    return None  # anything else: never answered


def endpoint_to(
    port: int, clock: Callable[[], int] = CLOCK.monotonic_ms, **settings: Any
) -> KafkaLeaderEndpoint:
    return KafkaLeaderEndpoint(
        LEADER,
        "127.0.0.1",
        port,
        EndpointSettings(FOLLOWER, ConnectionSettings("test", **settings)),
        monotonic_ms=clock,
    )


def test_negotiates_and_falls_back_to_api_versions_v0() -> None:
    # KIP-511: a leader that does not know ApiVersions v3 answers v0 UNSUPPORTED_VERSION.
    async def script(api_key: int, version: int, correlation_id: int) -> bytes | None:
        if version == 3:
            return frame(correlation_id, encode_unsupported_api_versions_response())
        return frame(correlation_id, encode_api_versions_response(version))

    async def test() -> None:
        async with scripted_server(script) as port:
            endpoint = endpoint_to(port)
            try:
                features = await endpoint.features()
                assert features.fetch_version == 17 and features.truncation_on_fetch_supported
                assert endpoint.connected
            finally:
                await endpoint.close()

    run(test)


def test_a_silent_leader_times_out_and_the_connection_is_dropped() -> None:
    # replica.socket.timeout.ms bounds every request.
    async def test() -> None:
        async with scripted_server(api_versions_only) as port:
            endpoint = endpoint_to(port, socket_timeout_ms=200)
            try:
                await endpoint.features()
                with pytest.raises(LeaderEndpointError, match="OFFSET_FOR_LEADER_EPOCH v4 failed"):
                    await endpoint.fetch_epoch_end_offsets({PETS0: LeaderEpochRequest(0, 0)})
                assert not endpoint.connected
            finally:
                await endpoint.close()

    run(test)


@pytest.mark.parametrize("problem", ["oversized", "wrong_correlation_id", "garbage"])
def test_a_bad_response_fails_the_request(problem: str) -> None:
    async def script(api_key: int, version: int, correlation_id: int) -> bytes | None:
        body = encode_api_versions_response(version)
        if problem == "oversized":
            return frame(correlation_id, body, size=1 << 30)
        if problem == "wrong_correlation_id":
            return frame(correlation_id + 1, body)
        return frame(correlation_id, b"\x00\x00\xff")

    async def test() -> None:
        async with scripted_server(script) as port:
            endpoint = endpoint_to(port, max_response_bytes=1 << 20)
            try:
                with pytest.raises(LeaderEndpointError):
                    await endpoint.features()
                assert not endpoint.connected
            finally:
                await endpoint.close()

    run(test)


def test_reconnects_with_exponential_back_off() -> None:
    # reconnect.backoff.ms 50 doubling up to reconnect.backoff.max.ms 1000; while backing off
    # a request fails at once without touching the network.
    async def test() -> None:
        async with scripted_server(api_versions_only) as port:
            pass  # the port is closed again: connections are refused
        now = [0]
        endpoint = endpoint_to(port, clock=lambda: now[0])
        try:
            for expected_backoff_ms in (50, 100, 200, 400, 800, 1000, 1000):
                with pytest.raises(LeaderEndpointError, match="connect failed"):
                    await endpoint.features()
                with pytest.raises(LeaderEndpointError, match="reconnecting in"):
                    await endpoint.features()
                now[0] += expected_backoff_ms - 1
                with pytest.raises(LeaderEndpointError, match="reconnecting in 1 ms"):
                    await endpoint.features()
                now[0] += 1
            async with scripted_server(api_versions_only) as new_port:
                endpoint.connection.port = new_port
                assert (await endpoint.features()).fetch_version == 17
        finally:
            await endpoint.close()

    run(test)
