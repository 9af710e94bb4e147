"""The advertised ApiVersions table, request dispositions and the kafka-python-backed codecs."""

from __future__ import annotations

import io
import json
import random
import re
from importlib import resources
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.broker_version_data import (
    BROKER_API_VERSIONS,
    infer_broker_version_from_api_versions,
)
from kio.schema.api_versions.v0.response import ApiVersionsResponse as KioApiVersionsV0
from kio.schema.api_versions.v3.response import ApiVersionsResponse as KioApiVersionsV3
from kio.serial import entity_reader

from pykraft.protocol import kraft_messages
from pykraft.protocol.api_codecs import CODEC_CLASSES
from pykraft.protocol.api_keys import FIRST_FLEXIBLE_VERSION, NEVER_FLEXIBLE, ApiKey
from pykraft.protocol.apis import (
    HAND_WRITTEN_APIS,
    KAFKA_RELEASE,
    SUPPORTED_API_VERSIONS,
    RequestDisposition,
    api_versions_request_is_valid,
    decode_request,
    decode_response,
    encode_api_versions_response,
    encode_response,
    encode_unsupported_api_versions_response,
    request_class,
    request_disposition,
    response_class,
)
from pykraft.protocol.errors import (
    Errors,
    MalformedRequestError,
    ProtocolError,
    UnsupportedRequestError,
)
from tests.protocol.schema_values import random_message

ADVERTISED = {int(key): (r.min_version, r.max_version) for key, r in SUPPORTED_API_VERSIONS.items()}
KAFKA_PYTHON_BACKED = [
    (key, version)
    for key, versions in sorted(SUPPORTED_API_VERSIONS.items())
    if key not in HAND_WRITTEN_APIS
    for version in range(versions.min_version, versions.max_version + 1)
]


# ------------------------------------------------------------------ a coherent real release


def test_kafka_python_infers_kafka_3_9() -> None:
    # Its first matching probe is Fetch v17 (test_api_versions_table.py checks every range).
    assert infer_broker_version_from_api_versions(ADVERTISED) == (3, 9)
    assert KAFKA_RELEASE == "3.9"


# librdkafka's rd_kafka_feature_map (src/rdkafka_feature.c): feature -> (api, min, max) deps.
LIBRDKAFKA_FEATURES: dict[str, list[tuple[int, int, int]]] = {
    "MsgVer1": [(0, 2, 2), (1, 2, 2)],
    "MsgVer2": [(0, 3, 3), (1, 4, 4)],
    "ApiVersion": [(18, 0, 0)],
    "BrokerGroupCoordinator": [(10, 0, 0)],
    "BrokerBalancedConsumer": [
        (10, 0, 0),
        (8, 1, 2),
        (9, 1, 1),
        (11, 0, 0),
        (14, 0, 0),
        (12, 0, 0),
        (13, 0, 0),
    ],
    "ThrottleTime": [(0, 1, 2), (1, 1, 2)],
    "SaslGssapi": [(11, 0, 0)],
    "SaslHandshake": [(17, 0, 0)],
    "LZ4": [(10, 0, 0)],
    "OffsetTime": [(2, 1, 1)],
    "IdempotentProducer": [(22, 0, 0)],
    "ZSTD": [(0, 7, 7), (1, 10, 10)],
    "SaslAuthReq": [(17, 1, 1), (36, 0, 1)],
}


def librdkafka_features(broker: dict[int, tuple[int, int]]) -> set[str]:
    def overlaps(api: int, low: int, high: int) -> bool:  # rd_kafka_ApiVersion_check
        return api in broker and low <= broker[api][1] and broker[api][0] <= high

    return {name for name, deps in LIBRDKAFKA_FEATURES.items() if all(overlaps(*d) for d in deps)}


def test_librdkafka_enables_the_features_a_kafka_3_9_broker_gets() -> None:
    ours = librdkafka_features(ADVERTISED)
    assert ours == {
        # Produce v0-2 / Fetch v0-3 are advertised as Kafka 3.9 does; librdkafka uses the
        # highest overlapping version (MsgVer2: Produce 3+, Fetch 4+), never these.
        "MsgVer1",
        "ThrottleTime",
        "MsgVer2",
        "ApiVersion",
        "BrokerGroupCoordinator",
        "BrokerBalancedConsumer",
        "SaslGssapi",
        "LZ4",
        "OffsetTime",
        "IdempotentProducer",
        "ZSTD",
        # SASL listeners (issue 11): librdkafka then uses SaslHandshake v1 + SaslAuthenticate.
        "SaslHandshake",
        "SaslAuthReq",
    }
    # Same feature set as a real Kafka 3.9 broker.
    assert ours == librdkafka_features(BROKER_API_VERSIONS[(3, 9)])


def test_librdkafka_compression_check_sees_produce_v0() -> None:
    # librdkafka < 2.11 disables compression unless Produce 0..0 is supported (librdkafka#4956).
    assert request_disposition(ApiKey.PRODUCE, 0) == RequestDisposition.ANSWER_UNSUPPORTED_PRODUCE
    assert 0 in SUPPORTED_API_VERSIONS[ApiKey.PRODUCE]


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (ApiKey.PRODUCE, 3),
        (ApiKey.FETCH, 4),
        (ApiKey.INIT_PRODUCER_ID, 0),
        (ApiKey.LIST_OFFSETS, 1),
        (ApiKey.JOIN_GROUP, 0),
        (ApiKey.SYNC_GROUP, 0),
        (ApiKey.HEARTBEAT, 0),
        (ApiKey.LEAVE_GROUP, 0),
        (ApiKey.FIND_COORDINATOR, 0),
        (ApiKey.OFFSET_COMMIT, 2),
        (ApiKey.OFFSET_FETCH, 1),
        (ApiKey.API_VERSIONS, 0),  # aiokafka
        (ApiKey.METADATA, 12),
        (ApiKey.PRODUCE, 10),
        (ApiKey.FETCH, 16),  # newest clients
    ],
)
def test_versions_clients_send_are_served(api_key: ApiKey, version: int) -> None:
    assert request_disposition(api_key, version) == RequestDisposition.SERVE


@pytest.mark.parametrize(
    ("api_key", "version", "disposition"),
    [
        (ApiKey.API_VERSIONS, 5, RequestDisposition.ANSWER_UNSUPPORTED_API_VERSIONS),
        (ApiKey.API_VERSIONS, 300, RequestDisposition.ANSWER_UNSUPPORTED_API_VERSIONS),
        (ApiKey.PRODUCE, 2, RequestDisposition.ANSWER_UNSUPPORTED_PRODUCE),
        # Issue 9: an error answer wherever a schema defines the version (Kafka closes).
        (ApiKey.PRODUCE, 12, RequestDisposition.ANSWER_UNSUPPORTED),
        (ApiKey.FETCH, 18, RequestDisposition.ANSWER_UNSUPPORTED),
        (ApiKey.METADATA, 13, RequestDisposition.ANSWER_UNSUPPORTED),
        (ApiKey.SASL_HANDSHAKE, 1, RequestDisposition.SERVE),
        (ApiKey.SASL_AUTHENTICATE, 3, RequestDisposition.CLOSE_CONNECTION),
        # Below the 4.x schema (1-2) but a Kafka 3.9 version: served (v0 = v1, KIP-113).
        (ApiKey.ALTER_REPLICA_LOG_DIRS, 0, RequestDisposition.SERVE),
        (ApiKey.ALTER_REPLICA_LOG_DIRS, 3, RequestDisposition.CLOSE_CONNECTION),
        # Kafka 4.x's DescribeLogDirs v5 (KIP-1066 cordoning): a schema, past 3.9's maximum 4.
        (ApiKey.DESCRIBE_LOG_DIRS, 5, RequestDisposition.ANSWER_UNSUPPORTED),
        # No schema defines these versions or keys: nothing can be encoded, the connection closes.
        (ApiKey.PRODUCE, 14, RequestDisposition.CLOSE_CONNECTION),
        (ApiKey.FETCH, 3, RequestDisposition.ANSWER_UNSUPPORTED_FETCH),
        (ApiKey.FETCH, 0, RequestDisposition.ANSWER_UNSUPPORTED_FETCH),
        (ApiKey.FETCH, 19, RequestDisposition.CLOSE_CONNECTION),
        (ApiKey.METADATA, 99, RequestDisposition.CLOSE_CONNECTION),
        (ApiKey.OFFSET_COMMIT, 11, RequestDisposition.CLOSE_CONNECTION),
        # Kafka 3.9's old versions (below the 4.x schemas' minimum) are served.
        (ApiKey.OFFSET_COMMIT, 0, RequestDisposition.SERVE),
        (ApiKey.OFFSET_COMMIT, 1, RequestDisposition.SERVE),
        (ApiKey.LIST_OFFSETS, 0, RequestDisposition.SERVE),
        (ApiKey.DESCRIBE_CONFIGS, 0, RequestDisposition.SERVE),
        (ApiKey.FETCH, 4, RequestDisposition.SERVE),
        (ApiKey.LEADER_AND_ISR, 7, RequestDisposition.CLOSE_CONNECTION),
        # ApiKeys.isVersionEnabled accepts every ApiVersions version, negative ones too.
        (ApiKey.API_VERSIONS, -1, RequestDisposition.ANSWER_UNSUPPORTED_API_VERSIONS),
        (999, 0, RequestDisposition.CLOSE_CONNECTION),
        (-1, 0, RequestDisposition.CLOSE_CONNECTION),
    ],
)
def test_dispositions(api_key: int, version: int, disposition: RequestDisposition) -> None:
    assert request_disposition(api_key, version) == disposition


# The schemas kafka-python does not ship, written as data in protocol/kraft_messages.py.
OUR_SCHEMAS = {
    schema["name"]: schema
    for schema in (
        kraft_messages.UNREGISTER_BROKER_REQUEST_SCHEMA,
        kraft_messages.UNREGISTER_BROKER_RESPONSE_SCHEMA,
    )
}


def schema_json(name: str) -> dict[str, Any]:
    if name in OUR_SCHEMAS:
        return OUR_SCHEMAS[name]
    ours = resources.files("pykraft.protocol.schemas").joinpath(f"{name}.json")
    if ours.is_file():  # KIP-48's, in protocol/schemas (protocol/token_messages.py)
        return dict(json.loads(ours.read_text()))
    text = resources.files("kafka.protocol.schemas.resources").joinpath(f"{name}.json")
    raw = re.sub(r"(?m)^\s*//.*\n?", "", text.read_text())
    parsed: dict[str, Any] = json.loads(raw)
    return parsed


def version_range(spec: str) -> tuple[int, int]:
    if spec.endswith("+"):
        return int(spec[:-1]), 32767
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


@pytest.mark.parametrize("api_key", sorted(SUPPORTED_API_VERSIONS))
def test_flexible_versions_match_kafkas_schemas(api_key: ApiKey) -> None:
    for suffix in ("Request", "Response"):
        name = "".join(word.title() for word in api_key.name.split("_")) + suffix
        schema = schema_json(name)
        assert schema["apiKey"] == api_key
        flexible = schema["flexibleVersions"]
        first_flexible = NEVER_FLEXIBLE if flexible == "none" else version_range(flexible)[0]
        assert first_flexible == FIRST_FLEXIBLE_VERSION[api_key]
        # Everything we advertise up to the maximum is in the schema kafka-python ships; below
        # its minimum are Kafka 3.9's versions (KIP-896 dropped them from validVersions but
        # kept their fields, which kafka-python's classes code: test_legacy_versions.py).
        _, high = version_range(schema["validVersions"])
        assert SUPPORTED_API_VERSIONS[api_key].max_version <= high


@pytest.mark.parametrize("api_key", sorted(FIRST_FLEXIBLE_VERSION))
def test_every_first_flexible_version_matches_kafkas_schema(api_key: ApiKey) -> None:
    name = "".join(word.title() for word in api_key.name.split("_")) + "Request"
    spec = schema_json(name)["flexibleVersions"]
    expected = NEVER_FLEXIBLE if spec == "none" else version_range(spec)[0]
    assert FIRST_FLEXIBLE_VERSION[api_key] == expected


# ------------------------------------------------------------------ kafka-python-backed codecs


@pytest.mark.parametrize(("api_key", "version"), KAFKA_PYTHON_BACKED)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_request_round_trip(api_key: ApiKey, version: int, seed: int) -> None:
    request = random_message(request_class(api_key), version, random.Random(seed))
    decoded = decode_request(api_key, version, request.encode(version=version))
    assert decoded == request
    assert decoded.version == version


@pytest.mark.parametrize(("api_key", "version"), KAFKA_PYTHON_BACKED)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_response_round_trip(api_key: ApiKey, version: int, seed: int) -> None:
    response = random_message(response_class(api_key), version, random.Random(seed))
    encoded = encode_response(api_key, version, response)
    assert decode_response(api_key, version, encoded) == response


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.METADATA, 1), (ApiKey.METADATA, 12), (ApiKey.JOIN_GROUP, 9), (ApiKey.LIST_OFFSETS, 8)],
)
def test_every_truncated_body_is_rejected(api_key: ApiKey, version: int) -> None:
    request = random_message(request_class(api_key), version, random.Random(7))
    body = request.encode(version=version)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequestError):
            decode_request(api_key, version, body[:cut])


@pytest.mark.parametrize(("api_key", "version"), KAFKA_PYTHON_BACKED[::3])
@settings(max_examples=25, deadline=None)
@given(body=st.binary(max_size=64))
def test_garbage_raises_only_protocol_errors(api_key: ApiKey, version: int, body: bytes) -> None:
    try:
        decoded = decode_request(api_key, version, body)
    except ProtocolError as error:
        assert str(error)
    else:
        assert decoded.version == version


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.PRODUCE, 9), (ApiKey.FETCH, 12), (ApiKey.METADATA, 13), (ApiKey.DESCRIBE_LOG_DIRS, 5)],
)
def test_codec_refuses_what_it_does_not_serve(api_key: ApiKey, version: int) -> None:
    with pytest.raises(UnsupportedRequestError):
        decode_request(api_key, version, b"")


def test_every_served_api_has_a_codec() -> None:
    assert set(CODEC_CLASSES) | HAND_WRITTEN_APIS == set(SUPPORTED_API_VERSIONS)


# ------------------------------------------------------------------ ApiVersions


def kio_decode(entity_type: Any, data: bytes) -> Any:
    return entity_reader(entity_type)(data, 0)[0]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_lists_the_table(version: int) -> None:
    body = encode_api_versions_response(version, throttle_time_ms=5)
    decoded = decode_response(ApiKey.API_VERSIONS, version, body)
    assert decoded.error_code == 0
    assert {e.api_key: (e.min_version, e.max_version) for e in decoded.api_keys} == ADVERTISED
    assert [e.api_key for e in decoded.api_keys] == sorted(ADVERTISED)
    if version == 3:
        kio = kio_decode(KioApiVersionsV3, body)
        assert {int(e.api_key): (e.min_version, e.max_version) for e in kio.api_keys} == ADVERTISED
        assert kio.throttle_time.total_seconds() == 0.005


def test_unsupported_api_versions_answer_is_kafkas_v0_bytes() -> None:
    # error_code 35, one entry: ApiVersions 0..4 (ApiVersionsRequest.getErrorResponse).
    body = encode_unsupported_api_versions_response()
    assert body == bytes.fromhex("0023 00000001 0012 0000 0004")
    kio = kio_decode(KioApiVersionsV0, body)
    assert int(kio.error_code) == Errors.UNSUPPORTED_VERSION
    assert [(int(e.api_key), e.min_version, e.max_version) for e in kio.api_keys] == [(18, 0, 4)]


def test_invalid_api_versions_request_gets_invalid_request_without_keys() -> None:
    request_cls = request_class(ApiKey.API_VERSIONS)
    bad = decode_request(
        ApiKey.API_VERSIONS,
        3,
        request_cls(
            version=3, client_software_name="-bad name", client_software_version="1.0"
        ).encode(version=3),
    )
    good = decode_request(
        ApiKey.API_VERSIONS,
        3,
        request_cls(
            version=3, client_software_name="librdkafka", client_software_version="2.3.0"
        ).encode(version=3),
    )
    assert not api_versions_request_is_valid(bad)
    assert api_versions_request_is_valid(good)
    assert api_versions_request_is_valid(decode_request(ApiKey.API_VERSIONS, 0, b""))
    body = encode_api_versions_response(3, error_code=Errors.INVALID_REQUEST)
    decoded = kio_decode(KioApiVersionsV3, body)
    assert int(decoded.error_code) == Errors.INVALID_REQUEST
    assert decoded.api_keys == ()


def test_a_newer_client_handshake_falls_back_to_our_maximum() -> None:
    # kafka-python 3.0 sends ApiVersions v4: served. A client at v5 reads the v0 error body and
    # retries with min(its maximum, ours).
    assert request_disposition(ApiKey.API_VERSIONS, 4) == RequestDisposition.SERVE
    response_cls = response_class(ApiKey.API_VERSIONS)
    error = response_cls.decode(io.BytesIO(encode_unsupported_api_versions_response()), version=0)
    retry_version = min(5, next(e.max_version for e in error.api_keys if e.api_key == 18))
    assert retry_version == 4
    assert request_disposition(ApiKey.API_VERSIONS, retry_version) == RequestDisposition.SERVE
