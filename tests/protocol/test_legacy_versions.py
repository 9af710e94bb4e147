"""Kafka 3.9's request versions below the 4.x schemas' minimum (KIP-896 removed them from
``validVersions`` but kept their fields): ``decode_request`` / ``encode_response`` code them with
kafka-python's schema classes, byte for byte as old clients do — checked against kafka-python's
hand-written legacy ``Struct`` classes (``kafka.protocol.old``), what its pre-3.0 releases sent.
Fetch v0-3 is ``protocol.legacy_fetch``."""

from __future__ import annotations

import random
from typing import Any

import pytest
from kafka.protocol.old import admin as old_admin
from kafka.protocol.old import commit as old_commit
from kafka.protocol.old import fetch as old_fetch
from kafka.protocol.old import list_offsets as old_list_offsets
from kafka.protocol.old import offset_for_leader_epoch as old_epoch

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    SUPPORTED_API_VERSIONS,
    decode_request,
    encode_response,
    request_class,
    response_class,
)
from pykraft.protocol.errors import Errors, MalformedRequestError
from pykraft.protocol.kafka_messages import MESSAGE_CLASSES
from pykraft.protocol.legacy_fetch import (
    LegacyFetchTopic,
    decode_legacy_fetch_request,
    encode_legacy_fetch_error,
)
from tests.protocol.schema_values import random_message


def _structs(module: Any, name: str, version: int) -> tuple[Any, Any]:
    request = getattr(module, f"{name}Request_v{version}")
    return request, getattr(module, f"{name}Response_v{version}")


# (api, version) -> kafka-python's legacy (request, response) Struct classes.
LEGACY_STRUCTS: dict[tuple[ApiKey, int], tuple[Any, Any]] = {
    (ApiKey.LIST_OFFSETS, 0): _structs(old_list_offsets, "ListOffsets", 0),
    (ApiKey.OFFSET_COMMIT, 0): _structs(old_commit, "OffsetCommit", 0),
    (ApiKey.OFFSET_COMMIT, 1): _structs(old_commit, "OffsetCommit", 1),
    (ApiKey.OFFSET_FETCH, 0): _structs(old_commit, "OffsetFetch", 0),
    (ApiKey.CREATE_TOPICS, 0): _structs(old_admin, "CreateTopics", 0),
    (ApiKey.CREATE_TOPICS, 1): _structs(old_admin, "CreateTopics", 1),
    (ApiKey.DELETE_TOPICS, 0): _structs(old_admin, "DeleteTopics", 0),
    (ApiKey.DESCRIBE_CONFIGS, 0): _structs(old_admin, "DescribeConfigs", 0),
    (ApiKey.DESCRIBE_ACLS, 0): _structs(old_admin, "DescribeAcls", 0),
    (ApiKey.CREATE_ACLS, 0): _structs(old_admin, "CreateAcls", 0),
    (ApiKey.DELETE_ACLS, 0): _structs(old_admin, "DeleteAcls", 0),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 0): _structs(old_epoch, "OffsetForLeaderEpoch", 0),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 1): _structs(old_epoch, "OffsetForLeaderEpoch", 1),
}

# Every version we advertise below the 4.x schema's minimum, but for Produce/Fetch (hand-written).
BELOW_4X_MINIMUM = sorted(
    (key, version)
    for key, versions in SUPPORTED_API_VERSIONS.items()
    if key not in (ApiKey.PRODUCE, ApiKey.FETCH)
    for version in range(versions.min_version, MESSAGE_CLASSES[key][0].valid_versions[0])
)


def test_the_legacy_structs_cover_every_old_version_but_two() -> None:
    # WriteTxnMarkers v0 is v1 without flexible encoding; kafka-python never had a Struct for
    # it (test_write_txn_markers_v0_is_v1_without_tagged_fields). DescribeLogDirs v0 is v1's
    # layout ("Version 1 is the same as version 0", Kafka's DescribeLogDirsRequest.json), and
    # kafka-python's Struct for it is wrong (its partitions are one Int32, not an array), so it
    # is no oracle (test_describe_log_dirs_v0_is_v1s_layout). AlterReplicaLogDirs v0 is v1
    # too ("Version 1 is the same as version 0"); kafka-python never had a Struct for it
    # (test_alter_replica_log_dirs_v0_is_v1s_layout).
    assert set(BELOW_4X_MINIMUM) == set(LEGACY_STRUCTS) | {
        (ApiKey.WRITE_TXN_MARKERS, 0),
        (ApiKey.DESCRIBE_LOG_DIRS, 0),
        (ApiKey.ALTER_REPLICA_LOG_DIRS, 0),
    }


@pytest.mark.parametrize(("api_key", "version"), sorted(LEGACY_STRUCTS))
@pytest.mark.parametrize("seed", range(6))
def test_requests_decode_what_old_clients_encode(api_key: ApiKey, version: int, seed: int) -> None:
    old_request, _ = LEGACY_STRUCTS[api_key, version]
    request = random_message(request_class(api_key), version, random.Random(seed))
    body = bytes(request.encode(version=version))
    # The old client's bytes are these bytes, field for field.
    assert old_request.decode(body).encode() == body
    assert decode_request(api_key, version, body) == request


@pytest.mark.parametrize(("api_key", "version"), sorted(LEGACY_STRUCTS))
@pytest.mark.parametrize("seed", range(6))
def test_responses_encode_what_old_clients_decode(api_key: ApiKey, version: int, seed: int) -> None:
    _, old_response = LEGACY_STRUCTS[api_key, version]
    response = random_message(response_class(api_key), version, random.Random(seed))
    body = encode_response(api_key, version, response)
    assert old_response.decode(body).encode() == body


def test_offset_commit_v1_carries_the_commit_timestamp() -> None:
    # Sarama's default (Version V0_8_2_0) commits this way: generation -1, no member.
    body = old_commit.OffsetCommitRequest_v1(
        "burrow", -1, "", [("pets", [(0, 42, 1_700_000_000_000, "meta"), (1, 7, -1, None)])]
    ).encode()
    request = decode_request(ApiKey.OFFSET_COMMIT, 1, body)
    assert (request.group_id, request.generation_id_or_member_epoch, request.member_id) == (
        "burrow",
        -1,
        "",
    )
    first, second = request.topics[0].partitions
    assert (first.committed_offset, first.commit_timestamp, first.committed_metadata) == (
        42,
        1_700_000_000_000,
        "meta",
    )
    assert (second.commit_timestamp, second.committed_metadata) == (-1, None)


def test_list_offsets_v0_carries_max_num_offsets_and_answers_old_style_offsets() -> None:
    body = old_list_offsets.ListOffsetsRequest_v0(-1, [("pets", [(0, -1, 5)])]).encode()
    request = decode_request(ApiKey.LIST_OFFSETS, 0, body)
    partition = request.topics[0].partitions[0]
    assert (partition.timestamp, partition.max_num_offsets) == (-1, 5)
    response_cls = response_class(ApiKey.LIST_OFFSETS)
    topic_cls = response_cls.ListOffsetsTopicResponse
    response = response_cls(
        version=0,
        topics=[
            topic_cls(
                name="pets",
                partitions=[
                    topic_cls.ListOffsetsPartitionResponse(
                        partition_index=0, error_code=0, old_style_offsets=[9, 4, 0]
                    )
                ],
            )
        ],
    )
    decoded = old_list_offsets.ListOffsetsResponse_v0.decode(
        encode_response(ApiKey.LIST_OFFSETS, 0, response)
    )
    assert decoded.topics == [("pets", [(0, 0, [9, 4, 0])])]


def test_acl_v0_requests_mean_literal_patterns() -> None:
    # PatternType is v1+; Kafka's schema default for v0 is LITERAL (3).
    body = old_admin.CreateAclsRequest_v0([(2, "pets", "User:alice", "*", 3, 3)]).encode()
    assert decode_request(ApiKey.CREATE_ACLS, 0, body).creations[0].resource_pattern_type == 3
    body = old_admin.DescribeAclsRequest_v0(2, "pets", None, None, 1, 1).encode()
    assert decode_request(ApiKey.DESCRIBE_ACLS, 0, body).pattern_type_filter == 3
    body = old_admin.DeleteAclsRequest_v0([(2, "pets", None, None, 1, 1)]).encode()
    assert decode_request(ApiKey.DELETE_ACLS, 0, body).filters[0].pattern_type_filter == 3


def test_write_txn_markers_v0_is_v1_without_tagged_fields() -> None:
    request = random_message(request_class(ApiKey.WRITE_TXN_MARKERS), 0, random.Random(3))
    v0 = bytes(request.encode(version=0))
    assert decode_request(ApiKey.WRITE_TXN_MARKERS, 0, v0) == request
    v1 = decode_request(ApiKey.WRITE_TXN_MARKERS, 1, bytes(request.encode(version=1)))
    assert [m.producer_id for m in v1.markers] == [m.producer_id for m in request.markers]


@pytest.mark.parametrize("seed", range(4))
def test_describe_log_dirs_v0_is_v1s_layout(seed: int) -> None:
    request = random_message(request_class(ApiKey.DESCRIBE_LOG_DIRS), 1, random.Random(seed))
    v1 = bytes(request.encode(version=1))
    assert bytes(request.encode(version=0)) == v1
    assert decode_request(ApiKey.DESCRIBE_LOG_DIRS, 0, v1).topics == request.topics
    response = random_message(response_class(ApiKey.DESCRIBE_LOG_DIRS), 1, random.Random(seed))
    assert encode_response(ApiKey.DESCRIBE_LOG_DIRS, 0, response) == encode_response(
        ApiKey.DESCRIBE_LOG_DIRS, 1, response
    )


@pytest.mark.parametrize("seed", range(6))
def test_alter_replica_log_dirs_v0_is_v1s_layout(seed: int) -> None:
    key = ApiKey.ALTER_REPLICA_LOG_DIRS
    request = random_message(request_class(key), 1, random.Random(seed))
    v1 = bytes(request.encode(version=1))
    assert bytes(request.encode(version=0)) == v1
    assert decode_request(key, 0, v1).dirs == request.dirs
    response = random_message(response_class(key), 1, random.Random(seed))
    assert encode_response(key, 0, response) == encode_response(key, 1, response)


# ------------------------------------------------------------------ Fetch v0-3


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_v0_to_v3_answer_unsupported_version_on_every_partition(version: int) -> None:
    old_request, old_response = (
        getattr(old_fetch, f"FetchRequest_v{version}"),
        getattr(old_fetch, f"FetchResponse_v{version}"),
    )
    topics = [("pets", [(0, 10, 1024), (2, 0, 1024)]), ("birds", [(1, 5, 1024)])]
    fields: list[Any] = [-1, 500, 1]
    if version == 3:
        fields.append(1 << 20)
    body = old_request(*fields, topics).encode()
    asked = decode_legacy_fetch_request(body, version)
    assert asked == (LegacyFetchTopic("pets", (0, 2)), LegacyFetchTopic("birds", (1,)))
    answer = old_response.decode(encode_legacy_fetch_error(asked, version))
    error = Errors.UNSUPPORTED_VERSION
    expected_topics = [
        ("pets", [(0, error, -1, b""), (2, error, -1, b"")]),
        ("birds", [(1, error, -1, b"")]),
    ]
    topics_answered = answer.topics
    assert [
        (name, [(p[0], p[1], p[2], bytes(p[-1] or b"")) for p in parts])
        for name, parts in topics_answered
    ] == expected_topics
    if version >= 1:
        assert answer.throttle_time_ms == 0


def test_a_truncated_fetch_v0_is_malformed() -> None:
    body = old_fetch.FetchRequest_v0(-1, 500, 1, [("pets", [(0, 10, 1024)])]).encode()
    for cut in range(len(body)):
        with pytest.raises(MalformedRequestError):
            decode_legacy_fetch_request(body[:cut], 0)
