"""The reassignment tool's admin codecs (``pykraft.admin_reassignments``) against the broker's
side of the same APIs (``protocol.apis``): what the client encodes the broker decodes, and what
the broker answers the client reads back, at each version both speak."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from pykraft.admin_codec import admin_versions
from pykraft.admin_reassignments import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigChange,
    ConfigOp,
    PartitionReassignment,
    decode_alter_reassignments,
    decode_incremental_alter_configs,
    decode_list_reassignments,
    encode_alter_reassignments,
    encode_incremental_alter_configs,
    encode_list_reassignments,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_request, encode_response, response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

FOO0, FOO1, BAR2 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 2)


def test_alter_request_and_answer() -> None:
    body = encode_alter_reassignments(0, {FOO0: (11, 12), FOO1: None, BAR2: [3]})
    request = decode_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, memoryview(body))
    asked = {(t.name, p.partition_index): p.replicas for t in request.topics for p in t.partitions}
    assert asked == {("foo", 0): [11, 12], ("foo", 1): None, ("bar", 2): [3]}
    answer_type: Any = response_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
    topic_type = answer_type.ReassignableTopicResponse
    partition_type = topic_type.ReassignablePartitionResponse
    answer = answer_type(
        version=0, throttle_time_ms=0, error_code=0, error_message=None,
        responses=[topic_type(name="foo", partitions=[
            partition_type(partition_index=0, error_code=0, error_message=None),
            partition_type(partition_index=1, error_code=85, error_message="none to cancel"),
        ])],
    )  # fmt: skip
    wire = encode_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, answer)
    decoded = decode_alter_reassignments(bytes(wire), 0)
    assert decoded.error is Errors.NONE
    assert decoded.partitions == {
        FOO0: (Errors.NONE, None),
        FOO1: (Errors.NO_REASSIGNMENT_IN_PROGRESS, "none to cancel"),
    }


def test_list_request_and_answer() -> None:
    for partitions, expected in (
        (None, None),
        ([FOO1, FOO0, BAR2], {("foo", (1, 0)), ("bar", (2,))}),
    ):
        body = encode_list_reassignments(0, partitions)
        request = decode_request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, memoryview(body))
        topics = (
            None
            if request.topics is None
            else {(t.name, tuple(t.partition_indexes)) for t in request.topics}
        )
        assert topics == expected
    answer_type: Any = response_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)
    topic_type = answer_type.OngoingTopicReassignment
    partition_type = topic_type.OngoingPartitionReassignment
    answer = answer_type(
        version=0, throttle_time_ms=0, error_code=0, error_message=None,
        topics=[topic_type(name="foo", partitions=[partition_type(
            partition_index=0, replicas=[11, 12, 10], adding_replicas=[12], removing_replicas=[10]
        )])],
    )  # fmt: skip
    wire = encode_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, answer)
    assert decode_list_reassignments(bytes(wire), 0).reassignments == {
        FOO0: PartitionReassignment((11, 12, 10), (12,), (10,))
    }


def test_incremental_alter_configs_groups_changes_by_resource() -> None:
    leader, follower = "leader.replication.throttled", "follower.replication.throttled"
    changes = [
        ConfigChange(TOPIC_RESOURCE, "foo", f"{leader}.replicas", ConfigOp.SET, "0:1"),
        ConfigChange(BROKER_RESOURCE, "1", f"{leader}.rate", ConfigOp.DELETE),
        ConfigChange(TOPIC_RESOURCE, "foo", f"{follower}.replicas", ConfigOp.SET, "0:2"),
    ]
    for version in (0, 1):
        body = encode_incremental_alter_configs(version, changes)
        request = IncrementalAlterConfigsRequest.decode(body, version=version)
        resources = {
            (r.resource_type, r.resource_name): [
                (c.name, c.config_operation, c.value) for c in r.configs
            ]
            for r in request.resources
        }
        assert resources == {
            (2, "foo"): [
                ("leader.replication.throttled.replicas", 0, "0:1"),
                ("follower.replication.throttled.replicas", 0, "0:2"),
            ],
            (4, "1"): [("leader.replication.throttled.rate", 1, None)],
        }
        result_type = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
        answer = IncrementalAlterConfigsResponse(
            version=version, throttle_time_ms=0,
            responses=[result_type(error_code=40, error_message="bad", resource_type=2,
                                   resource_name="foo")],
        )  # fmt: skip
        decoded = decode_incremental_alter_configs(answer.encode(version=version), version)
        assert decoded == {(2, "foo"): (Errors.INVALID_CONFIG, "bad")}


def test_versions_include_what_the_broker_offers() -> None:
    ranges = {ApiKey.METADATA: (0, 12), 45: (0, 0), 46: (0, 0), 44: (0, 1)}
    versions = admin_versions(ranges)
    assert versions.of(ApiKey.ALTER_PARTITION_REASSIGNMENTS) == 0
    assert versions.of(ApiKey.LIST_PARTITION_REASSIGNMENTS) == 0
    assert versions.of(ApiKey.INCREMENTAL_ALTER_CONFIGS) == 1
    assert admin_versions({ApiKey.METADATA: (0, 12)}).of(ApiKey.INCREMENTAL_ALTER_CONFIGS) is None
