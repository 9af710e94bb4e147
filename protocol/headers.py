"""Request and response headers (``RequestHeader.json``, ``ResponseHeader.json``).

Request header versions:

* v0: ``request_api_key int16, request_api_version int16, correlation_id int32`` — only
  ControlledShutdown v0 ever used it;
* v1: v0 + ``client_id`` (nullable STRING, int16 length);
* v2: v1 + a tagged-field section; used by every flexible API version. ``client_id`` stays a
  non-compact string in v2 so a broker can read it before knowing the API.

Response header v0 is ``correlation_id int32``; v1 adds a tagged-field section and is used by
flexible versions — except ApiVersions, whose response header is always v0 (KIP-511) so a client
that sent a too-new version can still parse the UNSUPPORTED_VERSION answer.

For API keys no schema here knows, the header is read as v1: api key, version and correlation
id sit at fixed offsets in every version, which is all the broker needs before it closes such a
connection.

ApiVersions at a version outside ours is read leniently (KIP-511): a client newer than the
broker may frame its header in a way the broker cannot know, and the v0 UNSUPPORTED_VERSION
answer needs only the correlation id, at its fixed offset. So when the client id or the tagged
section after it does not parse, the header is returned with ``client_id`` None and the body
empty instead of failing. Kafka's ``RequestHeader.parse`` would fail and close the connection
there; answering is what lets such a client fall back.
"""

from __future__ import annotations

import struct

import attrs

from pykraft.protocol.api_keys import ApiKey, is_flexible
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS
from pykraft.protocol.errors import MalformedRequestError
from pykraft.protocol.segments import Buffer
from pykraft.protocol.wire import (
    EMPTY_TAGGED_FIELDS,
    INT16,
    INT32,
    Reader,
    encode_nullable_string,
)


@attrs.frozen
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    # Nullable on the wire; Kafka's RequestHeader.parse treats null like "".
    client_id: str | None
    header_version: int


def request_header_version(api_key: int, api_version: int) -> int:
    """``ApiMessageType.requestHeaderVersion``: 2 for flexible versions, else 1 (0 for one case)."""
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """``ApiMessageType.responseHeaderVersion``: 1 for flexible versions, 0 for ApiVersions."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def parse_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """Read the header at the start of a request frame; return it and where the body starts.

    Raises ``MalformedRequestError`` when the frame is too short or the client id is not UTF-8.
    """
    return _parse_usual_header(frame) or _parse_request_header(frame)


# api key, api version, correlation id, client id length (header v1 and v2).
_FIXED_PREFIX = struct.Struct(">hhih")


def _parse_usual_header(frame: Buffer) -> tuple[RequestHeader, int] | None:
    """Every request's path (issue 18): the usual header (v1, or v2 without tagged fields, a
    client id in UTF-8) in one unpack; None for anything else (read field by field then)."""
    view = memoryview(frame)
    if view.nbytes < _FIXED_PREFIX.size:
        return None
    api_key, api_version, correlation_id, id_length = _FIXED_PREFIX.unpack_from(view)
    header_version = request_header_version(api_key, api_version)
    end = _FIXED_PREFIX.size + id_length
    body_start = end + header_version - 1  # v2: one byte, no tagged fields
    if not header_version or id_length < 0 or body_start > view.nbytes:
        return None
    if header_version == 2 and view[end] != 0:
        return None
    try:
        client_id = str(view[_FIXED_PREFIX.size : end], "utf-8")
    except UnicodeDecodeError:
        return None
    header = RequestHeader(api_key, api_version, correlation_id, client_id, header_version)
    return header, body_start


def _parse_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    reader = Reader(frame)
    api_key = reader.int16("request_api_key")
    api_version = reader.int16("request_api_version")
    correlation_id = reader.int32("correlation_id")
    header_version = request_header_version(api_key, api_version)
    client_id = None
    try:
        if header_version >= 1:
            client_id = reader.nullable_string("client_id", compact=False)
        if header_version >= 2:
            reader.skip_tagged_fields("request header tagged fields")
    except MalformedRequestError:
        if not _is_unsupported_api_versions(api_key, api_version):
            raise
        header = RequestHeader(api_key, api_version, correlation_id, None, header_version)
        return header, memoryview(frame).nbytes
    header = RequestHeader(api_key, api_version, correlation_id, client_id, header_version)
    return header, reader.position


def _is_unsupported_api_versions(api_key: int, api_version: int) -> bool:
    return (
        api_key == ApiKey.API_VERSIONS
        and api_version not in SUPPORTED_API_VERSIONS[ApiKey.API_VERSIONS]
    )


def encode_request_header(header: RequestHeader) -> bytes:
    """The client side of ``parse_request_header`` (replica fetcher, tools, tests)."""
    out = (
        INT16.pack(header.api_key)
        + INT16.pack(header.api_version)
        + INT32.pack(header.correlation_id)
    )
    if header.header_version >= 1:
        out += encode_nullable_string(header.client_id, compact=False)
    if header.header_version >= 2:
        out += EMPTY_TAGGED_FIELDS
    return out


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    assert header_version in (0, 1), f"response header version {header_version} does not exist"
    encoded = INT32.pack(correlation_id)
    return encoded + EMPTY_TAGGED_FIELDS if header_version == 1 else encoded


def parse_response_header(frame: Buffer, header_version: int) -> tuple[int, int]:
    """Client side: return ``(correlation_id, body offset)`` of a response frame."""
    reader = Reader(frame)
    correlation_id = reader.int32("correlation_id")
    if header_version >= 1:
        reader.skip_tagged_fields("response header tagged fields")
    return correlation_id, reader.position
