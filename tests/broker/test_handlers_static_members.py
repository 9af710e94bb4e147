"""Static membership (KIP-345) over the wire: the group handlers with requests encoded by
kafka-python at the versions clients send, over the real shell, ReplicaManager and
``__consumer_offsets`` log (the harness of ``test_handlers_groups.py``)."""

from __future__ import annotations

from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import HeartbeatRequest, SyncGroupRequest

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from tests.broker.test_handlers_groups import (
    GROUP,
    Broker,
    GroupCluster,
    cluster,
    commit,
    join,
    offsets_led_here,
    run,
    settle,
)

_Assignment = SyncGroupRequest.SyncGroupRequestAssignment

__all__ = ["cluster"]  # the fixture, shared with test_handlers_groups.py


def test_static_member_restart_keeps_its_assignment_and_fences_the_old_id(
    cluster: GroupCluster,
) -> None:
    # KIP-345 over the wire: GroupCoordinatorTest.testStaticMemberRejoinWithKnownMemberId /
    # staticMemberHeartbeatLeaderWithInvalidMemberId, at the request versions clients send.
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        joined = await broker.send(ApiKey.JOIN_GROUP, 5, join(5, instance="i-1"))
        assert joined.error_code == Errors.NONE  # no MEMBER_ID_REQUIRED round trip
        old_id, generation = joined.member_id, joined.generation_id
        assert old_id.startswith("i-1-") and joined.leader == old_id
        assert [(m.member_id, m.group_instance_id) for m in joined.members] == [(old_id, "i-1")]
        sync = SyncGroupRequest(
            version=3,
            group_id=GROUP,
            generation_id=generation,
            member_id=old_id,
            group_instance_id="i-1",
            assignments=[_Assignment(member_id=old_id, assignment=b"pets-0")],
        )
        assert (await broker.send(ApiKey.SYNC_GROUP, 3, sync)).assignment == b"pets-0"
        rejoined = await broker.send(ApiKey.JOIN_GROUP, 5, join(5, instance="i-1"))
        new_id = rejoined.member_id
        assert rejoined.error_code == Errors.NONE and new_id != old_id
        # No rebalance: the same generation, and the old leader id so it assigns nothing.
        assert (rejoined.generation_id, rejoined.leader) == (generation, old_id)
        sync.member_id = new_id
        assert (await broker.send(ApiKey.SYNC_GROUP, 3, sync)).assignment == b"pets-0"
        beat = HeartbeatRequest(
            version=3,
            group_id=GROUP,
            generation_id=generation,
            member_id=old_id,
            group_instance_id="i-1",
        )
        assert (await broker.send(ApiKey.HEARTBEAT, 3, beat)).error_code == (
            Errors.FENCED_INSTANCE_ID
        )
        request = commit(7, 1, member_id=old_id, generation=generation)
        request.group_instance_id = "i-1"
        response = await broker.send(ApiKey.OFFSET_COMMIT, 7, request)
        assert response.topics[0].partitions[0].error_code == Errors.FENCED_INSTANCE_ID
        described = await broker.send(
            ApiKey.DESCRIBE_GROUPS,
            4,
            DescribeGroupsRequest(version=4, groups=[GROUP], include_authorized_operations=False),
        )
        (member,) = described.groups[0].members
        assert (member.member_id, member.group_instance_id) == (new_id, "i-1")

    run(scenario)


def test_static_leader_restart_with_join_group_v9_skips_the_assignment(
    cluster: GroupCluster,
) -> None:
    # KIP-814 (JoinGroup v9's SkipAssignment): GroupCoordinatorTest.staticMemberRejoinWith-
    # LeaderIdAndUnknownMemberId(supportSkippingAssignment = true)
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        joined = await broker.send(ApiKey.JOIN_GROUP, 9, join(9, instance="i-1"))
        assert joined.error_code == Errors.NONE and not joined.skip_assignment
        sync = SyncGroupRequest(
            version=5,
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id="i-1",
            protocol_type="consumer",
            protocol_name="range",
            assignments=[_Assignment(member_id=joined.member_id, assignment=b"pets-0")],
        )
        assert (await broker.send(ApiKey.SYNC_GROUP, 5, sync)).error_code == Errors.NONE
        rejoined = await broker.send(ApiKey.JOIN_GROUP, 9, join(9, instance="i-1"))
        assert rejoined.error_code == Errors.NONE and rejoined.skip_assignment
        assert rejoined.leader == rejoined.member_id != joined.member_id
        assert rejoined.generation_id == joined.generation_id
        assert [(m.member_id, m.group_instance_id) for m in rejoined.members] == [
            (rejoined.member_id, "i-1")
        ]

    run(scenario)
