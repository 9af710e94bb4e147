"""Our ApiVersions answer against Kafka 3.9's (``protocol.kafka_3_9_versions``): equal for every
API except the differences listed here, each with its reason. Any other difference fails —
an API lost, a range drifting, a listed difference no longer true."""

from __future__ import annotations

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, encode_api_versions_response
from pykraft.protocol.kafka_3_9_versions import KAFKA_3_9_BROKER_API_VERSIONS

KAFKA_3_9 = {key: tuple(versions) for key, versions in KAFKA_3_9_BROKER_API_VERSIONS.items()}

# Kafka 3.9 serves these; pykraft does not. None today: every API Kafka 3.9 serves is served.
NOT_SERVED: dict[ApiKey, str] = {}

# APIs served below Kafka 3.9's maximum: (our maximum, why the next version is not served).
# None today: every served API reaches Kafka 3.9's maximum.
LOWER_MAXIMUM: dict[ApiKey, tuple[int, str]] = {}

# APIs served beyond Kafka 3.9's maximum: (our maximum, why).
HIGHER_MAXIMUM: dict[ApiKey, tuple[int, str]] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (
        1,
        "Kafka 4.0's v1 (SubscribedTopicRegex): librdkafka 2.12+ (confluent-kafka 2.16) asks "
        "for exactly v1, so group.protocol=consumer needs it; KIP-848 is GA in 4.0",
    ),
}


def advertised() -> dict[int, tuple[int, int]]:
    """Our ApiVersions answer, decoded from the bytes the broker sends (v3)."""
    body = encode_api_versions_response(3)
    response = decode_response(ApiKey.API_VERSIONS, 3, body)
    assert response.error_code == 0
    return {e.api_key: (e.min_version, e.max_version) for e in response.api_keys}


def test_the_reference_is_a_kraft_broker_of_3_9() -> None:
    # kafka-python recorded a 3.9 broker's answer (a ZooKeeper-mode one: it also lists the
    # controller-only and ZooKeeper APIs, and lacks the KRaft-only ones). Every range both
    # list agrees with the table taken from Kafka 3.9's message schemas.
    recorded = BROKER_API_VERSIONS[(3, 9)]
    assert {k: KAFKA_3_9[k] for k in KAFKA_3_9 if k in recorded} == {
        k: recorded[k] for k in KAFKA_3_9 if k in recorded
    }
    kraft_only = {k for k in KAFKA_3_9 if k not in recorded}
    assert kraft_only == {
        ApiKey.DESCRIBE_QUORUM,
        ApiKey.UNREGISTER_BROKER,
        ApiKey.LIST_CONFIG_RESOURCES,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        ApiKey.ADD_RAFT_VOTER,
        ApiKey.REMOVE_RAFT_VOTER,
    }


def test_every_api_kafka_3_9_serves_is_served_or_a_listed_difference() -> None:
    ours = advertised()
    missing = {ApiKey(k) for k in KAFKA_3_9 if k not in ours}
    assert missing <= set(NOT_SERVED)
    assert not set(NOT_SERVED) & set(ours), "served now: drop it from NOT_SERVED"


def test_we_serve_nothing_kafka_3_9_does_not() -> None:
    assert set(advertised()) <= set(KAFKA_3_9)


def test_minimum_versions_are_kafka_3_9s() -> None:
    # Produce v0-2 and Fetch v0-3 included: advertised, answered UNSUPPORTED_VERSION.
    ours = advertised()
    assert {k: low for k, (low, _) in ours.items()} == {k: KAFKA_3_9[ApiKey(k)][0] for k in ours}


def test_maximum_versions_are_kafka_3_9s_except_the_listed_ones() -> None:
    ours = advertised()
    listed = {**LOWER_MAXIMUM, **HIGHER_MAXIMUM}
    expected = {k: listed[ApiKey(k)][0] if k in listed else KAFKA_3_9[ApiKey(k)][1] for k in ours}
    assert {k: high for k, (_, high) in ours.items()} == expected
    for key, (high, reason) in LOWER_MAXIMUM.items():
        assert high < KAFKA_3_9[key][1], f"{key.name} reaches 3.9's maximum: drop it ({reason})"
    for key, (high, reason) in HIGHER_MAXIMUM.items():
        assert high > KAFKA_3_9[key][1], f"{key.name} is back at 3.9's maximum ({reason})"
