"""The controller's HTTP contract refuses a body of the wrong shape: one ``JsonBodyError``
naming the field (the controller answers it 400 INVALID_REQUEST), for bodies, path segments
and queries.

Split from ``test_api_codec.py`` (the round trips), which had grown past 600 lines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pykraft.metadata.api import admin, brokers, records, routes, topics
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject
from pykraft.metadata.records import ConfigResourceType

REG = {"broker_id": 7, "incarnation_id": "x", "endpoints": []}
BEAT = {"broker_id": 1, "broker_epoch": 2}
COUNTERS = dict.fromkeys(
    ("messages_in", "bytes_in", "bytes_out", "replication_bytes_in", "replication_bytes_out",
     "fetch_requests"), 0,
)  # fmt: skip
ALTER = {
    "broker_id": 1,
    "broker_epoch": 2,
    "partitions": [
        {
            "topic_id": "t",
            "partition_index": 0,
            "leader_epoch": 1,
            "partition_epoch": 1,
            "new_isr": [1],
        }
    ],
}


def refused(decode: Callable[[Fields], Any], body: JsonObject) -> str:
    with pytest.raises(JsonBodyError) as refusal:
        decode(Fields(body))
    message = str(refusal.value)
    assert message.endswith(".")
    return message


@pytest.mark.parametrize(("decode", "body", "message"), [
    (brokers.registration_request_from_json, {}, "The field 'broker_id' is required."),
    (brokers.registration_request_from_json, {**REG, "broker_id": True},
     "The field 'broker_id' must be an integer."),
    (brokers.registration_request_from_json, {**REG, "broker_id": 1.0},
     "The field 'broker_id' must be an integer."),
    (brokers.registration_request_from_json, {**REG, "endpoints": [3]},
     "An item of 'endpoints' must be a JSON object."),
    (brokers.registration_request_from_json, {**REG, "endpoints": [{"name": "P", "host": "h"}]},
     "The field 'port' of an item of 'endpoints' is required."),
    (brokers.registration_request_from_json, {**REG, "rack": 5},
     "The field 'rack' must be of JSON type string or null."),
    (brokers.heartbeat_request_from_json, {**BEAT, "want_fence": 1},
     "The field 'want_fence' must be of JSON type boolean."),
    (brokers.heartbeat_request_from_json, {**BEAT, "offline_log_dirs": [7]},
     "Each offline log dir is a directory id."),
    (brokers.heartbeat_request_from_json, {**BEAT, "offline_replicas": [{"topic_id": "t"}]},
     "The field 'partition' of an item of 'offline_replicas' is required."),
    (brokers.alter_partition_request_from_json, {**ALTER, "partitions": {}},
     "The field 'partitions' must be of JSON type array."),
    (brokers.alter_partition_request_from_json,
     {**ALTER, "partitions": [{**ALTER["partitions"][0], "new_isr": ["1"]}]},  # type: ignore
     "Each new_isr member is a broker id or {broker_id, broker_epoch}."),
    (brokers.producer_ids_request_from_json, {"broker_id": 1},
     "The field 'broker_epoch' is required."),
    (topics.create_topic_request_from_json, {"name": 5},
     "The field 'name' must be of JSON type string."),
    (topics.create_topic_request_from_json, {"name": "t", "partitions": "3"},
     "The field 'partitions' must be an integer."),
    (topics.create_topic_request_from_json, {"name": "t", "configs": {"retention.ms": 5}},
     "The values of 'configs' must be strings or null."),
    (topics.create_topic_request_from_json, {"name": "t", "assignments": {"0": "1"}},
     "assignments maps a partition number to a list of broker ids."),
    (topics.create_topic_request_from_json, {"name": "t", "assignments": {"-1": [1]}},
     "assignments maps a partition number to a list of broker ids."),
    (lambda f: topics.create_partitions_request_from_json("t", f),
     {"count": 2, "assignments": [[1], "2"]},
     "assignments is a list of broker-id lists, one per new partition."),
    (admin.elect_leaders_request_from_json, {"election_type": "random"},
     "election_type must be 'preferred' or 'unclean'."),
    (admin.elect_leaders_request_from_json, {"partitions": [1]},
     "An item of 'partitions' must be a JSON object."),
    (admin.elect_leaders_request_from_json, {"partitions": [{"topic": "t", "partitions": [0.5]}]},
     "The field 'partitions' of an item of 'partitions' must be an array of integers."),
    (lambda f: admin.alter_configs_request_from_json(ConfigResourceType.TOPIC, "t", f),
     {"delete": [1]}, "The field 'delete' must be an array of strings."),
])  # fmt: skip
def test_bad_bodies_are_refused_naming_the_field(
    decode: Callable[[Fields], Any], body: JsonObject, message: str
) -> None:
    assert refused(decode, body) == message


@pytest.mark.parametrize("raw", ["x", "-1", "1.5", "", "\u0661"])
def test_a_broker_id_in_the_path_is_digits(raw: str) -> None:
    with pytest.raises(JsonBodyError, match="is not an integer"):
        brokers.unregister_request_from_path(raw)


@pytest.mark.parametrize(("params", "message"), [
    ({}, "The query parameter 'from' is required."),
    ({"from": "x"}, "The query parameter 'from' must be an integer, got 'x'."),
    ({"from": "-1"}, "The query parameter 'from' must be at least 0."),
    ({"from": "0", "max_records": "0"}, "The query parameter 'max_records' must be at least 1."),
])  # fmt: skip
def test_a_bad_records_query_is_refused(params: dict[str, str], message: str) -> None:
    with pytest.raises(JsonBodyError) as refusal:
        records.records_query_from_params(params)
    assert str(refusal.value) == message


def test_a_resource_type_is_topic_broker_or_client_metrics() -> None:
    assert admin.config_resource_from_path("TOPIC") is ConfigResourceType.TOPIC
    assert admin.config_resource_from_path("client_metrics") is ConfigResourceType.CLIENT_METRICS
    with pytest.raises(JsonBodyError, match="'topic', 'broker' or 'client_metrics'"):
        admin.config_resource_from_path("group")


def test_a_path_segment_is_escaped() -> None:
    assert routes.DESCRIBE_TOPIC.path(name="a/b c") == "/v1/topics/a%2Fb%20c"
    assert (
        routes.DESCRIBE_CONFIGS.path(resource_type="topic", resource_name="t.1")
        == "/v1/configs/topic/t.1"
    )


@pytest.mark.parametrize(("counters", "message"), [
    ({**COUNTERS, "bytes_out": -1}, "The counter 'bytes_out' must be between 0 and 2**63-1."),
    ({**COUNTERS, "bytes_in": 10**400}, "The counter 'bytes_in' must be between 0 and 2**63-1."),
    ({**COUNTERS, "bytes_in": 2**63}, "The counter 'bytes_in' must be between 0 and 2**63-1."),
    ({**COUNTERS, "messages_in": 1.5},
     "The field 'messages_in' of the field 'broker_topic_metrics' must be an integer."),
    ({k: v for k, v in COUNTERS.items() if k != "fetch_requests"},
     "The field 'fetch_requests' of the field 'broker_topic_metrics' is required."),
    (7, "The field 'broker_topic_metrics' must be a JSON object."),
])  # fmt: skip
def test_bad_counters_are_dropped_and_the_heartbeat_kept(counters: object, message: str) -> None:
    """Review 2: counters only feed the console's rates; refusing the whole heartbeat for them
    would fence a broker that keeps sending them."""
    beat = brokers.heartbeat_request_from_json(Fields({**BEAT, "broker_topic_metrics": counters}))
    assert (beat.broker_id, beat.broker_epoch) == (BEAT["broker_id"], BEAT["broker_epoch"])
    assert beat.counters is None and beat.counters_sampled_ms is None
    assert beat.counters_refused == message.replace("2**63-1", str(2**63 - 1))
    largest = {**COUNTERS, "bytes_in": 2**63 - 1}
    kept = brokers.heartbeat_request_from_json(Fields({**BEAT, "broker_topic_metrics": largest}))
    assert kept.counters is not None and kept.counters.bytes_in == 2**63 - 1
