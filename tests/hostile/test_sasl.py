"""Hostile clients at the secure listeners: garbage SASL tokens, requests before
authentication, wrong passwords, TLS garbage, oversized frames before authentication. Each is
answered as Kafka's SaslServerAuthenticator answers (or closed as it closes), and the broker
keeps serving: a well-behaved client still logs in and produces afterwards.

One real controller and one real broker with PLAINTEXT, SASL_PLAINTEXT, SSL (client
certificates required) and SASL_SSL listeners (tests/tls_material.py)."""

from __future__ import annotations

import socket
import ssl
import struct
from pathlib import Path
from typing import Any

import pytest

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import parse_response_header, response_header_version
from tests.broker.wire_client import api_versions_frame, request_frame
from tests.secure_broker import SecureBroker, start_secure_brokers

# How long a test waits for the broker to close a connection it must close.
CLOSE_TIMEOUT_S = 10.0
RECEIVE_BYTES_MAX = 1 << 20


@pytest.fixture(scope="module")
def secure_broker(
    module_cluster_factory: Any, module_brokers: list[Any], module_path: Path
) -> SecureBroker:
    """Shared by the module's cases: each attacks on its own connections, then checks that the
    broker still serves (so it also survived the cases before it)."""
    return start_secure_brokers(module_cluster_factory, module_brokers, module_path)[0]


def exchange_until_closed(
    port: int, data: bytes, context: ssl.SSLContext | None = None
) -> list[bytes]:
    """Send ``data``, then read until the broker closes; every response frame. Fails if the
    broker keeps the connection open for CLOSE_TIMEOUT_S."""
    with socket.create_connection(("127.0.0.1", port), timeout=CLOSE_TIMEOUT_S) as raw:
        sock = context.wrap_socket(raw, server_hostname="localhost") if context else raw
        sock.sendall(data)
        received = bytearray()
        try:
            while chunk := sock.recv(65536):
                received += chunk
                assert len(received) <= RECEIVE_BYTES_MAX
        except (ConnectionResetError, ssl.SSLError):
            pass  # closed: TLS may end with a reset instead of close_notify
        except TimeoutError:
            message = f"the broker kept the connection open: {bytes(received)!r}"
            raise AssertionError(message) from None
    frames, position = [], 0
    while position + 4 <= len(received):
        (size,) = struct.unpack_from(">i", received, position)
        frames.append(bytes(received[position + 4 : position + 4 + size]))
        position += 4 + size
    return frames


def request(api_key: ApiKey, version: int, correlation_id: int, **fields: Any) -> bytes:
    body = bytes(request_class(api_key)(version=version, **fields).encode(version=version))
    return request_frame(api_key, version, correlation_id, body)


def response(frame: bytes, api_key: ApiKey, version: int) -> Any:
    _, start = parse_response_header(frame, response_header_version(api_key, version))
    return decode_response(api_key, version, memoryview(frame)[start:])


def plain_login(password: str) -> bytes:
    return request(ApiKey.SASL_HANDSHAKE, 1, 1, mechanism="PLAIN") + request(
        ApiKey.SASL_AUTHENTICATE, 2, 2, auth_bytes=b"\0alice\0" + password.encode()
    )


pytestmark = pytest.mark.integration


def test_wrong_password_is_sasl_authentication_failed_then_closed(
    secure_broker: SecureBroker,
) -> None:
    frames = exchange_until_closed(
        secure_broker.sasl_port, api_versions_frame(1) + plain_login("nope")
    )
    assert len(frames) == 3
    assert response(frames[1], ApiKey.SASL_HANDSHAKE, 1).error_code == Errors.NONE
    failed = response(frames[2], ApiKey.SASL_AUTHENTICATE, 2)
    assert failed.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert failed.error_message == "Authentication failed: Invalid username or password"
    secure_broker.assert_still_serves_sasl()


def test_requests_before_authentication_close_the_connection(
    secure_broker: SecureBroker,
) -> None:
    metadata = request(ApiKey.METADATA, 1, 9, topics=None)
    handshake = request(ApiKey.SASL_HANDSHAKE, 1, 1, mechanism="PLAIN")
    # (bytes sent, answers expected before the close): the refused request is never answered.
    for data, answered in (
        (metadata, 0),
        (api_versions_frame(1) + metadata, 1),
        (handshake + metadata, 1),  # during authentication: closed as Kafka does
        (request_frame(ApiKey.PRODUCE, 9, 2, b"\x00" * 32), 0),
    ):
        frames = exchange_until_closed(secure_broker.sasl_port, data)
        assert len(frames) == answered
    secure_broker.assert_still_serves_sasl()


@pytest.mark.parametrize(
    "token",
    [b"", b"\xff" * 64, b"n,,n=bob,r=" + b"\x00" * 10, b"n,,n=nobody,r=abc", b"x" * 4096],
)
def test_garbage_scram_tokens_fail_without_saying_why(
    secure_broker: SecureBroker, token: bytes
) -> None:
    data = request(ApiKey.SASL_HANDSHAKE, 1, 1, mechanism="SCRAM-SHA-512") + request(
        ApiKey.SASL_AUTHENTICATE, 2, 2, auth_bytes=token
    )
    frames = exchange_until_closed(secure_broker.sasl_port, data)
    failed = response(frames[-1], ApiKey.SASL_AUTHENTICATE, 2)
    assert failed.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert failed.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
    )
    secure_broker.assert_still_serves_sasl()


def test_unsupported_mechanism_lists_the_enabled_ones(secure_broker: SecureBroker) -> None:
    frames = exchange_until_closed(
        secure_broker.sasl_port, request(ApiKey.SASL_HANDSHAKE, 1, 1, mechanism="GSSAPI")
    )
    answer = response(frames[0], ApiKey.SASL_HANDSHAKE, 1)
    assert answer.error_code == Errors.UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-512"]


def test_frames_before_authentication_are_capped(secure_broker: SecureBroker) -> None:
    # sasl.server.max.receive.size (512 KiB): a bigger size prefix closes at once.
    frames = exchange_until_closed(secure_broker.sasl_port, struct.pack(">i", 600_000))
    assert frames == []
    secure_broker.assert_still_serves_sasl()


@pytest.mark.parametrize(
    "data", [api_versions_frame(1), b"\x16\x03\x01\x00\x05hello", b"\x00" * 1024]
)
def test_tls_garbage_is_dropped(secure_broker: SecureBroker, data: bytes) -> None:
    for port in (secure_broker.ssl_port, secure_broker.sasl_ssl_port):
        assert exchange_until_closed(port, data) == []
    secure_broker.assert_still_serves_sasl()


def test_mutual_tls_refuses_a_client_without_certificate(secure_broker: SecureBroker) -> None:
    try:
        frames = exchange_until_closed(
            secure_broker.ssl_port, api_versions_frame(1), secure_broker.client_tls(False)
        )
    except (ssl.SSLError, ConnectionResetError):  # TLS 1.2 fails the handshake itself
        frames = []
    assert frames == []  # TLS 1.3: the refusal arrives after the client's Finished
    # With alice's certificate the same listener answers.
    context = secure_broker.client_tls(True)
    address = ("127.0.0.1", secure_broker.ssl_port)
    with (
        socket.create_connection(address, CLOSE_TIMEOUT_S) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        sock.sendall(api_versions_frame(1))
        stream = sock.makefile("rb")
        (size,) = struct.unpack(">i", stream.read(4))
        frame = stream.read(size)
    assert response(frame, ApiKey.API_VERSIONS, 3).error_code == Errors.NONE
