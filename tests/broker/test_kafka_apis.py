"""KafkaApis dispatch and the ApiVersions handler (KafkaApis.handleApiVersionsRequest, KIP-511).

Responses are decoded with kafka-python's classes generated from Kafka's JSON schemas.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from pykraft.broker.kafka_apis import KafkaApis, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS, decode_response, request_class
from pykraft.protocol.errors import Errors, MalformedRequestError, UnsupportedRequestError
from pykraft.protocol.headers import (
    RequestHeader,
    parse_response_header,
    request_header_version,
    response_header_version,
)
from pykraft.protocol.segments import Segments
from tests.broker.wire_client import api_versions_body, decode_api_versions


def context(api_key: int, api_version: int, correlation_id: int = 7) -> RequestContext:
    header = RequestHeader(
        api_key, api_version, correlation_id, "client", request_header_version(api_key, api_version)
    )
    return RequestContext(header, "local-remote-0", "PLAINTEXT", "127.0.0.1", 50000)


def dispatch(apis: KafkaApis, api_key: int, api_version: int, body: bytes) -> Segments | None:
    async def call() -> Segments | None:
        return await apis.dispatch(context(api_key, api_version), memoryview(body))

    return asyncio.run(call())


def response_frame(segments: Segments | None) -> bytes:
    """The framed response without its size prefix (no file slices in these tests)."""
    assert segments is not None
    data = segments.to_bytes(lambda part: b"")
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    return data[4:]


def advertised(response: Any) -> dict[int, tuple[int, int]]:
    return {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}


TABLE = {int(k): (v.min_version, v.max_version) for k, v in SUPPORTED_API_VERSIONS.items()}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_the_table_at_every_version(version: int) -> None:
    frame = response_frame(
        dispatch(KafkaApis(), ApiKey.API_VERSIONS, version, api_versions_body(version))
    )
    assert int.from_bytes(frame[:4], "big") == 7  # response header v0, even for v3 (KIP-511)
    response = decode_api_versions(frame, version)
    assert response.error_code == Errors.NONE
    assert advertised(response) == TABLE
    assert advertised(response)[ApiKey.API_VERSIONS] == (0, 4)


@pytest.mark.parametrize("version", [5, 6, 127])
def test_a_too_new_api_versions_gets_the_v0_unsupported_answer(version: int) -> None:
    # The body of an unknown version is not parsed: garbage is fine.
    frame = response_frame(dispatch(KafkaApis(), ApiKey.API_VERSIONS, version, b"\xff\x00junk"))
    response = decode_api_versions(frame, 0)
    assert response.error_code == Errors.UNSUPPORTED_VERSION
    assert advertised(response) == {ApiKey.API_VERSIONS: (0, 4)}


def test_invalid_client_software_name_gets_invalid_request() -> None:
    body = bytes(
        ApiVersionsRequest(
            version=3, client_software_name="bad name!", client_software_version="1.0"
        ).encode(version=3)
    )
    frame = response_frame(dispatch(KafkaApis(), ApiKey.API_VERSIONS, 3, body))
    response = decode_api_versions(frame, 3)
    assert (response.error_code, response.api_keys) == (Errors.INVALID_REQUEST, [])


def test_a_truncated_api_versions_body_is_a_protocol_error() -> None:
    with pytest.raises(MalformedRequestError):
        dispatch(KafkaApis(), ApiKey.API_VERSIONS, 3, api_versions_body(3)[:2])


@pytest.mark.parametrize(
    ("api_key", "api_version"),
    [
        (999, 0),  # unknown API key: Kafka closes the connection
        (ApiKey.LEADER_AND_ISR, 0),  # a real API pykraft does not serve
        (ApiKey.LIST_OFFSETS, 12),  # above the advertised maximum, and no schema has it
        (ApiKey.METADATA, 99),  # above every version a schema defines
    ],
)
def test_requests_kafka_would_disconnect_raise_before_any_handler(
    api_key: int, api_version: int
) -> None:
    apis = KafkaApis()
    with pytest.raises(UnsupportedRequestError):
        apis.dispatch(context(api_key, api_version), memoryview(b""))


def test_a_served_api_above_its_range_gets_unsupported_version_at_its_own_version() -> None:
    # Issue 9: answered where the header parses and a schema defines the version (Kafka closes).
    body = MetadataRequest(version=13, topics=None, allow_auto_topic_creation=False)
    frame = response_frame(
        dispatch(KafkaApis(), ApiKey.METADATA, 13, bytes(body.encode(version=13)))
    )
    assert frame[:5] == (7).to_bytes(4, "big") + b"\x00"  # flexible: response header v1
    response = MetadataResponse.decode(frame[5:], version=13)
    assert (response.error_code, response.topics, response.brokers) == (35, [], [])


def test_a_version_not_served_answers_unsupported_version_for_every_partition_it_named() -> None:
    # ListOffsets v11: Kafka 4.x's schema, past the maximum we advertise (Kafka 3.9's).
    topic = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(
        version=11,
        replica_id=-1,
        isolation_level=0,
        timeout_ms=1000,
        topics=[
            topic(name="pets", partitions=[
                topic.ListOffsetsPartition(
                    partition_index=index, current_leader_epoch=-1, timestamp=-1
                ) for index in (0, 3)
            ])
        ],
    )  # fmt: skip
    frame = response_frame(
        dispatch(KafkaApis(), ApiKey.LIST_OFFSETS, 11, bytes(request.encode(version=11)))
    )
    assert frame[:5] == (7).to_bytes(4, "big") + b"\x00"  # flexible: response header v1
    response = ListOffsetsResponse.decode(frame[5:], version=11)
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics
    ] == [("pets", [(0, Errors.UNSUPPORTED_VERSION), (3, Errors.UNSUPPORTED_VERSION)])]


@pytest.mark.parametrize(
    ("api_key", "api_version", "body"),
    [
        (ApiKey.DESCRIBE_LOG_DIRS, 5, b"\x05"),  # does not decode at the version it claims
        (ApiKey.PRODUCE, 12, None),  # acks=0: the client reads no answer
    ],
)
def test_an_unsupported_request_that_cannot_be_answered_closes(
    api_key: int, api_version: int, body: bytes | None
) -> None:
    data = produce_body(api_version, acks=0) if body is None else body
    with pytest.raises(UnsupportedRequestError, match="no error answer"):
        dispatch(KafkaApis(), api_key, api_version, data)


def test_an_advertised_api_without_a_handler_is_rejected() -> None:
    with pytest.raises(UnsupportedRequestError, match="no handler"):
        KafkaApis().dispatch(context(ApiKey.METADATA, 1), memoryview(b""))


def test_registered_handlers_get_the_body_and_their_answer_is_framed() -> None:
    apis = KafkaApis()
    seen: list[bytes] = []

    async def metadata(context: RequestContext, body: memoryview) -> bytes:
        seen.append(bytes(body))
        return b"BODY"

    apis.register(ApiKey.METADATA, metadata)
    # Metadata v9+ is flexible: response header v1 adds an empty tagged-field section.
    assert (
        response_frame(dispatch(apis, ApiKey.METADATA, 9, b"req"))
        == (7).to_bytes(4, "big") + b"\x00BODY"
    )
    assert (
        response_frame(dispatch(apis, ApiKey.METADATA, 8, b"req"))
        == (7).to_bytes(4, "big") + b"BODY"
    )
    assert seen == [b"req", b"req"]


def test_a_handler_answering_none_sends_nothing() -> None:
    apis = KafkaApis()

    async def produce(context: RequestContext, body: memoryview) -> None:
        return None

    apis.register(ApiKey.PRODUCE, produce)
    assert dispatch(apis, ApiKey.PRODUCE, 9, b"") is None


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_gets_unsupported_version_per_partition(version: int) -> None:
    # Advertised from v0 for librdkafka (KAFKA-18659), answered before any handler runs.
    apis = KafkaApis()
    handled: list[int] = []

    async def produce(context: RequestContext, body: memoryview) -> bytes:
        handled.append(context.header.api_version)
        return b""

    apis.register(ApiKey.PRODUCE, produce)
    frame = response_frame(dispatch(apis, ApiKey.PRODUCE, version, produce_body(version, acks=1)))
    response = ProduceResponse.decode(frame[4:], version=version)
    assert [
        (topic.name, [(p.index, p.error_code) for p in topic.partition_responses])
        for topic in response.responses
    ] == [("pets", [(0, Errors.UNSUPPORTED_VERSION), (3, Errors.UNSUPPORTED_VERSION)])]
    assert handled == []


def test_legacy_produce_with_acks_0_closes_the_connection() -> None:
    with pytest.raises(UnsupportedRequestError, match="acks=0"):
        dispatch(KafkaApis(), ApiKey.PRODUCE, 2, produce_body(2, acks=0))


def produce_body(version: int, acks: int) -> bytes:
    partitions = [
        ProduceRequest.TopicProduceData.PartitionProduceData(index=index, records=b"")
        for index in (0, 3)
    ]
    request = ProduceRequest(
        version=version,
        acks=acks,
        timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(name="pets", partition_data=partitions)],
    )
    return bytes(request.encode(version=version))


def test_registration_rules() -> None:
    apis = KafkaApis()

    async def handler(context: RequestContext, body: memoryview) -> bytes:
        return b""

    apis.register_all({ApiKey.METADATA: handler, ApiKey.FETCH: handler})
    assert apis.registered == {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.METADATA,
        ApiKey.FETCH,
    }
    with pytest.raises(ValueError, match="already has a handler"):
        apis.register(ApiKey.METADATA, handler)
    with pytest.raises(ValueError, match="not in the ApiVersions table"):
        apis.register(ApiKey.LEADER_AND_ISR, handler)
    with pytest.raises(ValueError, match="already has a handler"):
        apis.register(ApiKey.API_VERSIONS, handler)


def test_kafka_python_handler_decodes_and_encodes_at_the_request_version() -> None:
    apis = KafkaApis()
    requests: list[Any] = []

    async def metadata(context: RequestContext, request: Any) -> Any:
        requests.append(request)
        return MetadataResponse(version=context.header.api_version, brokers=[], topics=[])

    apis.register(ApiKey.METADATA, kafka_python_handler(metadata))
    body = bytes(MetadataRequest(version=4, topics=None).encode(version=4))
    frame = response_frame(dispatch(apis, ApiKey.METADATA, 4, body))
    assert requests[0].topics is None
    response = MetadataResponse.decode(frame[4:], version=4)
    assert (response.brokers, response.topics) == ([], [])


@pytest.mark.parametrize(
    ("api_key", "version", "fields"),
    [
        (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
        (ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0a\0b"}),
    ],
)
def test_sasl_after_authentication_is_illegal_sasl_state(
    api_key: ApiKey, version: int, fields: dict[str, object]
) -> None:
    # KafkaApis.handleSaslHandshakeRequest / handleSaslAuthenticateRequest.
    body = bytes(request_class(api_key)(version=version, **fields).encode(version=version))
    answer = dispatch(KafkaApis(), api_key, version, body)
    assert answer is not None
    data = answer.to_bytes(lambda _: b"")[4:]
    _, body_start = parse_response_header(data, response_header_version(api_key, version))
    response = decode_response(api_key, version, memoryview(data)[body_start:])
    assert response.error_code == Errors.ILLEGAL_SASL_STATE
