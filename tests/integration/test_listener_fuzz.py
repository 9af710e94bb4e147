"""Fuzz the Kafka listener with random and mutated frames (Hypothesis, real loopback port).

Properties, after every example:
* the broker stays up: a fresh connection's ApiVersions request is answered;
* the dispatcher only ever saw headers that parse: the headers it was called with are a prefix
  of what an independent decode of the sent bytes (same FrameDecoder bound, same header parser)
  accepts before the first bad frame, bad header or request Kafka would disconnect for;
* no connection is leaked.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykraft.broker.kafka_apis import KafkaApis
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import RequestDisposition, request_disposition
from pykraft.protocol.errors import ProtocolError
from pykraft.protocol.framing import FrameDecoder
from pykraft.protocol.headers import RequestHeader, parse_request_header
from tests.broker.wire_client import (
    api_versions_body,
    api_versions_frame,
    blocking_exchange,
    correlation_id,
    decode_api_versions,
    request_frame,
)
from tests.integration.listener_harness import BackgroundBroker, background_broker

pytestmark = pytest.mark.integration

MAX_REQUEST_BYTES = 4096
EXAMPLES = 200

VALID_FRAMES = [
    api_versions_frame(1, 0),
    api_versions_frame(2, 3),
    request_frame(ApiKey.API_VERSIONS, 7, 3, b"future body"),
    request_frame(ApiKey.METADATA, 12, 4, b"\x00"),  # advertised, no handler registered
    request_frame(ApiKey.FETCH, 2, 5),  # message format v1: answered UNSUPPORTED_VERSION
    request_frame(4242, 0, 6),  # unknown API key
    request_frame(ApiKey.API_VERSIONS, 3, 7, api_versions_body(3), client_id=None),
]


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """Concatenated valid frames with a few byte-level mutations."""
    data = bytearray(
        b"".join(draw(st.lists(st.sampled_from(VALID_FRAMES), min_size=1, max_size=5)))
    )
    for _ in range(draw(st.integers(0, 4))):
        position = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        if kind == "flip" and position < len(data):
            data[position] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[position : position + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del data[position:]
    return bytes(data)


@st.composite
def random_payload_frames(draw: st.DrawFn) -> bytes:
    """Correctly sized frames whose payload is random (headers of any shape)."""
    frames = draw(st.lists(st.binary(max_size=64), min_size=1, max_size=4))
    return b"".join(len(frame).to_bytes(4, "big") + frame for frame in frames)


@st.composite
def bad_size_prefixes(draw: st.DrawFn) -> bytes:
    prefix = draw(st.sampled_from([-1, -(2**31), MAX_REQUEST_BYTES + 1, 2**31 - 1]))
    return draw(st.sampled_from(VALID_FRAMES)) + prefix.to_bytes(4, "big", signed=True)


inputs = st.one_of(
    st.binary(max_size=512), mutated_frames(), random_payload_frames(), bad_size_prefixes()
)


def expected_dispatches(data: bytes, apis: KafkaApis) -> list[RequestHeader]:
    """Headers a correct listener may hand to the dispatcher, in order, for ``data``."""
    decoder = FrameDecoder(MAX_REQUEST_BYTES)
    headers: list[RequestHeader] = []
    try:
        decoder.receive_data(data)
        while (frame := decoder.next_frame()) is not None:
            header, _ = parse_request_header(memoryview(frame))
            headers.append(header)
            if not _dispatch_accepts(header, apis):
                break
    except ProtocolError:
        pass  # the listener stops at the same frame
    return headers


def _dispatch_accepts(header: RequestHeader, apis: KafkaApis) -> bool:
    disposition = request_disposition(header.api_key, header.api_version)
    if disposition is RequestDisposition.CLOSE_CONNECTION:
        return False
    return disposition is not RequestDisposition.SERVE or ApiKey(header.api_key) in apis.registered


def send_and_drain(port: int, data: bytes) -> None:
    """Send everything (the broker may close first), half-close, read until the broker closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                continue
        except (ConnectionResetError, BrokenPipeError):
            return  # the broker closed a connection it would not serve: allowed


def api_versions_answered(broker: BackgroundBroker) -> bool:
    [frame] = blocking_exchange(broker.port, api_versions_frame(77, 3))
    return correlation_id(frame) == 77 and decode_api_versions(frame, 3).error_code == 0


def wait_for_no_connections(broker: BackgroundBroker, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while broker.call(lambda: broker.listener.connection_count if broker.listener else 0):
        assert time.monotonic() < deadline, "a connection was never closed"
        time.sleep(0.005)


def test_listener_survives_random_and_mutated_frames() -> None:
    with background_broker(max_request_bytes=MAX_REQUEST_BYTES) as broker:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=None,
        )
        @given(data=inputs)
        def check(data: bytes) -> None:
            broker.dispatched.clear()
            send_and_drain(broker.port, data)
            wait_for_no_connections(broker)
            dispatched: list[Any] = list(broker.dispatched)
            allowed = expected_dispatches(data, broker.apis)
            assert dispatched == allowed[: len(dispatched)], (dispatched, allowed)
            assert api_versions_answered(broker)

        check()
        wait_for_no_connections(broker)
        assert broker.metrics.connections.value() == 0
