"""Consumer groups (KIP-848) where Kafka's ``GroupMetadataManager`` is subtle: a failed append
reverts the group, each revocation round gets its full rebalance timeout, static members leave
for now and come back, and heartbeats with an instance id are checked by it
(``GroupMetadataManagerTest``'s static-member and rebalance-timeout cases)."""

from __future__ import annotations

import pytest

from pykraft.coordinator.group.consumer_member import MemberState
from pykraft.protocol.errors import Errors
from tests.coordinator.group.consumer_harness import GROUP, ConsumerHarness, topic
from tests.coordinator.group.test_consumer_groups import harness
from tests.coordinator.group.test_consumer_migration import FOO as FOO6
from tests.coordinator.group.test_consumer_migration import stable_classic_group


def test_each_revocation_round_gets_the_full_rebalance_timeout():
    # GroupMetadataManager.maybeReconcile reschedules the rebalance timeout whenever the member
    # changes and is UNREVOKED_PARTITIONS (CurrentAssignmentBuilder moves it to epoch + 1).
    h = ConsumerHarness([topic("t", 4)])
    tid = h.topic_id("t")
    a = h.join(("t",))
    b = h.join(("t",))
    first = h.call(
        member_id=a.member_id, member_epoch=1, topic_partitions={tid: frozenset(range(4))}
    )
    assert first.member_epoch == 1 and first.assignment == {tid: frozenset({0, 1})}
    h.advance(28_000)  # round one's timeout (30 s) is nearly up
    h.call(member_id=b.member_id, member_epoch=b.member_epoch)
    h.join(("t",))
    h.join(("t",))
    h.advance(1_000)
    second = h.call(
        member_id=a.member_id, member_epoch=1, topic_partitions={tid: frozenset({0, 1})}
    )
    group = h.coordinator.consumer_groups[GROUP]
    assert second.error is Errors.NONE and second.member_epoch == 2
    assert group.members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    h.advance(1_500)  # past round one's deadline, well within round two's
    assert a.member_id in group.members
    h.advance(28_500)  # round two's 30 s are up: fenced
    assert a.member_id not in group.members


def test_a_failed_write_reverts_the_group_and_fails_the_later_writes():
    # CoordinatorRuntime: a failed append reverts the state to the last written offset.
    h = harness()
    a = h.join(("foo",))
    group = h.coordinator.consumer_groups[GROUP]
    epoch, target = group.group_epoch, dict(group.target_assignment)
    h.hold_appends = True
    first = h.heartbeat(member_epoch=0, subscribed_topic_names=("foo",))
    second = h.heartbeat(member_epoch=0, subscribed_topic_names=("foo",))
    h.release(Errors.NOT_ENOUGH_REPLICAS)
    h.hold_appends = False
    assert h.answer(first).error is Errors.COORDINATOR_NOT_AVAILABLE
    assert h.answer(second).error is Errors.COORDINATOR_NOT_AVAILABLE
    group = h.coordinator.consumer_groups[GROUP]
    assert sorted(group.members) == [a.member_id]
    assert (group.group_epoch, group.target_assignment) == (epoch, target)
    assert sorted(group.partition_owners.values()) == [a.member_id] * 6
    # A new member now gets half, and a failover agrees with the live group.
    b = h.join(("foo",))
    assert b.member_epoch == epoch + 1
    live = h.coordinator.consumer_groups[GROUP]
    fresh = h.reload().consumer_groups[GROUP]
    assert fresh.members == live.members and fresh.target_assignment == live.target_assignment
    assert fresh.group_epoch == live.group_epoch


def test_a_failed_upgrade_puts_the_classic_group_back():
    h = ConsumerHarness([FOO6])
    classic, old_id, generation = stable_classic_group(h)
    h.hold_appends = True
    request_id = h.heartbeat(member_epoch=0, subscribed_topic_names=("foo",))
    h.release(Errors.NOT_ENOUGH_REPLICAS)
    assert h.answer(request_id).error is Errors.COORDINATOR_NOT_AVAILABLE
    assert GROUP not in h.coordinator.consumer_groups
    assert h.coordinator.groups[GROUP].members.keys() == {old_id}
    assert classic.heartbeat(old_id, generation) is Errors.NONE


def test_a_static_leave_gives_up_what_it_was_revoking_and_rejoins_at_epoch_zero():
    # GroupMetadataManager.consumerGroupStaticMemberGroupLeave: epoch -2, nothing pending
    # revocation, the previous epoch untouched; getOrMaybeSubscribeStaticConsumerGroupMember:
    # the new member id starts at epoch 0 and reconciles.
    h = harness()
    a = h.join(("foo",), instance_id="instance-a")
    h.join(("foo",))
    revoking = h.call(member_id=a.member_id, member_epoch=1, topic_partitions=a.assignment)
    group = h.coordinator.consumer_groups[GROUP]
    before = group.members[a.member_id]
    assert before.state is MemberState.UNREVOKED_PARTITIONS and revoking.member_epoch == 1
    left = h.call(member_id=a.member_id, member_epoch=-2, instance_id="instance-a")
    assert left.error is Errors.NONE and left.member_epoch == -2
    gone = group.members[a.member_id]
    assert gone.member_epoch == -2 and gone.previous_member_epoch == before.previous_member_epoch
    assert gone.partitions_pending_revocation == {}
    assert gone.assigned_partitions == before.assigned_partitions
    # The revoked partitions are free at once.
    assert sorted(group.partition_owners.values()) == [a.member_id] * 3
    back = h.join(("foo",), instance_id="instance-a")
    assert back.error is Errors.NONE and back.member_epoch == 2
    assert back.assignment == dict(before.assigned_partitions)
    fresh = h.reload().consumer_groups[GROUP]
    assert fresh.members == group.members


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        # throwIfStaticMemberIsUnknown / throwIfInstanceIdIsFenced on a heartbeat
        ({"member_epoch": 1, "instance_id": "nobody"}, Errors.UNKNOWN_MEMBER_ID),
        (
            {"member_epoch": 1, "instance_id": "instance-a", "member_id": "x"},
            Errors.FENCED_INSTANCE_ID,
        ),
        # ... and on a leave
        ({"member_epoch": -2, "instance_id": "nobody"}, Errors.UNKNOWN_MEMBER_ID),
        (
            {"member_epoch": -1, "instance_id": "instance-a", "member_id": "x"},
            Errors.FENCED_INSTANCE_ID,
        ),
        # consumerGroupLeave: consumerGroup(groupId) throws GROUP_ID_NOT_FOUND
        ({"member_epoch": -1, "group_id": "missing"}, Errors.GROUP_ID_NOT_FOUND),
        (
            {"member_epoch": -2, "group_id": "missing", "instance_id": "i"},
            Errors.GROUP_ID_NOT_FOUND,
        ),
        # throwIfConsumerGroupHeartbeatRequestIsInvalid: -2 needs a member id
        (
            {"member_epoch": -2, "member_id": "", "instance_id": "instance-a"},
            Errors.INVALID_REQUEST,
        ),
    ],
)
def test_static_member_checks(fields, error):
    h = harness()
    a = h.join(("foo",), instance_id="instance-a")
    fields.setdefault("member_id", a.member_id)
    assert h.call(**fields).error is error
    assert a.member_id in h.coordinator.consumer_groups[GROUP].members


def test_a_classic_member_heartbeating_with_the_consumer_protocol_drops_its_classic_metadata():
    # consumerGroupHeartbeat: .setClassicMemberMetadata(null)
    h = ConsumerHarness([FOO6])
    _, old_id, generation = stable_classic_group(h)
    h.join(("foo",))
    result = h.call(member_id=old_id, member_epoch=generation, subscribed_topic_names=("foo",))
    assert result.error is Errors.NONE
    member = h.coordinator.consumer_groups[GROUP].members[old_id]
    assert not member.uses_classic_protocol and member.classic_session_timeout_ms is None
    assert not h.reload().consumer_groups[GROUP].members[old_id].uses_classic_protocol


def test_a_failover_shows_the_assignor_the_members_ask_for():
    # ConsumerGroup.asDescribedGroup: preferredServerAssignor, else the default.
    h = harness()
    h.join(("foo",), server_assignor="range")
    assert h.coordinator.consumer_groups[GROUP].assignor_name == "range"
    assert h.reload().consumer_groups[GROUP].assignor_name == "range"


def test_a_failed_downgrade_puts_the_consumer_group_back():
    # Kafka writes the leave and convertToClassicGroup's records in one batch: a failed append
    # reverts both. Here the leave is written, the downgrade's batch fails.
    h = ConsumerHarness([FOO6])
    _, old_id, _ = stable_classic_group(h)
    joined = h.join(("foo",))
    h.hold_appends = True
    h.heartbeat(member_id=joined.member_id, member_epoch=-1)
    leave, downgrade = h.held
    h.held = []
    h.hold_appends = False
    h.take(h.coordinator.on_append_done(leave.write_id, Errors.NONE, 0, h.now_ms))
    h.appended.remove(downgrade)
    h.take(
        h.coordinator.on_append_done(downgrade.write_id, Errors.NOT_ENOUGH_REPLICAS, 0, h.now_ms)
    )
    group = h.coordinator.consumer_groups[GROUP]
    assert list(group.members) == [old_id]
    holder = h.coordinator.groups[GROUP]
    assert not holder.members and [o.value.offset for o in holder.offsets.values()] == [4]
    fresh = h.replayed()
    assert fresh.consumer_groups[GROUP].members == group.members
    assert not fresh.groups[GROUP].members
