"""DeleteGroups and OffsetDelete through ``KafkaApis.dispatch`` (kafka-python requests, carol's
principal, an authorizer), over the real group coordinator shell and ``__consumer_offsets`` log —
Kafka's ``KafkaApisTest`` (``testDeleteGroups*``, ``testOffsetDelete*``) and
``AuthorizerIntegrationTest`` (``testDeleteGroupApiWithDeleteGroupAcl``,
``testDeleteGroupApiWithNoDeleteGroupAcl``, ``testDeleteGroupOffsetsWithAcl``,
``testDeleteGroupOffsetsWithNoAcl``, ``testDeleteGroupOffsetsWithNoTopicAcl``) cases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DeleteGroupsRequest
from kafka.protocol.consumer import OffsetDeleteRequest

from pykraft.coordinator.group.loader import read_partition_records
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC, OffsetsReplay
from pykraft.metadata.auth.acl import AclOperation
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import pets_and_birds, started_cluster
from tests.broker.replica_harness import LOCAL
from tests.broker.test_authorization import acl
from tests.broker.test_authorization_groups import (
    GROUP,
    Broker,
    commit,
    group_acl,
    run,
)
from tests.broker.test_handlers_groups import OFFSETS_ID, GroupCluster, join, settle

PETS0 = TopicPartition("pets", 0)
BIRDS0 = TopicPartition("birds", 0)
EVERYTHING = (
    group_acl(AclOperation.ALL, "*"),
    acl(AclOperation.ALL, "*"),
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    yield from started_cluster(GroupCluster(tmp_path), *pets_and_birds(0))


def delete_groups(version: int, *group_ids: str) -> Any:
    return DeleteGroupsRequest(version=version, groups_names=list(group_ids))


def offset_delete(group_id: str, **topics: list[int]) -> Any:
    topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
    partition = topic.OffsetDeleteRequestPartition
    return OffsetDeleteRequest(
        version=0,
        group_id=group_id,
        topics=[
            topic(name=name, partitions=[partition(partition_index=p) for p in parts])
            for name, parts in topics.items()
        ],
    )


def group_results(response: Any) -> dict[str, int]:
    return {r.group_id: r.error_code for r in response.results}


def partition_errors(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


async def replayed_groups(broker: Broker) -> dict[str, dict[TopicPartition, int]]:
    """What a coordinator loading ``__consumer_offsets`` now would find."""
    hosted = broker.cluster.replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, 0))
    assert hosted is not None
    replay = OffsetsReplay()
    await read_partition_records(hosted.log, replay.replay)
    return {
        g.group_id: {tp: c.value.offset for tp, c in g.offsets.items()}
        for g in replay.loaded(now_ms=0).groups
    }


def test_the_versions_served_are_kafka_3_9_s() -> None:
    delete_groups = SUPPORTED_API_VERSIONS[ApiKey.DELETE_GROUPS]
    assert (delete_groups.min_version, delete_groups.max_version) == (0, 2)
    assert SUPPORTED_API_VERSIONS[ApiKey.OFFSET_DELETE].max_version == 0


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_groups_deletes_an_empty_group_and_it_stays_deleted(
    cluster: GroupCluster, version: int
) -> None:
    async def scenario() -> None:
        broker = Broker(cluster, *EVERYTHING)
        await settle()
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit())
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit("kept", 5))
        answer = await broker.send(
            ApiKey.DELETE_GROUPS, version, delete_groups(version, GROUP, "ghost")
        )
        assert group_results(answer) == {GROUP: Errors.NONE, "ghost": Errors.GROUP_ID_NOT_FOUND}
        await settle()
        assert broker.committed() == {}
        assert GROUP not in await replayed_groups(broker)
        # A new leader epoch reloads the partition from the log: still gone, "kept" is kept.
        cluster.publish(PartitionChangeRecord(partition_id=0, topic_id=OFFSETS_ID, leader=LOCAL))
        await settle()
        assert broker.committed() == {}
        assert broker.committed("kept") == {PETS0: 5, BIRDS0: 5}

    run(scenario)


def test_delete_groups_refuses_groups_without_delete(cluster: GroupCluster) -> None:
    """``testDeleteGroupApiWithNoDeleteGroupAcl``: only that group is refused."""

    async def scenario() -> None:
        broker = Broker(cluster, *EVERYTHING)
        await settle()
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit())
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit("mine"))
        broker.allow(
            group_acl(AclOperation.READ, GROUP),
            group_acl(AclOperation.DELETE, "mine"),
        )
        answer = await broker.send(ApiKey.DELETE_GROUPS, 2, delete_groups(2, GROUP, "mine"))
        assert group_results(answer) == {
            GROUP: Errors.GROUP_AUTHORIZATION_FAILED,
            "mine": Errors.NONE,
        }
        assert broker.committed() == {PETS0: 17, BIRDS0: 17}
        assert broker.committed("mine") == {}

    run(scenario)


def test_delete_groups_of_a_group_with_members_is_non_empty_group(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster, *EVERYTHING)
        await settle()
        first = await broker.send(ApiKey.JOIN_GROUP, 4, join(4))
        await broker.send(ApiKey.JOIN_GROUP, 4, join(4, first.member_id))
        answer = await broker.send(ApiKey.DELETE_GROUPS, 1, delete_groups(1, GROUP))
        assert group_results(answer) == {GROUP: Errors.NON_EMPTY_GROUP}

    run(scenario)


# ------------------------------------------------------------------ OffsetDelete


def test_offset_delete_deletes_known_partitions_and_refuses_unknown_ones(
    cluster: GroupCluster,
) -> None:
    """``testOffsetDeleteWithInvalidPartition``, ``testOffsetDelete``."""

    async def scenario() -> None:
        broker = Broker(cluster, *EVERYTHING)
        await settle()
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit())
        request = offset_delete(GROUP, pets=[0, 7], nope=[0])
        answer = await broker.send(ApiKey.OFFSET_DELETE, 0, request)
        assert answer.error_code == Errors.NONE
        assert partition_errors(answer) == {
            ("pets", 0): Errors.NONE,
            ("pets", 7): Errors.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        }
        await settle()
        assert broker.committed() == {BIRDS0: 17}
        assert (await replayed_groups(broker))[GROUP] == {BIRDS0: 17}

    run(scenario)


def test_offset_delete_of_a_subscribed_topic_and_of_unknown_groups(
    cluster: GroupCluster,
) -> None:
    async def scenario() -> None:
        broker = Broker(cluster, *EVERYTHING)
        await settle()
        first = await broker.send(ApiKey.JOIN_GROUP, 4, join(4))
        await broker.send(ApiKey.JOIN_GROUP, 4, join(4, first.member_id))
        # join()'s metadata is no ConsumerProtocolSubscription: every topic counts as used.
        answer = await broker.send(ApiKey.OFFSET_DELETE, 0, offset_delete(GROUP, pets=[0]))
        assert (answer.error_code, partition_errors(answer)) == (
            Errors.NONE,
            {("pets", 0): Errors.GROUP_SUBSCRIBED_TO_TOPIC},
        )
        answer = await broker.send(ApiKey.OFFSET_DELETE, 0, offset_delete("ghost", pets=[0]))
        assert (answer.error_code, answer.topics) == (Errors.GROUP_ID_NOT_FOUND, [])

    run(scenario)


def test_offset_delete_authorization(cluster: GroupCluster) -> None:
    """``testDeleteGroupOffsetsWithNoAcl`` (whole request) and ``...WithNoTopicAcl``."""

    async def scenario() -> None:
        broker = Broker(cluster, *EVERYTHING)
        await settle()
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit())
        broker.allow(group_acl(AclOperation.READ), acl(AclOperation.READ, "pets"))
        request = offset_delete(GROUP, pets=[0], birds=[0])
        answer = await broker.send(ApiKey.OFFSET_DELETE, 0, request)
        assert (answer.error_code, answer.topics) == (Errors.GROUP_AUTHORIZATION_FAILED, [])
        broker.allow(group_acl(AclOperation.DELETE), acl(AclOperation.READ, "pets"))
        answer = await broker.send(ApiKey.OFFSET_DELETE, 0, request)
        assert partition_errors(answer) == {
            ("pets", 0): Errors.NONE,
            ("birds", 0): Errors.TOPIC_AUTHORIZATION_FAILED,
        }
        assert broker.committed() == {BIRDS0: 17}

    run(scenario)
