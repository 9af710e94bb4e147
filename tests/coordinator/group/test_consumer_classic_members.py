"""Classic members inside a consumer group (KIP-848's online upgrade): what they still own when
they rejoin, static membership through the classic APIs, and their join and sync timers,
mirroring ``GroupMetadataManagerTest``'s ``testClassicGroupJoinToConsumerGroup...``,
``testClassicGroupSyncToConsumerGroup...``, ``testClassicGroupHeartbeatToConsumerGroup...``,
``testClassicGroupLeaveToConsumerGroup...`` and ``testConsumerGroupJoinTimeout...``."""

from __future__ import annotations

import struct

from pykraft.coordinator.group.consumer_member import MemberState
from pykraft.coordinator.group.consumer_migration import decode_assignment
from pykraft.coordinator.group.consumer_protocol import owned_partitions, subscription_rack
from pykraft.coordinator.group.effects import JoinGroupResult
from pykraft.protocol.errors import Errors
from tests.coordinator.group.consumer_harness import GROUP, ConsumerHarness
from tests.coordinator.group.test_consumer_migration import (
    FOO,
    Classic,
    subscription,
)


def test_owned_partitions_and_rack_of_a_subscription():
    assert owned_partitions(subscription("foo", owned={"foo": [3, 1]})) == {
        "foo": frozenset({1, 3})
    }
    v0 = struct.pack(">hih", 0, 1, 3) + b"foo" + struct.pack(">i", -1)
    assert owned_partitions(v0) == {} and subscription_rack(v0) is None
    v3 = subscription("foo", owned={}) + struct.pack(">ih", 7, 2) + b"r1"
    v3 = struct.pack(">h", 3) + v3[2:]
    assert owned_partitions(v3) == {} and subscription_rack(v3) == "r1"
    assert owned_partitions(b"\x00\x01\x00") == {}  # unreadable: owns nothing


def classic_with_three(h: ConsumerHarness) -> tuple[Classic, str, int]:
    """A consumer member and a classic member splitting foo 3/3, both stable."""
    consumer = h.join(("foo",))
    classic = Classic(h)
    joined = classic.join()
    h.call(member_id=consumer.member_id, member_epoch=1, topic_partitions=consumer.assignment)
    kept = h.coordinator.consumer_groups[GROUP].members[consumer.member_id].assigned_partitions
    h.call(member_id=consumer.member_id, member_epoch=1, topic_partitions=kept)
    again = classic.join(joined.member_id)
    got = decode_assignment(classic.sync(joined.member_id, again.generation_id).assignment)
    assert got is not None and len(got["foo"]) == 3
    return classic, joined.member_id, again.generation_id


def test_a_cooperative_classic_member_keeps_what_it_owns_until_it_revokes():
    # classicGroupJoinToConsumerGroup reconciles with subscription.ownedPartitions().
    h = ConsumerHarness([FOO])
    classic, member_id, generation = classic_with_three(h)
    group = h.coordinator.consumer_groups[GROUP]
    mine = sorted(group.members[member_id].assigned_partitions[FOO.topic_id])
    newcomer = h.join(("foo",))
    assert classic.heartbeat(member_id, generation) is Errors.REBALANCE_IN_PROGRESS
    rejoined = classic.join(member_id, owned={"foo": mine})
    member = group.members[member_id]
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    revoking = member.partitions_pending_revocation[FOO.topic_id]
    # The newcomer does not get what the classic client still owns.
    got = h.call(member_id=newcomer.member_id, member_epoch=newcomer.member_epoch)
    assert not (set((got.assignment or {}).get(FOO.topic_id, ())) & revoking)
    kept = decode_assignment(classic.sync(member_id, rejoined.generation_id).assignment)
    assert kept is not None and set(kept["foo"]) == set(mine) - revoking
    # Having revoked, it rejoins owning the rest; the partition is free.
    assert classic.heartbeat(member_id, rejoined.generation_id) is Errors.REBALANCE_IN_PROGRESS
    classic.join(member_id, owned=kept)
    assert group.members[member_id].state is MemberState.STABLE
    assert all(group.partition_owners.get((FOO.topic_id, p)) != member_id for p in revoking)


def test_an_eager_classic_member_gives_up_at_once():
    h = ConsumerHarness([FOO])
    classic, member_id, _ = classic_with_three(h)
    h.join(("foo",))
    classic.join(member_id)  # no owned partitions: it revoked before rejoining
    assert h.coordinator.consumer_groups[GROUP].members[member_id].state is not (
        MemberState.UNREVOKED_PARTITIONS
    )


def test_a_static_classic_member_joins_without_member_id_required_and_replaces_itself():
    # requiresKnownMemberId is false with an instance id; getOrMaybeSubscribeStatic
    # ConsumerGroupMember(..., useClassicProtocol=true) replaces the old member at once.
    h = ConsumerHarness([FOO])
    h.join(("foo",))
    classic = Classic(h)
    first = classic.join(instance_id="i-1", require_known_member_id=True)
    assert first.error is Errors.NONE
    group = h.coordinator.consumer_groups[GROUP]
    assert group.members[first.member_id].instance_id == "i-1"
    assert classic.heartbeat("", first.generation_id) is Errors.UNKNOWN_MEMBER_ID
    epoch = group.group_epoch
    restarted = classic.join(instance_id="i-1", require_known_member_id=True)
    assert restarted.error is Errors.NONE and restarted.member_id != first.member_id
    assert first.member_id not in group.members and group.group_epoch == epoch
    # The old incarnation is fenced by its instance id.
    assert classic.heartbeat(first.member_id, 0, "i-1") is Errors.FENCED_INSTANCE_ID
    synced = classic.sync(first.member_id, 0, instance_id="i-1")
    assert synced.error is Errors.FENCED_INSTANCE_ID
    assert classic.heartbeat("x", 0, "i-2") is Errors.UNKNOWN_MEMBER_ID
    assert classic.join(first.member_id, instance_id="i-1").error is Errors.FENCED_INSTANCE_ID
    # Admin removal by instance id (an empty member id).
    left = classic.leave("", "i-1")
    assert left.members[0].error is Errors.NONE
    assert left.members[0].member_id == restarted.member_id
    assert restarted.member_id not in group.members
    assert h.reload().consumer_groups[GROUP].members.keys() == group.members.keys()


def test_a_dynamic_classic_member_still_needs_a_member_id():
    h = ConsumerHarness([FOO])
    h.join(("foo",))
    result = Classic(h).join(require_known_member_id=True)
    assert result.error is Errors.MEMBER_ID_REQUIRED and result.member_id


def test_upgrade_keeps_the_instance_id():
    # ConsumerGroup.fromClassicGroup sets the instance id and the subscription's rack.
    h = ConsumerHarness([FOO])
    classic = Classic(h)
    joined = classic.join(instance_id="i-1")
    from pykraft.coordinator.group.consumer_migration import encode_assignment

    assignment = encode_assignment({"foo": range(6)}, 1)
    classic.sync(joined.member_id, joined.generation_id, {joined.member_id: assignment})
    h.join(("foo",))
    member = h.coordinator.consumer_groups[GROUP].members[joined.member_id]
    assert member.instance_id == "i-1"


def test_leave_group_of_a_consumer_member_is_unknown_and_one_epoch_per_request():
    # classicGroupLeaveToConsumerGroup: throwIfMemberDoesNotUseClassicProtocol; one
    # ConsumerGroupMetadata record (epoch + 1) for the request.
    h = ConsumerHarness([FOO])
    consumer = h.join(("foo",))
    classic = Classic(h)
    a = classic.join()
    b = classic.join()
    group = h.coordinator.consumer_groups[GROUP]
    epoch = group.group_epoch
    result = classic.leave_many(
        [(consumer.member_id, None), (a.member_id, None), (b.member_id, None)]
    )
    assert [m.error for m in result.members] == [
        Errors.UNKNOWN_MEMBER_ID,
        Errors.NONE,
        Errors.NONE,
    ]
    assert group.group_epoch == epoch + 1 and list(group.members) == [consumer.member_id]


def test_sync_after_the_group_moved_on_is_rebalance_in_progress():
    # classicGroupSyncToConsumerGroup: throwIfRebalanceInProgress.
    h = ConsumerHarness([FOO])
    h.join(("foo",))
    classic = Classic(h)
    joined = classic.join()
    h.join(("foo",))  # the group epoch moves past the classic member's
    synced = classic.sync(joined.member_id, joined.generation_id)
    assert synced.error is Errors.REBALANCE_IN_PROGRESS


def test_a_classic_member_that_never_syncs_is_fenced_after_its_rebalance_timeout():
    # scheduleConsumerGroupSyncTimeout: the classic member must sync within 10 s.
    h = ConsumerHarness([FOO])
    h.join(("foo",))
    classic = Classic(h)
    joined = classic.join(session_timeout_ms=30_000)
    group = h.coordinator.consumer_groups[GROUP]
    for _ in range(3):
        h.advance(3_000)
        assert classic.heartbeat(joined.member_id, joined.generation_id) is Errors.NONE
    h.advance(1_001)
    assert joined.member_id not in group.members


def test_a_classic_member_that_heartbeats_but_never_rejoins_is_fenced():
    # scheduleConsumerGroupJoinTimeoutIfAbsent on REBALANCE_IN_PROGRESS.
    h = ConsumerHarness([FOO])
    classic, member_id, generation = classic_with_three(h)
    h.join(("foo",))
    group = h.coordinator.consumer_groups[GROUP]
    assert classic.heartbeat(member_id, generation) is Errors.REBALANCE_IN_PROGRESS
    for _ in range(3):
        h.advance(3_000)
        assert classic.heartbeat(member_id, generation) is Errors.REBALANCE_IN_PROGRESS
    h.advance(1_001)
    assert member_id not in group.members


def test_a_failed_classic_join_is_reverted():
    h = ConsumerHarness([FOO])
    h.join(("foo",))
    group = h.coordinator.consumer_groups[GROUP]
    members, epoch = set(group.members), group.group_epoch
    h.hold_appends = True
    classic = Classic(h)
    rid = classic.ids + 1
    from pykraft.coordinator.group.coordinator import JoinGroupRequest
    from pykraft.coordinator.group.state import Protocol

    request = JoinGroupRequest(
        group_id=GROUP,
        member_id="",
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=10_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=(Protocol("range", subscription("foo")),),
        require_known_member_id=False,
    )
    h.take(h.coordinator.handle_join_group(request, rid, h.now_ms))
    h.release(Errors.NOT_ENOUGH_REPLICAS)
    answer = h.answers[rid]
    assert isinstance(answer, JoinGroupResult)
    assert answer.error is Errors.COORDINATOR_NOT_AVAILABLE
    group = h.coordinator.consumer_groups[GROUP]
    assert set(group.members) == members and group.group_epoch == epoch
