"""The group APIs' refusals, through ``KafkaApis.dispatch`` with carol's principal on the
request context, over the real group coordinator shell and ``__consumer_offsets`` log: each
refusal answers Kafka's error code and leaves nothing behind (no offset committed, no group
listed or described). They mirror ``AuthorizerIntegrationTest``'s ``testCommitWithTopicDescribe``,
``testCommitWithNoGroupAccess``, ``testOffsetFetchWithNoGroupAccess``,
``testOffsetFetchAllTopicPartitionsAuthorization``, ``testListGroupApiWithAndWithoutListGroupAcls``
and ``testDescribeGroupApiWithGroupDescribe``, and KafkaApis' ``handleOffsetCommitRequest``,
``handleOffsetFetchRequest``, ``handleListGroupsRequest``, ``handleDescribeGroupsRequest``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from pykraft.broker.handlers import broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.metadata.auth.acl import AclBinding, AclOperation, ResourceType
from pykraft.metadata.auth.principal import KafkaPrincipal
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import parse_response_header, response_header_version
from pykraft.storage.file_slice import FileSlice
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import pets_and_birds, started_cluster
from tests.broker.replica_harness import encode, services
from tests.broker.test_authorization import ADMIN, CAROL, acl, acls, authorizer, context
from tests.broker.test_handlers_groups import GroupCluster, offsets_led_here, settle

GROUP = "readers"
OTHER_GROUP = "writers"
OFFSETS0 = TopicPartition("__consumer_offsets", 0)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    yield from started_cluster(GroupCluster(tmp_path), *pets_and_birds(0))


class Broker:
    """The group handlers behind ``KafkaApis`` with an authorizer holding ``bindings``."""

    def __init__(self, cluster: GroupCluster, *bindings: AclBinding) -> None:
        config = GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)
        self.cluster = cluster
        self.shell = GroupCoordinatorShell(
            cluster.replica_manager, config, wall_clock_ms=cluster.clock.wall_clock_ms
        )
        cluster.shell = self.shell
        cluster.publish(*offsets_led_here())
        self.authorizer = authorizer(*bindings)
        self.apis = KafkaApis()
        handlers = broker_handlers(
            services(cluster, authorizer=self.authorizer), group_coordinator=self.shell
        )
        self.apis.register_all(handlers)

    def allow(self, *bindings: AclBinding) -> None:
        """The ACLs from now on are ``bindings`` only."""
        assert self.authorizer.update(acls(*bindings))

    async def send(
        self, api_key: ApiKey, version: int, request: Any, principal: KafkaPrincipal = CAROL
    ) -> Any:
        body = memoryview(bytearray(encode(request, version)))
        segments = await self.apis.dispatch(context(api_key, version, principal), body)
        assert segments is not None
        frame = segments.to_bytes(
            lambda part: FileSlice(part.path, part.position, part.length).read_bytes()
        )
        _, start = parse_response_header(frame[4:], response_header_version(api_key, version))
        return decode_response(api_key, version, frame[4 + start :])

    def committed(self, group_id: str = GROUP) -> dict[TopicPartition, int]:
        _, offsets = self.shell.fetch_offsets(group_id, None)
        return {f.topic_partition: f.offset.offset for f in offsets if f.offset is not None}

    def offsets_log_end_offset(self) -> int:
        return int(self.cluster.replica_manager.partitions[OFFSETS0].log_end_offset)


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def group_acl(operation: AclOperation, name: str = GROUP) -> AclBinding:
    return acl(operation, name, ResourceType.GROUP)


def commit(group_id: str = GROUP, offset: int = 17) -> Any:
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    partition = topic.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        version=8, group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, retention_time_ms=-1,
        topics=[
            topic(name=name, partitions=[partition(
                partition_index=0, committed_offset=offset, committed_leader_epoch=3,
                commit_timestamp=-1, committed_metadata="meta",
            )])
            for name in ("pets", "birds")
        ],
    )  # fmt: skip


def commit_errors(response: Any) -> dict[str, int]:
    return {t.name: p.error_code for t in response.topics for p in t.partitions}


# ------------------------------------------------------------------ OffsetCommit


def test_offset_commit_refuses_the_topics_not_read_and_commits_the_others(
    cluster: GroupCluster,
) -> None:
    """``testCommitWithTopicDescribe`` / ``handleOffsetCommitRequest``: READ per topic."""

    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.READ), acl(AclOperation.READ, "pets"))
        await settle()
        answer = await broker.send(ApiKey.OFFSET_COMMIT, 8, commit())
        assert commit_errors(answer) == {
            "pets": Errors.NONE,
            "birds": Errors.TOPIC_AUTHORIZATION_FAILED,
        }
        assert broker.committed() == {TopicPartition("pets", 0): 17}

    run(scenario)


def test_offset_commit_without_group_read_commits_nothing(cluster: GroupCluster) -> None:
    """``testCommitWithNoGroupAccess``: GROUP_AUTHORIZATION_FAILED on every partition."""

    async def scenario() -> None:
        topics = (acl(AclOperation.READ, "pets"), acl(AclOperation.READ, "birds"))
        broker = Broker(cluster, group_acl(AclOperation.DESCRIBE), *topics)
        await settle()
        answer = await broker.send(ApiKey.OFFSET_COMMIT, 8, commit())
        assert commit_errors(answer) == {
            "pets": Errors.GROUP_AUTHORIZATION_FAILED,
            "birds": Errors.GROUP_AUTHORIZATION_FAILED,
        }
        assert broker.committed() == {}
        assert broker.offsets_log_end_offset() == 0

    run(scenario)


# ------------------------------------------------------------------ OffsetFetch


def fetch_v1(topics: tuple[str, ...] = ("pets", "birds")) -> Any:
    topic = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(
        version=1, group_id=GROUP, topics=[topic(name=t, partition_indexes=[0]) for t in topics]
    )


def fetch_v8(*groups: tuple[str, list[str] | None]) -> Any:
    group = OffsetFetchRequest.OffsetFetchRequestGroup
    topic = group.OffsetFetchRequestTopics
    return OffsetFetchRequest(
        version=8, require_stable=False,
        groups=[
            group(group_id=g, topics=None if names is None else [
                topic(name=t, partition_indexes=[0]) for t in names
            ])
            for g, names in groups
        ],
    )  # fmt: skip


def fetched(topics: Any) -> dict[str, tuple[int, int, int, str | None]]:
    """topic -> (error, committed offset, committed leader epoch, metadata) of partition 0."""
    return {
        t.name: (
            p.error_code,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.metadata,
        )
        for t in topics
        for p in t.partitions
    }


REFUSED = (Errors.TOPIC_AUTHORIZATION_FAILED, -1, -1, "")


async def committed_by_admin(broker: Broker) -> None:
    await settle()
    answer = await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(), ADMIN)
    assert set(commit_errors(answer).values()) == {Errors.NONE}


def test_offset_fetch_v1_refuses_the_topics_not_described(cluster: GroupCluster) -> None:
    """``fetchOffsetsForGroup`` (``testOffsetFetchTopicDescribe``): the named partitions
    of a topic not described answer TOPIC_AUTHORIZATION_FAILED, offset -1, no metadata — nothing
    of what was committed for them."""

    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.DESCRIBE), acl(AclOperation.DESCRIBE))
        await committed_by_admin(broker)
        answer = await broker.send(ApiKey.OFFSET_FETCH, 1, fetch_v1())
        assert fetched(answer.topics) == {"pets": (Errors.NONE, 17, -1, "meta"), "birds": REFUSED}

    run(scenario)


def test_offset_fetch_v1_without_group_describe_refuses_every_partition(
    cluster: GroupCluster,
) -> None:
    """``testOffsetFetchWithNoGroupAccess``; v0-v1 have no group error, so every partition
    asked for carries GROUP_AUTHORIZATION_FAILED (``OffsetFetchResponse.groupError``), topics
    described or not."""

    async def scenario() -> None:
        broker = Broker(cluster, acl(AclOperation.DESCRIBE))
        await committed_by_admin(broker)
        answer = await broker.send(ApiKey.OFFSET_FETCH, 1, fetch_v1())
        group_refused = (Errors.GROUP_AUTHORIZATION_FAILED, -1, -1, "")
        assert fetched(answer.topics) == {"pets": group_refused, "birds": group_refused}

    run(scenario)


def test_offset_fetch_v8_refuses_groups_and_filters_topics_per_group(
    cluster: GroupCluster,
) -> None:
    """``testOffsetFetchAllTopicPartitionsAuthorization``, v8's several groups
    (``handleOffsetFetchRequestFromCoordinator``): a group not described answers
    GROUP_AUTHORIZATION_FAILED and no topics; the all-partitions form leaves out the topics
    not described; named ones are refused."""

    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.DESCRIBE), acl(AclOperation.DESCRIBE))
        await committed_by_admin(broker)
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(OTHER_GROUP), ADMIN)
        request = fetch_v8((GROUP, None), (OTHER_GROUP, None))
        every, refused = (await broker.send(ApiKey.OFFSET_FETCH, 8, request)).groups
        assert (every.group_id, every.error_code) == (GROUP, Errors.NONE)
        assert fetched(every.topics) == {"pets": (Errors.NONE, 17, 3, "meta")}
        assert (refused.group_id, refused.error_code, refused.topics) == (
            OTHER_GROUP,
            Errors.GROUP_AUTHORIZATION_FAILED,
            [],
        )
        [named] = (await broker.send(ApiKey.OFFSET_FETCH, 8, fetch_v8((GROUP, ["birds"])))).groups
        assert fetched(named.topics) == {"birds": REFUSED}

    run(scenario)


# ------------------------------------------------------------------ ListGroups, DescribeGroups


def listed(answer: Any) -> set[str]:
    assert answer.error_code == Errors.NONE
    return {group.group_id for group in answer.groups}


def test_list_groups_lists_the_groups_described_or_all_with_cluster_describe(
    cluster: GroupCluster,
) -> None:
    """``testListGroupApiWithAndWithoutListGroupAcls`` / ``handleListGroupsRequest``."""

    async def scenario() -> None:
        cluster_describe = acl(AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER)
        broker = Broker(cluster, group_acl(AclOperation.DESCRIBE))
        await committed_by_admin(broker)
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(OTHER_GROUP), ADMIN)
        request = ListGroupsRequest(version=4, states_filter=[])
        assert listed(await broker.send(ApiKey.LIST_GROUPS, 4, request)) == {GROUP}
        broker.allow()
        assert listed(await broker.send(ApiKey.LIST_GROUPS, 4, request)) == set()
        broker.allow(cluster_describe)
        assert listed(await broker.send(ApiKey.LIST_GROUPS, 4, request)) == {
            GROUP,
            OTHER_GROUP,
        }

    run(scenario)


def test_describe_groups_refuses_per_group_and_reports_authorized_operations(
    cluster: GroupCluster,
) -> None:
    """``testDescribeGroupApiWithGroupDescribe`` / ``handleDescribeGroupsRequest``:
    GROUP_AUTHORIZATION_FAILED and nothing else for a group not described (Kafka's
    ``DescribeGroupsResponse.groupError``); KIP-430 operations (v3+) for the others."""

    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.READ))
        await committed_by_admin(broker)
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(OTHER_GROUP), ADMIN)
        request = DescribeGroupsRequest(
            version=5, groups=[GROUP, OTHER_GROUP], include_authorized_operations=True
        )
        ours, theirs = (await broker.send(ApiKey.DESCRIBE_GROUPS, 5, request)).groups
        assert (ours.group_id, ours.error_code, ours.group_state) == (GROUP, Errors.NONE, "Empty")
        # READ implies DESCRIBE (StandardAuthorizerData).
        assert ours.authorized_operations == {AclOperation.READ, AclOperation.DESCRIBE}
        assert (theirs.group_id, theirs.error_code) == (
            OTHER_GROUP,
            Errors.GROUP_AUTHORIZATION_FAILED,
        )
        assert (theirs.group_state, theirs.protocol_type, theirs.members) == ("", "", [])
        # kafka-python reads Kafka's -2147483648 (the schema default) as None.
        assert theirs.authorized_operations is None

    run(scenario)
