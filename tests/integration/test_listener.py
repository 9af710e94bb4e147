"""The Kafka listener with KafkaApis on a real 127.0.0.1 port: pipelining, isolation of bad
connections, and a real client (kafka-python 3.0) negotiating ApiVersions with it."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector

from pykraft.broker.acceptor import configure_accepted_socket
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.metrics import CloseReason
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS
from pykraft.protocol.errors import Errors
from tests.broker.wire_client import (
    api_versions_frame,
    blocking_exchange,
    correlation_id,
    decode_api_versions,
    request_frame,
)
from tests.integration.listener_harness import BackgroundBroker, background_broker, echo_after

pytestmark = pytest.mark.integration

METADATA_V1 = (ApiKey.METADATA, 1)


def api_versions_ok(port: int, correlation: int = 99) -> bool:
    [frame] = blocking_exchange(port, api_versions_frame(correlation, 3))
    response = decode_api_versions(frame, 3)
    return correlation_id(frame) == correlation and response.error_code == Errors.NONE


def test_pipelined_responses_come_back_in_request_order() -> None:
    apis = KafkaApis()
    # Request 1 finishes last, request 3 first: the wire order must still be 1, 2, 3, 4.
    apis.register(ApiKey.METADATA, echo_after({1: 0.3, 2: 0.15, 3: 0.0}))
    with background_broker(apis) as broker:
        frames = blocking_exchange(
            broker.port,
            b"".join(request_frame(*METADATA_V1, cid, b"body-%d" % cid) for cid in (1, 2, 3))
            + api_versions_frame(4, 3),
        )
        assert [correlation_id(f) for f in frames] == [1, 2, 3, 4]
        assert [f[4:] for f in frames[:3]] == [b"body-1", b"body-2", b"body-3"]
        assert decode_api_versions(frames[3], 3).error_code == Errors.NONE


def test_an_oversized_frame_closes_that_connection_only() -> None:
    with background_broker(max_request_bytes=1024) as broker:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as idle:
            # A good connection opened before the bad one stays usable after it.
            oversized = (1025).to_bytes(4, "big") + b"\x00" * 16
            assert blocking_exchange(broker.port, api_versions_frame(1) + oversized)[0]
            idle.sendall(api_versions_frame(2, 3))
            size = int.from_bytes(_recv_exactly(idle, 4), "big")
            assert correlation_id(_recv_exactly(idle, size)) == 2
        assert api_versions_ok(broker.port)
        _wait_for(lambda: _closed(broker, CloseReason.MALFORMED_REQUEST) == 1)


def test_unknown_api_key_closes_the_connection_without_an_answer() -> None:
    # Kafka: SocketServer.parseRequestHeader throws InvalidRequestException, the channel closes.
    with background_broker() as broker:
        frames = blocking_exchange(
            broker.port, api_versions_frame(1) + request_frame(1000, 0, 2) + api_versions_frame(3)
        )
        assert [correlation_id(f) for f in frames] == [1]
        assert api_versions_ok(broker.port)
        _wait_for(lambda: _closed(broker, CloseReason.REQUEST_REJECTED) == 1)


def test_unadvertised_version_of_a_known_api_closes_the_connection() -> None:
    with background_broker() as broker:
        # Fetch v19: no schema defines it, so no answer can be encoded.
        assert blocking_exchange(broker.port, request_frame(ApiKey.FETCH, 19, 1)) == []
        assert api_versions_ok(broker.port)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_over_the_wire(version: int) -> None:
    with background_broker() as broker:
        [frame] = blocking_exchange(broker.port, api_versions_frame(11, version))
        response = decode_api_versions(frame, version)
        assert correlation_id(frame) == 11 and response.error_code == Errors.NONE
        assert {e.api_key: (e.min_version, e.max_version) for e in response.api_keys} == {
            int(k): (v.min_version, v.max_version) for k, v in SUPPORTED_API_VERSIONS.items()
        }


def test_too_new_api_versions_gets_the_v0_unsupported_answer() -> None:
    with background_broker() as broker:
        [frame] = blocking_exchange(broker.port, request_frame(ApiKey.API_VERSIONS, 9, 5, b"??"))
        response = decode_api_versions(frame, 0)
        assert response.error_code == Errors.UNSUPPORTED_VERSION
        assert [(e.api_key, e.max_version) for e in response.api_keys] == [(18, 4)]


def test_kafka_python_negotiates_api_versions_and_infers_the_release() -> None:
    # kafka-python 3.0 opens with its newest ApiVersions (v4, Kafka 3.9's and ours) and infers
    # the broker release from the advertised ranges.
    with background_broker() as broker:
        net = NetworkSelector()
        manager = KafkaConnectionManager(net, bootstrap_servers=f"127.0.0.1:{broker.port}")
        try:
            node = manager.cluster.bootstrap_brokers()[0]

            async def check_version() -> Any:
                connection = manager.get_connection(
                    node.node_id, pop_on_close=False, refresh_metadata_on_err=False
                )
                await connection
                return connection.broker_version

            assert net.run(check_version) == (3, 9)
        finally:
            manager.close()
            net.close()
        versions = [(h.api_key, h.api_version) for h in broker.dispatched]
        assert versions[-1] == (ApiKey.API_VERSIONS, 4)
        assert all(key == ApiKey.API_VERSIONS for key, _ in versions)


def test_metrics_count_requests_and_bytes() -> None:
    with background_broker() as broker:
        request = api_versions_frame(1, 3)
        [frame] = blocking_exchange(broker.port, request)
        _wait_for(lambda: broker.metrics.request_duration.count("ApiVersions") == 1)
        assert broker.metrics.bytes_in.value() == len(request)
        assert broker.metrics.bytes_out.value() == 4 + len(frame)


def _closed(broker: BackgroundBroker, reason: CloseReason) -> float:
    return broker.metrics.connections_closed.value(reason.value)


def _wait_for(condition: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed early"
        data += chunk
    return bytes(data)


def test_accepted_sockets_get_tcp_nodelay_and_keepalive_as_in_kafka() -> None:
    # Acceptor.configureAcceptedSocketChannel: setTcpNoDelay(true), setKeepAlive(true). asyncio
    # sets TCP_NODELAY itself only when sock.proto is IPPROTO_TCP, and accepted sockets from
    # socket.create_server have proto 0 — without this, acks=all Produce lost 25-30%.
    server = socket.create_server(("127.0.0.1", 0))
    with server, socket.create_connection(server.getsockname(), timeout=5):
        accepted, _ = server.accept()
        with accepted:
            assert accepted.proto == 0
            configure_accepted_socket(accepted)
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            assert accepted.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
