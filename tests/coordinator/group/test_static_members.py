"""Static membership (KIP-345) in the classic group coordinator: Kafka's ``GroupCoordinatorTest``
static-member cases (each test names the one it mirrors) over the pure coordinator."""

from __future__ import annotations

import attrs

from pykraft.coordinator.group.effects import MemberLeaveResult
from pykraft.coordinator.group.offsets import load_groups
from pykraft.coordinator.group.records import (
    GroupMetadataValue,
    MemberRecord,
    decode_group_metadata_value,
    group_metadata_value,
)
from pykraft.coordinator.group.state import GroupState, Protocol
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.group.harness import (
    RANGE,
    REBALANCE_TIMEOUT_MS,
    ROUNDROBIN,
    SESSION_TIMEOUT_MS,
    TOPIC0,
    Harness,
)
from tests.coordinator.group.test_deletion import delete_offsets, replayed_log, subscription
from tests.coordinator.group.test_offsets import log_of

LEADER = "leader-instance"
FOLLOWER = "follower-instance"
# Kafka's protocolSuperset: both members support both, "range" is selected.
SUPERSET = (Protocol("range", b"range-metadata"), Protocol("roundrobin", b"rr-metadata"))


INITIAL_DELAY_MS = 100


def harness() -> Harness:
    """A coordinator whose first rebalance waits for both static members (Kafka's tests use
    ``GroupInitialRebalanceDelay`` the same way)."""
    return Harness(group_initial_rebalance_delay_ms=INITIAL_DELAY_MS)


@attrs.frozen
class Rebalanced:
    leader_id: str
    follower_id: str
    generation: int


def static_members_join_and_rebalance(
    h: Harness, session_timeout_ms: int = SESSION_TIMEOUT_MS
) -> Rebalanced:
    """Kafka's ``staticMembersJoinAndRebalance``: two static members joined and synced
    (leader gets "leader-assignment", follower "follower-assignment")."""
    leader_join = h.send_join(
        group_instance_id=LEADER, protocols=SUPERSET, session_timeout_ms=session_timeout_ms
    )
    follower_join = h.send_join(
        group_instance_id=FOLLOWER, protocols=SUPERSET, session_timeout_ms=session_timeout_ms
    )
    for _ in range(3):  # the initial delay waits again once per new member
        h.advance(INITIAL_DELAY_MS)
    leader, follower = h.join_result(leader_join), h.join_result(follower_join)
    assert leader.error is follower.error is Errors.NONE
    assert leader.leader_id == leader.member_id
    generation = leader.generation_id
    assignment = {
        leader.member_id: b"leader-assignment",
        follower.member_id: b"follower-assignment",
    }
    h.send_sync(leader.member_id, generation, assignment, group_instance_id=LEADER)
    h.send_sync(follower.member_id, generation, group_instance_id=FOLLOWER)
    h.complete_appends()
    assert h.group().state is GroupState.STABLE
    return Rebalanced(leader.member_id, follower.member_id, generation)


def test_static_member_joins_without_member_id_required() -> None:
    # staticMemberJoinAsFirstMember; doStaticNewMemberJoinGroup skips KIP-394's round trip
    h = Harness()
    joined = h.join_result(
        h.send_join(group_instance_id=LEADER, require_known_member_id=True, protocols=SUPERSET)
    )
    assert joined.error is Errors.NONE
    assert joined.member_id.startswith(f"{LEADER}-")
    assert [(m.member_id, m.group_instance_id) for m in joined.members] == [
        (joined.member_id, LEADER)
    ]
    assert h.group().static_members == {LEADER: joined.member_id}


def test_static_member_rejoin_with_explicit_unknown_member_id_is_fenced() -> None:
    # staticMemberReJoinWithExplicitUnknownMemberId
    h = Harness()
    assert h.join_result(h.send_join(group_instance_id=LEADER)).error is Errors.NONE
    rejoined = h.join_result(h.send_join("unknown_member", group_instance_id=LEADER))
    assert rejoined.error is Errors.FENCED_INSTANCE_ID


def test_follower_rejoin_with_unknown_member_id_gets_its_assignment_without_rebalance() -> None:
    # staticMemberRejoinAsFollowerWithUnknownMemberId
    h = harness()
    r = static_members_join_and_rebalance(h)
    request = h.send_join(group_instance_id=FOLLOWER, protocols=SUPERSET)
    assert h.result(request) is None  # answered once the group record is stored
    (append,) = h.pending_appends
    h.complete_appends()
    joined = h.join_result(request)
    assert joined.error is Errors.NONE and joined.member_id != r.follower_id
    assert (joined.generation_id, joined.leader_id) == (r.generation, r.leader_id)
    assert joined.members == ()
    assert h.group().state is GroupState.STABLE
    assert LEADER in h.group().static_members  # the leader is not timed out
    synced = h.sync_result(h.send_sync(joined.member_id, r.generation))
    assert (synced.error, synced.assignment) == (Errors.NONE, b"follower-assignment")
    # The stored record names the new member id with its instance id and assignment.
    (group,) = load_groups(log_of([append]), h.now_ms).groups
    assert group.static_members == {LEADER: r.leader_id, FOLLOWER: joined.member_id}
    assert group.members[joined.member_id].assignment == b"follower-assignment"


def test_old_member_id_is_fenced_after_replacement() -> None:
    # staticMemberRejoinWithUnknownMemberIdAndChangeOfProtocolWhileSelectProtocolUnchanged,
    # staticMemberCommitOffsetWithInvalidMemberId, staticMemberHeartbeatLeaderWithInvalidMemberId
    h = harness()
    r = static_members_join_and_rebalance(h)
    request = h.send_join(group_instance_id=FOLLOWER, protocols=RANGE)
    h.complete_appends()
    new_id = h.join_result(request).member_id
    old, gen = r.follower_id, r.generation
    fenced = Errors.FENCED_INSTANCE_ID
    assert h.join_result(h.send_join(old, group_instance_id=FOLLOWER)).error is fenced
    assert h.sync_result(h.send_sync(old, gen, group_instance_id=FOLLOWER)).error is fenced
    assert h.heartbeat(old, gen, group_instance_id=FOLLOWER) is fenced
    commit = h.commit({TOPIC0: 1}, member_id=old, generation_id=gen, group_instance_id=FOLLOWER)
    assert commit == {TOPIC0: fenced}
    txn = h.txn_commit({TOPIC0: 1}, member_id=old, generation_id=gen, group_instance_id=FOLLOWER)
    assert txn == {TOPIC0: fenced}
    assert h.leave((old, FOLLOWER)).members == (MemberLeaveResult(old, FOLLOWER, fenced),)
    # Without the instance id the old member id is merely unknown.
    assert h.heartbeat(old, gen) is Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(new_id, gen, group_instance_id=FOLLOWER) is Errors.NONE
    commit = h.commit({TOPIC0: 2}, member_id=new_id, generation_id=gen, group_instance_id=FOLLOWER)
    assert commit == {TOPIC0: Errors.NONE}
    assert h.group().state is GroupState.STABLE


def test_leader_rejoin_with_unknown_member_id_below_v9_names_the_old_leader() -> None:
    # staticMemberRejoinWithLeaderIdAndUnknownMemberId(supportSkippingAssignment = false)
    h = harness()
    r = static_members_join_and_rebalance(h)
    request = h.send_join(group_instance_id=LEADER, protocols=SUPERSET)
    h.complete_appends()
    joined = h.join_result(request)
    assert joined.error is Errors.NONE
    assert (joined.generation_id, joined.leader_id) == (r.generation, r.leader_id)
    assert joined.members == ()
    assert not joined.skip_assignment
    assert h.group().leader_id == joined.member_id and h.group().state is GroupState.STABLE
    old_sync = h.send_sync(r.leader_id, r.generation, group_instance_id=LEADER)
    assert h.sync_result(old_sync).error is Errors.FENCED_INSTANCE_ID
    assert h.sync_result(h.send_sync(r.leader_id, r.generation)).error is Errors.UNKNOWN_MEMBER_ID


def test_leader_rejoin_with_unknown_member_id_from_v9_skips_the_assignment() -> None:
    # staticMemberRejoinWithLeaderIdAndUnknownMemberId(supportSkippingAssignment = true), KIP-814
    h = harness()
    r = static_members_join_and_rebalance(h)
    request = h.send_join(
        group_instance_id=LEADER, protocols=SUPERSET, supports_skipping_assignment=True
    )
    h.complete_appends()
    joined = h.join_result(request)
    assert (joined.error, joined.generation_id) == (Errors.NONE, r.generation)
    assert joined.leader_id == joined.member_id and joined.skip_assignment
    assert {(m.member_id, m.group_instance_id) for m in joined.members} == {
        (joined.member_id, LEADER),
        (r.follower_id, FOLLOWER),
    }
    synced = h.sync_result(h.send_sync(joined.member_id, r.generation, group_instance_id=LEADER))
    assert (synced.error, synced.assignment) == (Errors.NONE, b"leader-assignment")


def test_leader_rejoin_with_known_member_id_rebalances() -> None:
    # staticMemberRejoinWithLeaderIdAndKnownMemberId: the follower times out meanwhile
    h = harness()
    r = static_members_join_and_rebalance(h, session_timeout_ms=REBALANCE_TIMEOUT_MS // 2)
    request = h.send_join(r.leader_id, group_instance_id=LEADER, protocols=SUPERSET)
    assert h.group().state is GroupState.PREPARING_REBALANCE
    h.advance(REBALANCE_TIMEOUT_MS + 1)
    joined = h.join_result(request)
    assert FOLLOWER not in h.group().static_members
    assert (joined.generation_id, joined.member_id, joined.leader_id) == (
        r.generation + 1,
        r.leader_id,
        r.leader_id,
    )
    assert [m.group_instance_id for m in joined.members] == [LEADER]
    assert h.group().state is GroupState.COMPLETING_REBALANCE


def test_rejoin_changing_the_selected_protocol_rebalances() -> None:
    # staticMemberRejoinWithUnknownMemberIdAndChangeOfProtocolWithSelectedProtocolChanged
    h = harness()
    r = static_members_join_and_rebalance(h)
    request = h.send_join(group_instance_id=FOLLOWER, protocols=ROUNDROBIN)
    assert not h.pending_appends and h.group().state is GroupState.PREPARING_REBALANCE
    h.advance(SESSION_TIMEOUT_MS + 1)  # the leader does not rejoin and times out
    joined = h.join_result(request)
    assert (joined.error, joined.generation_id) == (Errors.NONE, r.generation + 1)
    assert joined.protocol_name == "roundrobin" and joined.leader_id == joined.member_id
    assert joined.member_id != r.follower_id


def test_store_failure_undoes_the_replacement() -> None:
    # staticMemberRejoinWithUnknownMemberIdAndChangeOfProtocolWhileSelectProtocolUnchanged-
    # PersistenceFailure, staticMemberRejoinWithUpdatedSessionAndRebalanceTimeoutsButCannot-
    # PersistChange
    h = harness()
    r = static_members_join_and_rebalance(h)
    request = h.send_join(
        group_instance_id=FOLLOWER,
        protocols=RANGE,
        session_timeout_ms=2 * SESSION_TIMEOUT_MS,
        rebalance_timeout_ms=2 * REBALANCE_TIMEOUT_MS,
    )
    h.complete_appends(Errors.MESSAGE_TOO_LARGE)
    joined = h.join_result(request)
    assert (joined.error, joined.member_id) == (Errors.UNKNOWN_SERVER_ERROR, "")
    assert joined.generation_id == r.generation
    group = h.group()
    assert group.static_members[FOLLOWER] == r.follower_id
    follower = group.members[r.follower_id]
    assert (follower.protocols, follower.session_timeout_ms) == (SUPERSET, SESSION_TIMEOUT_MS)
    assert follower.rebalance_timeout_ms == REBALANCE_TIMEOUT_MS
    synced = h.send_sync(r.follower_id, r.generation, group_instance_id=FOLLOWER)
    assert h.sync_result(synced).error is Errors.NONE


def test_duplicate_rejoin_fences_the_parked_join_of_the_old_follower() -> None:
    # staticMemberFenceDuplicateRejoinedFollower
    h = harness()
    r = static_members_join_and_rebalance(h)
    h.send_join(protocols=SUPERSET)  # a third, dynamic member starts a rebalance
    assert h.group().state is GroupState.PREPARING_REBALANCE
    old = h.send_join(r.follower_id, group_instance_id=FOLLOWER, protocols=SUPERSET)
    assert h.result(old) is None
    duplicate = h.send_join(group_instance_id=FOLLOWER, protocols=SUPERSET)
    assert h.join_result(old).error is Errors.FENCED_INSTANCE_ID
    assert h.result(duplicate) is None  # waits for the rebalance like any member
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_duplicate_rejoin_fences_the_parked_sync_and_rebalances() -> None:
    # staticMemberFenceDuplicateSyncingFollowerAfterMemberIdChanged
    h = harness()
    r = static_members_join_and_rebalance(h)
    h.send_join(r.leader_id, group_instance_id=LEADER, protocols=SUPERSET)
    old = h.send_join(r.follower_id, group_instance_id=FOLLOWER, protocols=SUPERSET)
    assert h.join_result(old).generation_id == r.generation + 1
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    old_sync = h.send_sync(r.follower_id, r.generation + 1, group_instance_id=FOLLOWER)
    duplicate = h.send_join(group_instance_id=FOLLOWER, protocols=SUPERSET)
    assert h.sync_result(old_sync).error is Errors.FENCED_INSTANCE_ID
    assert h.group().state is GroupState.PREPARING_REBALANCE
    h.advance(REBALANCE_TIMEOUT_MS + 1)  # the leader does not rejoin: only the duplicate did
    joined = h.join_result(duplicate)
    assert (joined.error, joined.generation_id) == (Errors.NONE, r.generation + 2)
    assert joined.leader_id == joined.member_id
    assert h.group().state is GroupState.COMPLETING_REBALANCE


def test_mismatched_instance_and_member_ids() -> None:
    # staticMemberRejoinAsFollowerWithMismatchedMemberId, staticMemberRejoinAsLeaderWith-
    # MismatchedMemberId, staticMemberSyncAsLeaderWithInvalidMemberId,
    # staticMemberJoinWithUnknownInstanceIdAndKnownMemberId
    h = harness()
    r = static_members_join_and_rebalance(h)
    fenced = Errors.FENCED_INSTANCE_ID
    assert h.join_result(h.send_join(r.follower_id, group_instance_id=LEADER)).error is fenced
    assert h.join_result(h.send_join(r.leader_id, group_instance_id=FOLLOWER)).error is fenced
    assert h.sync_result(h.send_sync("invalid", r.generation, group_instance_id=LEADER)).error is (
        fenced
    )
    unknown = h.send_join(r.leader_id, group_instance_id="unknown_instance")
    assert h.join_result(unknown).error is Errors.UNKNOWN_MEMBER_ID


def test_each_rejoin_gets_a_new_member_id() -> None:
    # shouldGetDifferentStaticMemberIdAfterEachRejoin
    h = harness()
    r = static_members_join_and_rebalance(h)
    last = r.leader_id
    for _ in range(5):
        request = h.send_join(group_instance_id=LEADER, protocols=SUPERSET)
        h.complete_appends()
        member_id = h.join_result(request).member_id
        assert member_id.startswith(LEADER) and member_id != last
        last = member_id
    assert h.group().generation_id == r.generation


def test_static_member_that_does_not_rejoin_stays_until_its_session_expires() -> None:
    # groupStuckInRebalanceTimeoutDueToNonjoinedStaticMember, testStaticMemberFollowerFailTo-
    # RejoinBeforeRebalanceTimeout: onCompleteJoin removes only dynamic members
    h = harness()
    r = static_members_join_and_rebalance(h, session_timeout_ms=REBALANCE_TIMEOUT_MS * 2)
    newcomer = h.send_join(group_instance_id="new-member", protocols=SUPERSET)
    leader = h.send_join(r.leader_id, group_instance_id=LEADER, protocols=SUPERSET)
    h.advance(REBALANCE_TIMEOUT_MS + 1)
    joined = h.join_result(leader)
    # The follower did not rejoin but is still a member of the new generation.
    assert {m.group_instance_id for m in joined.members} == {LEADER, FOLLOWER, "new-member"}
    newcomer_id = h.join_result(newcomer).member_id
    assert h.join_result(newcomer).leader_id == r.leader_id
    generation = r.generation + 1
    assert h.group().generation_id == generation
    # Everyone syncs (the follower a little later), so no sync deadline removes anybody: only
    # the follower's session, counted from its SyncGroup, can.
    h.send_sync(r.leader_id, generation, group_instance_id=LEADER)
    h.send_sync(newcomer_id, generation, group_instance_id="new-member")
    h.complete_appends()
    assert h.group().state is GroupState.STABLE
    h.advance(1_000)
    follower_sync = h.send_sync(r.follower_id, generation, group_instance_id=FOLLOWER)
    assert h.sync_result(follower_sync).error is Errors.NONE
    session_deadline_ms = h.now_ms + REBALANCE_TIMEOUT_MS * 2
    alive = ((r.leader_id, LEADER), (newcomer_id, "new-member"))
    while h.now_ms < session_deadline_ms - 1:
        h.advance(min(SESSION_TIMEOUT_MS // 2, session_deadline_ms - 1 - h.now_ms))
        for member_id, instance_id in alive:
            assert h.heartbeat(member_id, generation, group_instance_id=instance_id) is Errors.NONE
    assert h.group().static_members[FOLLOWER] == r.follower_id  # 1 ms before its deadline
    h.advance(1)
    assert FOLLOWER not in h.group().static_members
    assert set(h.group().static_members) == {LEADER, "new-member"}
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_batch_leave_by_instance_id() -> None:
    # testStaticMembersValidBatchLeaveGroup, testStaticMembersFencedInstanceBatchLeaveGroup,
    # testStaticMembersUnknownInstanceBatchLeaveGroup (LeaveGroup v3+)
    h = harness()
    r = static_members_join_and_rebalance(h)
    result = h.leave(("", LEADER), ("invalid", FOLLOWER), ("", "unknown-instance"))
    assert result.error is Errors.NONE
    assert [m.error for m in result.members] == [
        Errors.NONE,
        Errors.FENCED_INSTANCE_ID,
        Errors.UNKNOWN_MEMBER_ID,
    ]
    assert h.group().static_members == {FOLLOWER: r.follower_id}
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.leave((r.follower_id, FOLLOWER)).members[0].error is Errors.NONE
    assert h.group().state is GroupState.EMPTY


def test_static_members_survive_a_reload() -> None:
    # GroupMetadataManagerTest.testLoadGroupWithStaticMember: group value v3 carries the
    # instance id, so a new coordinator still fences the old member id
    h = harness()
    r = static_members_join_and_rebalance(h)
    other = Harness(load=False, group_initial_rebalance_delay_ms=INITIAL_DELAY_MS)
    other.load(0, epoch=1, records=log_of(h.appended))
    group = other.group()
    assert group.state is GroupState.STABLE
    assert group.static_members == {LEADER: r.leader_id, FOLLOWER: r.follower_id}
    rejoin = other.send_join(group_instance_id=FOLLOWER, protocols=SUPERSET)
    other.complete_appends()
    joined = other.join_result(rejoin)
    assert (joined.error, joined.generation_id) == (Errors.NONE, r.generation)
    assert other.heartbeat(r.follower_id, r.generation, group_instance_id=FOLLOWER) is (
        Errors.FENCED_INSTANCE_ID
    )
    synced = other.send_sync(joined.member_id, r.generation, group_instance_id=FOLLOWER)
    assert other.sync_result(synced).assignment == b"follower-assignment"


def test_rejoin_with_a_new_subscription_protects_its_offsets_at_once() -> None:
    # A static rejoin stores the group with the member's new subscription and no new generation;
    # the live group must know the subscribed topics the stored record gives a reload
    # (GroupMetadata.loadGroup's computeSubscribedTopics), for expiry and OffsetDelete alike.
    retention_ms, interval_ms = 60_000, 1_000
    h = Harness(offsets_retention_ms=retention_ms, offsets_retention_check_interval_ms=interval_ms)
    foo, bar, baz = TopicPartition("foo", 0), TopicPartition("bar", 0), TopicPartition("baz", 0)
    first = h.join_result(
        h.send_join(group_instance_id=LEADER, protocols=(Protocol("range", subscription("foo")),))
    )
    generation = first.generation_id
    h.send_sync(first.member_id, generation, {first.member_id: b""}, group_instance_id=LEADER)
    h.complete_appends()
    h.commit(
        {foo: 1, bar: 2, baz: 3},
        member_id=first.member_id,
        generation_id=generation,
        group_instance_id=LEADER,
    )
    restarted = h.send_join(
        group_instance_id=LEADER, protocols=(Protocol("range", subscription("foo", "bar")),)
    )
    h.complete_appends()
    member_id = h.join_result(restarted).member_id
    assert h.group().generation_id == generation  # no rebalance
    assert h.group().subscribed_topics == frozenset({"foo", "bar"})
    # OffsetDelete refuses the newly subscribed topic at once.
    assert delete_offsets(h, bar)[1] == {bar: Errors.GROUP_SUBSCRIBED_TO_TOPIC}
    # Expiry spares it: only the unsubscribed topic's offset goes.
    for _ in range(2 * retention_ms // SESSION_TIMEOUT_MS):
        h.advance(SESSION_TIMEOUT_MS // 2)
        assert h.heartbeat(member_id, generation, group_instance_id=LEADER) is Errors.NONE
    fetched = h.fetch([foo, bar, baz])
    assert {tp: f.offset and f.offset.offset for tp, f in fetched.items()} == {
        foo: 1,
        bar: 2,
        baz: None,
    }
    reloaded = Harness(load=False)
    reloaded.load(0, epoch=1, records=replayed_log(h))
    assert reloaded.group().subscribed_topics == h.group().subscribed_topics


def test_group_value_v3_carries_the_instance_id() -> None:
    # GroupMetadataValue v3: member_id, then group_instance_id (nullable string), client_id
    member = MemberRecord(
        member_id="i-1-m1",
        group_instance_id="i-1",
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=30_000,
        session_timeout_ms=10_000,
        subscription=b"sub",
        assignment=b"asg",
    )
    value = GroupMetadataValue(
        protocol_type="consumer", generation=1, protocol="range", leader="i-1-m1", members=(member,)
    )
    data = group_metadata_value(value)
    member_id, instance_id = b"\x00\x06i-1-m1", b"\x00\x03i-1"
    assert member_id + instance_id + b"\x00\x01c" in data
    assert decode_group_metadata_value(data) == value
