"""Kafka 3.9's old request versions through the real handlers, with the bytes old clients send
(kafka-python's legacy ``Struct`` classes): OffsetCommit v0-v1 and OffsetFetch v0 (Sarama 1.22's
defaults), ListOffsets v0 (Burrow), DescribeConfigs v0 and CreateTopics v0 (Sarama's
ClusterAdmin), Fetch v0-3 through ``KafkaApis`` — and its newest: ListGroups v5, FindCoordinator
v6."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.old import admin as old_admin
from kafka.protocol.old import commit as old_commit
from kafka.protocol.old import fetch as old_fetch
from kafka.protocol.old import list_offsets as old_list_offsets

from pykraft.broker.handlers import broker_handlers
from pykraft.broker.handlers.find_coordinator import find_coordinator_handler
from pykraft.broker.handlers.list_offsets import list_offsets_handler
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.coordinator.group.loader import read_partition_records
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC, OffsetsReplay
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    ResourceType,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response
from pykraft.protocol.errors import Errors
from pykraft.protocol.segments import Segments
from pykraft.storage.segment import LogSegment
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import pets_and_birds, started_cluster
from tests.broker.replica_harness import (
    LOCAL,
    PETS0,
    Cluster,
    batch,
    call,
    call_async,
    pets_led_here,
    request_context,
    services,
)
from tests.broker.test_authorization import CAROL, acl, authorizer
from tests.broker.test_authorization import context as auth_context
from tests.broker.test_handlers_groups import (
    GROUP,
    START_MS,
    Broker,
    GroupCluster,
    offsets_led_here,
    settle,
)

UNSUPPORTED = Errors.UNSUPPORTED_VERSION


@pytest.fixture
def groups(tmp_path: Path) -> Iterator[GroupCluster]:
    yield from started_cluster(GroupCluster(tmp_path), *pets_led_here())


async def send_raw(broker: Broker, api_key: ApiKey, version: int, body: bytes) -> bytes:
    answer = await call_async(broker.handlers[api_key], api_key, version, body)
    assert answer is not None
    return answer


async def fetch_v1(broker: Broker, partitions: list[int]) -> bytes:
    body = old_commit.OffsetFetchRequest_v1(GROUP, [("pets", partitions)]).encode()
    return await send_raw(broker, ApiKey.OFFSET_FETCH, 1, body)


# ------------------------------------------------------------------ OffsetCommit / OffsetFetch


def test_sarama_default_commit_v1_is_stored_and_fetched_back(groups: GroupCluster) -> None:
    # Sarama 1.22.1 (Version V0_8_2_0): OffsetCommit v1, generation -1, no member, its own
    # commit timestamp or -1 (GroupCoordinatorAdapter.createOffsetAndMetadata).
    async def scenario() -> None:
        broker = Broker(groups)
        groups.publish(*offsets_led_here())
        await settle()
        body = old_commit.OffsetCommitRequest_v1(
            GROUP, -1, "", [("pets", [(0, 42, 1_600_000_000_000, "sarama")])]
        ).encode()
        answer = old_commit.OffsetCommitResponse_v1.decode(
            await send_raw(broker, ApiKey.OFFSET_COMMIT, 1, body)
        )
        assert answer.topics == [("pets", [(0, Errors.NONE)])]
        fetched = old_commit.OffsetFetchResponse_v1.decode(await fetch_v1(broker, [0]))
        assert fetched.topics == [("pets", [(0, 42, "sarama", Errors.NONE)])]
        # The commit timestamp stored is the client's; -1 means the broker's clock.
        body = old_commit.OffsetCommitRequest_v1(
            GROUP, -1, "", [("pets", [(0, 43, -1, "")])]
        ).encode()
        await send_raw(broker, ApiKey.OFFSET_COMMIT, 1, body)
        hosted = groups.replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, 0))
        assert hosted is not None
        replay = OffsetsReplay()
        await read_partition_records(hosted.log, replay.replay, chunk_bytes=1 << 16)
        [group] = replay.loaded(now_ms=0).groups
        committed = group.offset(TopicPartition("pets", 0))
        assert committed is not None
        assert (committed.offset, committed.commit_timestamp_ms) == (43, START_MS)

    asyncio.run(scenario())


def test_commit_v1_keeps_the_clients_timestamp(groups: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(groups)
        groups.publish(*offsets_led_here())
        await settle()
        body = old_commit.OffsetCommitRequest_v1(
            GROUP, -1, "", [("pets", [(0, 7, 1_600_000_000_000, None)])]
        ).encode()
        await send_raw(broker, ApiKey.OFFSET_COMMIT, 1, body)
        committed = broker.shell.fetch_offsets(GROUP, [TopicPartition("pets", 0)])
        assert committed[0] == Errors.NONE
        hosted = groups.replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, 0))
        assert hosted is not None
        replay = OffsetsReplay()
        await read_partition_records(hosted.log, replay.replay, chunk_bytes=1 << 16)
        [group] = replay.loaded(now_ms=0).groups
        value = group.offset(TopicPartition("pets", 0))
        assert value is not None
        assert (value.offset, value.metadata, value.commit_timestamp_ms) == (
            7,
            "",
            1_600_000_000_000,
        )

    asyncio.run(scenario())


def test_commit_v0_is_unsupported_on_every_partition_as_kraft_kafka(groups: GroupCluster) -> None:
    # KafkaApis.commitOffsetsToZookeeper: requireZkOrThrow -> UnsupportedVersionException,
    # and getErrorResponse puts it on every partition named, the unknown one too.
    async def scenario() -> None:
        broker = Broker(groups)
        groups.publish(*offsets_led_here())
        await settle()
        body = old_commit.OffsetCommitRequest_v0(
            GROUP, [("pets", [(0, 5, "m")]), ("nope", [(0, 1, "")])]
        ).encode()
        answer = old_commit.OffsetCommitResponse_v0.decode(
            await send_raw(broker, ApiKey.OFFSET_COMMIT, 0, body)
        )
        assert answer.topics == [("pets", [(0, UNSUPPORTED)]), ("nope", [(0, UNSUPPORTED)])]
        fetched = old_commit.OffsetFetchResponse_v1.decode(await fetch_v1(broker, [0]))
        assert fetched.topics == [("pets", [(0, -1, "", Errors.NONE)])]  # nothing committed
        # Only unknown partitions: the per-partition errors, nothing thrown.
        body = old_commit.OffsetCommitRequest_v0(
            GROUP, [("nope", [(0, 1, "")]), ("pets", [(9, 1, "")])]
        ).encode()
        answer = old_commit.OffsetCommitResponse_v0.decode(
            await send_raw(broker, ApiKey.OFFSET_COMMIT, 0, body)
        )
        unknown = Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert answer.topics == [("nope", [(0, unknown)]), ("pets", [(9, unknown)])]

    asyncio.run(scenario())


def test_offset_fetch_v0_is_unsupported_on_every_partition(groups: GroupCluster) -> None:
    # handleOffsetFetchRequestFromZookeeper: "Version 0 offset fetch requests" unsupported;
    # OffsetFetchRequest.getErrorResponse below v2: offset -1, no metadata, per partition.
    async def scenario() -> None:
        broker = Broker(groups)
        groups.publish(*offsets_led_here())
        await settle()
        body = old_commit.OffsetFetchRequest_v0(GROUP, [("pets", [0, 1])]).encode()
        answer = old_commit.OffsetFetchResponse_v0.decode(
            await send_raw(broker, ApiKey.OFFSET_FETCH, 0, body)
        )
        assert answer.topics == [("pets", [(0, -1, "", UNSUPPORTED), (1, -1, "", UNSUPPORTED)])]

    asyncio.run(scenario())


# ------------------------------------------------------------------ ListOffsets v0


@pytest.fixture
def pets(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path)
    try:
        harness.start(*pets_and_birds(pets0_leader_epoch=4))
        harness.produce(PETS0, batch(b"a", b"b", timestamp=1000))  # offsets 0-1
        harness.produce(PETS0, batch(b"c", timestamp=5000))  # offset 2
        yield harness
    finally:
        harness.close()


def list_offsets_v0(
    cluster: Cluster, queries: list[tuple[str, int, int, int]], replica_id: int = -1
) -> list[tuple[int, int, list[int]]]:
    """[(partition, error, old style offsets)] for (topic, partition, timestamp, max) queries."""
    topics: dict[str, list[tuple[int, int, int]]] = {}
    for topic, partition, timestamp, max_num in queries:
        topics.setdefault(topic, []).append((partition, timestamp, max_num))
    body = old_list_offsets.ListOffsetsRequest_v0(replica_id, list(topics.items())).encode()
    answer = call(list_offsets_handler(services(cluster)), ApiKey.LIST_OFFSETS, 0, body)
    assert answer is not None
    decoded = old_list_offsets.ListOffsetsResponse_v0.decode(answer)
    return [tuple(p) for _, parts in decoded.topics for p in parts]


def test_burrow_asks_v0_for_the_latest_and_earliest_offset(pets: Cluster) -> None:
    # One segment, not empty: [log end (at now), segment base] (legacyFetchOffsetsBefore).
    pets.replica_manager.partition_or_error(PETS0).log.update_high_watermark(3)
    assert list_offsets_v0(pets, [("pets", 0, -1, 1), ("pets", 0, -2, 1)]) == [
        (0, Errors.NONE, [3]),
        (0, Errors.NONE, [0]),
    ]
    assert list_offsets_v0(pets, [("pets", 0, -1, 10)]) == [(0, Errors.NONE, [3, 0])]


def test_a_consumer_never_sees_past_the_high_watermark(pets: Cluster) -> None:
    pets.replica_manager.partition_or_error(PETS0).log.update_high_watermark(2)
    assert list_offsets_v0(pets, [("pets", 0, -1, 10)]) == [(0, Errors.NONE, [2, 0])]
    # The debugging replica id sees the log end.
    assert list_offsets_v0(pets, [("pets", 0, -1, 10)], replica_id=-2) == [(0, Errors.NONE, [3, 0])]


def test_v0_errors(pets: Cluster) -> None:
    assert list_offsets_v0(
        pets,
        [("pets", 0, -3, 1), ("pets", 0, -1, -1), ("pets", 7, -1, 1), ("nope", 0, -1, 1)],
    ) == [
        (0, UNSUPPORTED, []),  # "negative timestamps only support -1 and -2" for v0
        (0, Errors.UNKNOWN_SERVER_ERROR, []),  # a negative MaxNumOffsets
        (7, Errors.UNKNOWN_TOPIC_OR_PARTITION, []),
        (0, Errors.UNKNOWN_TOPIC_OR_PARTITION, []),
    ]


def test_a_time_before_every_segment_answers_nothing(pets: Cluster) -> None:
    assert list_offsets_v0(pets, [("pets", 0, 10, 5)]) == [(0, Errors.NONE, [])]


def test_a_partition_named_thousands_of_times_reads_its_log_once(
    pets: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # v0 has no duplicate check: every entry is answered, but the segments' times (a stat for
    # a segment without records) are read once per partition and request, not once per entry.
    pets.replica_manager.partition_or_error(PETS0).log.update_high_watermark(3)
    reads: list[int] = []
    original = LogSegment.largest_timestamp_ms

    def counted(segment: LogSegment) -> int:
        reads.append(segment.base_offset)
        return original(segment)

    monkeypatch.setattr(LogSegment, "largest_timestamp_ms", counted)
    entries = 3_000
    queries = [("pets", 0, (-1, -2, 5000)[n % 3], 1 + n % 2) for n in range(entries)]
    answers = list_offsets_v0(pets, queries)
    assert len(answers) == entries
    assert answers[:6] == [
        (0, Errors.NONE, [3]),
        (0, Errors.NONE, [0]),
        (0, Errors.NONE, [0]),
        (0, Errors.NONE, [3, 0]),
        (0, Errors.NONE, [0]),
        (0, Errors.NONE, [0]),
    ]
    assert reads == [0]  # one segment, read once


# ------------------------------------------------------------------ admin v0 and Fetch v0-3


def test_sarama_cluster_admin_describes_topic_configs_with_v0(pets: Cluster) -> None:
    table = broker_handlers(services(pets))
    body = old_admin.DescribeConfigsRequest_v0([(2, "pets", None)]).encode()
    answer = call(table[ApiKey.DESCRIBE_CONFIGS], ApiKey.DESCRIBE_CONFIGS, 0, body)
    assert answer is not None
    decoded = old_admin.DescribeConfigsResponse_v0.decode(answer)
    [(error, _message, resource_type, name, entries)] = decoded.resources
    assert (error, resource_type, name) == (Errors.NONE, 2, "pets")
    by_name = {entry[0]: entry for entry in entries}
    # v0 reports is_default instead of a config source (DescribeConfigsResponse v0).
    _name, value, _read_only, is_default, _sensitive = by_name["cleanup.policy"]
    assert (value, is_default) == ("delete", True)


@pytest.mark.parametrize("version", [0, 3])
def test_fetch_v0_to_v3_are_answered_unsupported_by_kafka_apis(version: int) -> None:
    fields: list[Any] = [-1, 500, 1] + ([1 << 20] if version == 3 else [])
    request = getattr(old_fetch, f"FetchRequest_v{version}")
    body = request(*fields, [("pets", [(0, 0, 1024)])]).encode()

    async def dispatch() -> Segments | None:
        return await KafkaApis().dispatch(request_context(ApiKey.FETCH, version), memoryview(body))

    frame = asyncio.run(dispatch())
    assert frame is not None
    raw = frame.to_bytes(lambda _: b"")
    # size, correlation id, then the body (response header v0: these versions are not flexible)
    decoded = getattr(old_fetch, f"FetchResponse_v{version}").decode(raw[8:])
    assert [(t, [(p[0], p[1], p[2]) for p in parts]) for t, parts in decoded.topics] == [
        ("pets", [(0, UNSUPPORTED, -1)])
    ]


def test_topics_created_and_deleted_with_v0_and_v1(pets: Cluster) -> None:
    # CreateTopics v0 (no validate_only, no error message), v1 (both), DeleteTopics v0.
    table = broker_handlers(services(pets))

    def send(api_key: ApiKey, version: int, body: bytes) -> bytes:
        answer = call(table[api_key], api_key, version, body)
        assert answer is not None
        return answer

    new: tuple[Any, ...] = ("fresh", 2, 1, [], [("retention.ms", "1")])
    created = old_admin.CreateTopicsResponse_v0.decode(
        send(ApiKey.CREATE_TOPICS, 0, old_admin.CreateTopicsRequest_v0([new], 5000).encode())
    )
    assert created.topic_errors == [("fresh", Errors.NONE)]
    assert len(pets.image.topics.by_name["fresh"].partitions) == 2
    again = old_admin.CreateTopicsResponse_v1.decode(
        send(ApiKey.CREATE_TOPICS, 1, old_admin.CreateTopicsRequest_v1([new], 5000, True).encode())
    )
    [(name, error, message)] = again.topic_errors
    assert (name, error) == ("fresh", Errors.TOPIC_ALREADY_EXISTS) and message
    described = old_admin.DescribeConfigsResponse_v0.decode(
        send(
            ApiKey.DESCRIBE_CONFIGS,
            0,
            old_admin.DescribeConfigsRequest_v0([(2, "fresh", ["retention.ms"])]).encode(),
        )
    )
    [(_error, _message, _type, _name, entries)] = described.resources
    assert [(e[0], e[1], e[3]) for e in entries] == [("retention.ms", "1", False)]
    deleted = old_admin.DeleteTopicsResponse_v0.decode(
        send(ApiKey.DELETE_TOPICS, 0, old_admin.DeleteTopicsRequest_v0(["fresh"], 5000).encode())
    )
    assert deleted.topic_error_codes == [("fresh", Errors.NONE)]
    assert "fresh" not in pets.image.topics.by_name


class _AclController:
    """The controller's ACL calls (an I/O boundary): records the filter, answers one ACL."""

    def __init__(self) -> None:
        self.filters: list[AclBindingFilter] = []

    async def describe_acls(self, acl_filter: AclBindingFilter) -> tuple[AclBinding, ...]:
        self.filters.append(acl_filter)
        return (acl(AclOperation.READ),)


def test_describe_acls_v0_asks_for_literal_patterns(pets: Cluster) -> None:
    # DescribeAcls v0 has no pattern type: Kafka's schema default LITERAL, so v0 clients see
    # only literal ACLs, which a v0 answer can express (it has no pattern type either).
    controller = _AclController()
    holder = authorizer(acl(AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER))
    table = broker_handlers(services(pets, controller=controller, authorizer=holder))
    body = old_admin.DescribeAclsRequest_v0(2, "pets", None, None, 1, 1).encode()

    async def send() -> bytes | None:
        context = auth_context(ApiKey.DESCRIBE_ACLS, 0, CAROL)
        answer = await table[ApiKey.DESCRIBE_ACLS](context, memoryview(bytearray(body)))
        assert isinstance(answer, bytes)
        return answer

    answer = asyncio.run(send())
    assert answer is not None
    decoded = old_admin.DescribeAclsResponse_v0.decode(answer)
    assert (decoded.error_code, decoded.resources) == (
        Errors.NONE,
        [(2, "pets", [("User:carol", "*", int(AclOperation.READ), 3)])],
    )
    [asked] = controller.filters
    assert (asked.resource_name, asked.pattern_type) == ("pets", PatternType.LITERAL)


# ------------------------------------------------------------------ Kafka 3.9's newest versions


def test_list_groups_v5_filters_by_group_type(groups: GroupCluster) -> None:
    # GroupCoordinator.handleListGroups (3.9): every group is classic; a types filter without
    # "classic" (GroupType.parse, case-insensitive) lists none.
    async def scenario() -> None:
        broker = Broker(groups)
        groups.publish(*offsets_led_here())
        await settle()
        body = old_commit.OffsetCommitRequest_v1(GROUP, -1, "", [("pets", [(0, 1, -1, "")])])
        await send_raw(broker, ApiKey.OFFSET_COMMIT, 1, body.encode())

        async def listed(types: list[str] | None) -> list[tuple[str, str, str]]:
            request = ListGroupsRequest(version=5, states_filter=[], types_filter=types)
            response = await broker.send(ApiKey.LIST_GROUPS, 5, request)
            assert response.error_code == Errors.NONE
            return [(g.group_id, g.group_state, g.group_type) for g in response.groups]

        assert await listed(None) == [(GROUP, "Empty", "classic")]
        assert await listed(["Classic"]) == [(GROUP, "Empty", "classic")]
        assert await listed(["consumer", "classic"]) == [(GROUP, "Empty", "classic")]
        assert await listed(["consumer"]) == []
        assert await listed(["share"]) == []

    asyncio.run(scenario())


def test_find_coordinator_v6_share_groups_are_not_available(groups: GroupCluster) -> None:
    # KafkaApis.getCoordinator (3.9): key type 2 before v6 is INVALID_REQUEST; from v6,
    # CLUSTER_ACTION is checked, then COORDINATOR_NOT_AVAILABLE (no share coordinator).
    async def scenario() -> None:
        broker = Broker(groups)
        groups.publish(*offsets_led_here())
        await settle()
        share = FindCoordinatorRequest(version=6, key_type=2, coordinator_keys=["s"])
        response = await broker.send(ApiKey.FIND_COORDINATOR, 6, share)
        assert [(c.key, c.error_code) for c in response.coordinators] == [
            ("s", Errors.COORDINATOR_NOT_AVAILABLE)
        ]
        response = await broker.send(
            ApiKey.FIND_COORDINATOR,
            5,
            FindCoordinatorRequest(version=5, key_type=2, coordinator_keys=["s"]),
        )
        assert [(c.key, c.error_code) for c in response.coordinators] == [
            ("s", Errors.INVALID_REQUEST)
        ]
        groups_v6 = FindCoordinatorRequest(version=6, key_type=0, coordinator_keys=["a"])
        response = await broker.send(ApiKey.FIND_COORDINATOR, 6, groups_v6)
        assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
            ("a", Errors.NONE, LOCAL)
        ]

    asyncio.run(scenario())


def test_find_coordinator_v6_share_key_needs_cluster_action(pets: Cluster) -> None:
    holder = authorizer(acl(AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER))
    handler = find_coordinator_handler(services(pets, authorizer=holder), topics=())
    request = FindCoordinatorRequest(version=6, key_type=2, coordinator_keys=["s"])

    async def send() -> bytes:
        context = auth_context(ApiKey.FIND_COORDINATOR, 6, CAROL)
        body = memoryview(bytearray(request.encode(version=6)))
        answer = await handler(context, body)
        assert isinstance(answer, bytes)
        return answer

    decoded = decode_response(ApiKey.FIND_COORDINATOR, 6, asyncio.run(send()))
    assert [(c.key, c.error_code) for c in decoded.coordinators] == [
        ("s", Errors.CLUSTER_AUTHORIZATION_FAILED)
    ]
