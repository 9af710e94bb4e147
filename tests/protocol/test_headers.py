"""Request/response headers, checked against kio's generated header classes.

Header version rules follow Kafka's ``ApiMessageType.requestHeaderVersion`` /
``responseHeaderVersion`` and KIP-511 (ApiVersions responses always use header v0).
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as KioResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import MalformedRequestError
from pykraft.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    request_header_version,
    response_header_version,
)


@pytest.mark.parametrize(
    ("api_key", "api_version", "request_version", "response_version"),
    [
        (ApiKey.PRODUCE, 8, 1, 0),
        (ApiKey.PRODUCE, 9, 2, 1),
        (ApiKey.FETCH, 11, 1, 0),
        (ApiKey.FETCH, 12, 2, 1),
        (ApiKey.METADATA, 8, 1, 0),
        (ApiKey.METADATA, 9, 2, 1),
        (ApiKey.API_VERSIONS, 2, 1, 0),
        (ApiKey.API_VERSIONS, 3, 2, 0),  # KIP-511: response header stays v0
        (ApiKey.API_VERSIONS, 99, 2, 0),  # unsupported versions still parse as flexible
        (ApiKey.DESCRIBE_CLUSTER, 0, 2, 1),
        (ApiKey.INIT_PRODUCER_ID, 1, 1, 0),
        (ApiKey.INIT_PRODUCER_ID, 2, 2, 1),
        (ApiKey.CONTROLLED_SHUTDOWN, 0, 0, 0),
        (ApiKey.SASL_HANDSHAKE, 1, 1, 0),  # never flexible ("flexibleVersions": "none")
        (ApiKey.DELETE_RECORDS, 2, 2, 1),
        (999, 0, 1, 0),  # unknown key
    ],
)
def test_header_versions(
    api_key: int, api_version: int, request_version: int, response_version: int
) -> None:
    assert request_header_version(api_key, api_version) == request_version
    assert response_header_version(api_key, api_version) == response_version


def kio_bytes(entity: Any, entity_type: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize("client_id", ["", "rdkafka", "ünïcode-client", None])
def test_parse_v1_header_as_kio_writes_it(client_id: str | None) -> None:
    kio_header = KioRequestHeaderV1(
        request_api_key=i16(1),
        request_api_version=i16(11),
        correlation_id=i32(-5),
        client_id=client_id,
    )
    frame = kio_bytes(kio_header, KioRequestHeaderV1) + b"BODY"
    header, body_offset = parse_request_header(frame)
    assert header == RequestHeader(1, 11, -5, client_id, 1)
    assert frame[body_offset:] == b"BODY"
    assert encode_request_header(header) == frame[:body_offset]


@pytest.mark.parametrize("client_id", ["console-producer", None])
def test_parse_v2_header_as_kio_writes_it(client_id: str | None) -> None:
    kio_header = KioRequestHeaderV2(
        request_api_key=i16(0),
        request_api_version=i16(9),
        correlation_id=i32(2**31 - 1),
        client_id=client_id,
    )
    frame = kio_bytes(kio_header, KioRequestHeaderV2) + b"\x01\x02"
    header, body_offset = parse_request_header(frame)
    assert header == RequestHeader(0, 9, 2**31 - 1, client_id, 2)
    assert frame[body_offset:] == b"\x01\x02"
    assert encode_request_header(header) == frame[:body_offset]


def test_v2_header_skips_unknown_tagged_fields() -> None:
    header = bytes.fromhex("0000 0009 00000001 0002 6964") + bytes.fromhex("02 00 01 ff 05 02 aabb")
    parsed, body_offset = parse_request_header(header + b"B")
    assert parsed.client_id == "id"
    assert body_offset == len(header)


def test_v0_header_has_no_client_id() -> None:
    frame = bytes.fromhex("0007 0000 0000002a") + b"rest"
    header, body_offset = parse_request_header(frame)
    assert header == RequestHeader(ApiKey.CONTROLLED_SHUTDOWN, 0, 42, None, 0)
    assert body_offset == 8


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        (b"", "request_api_key"),
        (bytes.fromhex("0001 000b 0000"), "correlation_id"),
        (bytes.fromhex("0001 000b 00000001 0005 6162"), "client_id"),
        (bytes.fromhex("0001 000b 00000001 fffe"), "client_id"),
        (bytes.fromhex("0001 000b 00000001 0002 c328"), "client_id"),  # invalid UTF-8
        (bytes.fromhex("0001 000c 00000001 0000 05"), "request header tagged fields"),
    ],
)
def test_malformed_headers_raise_typed_errors(frame: bytes, field: str) -> None:
    with pytest.raises(MalformedRequestError) as raised:
        parse_request_header(frame)
    assert raised.value.field == field


@pytest.mark.parametrize(
    "frame",
    [
        bytes.fromhex("0012 0063 0000002a 0001"),  # v1 layout, client id cut short
        bytes.fromhex("0012 0063 0000002a 0001 78"),  # v1 layout: no tagged section
        bytes.fromhex("0012 ffff 0000002a 0005 6162"),  # version -1, client id cut short
    ],
)
def test_an_unsupported_api_versions_header_needs_only_its_correlation_id(frame: bytes) -> None:
    # KIP-511: a newer client's header may not parse; the v0 answer needs only the id.
    header, body_offset = parse_request_header(frame)
    assert (header.api_key, header.correlation_id, header.client_id) == (18, 42, None)
    assert body_offset == len(frame)


def test_a_supported_api_versions_header_must_parse() -> None:
    with pytest.raises(MalformedRequestError):
        parse_request_header(bytes.fromhex("0012 0003 0000002a 0001 78"))


@pytest.mark.parametrize("header_version", [0, 1])
def test_response_header_matches_kio(header_version: int) -> None:
    if header_version == 0:
        expected = kio_bytes(KioResponseHeaderV0(correlation_id=i32(77)), KioResponseHeaderV0)
    else:
        expected = kio_bytes(KioResponseHeaderV1(correlation_id=i32(77)), KioResponseHeaderV1)
    encoded = encode_response_header(77, header_version)
    assert encoded == expected
    assert parse_response_header(encoded + b"body", header_version) == (77, len(encoded))
