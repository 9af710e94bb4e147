"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) through ``KafkaApis.dispatch`` over
the real group coordinator shell and ``__consumer_offsets`` log, with carol's principal: the wire
shapes (uuids, the nullable assignment), Kafka 3.9's ACL checks (``KafkaApis``'s
``handleConsumerGroupHeartbeat`` / ``handleConsumerGroupDescribe``,
``ConsumerGroupHeartbeatRequestTest``, ``ConsumerGroupDescribeRequestsTest``), and ListGroups
v5's group types."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest

from pykraft.broker.handlers.consumer_groups import consumer_group_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.coordinator.group.consumer_heartbeat import ConsumerGroupConfig
from pykraft.metadata.auth.acl import AclOperation
from pykraft.metadata.records import kafka_string_to_uuid
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import request_class
from pykraft.protocol.errors import Errors
from tests.broker.handler_support import pets_and_birds, started_cluster
from tests.broker.replica_harness import PETS_ID, services
from tests.broker.test_authorization import ADMIN, acl
from tests.broker.test_authorization_groups import GROUP, Broker, group_acl, run
from tests.broker.test_handlers_groups import GroupCluster, commit, settle

PETS_UUID = uuid.UUID(bytes=kafka_string_to_uuid(PETS_ID))
HEARTBEAT = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
DESCRIBE = request_class(ApiKey.CONSUMER_GROUP_DESCRIBE)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    yield from started_cluster(GroupCluster(tmp_path), *pets_and_birds(0))


def join(group_id: str = GROUP) -> Any:
    return HEARTBEAT(
        version=0,
        group_id=group_id,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=["pets"],
        topic_partitions=[],
    )


def beat(member_id: str, epoch: int, owned: list[int] | None) -> Any:
    topic = HEARTBEAT.TopicPartitions
    return HEARTBEAT(
        version=0,
        group_id=GROUP,
        member_id=member_id,
        member_epoch=epoch,
        topic_partitions=None if owned is None else [topic(topic_id=PETS_UUID, partitions=owned)],
    )


def test_join_heartbeat_describe_and_list(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.READ), group_acl(AclOperation.DESCRIBE))
        await settle()
        joined = await broker.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join())
        assert joined.error_code == Errors.NONE and joined.error_message is None
        assert joined.member_epoch == 1 and joined.heartbeat_interval_ms == 5000
        member_id = joined.member_id
        assert member_id
        [owned] = joined.assignment.topic_partitions
        assert (owned.topic_id, owned.partitions) == (PETS_UUID, [0, 1])
        # A heartbeat that changes nothing carries no assignment (null on the wire).
        again = await broker.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, beat(member_id, 1, None))
        assert again.error_code == Errors.NONE and again.assignment is None
        described = await broker.send(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            0,
            DESCRIBE(version=0, group_ids=[GROUP, "nobody"], include_authorized_operations=True),
        )
        group, missing = described.groups
        assert (group.error_code, group.group_state, group.group_epoch) == (0, "Stable", 1)
        assert (group.assignment_epoch, group.assignor_name) == (1, "uniform")
        [member] = group.members
        assert (member.member_id, member.client_id, member.client_host) == (
            member_id,
            "harness",
            "/127.0.0.1",
        )
        [assigned] = member.assignment.topic_partitions
        assert (assigned.topic_name, assigned.partitions) == ("pets", [0, 1])
        assert member.target_assignment.topic_partitions[0].topic_name == "pets"
        # READ and DESCRIBE (codes 3 and 8) of the group's operations (KIP-430)
        assert group.authorized_operations == (1 << 3) | (1 << 8)
        # Kafka 3.9 answers an unknown group GROUP_ID_NOT_FOUND (not authorized: the same).
        assert missing.error_code in (Errors.GROUP_ID_NOT_FOUND, Errors.GROUP_AUTHORIZATION_FAILED)
        listed = await broker.send(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(
            version=5, states_filter=[], types_filter=["consumer"]))  # fmt: skip
        assert [
            (g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups
        ] == [(GROUP, "consumer", "Stable", "consumer")]
        classic = await broker.send(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(
            version=5, states_filter=[], types_filter=["classic"]))  # fmt: skip
        assert classic.groups == []

    run(scenario)


def test_heartbeat_without_group_read_is_refused_and_creates_nothing(
    cluster: GroupCluster,
) -> None:
    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.DESCRIBE))
        await settle()
        refused = await broker.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join())
        assert refused.error_code == Errors.GROUP_AUTHORIZATION_FAILED
        assert GROUP not in broker.shell.core.consumer_groups

    run(scenario)


def test_describe_without_group_describe_is_refused(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        await settle()
        joined = await broker.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join(), principal=ADMIN)
        assert joined.error_code == Errors.NONE
        described = await broker.send(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            0,
            DESCRIBE(version=0, group_ids=[GROUP], include_authorized_operations=False),
        )
        [group] = described.groups
        assert group.error_code == Errors.GROUP_AUTHORIZATION_FAILED and group.members == []

    run(scenario)


def test_unknown_group_describes_as_group_id_not_found(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.DESCRIBE, "ghosts"))
        await settle()
        described = await broker.send(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            0,
            DESCRIBE(version=0, group_ids=["ghosts"], include_authorized_operations=False),
        )
        assert [g.error_code for g in described.groups] == [Errors.GROUP_ID_NOT_FOUND]

    run(scenario)


def test_without_the_consumer_protocol_both_apis_are_unsupported(cluster: GroupCluster) -> None:
    """``group.coordinator.rebalance.protocols=classic``: ``isConsumerGroupProtocolEnabled``."""

    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.READ))
        broker.shell.core.consumer.consumer_config = ConsumerGroupConfig(
            rebalance_protocols=frozenset({"classic"})
        )
        broker.apis = KafkaApis()
        broker.apis.register_all(consumer_group_handlers(services(cluster), broker.shell))
        await settle()
        refused = await broker.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join())
        assert refused.error_code == Errors.UNSUPPORTED_VERSION
        described = await broker.send(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            0,
            DESCRIBE(version=0, group_ids=[GROUP], include_authorized_operations=False),
        )
        assert [g.error_code for g in described.groups] == [Errors.UNSUPPORTED_VERSION]

    run(scenario)


def test_a_consumer_member_commits_with_offset_commit_v9_only(cluster: GroupCluster) -> None:
    # ConsumerGroup.validateOffsetCommit: OffsetCommit below v9 from a member of the consumer
    # protocol is UNSUPPORTED_VERSION (the handler passes the request version through).
    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.READ), acl(AclOperation.READ, "pets"))
        await settle()
        joined = await broker.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join())
        member_id, epoch = joined.member_id, joined.member_epoch
        old = await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(8, 5, member_id, epoch))
        assert old.topics[0].partitions[0].error_code == Errors.UNSUPPORTED_VERSION
        new = await broker.send(ApiKey.OFFSET_COMMIT, 9, commit(9, 5, member_id, epoch))
        assert new.topics[0].partitions[0].error_code == Errors.NONE

    run(scenario)


def test_offset_fetch_v9_checks_the_member_epoch(cluster: GroupCluster) -> None:
    # ConsumerGroup.validateOffsetFetch: v9's member id and epoch, when given, must match.
    group_class = OffsetFetchRequest.OffsetFetchRequestGroup
    topic_class = group_class.OffsetFetchRequestTopics

    def fetch(member_id: str | None, epoch: int) -> Any:
        group = group_class(
            group_id=GROUP,
            member_id=member_id,
            member_epoch=epoch,
            topics=[topic_class(name="pets", partition_indexes=[0])],
        )
        return OffsetFetchRequest(version=9, require_stable=False, groups=[group])

    async def scenario() -> None:
        broker = Broker(cluster, group_acl(AclOperation.READ), group_acl(AclOperation.DESCRIBE))
        broker.allow(
            group_acl(AclOperation.READ),
            group_acl(AclOperation.DESCRIBE),
            acl(AclOperation.DESCRIBE, "pets"),
        )
        await settle()
        joined = await broker.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join())
        member_id, epoch = joined.member_id, joined.member_epoch
        cases = [
            ((member_id, epoch), Errors.NONE),
            ((None, -1), Errors.NONE),
            ((member_id, epoch + 1), Errors.STALE_MEMBER_EPOCH),
            (("nobody", epoch), Errors.UNKNOWN_MEMBER_ID),
        ]
        for (asker, asked_epoch), error in cases:
            response = await broker.send(ApiKey.OFFSET_FETCH, 9, fetch(asker, asked_epoch))
            assert response.groups[0].error_code == error, (asker, asked_epoch)

    run(scenario)
