"""A minimal Kafka client for listener tests: build request frames, read response frames."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response
from pykraft.protocol.headers import RequestHeader, encode_request_header, request_header_version


def request_frame(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: bytes = b"",
    client_id: str | None = "test-client",
) -> bytes:
    header = RequestHeader(
        api_key, api_version, correlation_id, client_id,
        request_header_version(api_key, api_version),
    )  # fmt: skip
    payload = encode_request_header(header) + body
    return struct.pack(">i", len(payload)) + payload


def api_versions_body(version: int) -> bytes:
    if version >= 3:
        request = ApiVersionsRequest(
            version=version, client_software_name="pykraft-tests", client_software_version="1.0"
        )
    else:
        request = ApiVersionsRequest(version=version)
    return bytes(request.encode(version=version))


def api_versions_frame(correlation_id: int, version: int = 3) -> bytes:
    return request_frame(ApiKey.API_VERSIONS, version, correlation_id, api_versions_body(version))


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next response frame without its size prefix; None at end of stream."""
    try:
        size_prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as error:
        assert error.partial == b"", "connection ended inside a size prefix"
        return None
    (size,) = struct.unpack(">i", size_prefix)
    return await reader.readexactly(size)


def correlation_id(frame: bytes) -> int:
    value: int = struct.unpack_from(">i", frame)[0]
    return value


def decode_api_versions(frame: bytes, version: int) -> Any:
    """ApiVersions responses always use response header v0: correlation id, then the body."""
    return decode_response(ApiKey.API_VERSIONS, version, frame[4:])


def blocking_exchange(port: int, data: bytes, timeout_s: float = 5.0) -> list[bytes]:
    """Send ``data`` on a fresh connection, half-close, return every response frame."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    frames = []
    position = 0
    while position + 4 <= len(received):
        (size,) = struct.unpack_from(">i", received, position)
        frames.append(bytes(received[position + 4 : position + 4 + size]))
        position += 4 + size
    assert position == len(received), "a response frame was cut short"
    return frames
