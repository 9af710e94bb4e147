"""The group membership protocol, scenario by scenario from Kafka's ``GroupCoordinatorTest``
(the test names are Kafka's), on the pure coordinator with a simulated clock."""

from __future__ import annotations

from pykraft.coordinator.group.effects import HeartbeatResult, MemberLeaveResult
from pykraft.coordinator.group.rebalance import NEW_MEMBER_JOIN_TIMEOUT_MS
from pykraft.coordinator.group.records import group_metadata_key
from pykraft.coordinator.group.state import GroupState, Protocol
from pykraft.protocol.errors import Errors
from tests.coordinator.group.harness import (
    GROUP,
    RANGE,
    REBALANCE_TIMEOUT_MS,
    ROUNDROBIN,
    SESSION_TIMEOUT_MS,
    TOPIC0,
    Harness,
)

# ------------------------------------------------------------------ JoinGroup errors


def test_invalid_group_id() -> None:
    # testInvalidGroupId: JoinGroup needs a non-empty group id
    h = Harness()
    assert h.join_result(h.send_join(group_id="")).error is Errors.INVALID_GROUP_ID


def test_join_group_wrong_coordinator() -> None:
    # testJoinGroupWrongCoordinator: a partition not led here
    h = Harness(num_partitions=2, load=False)
    h.load(h.coordinator.partition_for("other") ^ 1, epoch=0)
    assert h.join_result(h.send_join(group_id="other")).error is Errors.NOT_COORDINATOR


def test_join_group_while_loading() -> None:
    h = Harness(load=False)
    h.take(h.coordinator.begin_loading(0, 3, h.now_ms)[1])
    assert h.join_result(h.send_join()).error is Errors.COORDINATOR_LOAD_IN_PROGRESS


def test_join_group_session_timeout_too_small_or_large() -> None:
    # testJoinGroupSessionTimeoutTooSmall / TooLarge
    h = Harness(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=60_000)
    small = h.send_join(session_timeout_ms=5999)
    large = h.send_join(session_timeout_ms=60_001)
    assert h.join_result(small).error is Errors.INVALID_SESSION_TIMEOUT
    assert h.join_result(large).error is Errors.INVALID_SESSION_TIMEOUT


def test_join_group_unknown_consumer_new_group() -> None:
    # testJoinGroupUnknownConsumerNewGroup: a member id for a group that does not exist
    h = Harness()
    assert h.join_result(h.send_join("someone")).error is Errors.UNKNOWN_MEMBER_ID
    assert GROUP not in h.coordinator.groups


def test_join_group_with_empty_protocol_type_or_protocols() -> None:
    # testJoinGroupWithEmptyProtocolType / testJoinGroupWithEmptyGroupProtocol
    h = Harness()
    assert h.join_result(h.send_join(protocol_type="")).error is (
        Errors.INCONSISTENT_GROUP_PROTOCOL
    )
    assert h.join_result(h.send_join(protocols=())).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert GROUP not in h.coordinator.groups  # nothing was left behind


def test_join_group_inconsistent_protocol() -> None:
    # testJoinGroupInconsistentProtocolType / testJoinGroupInconsistentGroupProtocol
    h = Harness()
    h.join_new_member(protocols=RANGE)
    other_type = h.send_join(protocol_type="connect")
    other_protocol = h.send_join(protocols=ROUNDROBIN)
    assert h.join_result(other_type).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.join_result(other_protocol).error is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_join_with_unknown_member_id_of_existing_group() -> None:
    # testJoinGroupUnknownConsumerExistingGroup
    h = Harness()
    h.stable_group_of_one()
    assert h.join_result(h.send_join("stranger")).error is Errors.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------------ join -> sync -> stable


def test_member_id_required_then_join_sync_stable() -> None:
    # testJoinGroupUnknownMemberIdV4 (KIP-394), testValidJoinGroup, testSyncGroupFollowerAfterLeader
    h = Harness()
    first = h.join_result(h.send_join(require_known_member_id=True))
    assert first.error is Errors.MEMBER_ID_REQUIRED
    assert first.member_id == "consumer-m1" and first.generation_id == -1
    assert h.group().pending_members == {"consumer-m1": h.now_ms + SESSION_TIMEOUT_MS}
    join = h.send_join(first.member_id, require_known_member_id=True)
    joined = h.join_result(join)  # one member, no initial delay: completes at once
    assert joined.error is Errors.NONE
    assert (joined.generation_id, joined.leader_id, joined.protocol_name) == (
        1,
        "consumer-m1",
        "range",
    )
    assert [(m.member_id, m.metadata) for m in joined.members] == [
        ("consumer-m1", b"range-metadata")
    ]
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    sync = h.send_sync(first.member_id, 1, {first.member_id: b"assignment"})
    assert h.result(sync) is None  # waits for the group record
    assert len(h.pending_appends) == 1
    h.complete_appends()
    result = h.sync_result(sync)
    assert (result.error, result.assignment, result.protocol_name) == (
        Errors.NONE,
        b"assignment",
        "range",
    )
    assert h.group().state is GroupState.STABLE
    assert h.heartbeat(first.member_id, 1) is Errors.NONE


def test_sync_group_leader_after_follower() -> None:
    # testSyncGroupLeaderAfterFollower: the follower's SyncGroup waits for the leader's
    h = Harness()
    leader, generation = h.stable_group_of_one()
    follower_join = h.send_join()  # v3-style join: the member id comes with the answer
    assert h.result(follower_join) is None
    leader_join = h.send_join(leader)
    follower = h.join_result(follower_join)
    assert follower.generation_id == generation + 1 and follower.members == ()
    assert len(h.join_result(leader_join).members) == 2
    follower_sync = h.send_sync(follower.member_id, follower.generation_id)
    assert h.result(follower_sync) is None
    leader_sync = h.send_sync(
        leader, follower.generation_id, {leader: b"L", follower.member_id: b"F"}
    )
    h.complete_appends()
    assert h.sync_result(follower_sync).assignment == b"F"
    assert h.sync_result(leader_sync).assignment == b"L"


def test_sync_group_empty_assignment_for_missing_members() -> None:
    # testSyncGroupEmptyAssignment: members the leader left out get an empty assignment
    h = Harness()
    leader, _ = h.stable_group_of_one()
    follower_join = h.send_join()
    h.send_join(leader)
    follower = h.join_result(follower_join)
    follower_sync = h.send_sync(follower.member_id, follower.generation_id)
    h.send_sync(leader, follower.generation_id, {leader: b"L"})
    h.complete_appends()
    assert h.sync_result(follower_sync).error is Errors.NONE
    assert h.sync_result(follower_sync).assignment == b""


def test_sync_group_errors() -> None:
    # testSyncGroupFromUnknownGroup / FromUnknownMember / FromIllegalGeneration, and KIP-559's
    # protocol type and name checks
    h = Harness()
    member, generation = h.stable_group_of_one()
    assert h.sync_result(h.send_sync(member, 1, group_id="nobody")).error is (
        Errors.UNKNOWN_MEMBER_ID
    )
    assert h.sync_result(h.send_sync("stranger", generation)).error is Errors.UNKNOWN_MEMBER_ID
    assert h.sync_result(h.send_sync(member, generation + 1)).error is Errors.ILLEGAL_GENERATION
    wrong_type = h.send_sync(member, generation, protocol_type="connect")
    wrong_name = h.send_sync(member, generation, protocol_name="roundrobin")
    assert h.sync_result(wrong_type).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync_result(wrong_name).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    stable = h.sync_result(h.send_sync(member, generation, protocol_name="range"))
    assert (stable.error, stable.assignment) == (Errors.NONE, b"all")


def test_sync_group_while_loading_asks_to_rejoin() -> None:
    h = Harness(load=False)
    h.take(h.coordinator.begin_loading(0, 1, h.now_ms)[1])
    assert h.sync_result(h.send_sync("m", 1)).error is Errors.REBALANCE_IN_PROGRESS
    assert h.heartbeat("m", 1) is Errors.NONE  # heartbeats are answered blindly


def test_failed_group_store_asks_members_to_rejoin() -> None:
    # GroupCoordinator.doSyncGroup: a storeGroup error resets the assignment and rebalances
    h = Harness()
    member = h.join_new_member()
    joined = h.join_result(h.last_join)
    sync = h.send_sync(member, joined.generation_id, {member: b"x"})
    h.complete_appends(Errors.NOT_LEADER_OR_FOLLOWER)
    assert h.sync_result(sync).error is Errors.NOT_COORDINATOR
    assert h.group().state is GroupState.PREPARING_REBALANCE


# ------------------------------------------------------------------ rebalances


def test_join_group_from_unchanged_follower_does_not_rebalance() -> None:
    # testJoinGroupFromUnchangedFollowerDoesNotRebalance
    h = Harness()
    leader, _ = h.stable_group_of_one()
    follower_join = h.send_join()
    h.send_join(leader)
    follower = h.join_result(follower_join)
    h.send_sync(follower.member_id, follower.generation_id)
    h.send_sync(leader, follower.generation_id, {leader: b"L", follower.member_id: b"F"})
    h.complete_appends()
    again = h.join_result(h.send_join(follower.member_id))
    assert again.error is Errors.NONE and again.generation_id == follower.generation_id
    assert again.members == () and h.group().state is GroupState.STABLE


def test_join_group_from_unchanged_leader_should_rebalance() -> None:
    # testJoinGroupFromUnchangedLeaderShouldRebalance
    h = Harness()
    leader, generation = h.stable_group_of_one()
    again = h.join_result(h.send_join(leader))  # the only member: completes at once
    assert again.generation_id == generation + 1
    assert h.group().state is GroupState.COMPLETING_REBALANCE


def test_changed_metadata_rebalances() -> None:
    h = Harness()
    member, generation = h.stable_group_of_one()
    changed = (Protocol("range", b"new-subscription"),)
    result = h.join_result(h.send_join(member, protocols=changed))
    assert result.generation_id == generation + 1
    assert result.members[0].metadata == b"new-subscription"


def test_second_member_joins_and_the_first_must_rejoin() -> None:
    # testHeartbeatDuringRebalanceCausesRebalanceInProgress
    h = Harness()
    first, generation = h.stable_group_of_one()
    second_join = h.send_join()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(first, generation) is Errors.REBALANCE_IN_PROGRESS
    h.send_join(first)
    second = h.join_result(second_join)
    assert second.generation_id == generation + 1 and second.leader_id == first


def test_rebalance_timeout_drops_members_that_did_not_rejoin() -> None:
    # testRebalanceCompletesBeforeMemberJoins-like: the join completes at the rebalance timeout
    h = Harness()
    first, _ = h.stable_group_of_one()
    second_join = h.send_join()
    for _ in range(REBALANCE_TIMEOUT_MS // 5000 - 1):
        h.advance(5000)
        # keeps the session (REBALANCE_IN_PROGRESS says rejoin), but is not a join
        assert h.heartbeat(first, 1) is Errors.REBALANCE_IN_PROGRESS
    h.advance(4999)
    assert h.result(second_join) is None
    h.advance(1)
    second = h.join_result(second_join)
    assert second.error is Errors.NONE and second.leader_id == second.member_id
    assert list(h.group().members) == [second.member_id]


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    # testDelayInitialRebalanceByGroupInitialRebalanceDelayOnEmptyGroup and
    # testDelayRebalanceUptoRebalanceTimeout (InitialDelayedJoin)
    h = Harness(group_initial_rebalance_delay_ms=3000)
    a = h.send_join(rebalance_timeout_ms=7000)
    h.advance(2999)
    assert h.result(a) is None
    b = h.send_join(rebalance_timeout_ms=7000)  # a new member: wait once more
    h.advance(1)
    assert h.result(a) is None
    h.advance(2999)
    c = h.send_join(rebalance_timeout_ms=7000)
    h.advance(1)  # 6 s: the remaining 1 s of the rebalance timeout
    assert h.result(a) is None
    h.advance(1000)
    results = [h.join_result(r) for r in (a, b, c)]
    assert {r.generation_id for r in results} == {1}
    assert sum(1 for r in results if r.members) == 1  # only the leader gets the members


def test_session_timeout_removes_the_member() -> None:
    # testSessionTimeout: the group goes through a rebalance to an empty generation
    h = Harness()
    member, generation = h.stable_group_of_one()
    h.advance(SESSION_TIMEOUT_MS - 1)
    assert h.heartbeat(member, generation) is Errors.NONE  # testHeartbeatMaintainsSession
    h.advance(SESSION_TIMEOUT_MS - 1)
    assert h.group().has(member)
    h.advance(1)
    group = h.group()
    assert not group.has(member)
    assert (group.state, group.generation_id) == (GroupState.EMPTY, generation + 1)
    # the empty generation is stored (onCompleteJoin): the last record holds no members
    assert h.appended[-1].records[0].key == group_metadata_key(GROUP)
    assert h.heartbeat(member, generation) is Errors.UNKNOWN_MEMBER_ID


def test_commit_maintains_session() -> None:
    # testCommitMaintainsSession
    h = Harness()
    member, generation = h.stable_group_of_one()
    h.advance(SESSION_TIMEOUT_MS - 1)
    errors = h.commit({TOPIC0: 5}, member_id=member, generation_id=generation)
    assert set(errors.values()) == {Errors.NONE}
    h.advance(SESSION_TIMEOUT_MS - 1)
    assert h.group().has(member)


def test_session_timeout_during_rebalance_spares_joined_members() -> None:
    # testSessionTimeoutDuringRebalance: a member waiting in JoinGroup does not expire
    h = Harness()
    first, _ = h.stable_group_of_one()
    h.send_join(first, rebalance_timeout_ms=60_000)  # leader rejoins with a longer timeout
    # the single member rejoined, so the rebalance completed at once; now add a second one
    second_join = h.send_join(rebalance_timeout_ms=60_000)
    h.send_join(first, rebalance_timeout_ms=60_000)
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    assert h.join_result(second_join).error is Errors.NONE
    h.advance(SESSION_TIMEOUT_MS + 1)  # nobody synced or heartbeated: both sessions end
    assert not h.group().members


def test_new_member_join_timeout() -> None:
    # testNewMemberTimeoutCompletion: a new member's JoinGroup is dropped after 5 minutes
    h = Harness()
    first, generation = h.stable_group_of_one()
    new_join = h.send_join(rebalance_timeout_ms=10 * 60_000)
    for _ in range(NEW_MEMBER_JOIN_TIMEOUT_MS // 5000):
        h.advance(5000)
        h.heartbeat(first, generation)  # the old member keeps its session
    dropped = h.join_result(new_join)
    assert (dropped.error, dropped.member_id) == (Errors.UNKNOWN_MEMBER_ID, "")
    assert list(h.group().members) == [first]


def test_pending_member_expires() -> None:
    # testPendingMemberJoinExpiration-like: an id from MEMBER_ID_REQUIRED is forgotten
    h = Harness()
    first = h.join_result(h.send_join(require_known_member_id=True))
    h.advance(SESSION_TIMEOUT_MS)
    assert GROUP not in h.coordinator.groups  # nothing else held the new group
    late = h.send_join(first.member_id, require_known_member_id=True)
    assert h.join_result(late).error is Errors.UNKNOWN_MEMBER_ID


def test_members_that_do_not_sync_are_removed() -> None:
    # testRebalanceTimesOutWhenSyncRequestIsNotReceived (DelayedSync)
    h = Harness()
    leader, _ = h.stable_group_of_one()
    # a session longer than the rebalance timeout: only the missing SyncGroup can remove it
    follower_join = h.send_join(session_timeout_ms=2 * REBALANCE_TIMEOUT_MS)
    h.send_join(leader)
    follower = h.join_result(follower_join)
    leader_sync = h.send_sync(leader, follower.generation_id, {leader: b"L"})
    h.complete_appends()
    assert h.sync_result(leader_sync).error is Errors.NONE
    for _ in range(REBALANCE_TIMEOUT_MS // 5000):
        assert h.group().has(follower.member_id)
        h.heartbeat(leader, follower.generation_id)
        h.advance(5000)
    assert not h.group().has(follower.member_id)
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_leader_failure_in_sync_group() -> None:
    # testLeaderFailureInSyncGroup: the leader's session ends before it syncs
    h = Harness()
    leader, _ = h.stable_group_of_one()
    follower_join = h.send_join()
    h.send_join(leader, session_timeout_ms=6000)
    follower = h.join_result(follower_join)
    follower_sync = h.send_sync(follower.member_id, follower.generation_id)
    h.advance(6000)  # the leader neither syncs nor heartbeats
    assert h.sync_result(follower_sync).error is Errors.REBALANCE_IN_PROGRESS
    assert not h.group().has(leader)


# ------------------------------------------------------------------ heartbeat and leave


def test_heartbeat_errors() -> None:
    # testHeartbeatUnknownGroup, testHeartbeatUnknownConsumerExistingGroup,
    # testHeartbeatIllegalGeneration, testHeartbeatWrongCoordinator
    h = Harness(num_partitions=2, load=False)
    h.load(h.coordinator.partition_for(GROUP), epoch=0)
    assert h.heartbeat("m", 1) is Errors.UNKNOWN_MEMBER_ID
    member, generation = h.stable_group_of_one()
    assert h.heartbeat("stranger", generation) is Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(member, generation + 1) is Errors.ILLEGAL_GENERATION
    other = "other-group"
    assert h.coordinator.partition_for(other) != h.coordinator.partition_for(GROUP)
    assert h.heartbeat(member, generation, group_id=other) is Errors.NOT_COORDINATOR


def test_valid_leave_group_and_errors() -> None:
    # testValidLeaveGroup, testLeaveGroupUnknownGroup, testLeaveGroupUnknownConsumerExistingGroup
    h = Harness()
    unknown = h.leave(("m", None), group_id="nobody")
    assert unknown.error is Errors.NONE
    assert unknown.members == (MemberLeaveResult("m", None, Errors.UNKNOWN_MEMBER_ID),)
    member, generation = h.stable_group_of_one()
    result = h.leave(("stranger", None), (member, None), ("", "instance-1"))
    assert [m.error for m in result.members] == [
        Errors.UNKNOWN_MEMBER_ID,
        Errors.NONE,
        Errors.UNKNOWN_MEMBER_ID,  # no static member holds instance-1
    ]
    group = h.group()
    assert (group.state, group.generation_id) == (GroupState.EMPTY, generation + 1)


def test_leave_completes_a_waiting_rebalance() -> None:
    h = Harness()
    leader, _ = h.stable_group_of_one()
    second_join = h.send_join()
    assert h.result(second_join) is None
    h.leave((leader, None))  # the only member not rejoined leaves: the join completes
    second = h.join_result(second_join)
    assert second.error is Errors.NONE and second.leader_id == second.member_id


def test_leave_of_a_pending_member() -> None:
    h = Harness()
    h.stable_group_of_one()
    pending = h.join_result(h.send_join(require_known_member_id=True)).member_id
    assert h.leave((pending, None)).members[0].error is Errors.NONE
    assert not h.group().pending_members


# ------------------------------------------------------------------ loading and unloading


def test_unload_answers_waiting_requests_not_coordinator() -> None:
    # onGroupUnloaded: parked JoinGroups and SyncGroups learn the coordinator moved
    h = Harness()
    leader, _ = h.stable_group_of_one()
    follower_join = h.send_join()
    h.take(h.coordinator.unload(0, h.now_ms))
    assert h.join_result(follower_join).error is Errors.NOT_COORDINATOR
    assert GROUP not in h.coordinator.groups
    assert h.heartbeat(leader, 1) is Errors.NOT_COORDINATOR


def test_every_request_gets_exactly_one_answer_when_a_join_is_resent() -> None:
    # A client that gave up on its JoinGroup sends another; Kafka drops the first callback,
    # but responses go out in request order here, so the first is answered at once.
    h = Harness()
    leader, _ = h.stable_group_of_one()
    follower_join = h.send_join()
    h.send_join(leader)
    follower = h.join_result(follower_join).member_id
    changed = (Protocol("range", b"changed"),)
    first = h.send_join(follower, protocols=changed)
    assert h.result(first) is None  # parked until the leader rejoins
    second = h.send_join(follower, protocols=changed)
    assert h.join_result(first).error is Errors.REBALANCE_IN_PROGRESS
    assert h.result(second) is None
    h.send_join(leader)
    assert h.join_result(second).error is Errors.NONE  # the harness checks single answers


def test_group_max_size() -> None:
    # testJoinGroupMaxSizeReached-like: the third member is refused
    h = Harness(group_max_size=2)
    leader, _ = h.stable_group_of_one()
    second = h.send_join()
    h.send_join(leader)
    assert h.join_result(second).error is Errors.NONE
    third = h.join_result(h.send_join())
    assert (third.error, third.member_id) == (Errors.GROUP_MAX_SIZE_REACHED, "")


def test_heartbeat_result_is_typed() -> None:
    h = Harness()
    request_id = h.new_request()
    effects = h.coordinator.handle_heartbeat(GROUP, "m", 0, request_id, h.now_ms)
    assert effects.result_for(request_id) == HeartbeatResult(Errors.UNKNOWN_MEMBER_ID)
