"""The APIs the broker serves: advertised versions, what to do with each request, and codecs.

The ApiVersions table (``SUPPORTED_API_VERSIONS``) reads like one real release, chosen so every
client Kafka 3.9 serves negotiates a version we implement (issue 13):

* minimum versions are Apache Kafka 3.9's (``kafka_3_9_versions``, from its message schemas):
  every old version a 3.9 broker serves — Sarama 1.22 commits with OffsetCommit v1 and describes
  configs with DescribeConfigs v0, Burrow asks ListOffsets v0. Kafka 4 dropped them (KIP-896)
  from ``validVersions`` but kept their fields, so kafka-python's schema classes still code
  them, byte-identical to its legacy structs (``tests/protocol/test_legacy_versions.py``).
  Exceptions, as the issue asks: Produce v0-2 and Fetch v0-3 (message formats v0/v1) are
  advertised and answered UNSUPPORTED_VERSION; OffsetCommit v0 and OffsetFetch v0 (ZooKeeper's
  offsets) are answered UNSUPPORTED_VERSION the way Kafka 3.9 answers them in KRaft mode.
* maximum versions are Kafka 3.9's where we implement that version's semantics, else the last
  one we do; each such API and why is listed in ``tests/protocol/test_api_versions_table.py``.
  kafka-python infers the broker release from the maxima alone; its first matching probe is
  "Fetch v17 -> 3.9" (``infer_broker_version_from_api_versions``), so it reports
  ``KAFKA_RELEASE``.

librdkafka enables a feature when its required range *overlaps* ours
(``rd_kafka_ApiVersion_check``) and then uses the highest version both sides have: MsgVer2 needs
Produce 3 and Fetch 4, the balanced consumer FindCoordinator 0, OffsetCommit 1-2, OffsetFetch 1,
JoinGroup/SyncGroup/Heartbeat/LeaveGroup 0, OffsetTime ListOffsets 1, the idempotent producer
InitProducerId 0, ZSTD Produce 7 and Fetch 10 — all overlap; so do MsgVer1 and ThrottleTime
(Produce/Fetch 1-2), exactly as with a real 3.9 broker, and librdkafka < 2.11's compression
check finds Produce v0 (KAFKA-18659). aiokafka sends ApiVersions v0 and InitProducerId v0.

What happens to a request (``request_disposition``), following Kafka's ``SocketServer`` /
``KafkaApis``:

* a served API at an advertised version: ``SERVE``;
* ApiVersions at a version outside ours: ``ANSWER_UNSUPPORTED_API_VERSIONS`` — a v0 response with
  UNSUPPORTED_VERSION (35) listing the ApiVersions range, so the client retries with our maximum
  (``ApiVersionsRequest.getErrorResponse``, ``RequestContext.apiVersion()``, KIP-511);
* Produce v0-2: ``ANSWER_UNSUPPORTED_PRODUCE`` — advertised as Kafka 3.9 does (and for
  librdkafka's check), answered with UNSUPPORTED_VERSION on every partition
  (``produce.unsupported_version_response``), as DESIGN.md §3.5 asks;
* Fetch v0-3: ``ANSWER_UNSUPPORTED_FETCH`` — likewise, UNSUPPORTED_VERSION on every partition
  (``legacy_fetch``);
* a known API we do not serve, or a served API at a version outside its range, whose schema
  defines that version: ``ANSWER_UNSUPPORTED`` — the response at the request's version with
  UNSUPPORTED_VERSION in every error code (``protocol.unsupported``, which says why this differs
  from Kafka: Kafka 4.x's ``Processor.parseRequestHeader`` throws and closes the connection);
* anything else — an API key no schema here knows, a version no schema defines:
  ``CLOSE_CONNECTION``, as Kafka does; no response can be encoded for them.

Produce and Fetch bodies use the hand-written ``protocol.produce`` / ``protocol.fetch``; every
other body goes through kafka-python 3.0's classes generated from Kafka's JSON schemas
(``decode_request``, ``encode_response``; build responses with ``response_class(key)(version=v,
field=value, ...)`` — field names are the schema's in snake_case).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs
from kafka.protocol.metadata import ApiVersionsResponse

from pykraft.protocol import unsupported
from pykraft.protocol.api_codecs import CODEC_CLASSES
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors, UnsupportedRequestError
from pykraft.protocol.kafka_3_9_versions import LEGACY_FETCH_VERSIONS, LEGACY_PRODUCE_VERSIONS
from pykraft.protocol.kafka_messages import decode_message
from pykraft.protocol.segments import Buffer

KAFKA_RELEASE = "3.9"


@attrs.frozen
class ApiVersionRange:
    api_key: ApiKey
    min_version: int
    max_version: int

    def __contains__(self, api_version: object) -> bool:
        return isinstance(api_version, int) and self.min_version <= api_version <= self.max_version


def _table(*rows: tuple[ApiKey, int, int]) -> Mapping[ApiKey, ApiVersionRange]:
    return MappingProxyType({key: ApiVersionRange(key, low, high) for key, low, high in rows})


# (api, min = Kafka 3.9, max); see the module docstring and ``kafka_3_9_versions``.
SUPPORTED_API_VERSIONS: Mapping[ApiKey, ApiVersionRange] = _table(
    (ApiKey.PRODUCE, 0, 11),  # v0-2 advertised, answered UNSUPPORTED_VERSION (KAFKA-18659)
    (ApiKey.FETCH, 0, 17),  # v0-3 advertised, answered UNSUPPORTED_VERSION (legacy_fetch)
    (ApiKey.LIST_OFFSETS, 0, 9),  # v0: MaxNumOffsets, OldStyleOffsets (list_offsets_v0)
    (ApiKey.METADATA, 0, 12),
    (ApiKey.OFFSET_COMMIT, 0, 9),  # v0 is ZooKeeper's: answered UNSUPPORTED_VERSION, as KRaft
    (ApiKey.OFFSET_FETCH, 0, 9),  # v0 likewise
    (ApiKey.FIND_COORDINATOR, 0, 6),  # v6: share groups' key type (KIP-932), not served
    (ApiKey.JOIN_GROUP, 0, 9),
    (ApiKey.HEARTBEAT, 0, 4),
    (ApiKey.LEAVE_GROUP, 0, 5),
    (ApiKey.SYNC_GROUP, 0, 5),
    (ApiKey.DESCRIBE_GROUPS, 0, 5),
    (ApiKey.LIST_GROUPS, 0, 5),  # v5: the group type filter (KIP-848): all are classic
    (ApiKey.DELETE_GROUPS, 0, 2),  # Kafka 3.9: 0-2
    (ApiKey.OFFSET_DELETE, 0, 0),  # Kafka 3.9: 0 (KIP-496)
    (ApiKey.API_VERSIONS, 0, 4),
    (ApiKey.CREATE_TOPICS, 0, 7),
    (ApiKey.DELETE_TOPICS, 0, 6),
    (ApiKey.INIT_PRODUCER_ID, 0, 5),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4),
    (ApiKey.DESCRIBE_CONFIGS, 0, 4),
    (ApiKey.ALTER_CONFIGS, 0, 2),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1),
    (ApiKey.CREATE_PARTITIONS, 0, 3),
    (ApiKey.DESCRIBE_CLUSTER, 0, 1),
    # The ACL APIs (v0: LITERAL patterns only), the KIP-554 SCRAM APIs at their only version.
    (ApiKey.DESCRIBE_ACLS, 0, 3),
    (ApiKey.CREATE_ACLS, 0, 3),
    (ApiKey.DELETE_ACLS, 0, 3),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0),
    # SaslHandshake v0 is followed by raw SASL tokens without Kafka headers (before KIP-152);
    # broker.sasl_server serves both. Answered by the SASL authenticator before
    # authentication, and with ILLEGAL_SASL_STATE after it (KafkaApis).
    (ApiKey.SASL_HANDSHAKE, 0, 1),
    (ApiKey.SASL_AUTHENTICATE, 0, 2),
    # Transactions (KIP-98). The 3.8 bumps (Produce 11, InitProducerId 5, AddPartitionsToTxn 5,
    # AddOffsetsToTxn 4, EndTxn 4, TxnOffsetCommit 4, FindCoordinator 5) only say the client
    # knows TRANSACTION_ABORTABLE (KIP-890); layouts are unchanged and Kafka 3.9 sends that error
    # only to Produce v11+ (``AddPartitionsToTxnManager``), as pykraft does.
    (ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5),  # v4+: broker-to-broker verification (KIP-890)
    (ApiKey.ADD_OFFSETS_TO_TXN, 0, 4),
    (ApiKey.END_TXN, 0, 4),
    (ApiKey.WRITE_TXN_MARKERS, 0, 1),  # v0 = v1 without flexible encoding
    (ApiKey.TXN_OFFSET_COMMIT, 0, 4),
    (ApiKey.DESCRIBE_PRODUCERS, 0, 0),  # KIP-664
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, 0),
    (ApiKey.LIST_TRANSACTIONS, 0, 1),  # v1: the duration filter (KIP-994)
    (ApiKey.ELECT_LEADERS, 0, 2),  # KIP-183, KIP-460 (v1: election type); forwarded
    (ApiKey.DESCRIBE_QUORUM, 0, 2),  # KIP-595, KIP-836 (v1), KIP-853 (v2); forwarded
    # KIP-853 controller membership changes: Kafka 3.9 serves v0 of both; forwarded.
    (ApiKey.ADD_RAFT_VOTER, 0, 0),
    (ApiKey.REMOVE_RAFT_VOTER, 0, 0),
    # KIP-455 partition reassignment; Kafka 3.9 serves v0 of both (v1 of 45 is Kafka 4.1's).
    (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0),
    # Kafka 3.9's ranges as far as the 4.x schemas go .
    (ApiKey.DELETE_RECORDS, 0, 2),
    (ApiKey.DESCRIBE_LOG_DIRS, 0, 4),
    (ApiKey.ALTER_REPLICA_LOG_DIRS, 0, 2),  # KIP-113; v0 = v1, v2 flexible
    # Client quotas (KIP-546): v0-1, both Kafka 3.9's and 4.x's range.
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1),
    (ApiKey.ALTER_CLIENT_QUOTAS, 0, 1),
    # KIP-631: forwarded to the controller.
    (ApiKey.UNREGISTER_BROKER, 0, 0),
    # KIP-966: the paginated describe, from the broker's metadata image.
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0),
    # KIP-584; v1: upgrade types and validate_only (KIP-778). v2 is Kafka 4.0's. Forwarded.
    (ApiKey.UPDATE_FEATURES, 0, 1),
    # KIP-714: ListClientMetricsResources v0, the CLIENT_METRICS subscriptions from the image.
    (ApiKey.LIST_CONFIG_RESOURCES, 0, 0),
    # KIP-48 delegation tokens (v3 of Create and Describe: KIP-373's owner and requester);
    # Create, Renew and Expire are forwarded to the controller.
    (ApiKey.CREATE_DELEGATION_TOKEN, 0, 3),
    (ApiKey.RENEW_DELEGATION_TOKEN, 0, 2),
    (ApiKey.EXPIRE_DELEGATION_TOKEN, 0, 2),
    (ApiKey.DESCRIBE_DELEGATION_TOKEN, 0, 3),
    # KIP-848: the consumer group protocol (coordinator/group/unified.py). ConsumerGroupHeartbeat
    # v1 is Kafka 4.0's (SubscribedTopicRegex): librdkafka 2.12+ sends nothing else.
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 0),
)

# LEGACY_PRODUCE_VERSIONS / LEGACY_FETCH_VERSIONS (kafka_3_9_versions): the versions that carry
# message format v0/v1; advertised, never served (KIP-896).
HAND_WRITTEN_APIS = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})


class RequestDisposition(enum.Enum):
    SERVE = "serve"
    ANSWER_UNSUPPORTED_API_VERSIONS = "answer_unsupported_api_versions"
    ANSWER_UNSUPPORTED_PRODUCE = "answer_unsupported_produce"
    ANSWER_UNSUPPORTED_FETCH = "answer_unsupported_fetch"
    ANSWER_UNSUPPORTED = "answer_unsupported"
    CLOSE_CONNECTION = "close_connection"


def request_disposition(api_key: int, api_version: int) -> RequestDisposition:
    """What the broker does with a request, decided from its header alone."""
    try:
        key = ApiKey(api_key)
    except ValueError:
        return RequestDisposition.CLOSE_CONNECTION
    supported = SUPPORTED_API_VERSIONS.get(key)
    if key == ApiKey.API_VERSIONS and api_version not in SUPPORTED_API_VERSIONS[key]:
        return RequestDisposition.ANSWER_UNSUPPORTED_API_VERSIONS
    if supported is None or api_version not in supported:
        if unsupported.can_answer(api_key, api_version):
            return RequestDisposition.ANSWER_UNSUPPORTED
        return RequestDisposition.CLOSE_CONNECTION
    if key == ApiKey.PRODUCE and api_version in LEGACY_PRODUCE_VERSIONS:
        return RequestDisposition.ANSWER_UNSUPPORTED_PRODUCE
    if key == ApiKey.FETCH and api_version in LEGACY_FETCH_VERSIONS:
        return RequestDisposition.ANSWER_UNSUPPORTED_FETCH
    return RequestDisposition.SERVE


def _codec(api_key: int, api_version: int) -> tuple[Any, Any]:
    try:
        classes = CODEC_CLASSES[ApiKey(api_key)]
    except (ValueError, KeyError):
        reason = "hand-written codec" if api_key in HAND_WRITTEN_APIS else "not served"
        raise UnsupportedRequestError(api_key, api_version, reason) from None
    if api_version not in SUPPORTED_API_VERSIONS[ApiKey(api_key)]:
        raise UnsupportedRequestError(api_key, api_version, "version not advertised")
    return classes


def request_class(api_key: ApiKey) -> Any:
    """kafka-python's request class (tests, tools and the replica fetcher build requests)."""
    return CODEC_CLASSES[api_key][0]


def response_class(api_key: ApiKey) -> Any:
    """kafka-python's response class; nested structs are attributes of it."""
    return CODEC_CLASSES[api_key][1]


def decode_request(api_key: int, api_version: int, body: Buffer) -> Any:
    """Decode a request body with kafka-python's generated class for this version.

    Raises ``UnsupportedRequestError`` for Produce/Fetch or unadvertised versions and
    ``MalformedRequestError`` when the bytes do not decode or run short.
    """
    request_cls, _ = _codec(api_key, api_version)
    return decode_message(request_cls, api_version, body)


def decode_response(api_key: int, api_version: int, body: Buffer) -> Any:
    """Client side of ``encode_response`` (replica fetcher, tests)."""
    _, response_cls = _codec(api_key, api_version)
    return decode_message(response_cls, api_version, body)


def encode_response(api_key: int, api_version: int, response: Any) -> bytes:
    """Encode a response body (no size, no header) for ``api_version``."""
    _codec(api_key, api_version)
    # kafka-python hands back its pooled bytearray; freeze it so callers may keep it.
    return bytes(response.encode(version=api_version))


# ---------------------------------------------------------------------------- ApiVersions

# ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN (KIP-511).
_SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_request_is_valid(request: Any) -> bool:
    """``ApiVersionsRequest.isValid``: v3+ client software name/version must match KIP-511."""
    if request.version < 3:
        return True
    return all(
        _SOFTWARE_NAME_VERSION.fullmatch(value or "") is not None
        for value in (request.client_software_name, request.client_software_version)
    )


def _api_version_entries(keys: list[ApiKey]) -> list[Any]:
    entry = ApiVersionsResponse.ApiVersion
    return [
        entry(
            api_key=int(key),
            min_version=SUPPORTED_API_VERSIONS[key].min_version,
            max_version=SUPPORTED_API_VERSIONS[key].max_version,
        )
        for key in keys
    ]


def encode_api_versions_response(
    api_version: int, *, throttle_time_ms: int = 0, error_code: Errors = Errors.NONE
) -> bytes:
    """The ApiVersions answer at the version the client asked for.

    With ``Errors.NONE`` it lists every supported API; with another error (INVALID_REQUEST for a
    request failing ``api_versions_request_is_valid``) it lists none, like Kafka.
    """
    keys = sorted(SUPPORTED_API_VERSIONS) if error_code == Errors.NONE else []
    response = ApiVersionsResponse(
        version=api_version,
        error_code=int(error_code),
        api_keys=_api_version_entries(keys),
        throttle_time_ms=throttle_time_ms,
    )
    return encode_response(ApiKey.API_VERSIONS, api_version, response)


def encode_unsupported_api_versions_response() -> bytes:
    """Answer to ApiVersions above our maximum: always v0, UNSUPPORTED_VERSION, our range.

    Kafka's ``ApiVersionsRequest.getErrorResponse`` lists only the ApiVersions key, and
    ``RequestContext.apiVersion()`` serializes an unsupported ApiVersions answer as v0 — every
    client can parse v0, then retries with the maximum found there.
    """
    response = ApiVersionsResponse(
        version=0,
        error_code=int(Errors.UNSUPPORTED_VERSION),
        api_keys=_api_version_entries([ApiKey.API_VERSIONS]),
    )
    return encode_response(ApiKey.API_VERSIONS, 0, response)
