"""The consumer group heartbeat (KIP-848) end to end through ``UnifiedGroupCoordinator``,
mirroring ``GroupMetadataManagerTest``'s consumer group cases
(testConsumerGroupMemberEpochValidation, testMemberJoinsEmptyConsumerGroup,
testUpdatingSubscriptionTriggersNewTargetAssignment,
testNewJoiningMemberTriggersNewTargetAssignment, testLeavingMemberBumpsGroupEpoch,
testReconciliationProcess, testSessionTimeoutExpiration, testRebalanceTimeoutExpiration) and
``ConsumerGroupHeartbeatRequestTest``'s request validation."""

from __future__ import annotations

import pytest

from pykraft.coordinator.group.consumer_group import ConsumerGroupState
from pykraft.coordinator.group.coordinator import JoinGroupRequest
from pykraft.coordinator.group.effects import (
    JoinGroupResult,
    OffsetCommitResult,
    TransactionalProducer,
)
from pykraft.coordinator.group.offsets import LogRecord, OffsetsReplay
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.state import Protocol
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.group.consumer_harness import GROUP, ConsumerHarness, topic

FOO = topic("foo", 6)
BAR = topic("bar", 3)


def harness(**config) -> ConsumerHarness:
    return ConsumerHarness([FOO, BAR], **config)


def ps(h: ConsumerHarness, name: str, *partitions: int) -> dict[str, frozenset[int]]:
    return {h.topic_id(name): frozenset(partitions)}


def test_first_member_gets_every_partition_at_epoch_one():
    h = harness()
    joined = h.join(("foo",))
    assert joined.error is Errors.NONE
    assert joined.member_id == "member-1"
    assert joined.member_epoch == 1
    assert joined.heartbeat_interval_ms == 5000
    assert joined.assignment == ps(h, "foo", 0, 1, 2, 3, 4, 5)
    group = h.coordinator.consumer_groups[GROUP]
    assert (group.group_epoch, group.assignment_epoch, group.state) == (
        1,
        1,
        ConsumerGroupState.STABLE,
    )


def test_client_chosen_member_id_is_kept():
    h = harness()
    assert h.join(("foo",), member_id="my-uuid").member_id == "my-uuid"


def test_second_member_waits_for_revocation_then_gets_its_half():
    # testReconciliationProcess: revoke before assign, partitions move only once released.
    h = harness()
    a = h.join(("foo",))
    b = h.join(("foo",))
    assert b.member_epoch == 2 and b.assignment == {}  # all six still owned by A
    assert h.coordinator.consumer_groups[GROUP].state is ConsumerGroupState.RECONCILING
    # A learns it must give three up: it keeps epoch 1 and the three it retains.
    revoke = h.call(member_id=a.member_id, member_epoch=1)
    assert revoke.member_epoch == 1
    assert revoke.assignment is not None
    kept = dict(revoke.assignment)[h.topic_id("foo")]
    assert len(kept) == 3
    # B heartbeats again: nothing released yet.
    assert h.call(member_id=b.member_id, member_epoch=2).assignment is None
    # A acknowledges: it owns only what it kept; it moves to epoch 2.
    acked = h.call(
        member_id=a.member_id, member_epoch=1, topic_partitions={h.topic_id("foo"): kept}
    )
    assert acked.member_epoch == 2 and acked.assignment is None
    got = h.call(member_id=b.member_id, member_epoch=2)
    assert got.assignment == {h.topic_id("foo"): frozenset(range(6)) - kept}
    assert h.coordinator.consumer_groups[GROUP].state is ConsumerGroupState.STABLE


def test_partitions_that_do_not_move_are_never_revoked():
    h = harness()
    a = h.join(("foo",))
    kept_by_a = h.call(member_id=a.member_id, member_epoch=1, topic_partitions=a.assignment)
    assert kept_by_a.assignment is None
    b = h.join(("foo",))
    revoke = h.call(member_id=a.member_id, member_epoch=1, topic_partitions=a.assignment)
    assert revoke.assignment is not None and a.assignment is not None
    # what A keeps is a subset of what it had: nothing it keeps is revoked and re-assigned
    assert revoke.assignment[h.topic_id("foo")] < a.assignment[h.topic_id("foo")]
    assert b.member_epoch == 2


def test_subscription_change_bumps_the_group_epoch():
    # testUpdatingSubscriptionTriggersNewTargetAssignment
    h = harness()
    a = h.join(("foo",))
    changed = h.call(member_id=a.member_id, member_epoch=1, subscribed_topic_names=("foo", "bar"))
    assert changed.member_epoch == 2
    assert changed.assignment == {**ps(h, "foo", *range(6)), **ps(h, "bar", 0, 1, 2)}


def test_regex_subscription_picks_up_a_topic_created_later():
    h = harness()
    a = h.join(subscribed_topic_regex="^topic-.*")
    assert a.assignment == {} and a.member_epoch == 1
    created = topic("topic-new", 2)
    h.set_topics([FOO, BAR, created])
    later = h.call(member_id=a.member_id, member_epoch=1)
    assert later.member_epoch == 2
    assert later.assignment == {created.topic_id: frozenset({0, 1})}


def test_leaving_member_bumps_the_group_epoch_and_frees_its_partitions():
    # testLeavingMemberBumpsGroupEpoch
    h = harness()
    a = h.join(("foo",))
    b = h.join(("foo",))
    left = h.call(member_id=a.member_id, member_epoch=-1)
    assert (left.error, left.member_epoch, left.member_id) == (Errors.NONE, -1, a.member_id)
    group = h.coordinator.consumer_groups[GROUP]
    assert group.group_epoch == 3 and a.member_id not in group.members
    assert h.call(member_id=b.member_id, member_epoch=2).assignment == ps(h, "foo", *range(6))


def test_session_timeout_fences_a_silent_member():
    # testSessionTimeoutExpiration
    h = harness()
    a = h.join(("foo",))
    b = h.join(("foo",))
    h.advance(44_000)
    h.call(member_id=b.member_id, member_epoch=2)
    h.advance(2_000)
    assert a.member_id not in h.coordinator.consumer_groups[GROUP].members
    assert h.coordinator.consumer_groups[GROUP].group_epoch == 3
    assert h.call(member_id=a.member_id, member_epoch=1).error is Errors.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    # testRebalanceTimeoutExpiration
    h = harness()
    a = h.join(("foo",), rebalance_timeout_ms=12_000)
    h.join(("foo",))
    assert h.call(member_id=a.member_id, member_epoch=1).member_epoch == 1  # must revoke
    h.advance(11_000)
    h.call(member_id=a.member_id, member_epoch=1)  # still owns them: the timer keeps running
    h.advance(1_500)
    assert a.member_id not in h.coordinator.consumer_groups[GROUP].members


def test_the_answer_waits_for_the_records():
    h = harness()
    h.hold_appends = True
    request_id = h.heartbeat(member_epoch=0, subscribed_topic_names=("foo",))
    assert request_id not in h.answers
    h.release()
    assert h.answer(request_id).member_epoch == 1


def test_a_failed_write_is_the_clients_error():
    h = harness()
    h.hold_appends = True
    request_id = h.heartbeat(member_epoch=0, subscribed_topic_names=("foo",))
    h.release(Errors.NOT_LEADER_OR_FOLLOWER)
    assert h.answer(request_id).error is Errors.NOT_COORDINATOR
    # Kafka reverts its timeline to the last written offset: the member that was never
    # written is gone, and the group is what a reload of the log finds.
    assert GROUP not in h.coordinator.consumer_groups
    assert h.coordinator.consumer.next_deadline_ms() is None


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"group_id": "", "member_epoch": 0}, Errors.INVALID_REQUEST, "GroupId can't be empty."),
        ({"member_epoch": 5}, Errors.INVALID_REQUEST, "MemberId can't be empty."),
        ({"member_epoch": -1}, Errors.INVALID_REQUEST, "MemberId can't be empty."),
        (
            {"member_epoch": 0, "rebalance_timeout_ms": -1, "subscribed_topic_names": ("foo",)},
            Errors.INVALID_REQUEST,
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            {"member_epoch": 0},
            Errors.INVALID_REQUEST,
            "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
        ),
        (
            {
                "member_epoch": 0,
                "subscribed_topic_names": ("foo",),
                "topic_partitions": {"x": frozenset({1})},
            },
            Errors.INVALID_REQUEST,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            {"member_epoch": -2, "member_id": "m"},
            Errors.INVALID_REQUEST,
            "InstanceId can't be null.",
        ),
        (
            {"member_epoch": -3, "member_id": "m"},
            Errors.INVALID_REQUEST,
            "MemberEpoch is -3, but must be greater than or equal to -2.",
        ),
        (
            {"member_epoch": 0, "subscribed_topic_names": ("foo",), "rack_id": ""},
            Errors.INVALID_REQUEST,
            "RackId can't be empty.",
        ),
        (
            {"member_epoch": 0, "subscribed_topic_regex": "topic-("},
            Errors.INVALID_REGULAR_EXPRESSION,
            "SubscribedTopicRegex `topic-(` is not a valid regular expression.",
        ),
        (
            {"member_epoch": 0, "subscribed_topic_names": ("foo",), "server_assignor": "sticky"},
            Errors.UNSUPPORTED_ASSIGNOR,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
        ),
    ],
)
def test_invalid_requests(fields, error, message):
    # ConsumerGroupHeartbeatRequestTest / testConsumerHeartbeatRequestValidation
    h = harness()
    result = h.call(**fields)
    assert (result.error, result.error_message) == (error, message)
    assert GROUP not in h.coordinator.consumer_groups


def test_member_epoch_validation():
    # testConsumerGroupMemberEpochValidation
    h = harness()
    a = h.join(("foo",))
    assert h.call(member_id="nobody", member_epoch=1).error is Errors.UNKNOWN_MEMBER_ID
    assert h.call(member_id=a.member_id, member_epoch=2).error is Errors.FENCED_MEMBER_EPOCH
    h.join(("foo",))
    h.call(member_id=a.member_id, member_epoch=1, topic_partitions=a.assignment)
    acked = h.coordinator.consumer_groups[GROUP].members[a.member_id]
    kept = acked.assigned_partitions
    moved = h.call(member_id=a.member_id, member_epoch=1, topic_partitions=kept)
    assert moved.member_epoch == 2
    # The response with epoch 2 was lost: epoch 1 with a subset of its partitions is accepted...
    again = h.call(member_id=a.member_id, member_epoch=1, topic_partitions=kept)
    assert again.error is Errors.NONE and again.member_epoch == 2
    # ... but not with partitions it does not own.
    stale = h.call(member_id=a.member_id, member_epoch=1, topic_partitions=a.assignment)
    assert stale.error is Errors.FENCED_MEMBER_EPOCH


def test_unknown_group_is_group_id_not_found():
    h = harness()
    result = h.call(member_id="m", member_epoch=3)
    assert result.error is Errors.GROUP_ID_NOT_FOUND


def test_group_max_size():
    h = harness(max_size=1)
    h.join(("foo",))
    result = h.join(("foo",))
    assert result.error is Errors.GROUP_MAX_SIZE_REACHED
    assert (
        result.error_message == "The consumer group has reached its maximum capacity of 1 members."
    )


def test_static_member_leaves_and_rejoins_without_a_new_group_epoch():
    h = harness()
    a = h.join(("foo",), instance_id="instance-a")
    b = h.join(("foo",), instance_id="instance-b")
    assert h.join(("foo",), instance_id="instance-a").error is Errors.UNRELEASED_INSTANCE_ID
    h.call(member_id=a.member_id, member_epoch=1, topic_partitions=a.assignment)
    a_now = h.coordinator.consumer_groups[GROUP].members[a.member_id]
    h.call(member_id=a.member_id, member_epoch=1, topic_partitions=a_now.assigned_partitions)
    h.call(member_id=b.member_id, member_epoch=2)
    owned = h.coordinator.consumer_groups[GROUP].members[a.member_id].assigned_partitions
    epoch = h.coordinator.consumer_groups[GROUP].group_epoch
    left = h.call(member_id=a.member_id, member_epoch=-2, instance_id="instance-a")
    assert left.member_epoch == -2
    back = h.join(("foo",), instance_id="instance-a")
    assert back.error is Errors.NONE and back.member_id != a.member_id
    assert back.assignment == dict(owned)
    assert h.coordinator.consumer_groups[GROUP].group_epoch == epoch


def test_classic_group_with_members_owns_the_id():
    h = harness()
    join = JoinGroupRequest(
        group_id=GROUP,
        member_id="",
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=10_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=(Protocol("range", b""),),
        require_known_member_id=False,
    )
    h.take(h.coordinator.handle_join_group(join, 999, h.now_ms))
    result = h.join(("foo",))
    assert result.error is Errors.GROUP_ID_NOT_FOUND
    assert result.error_message == f"Group {GROUP} is not a consumer group."


def test_classic_join_to_a_consumer_group_is_inconsistent():
    h = harness()
    h.join(("foo",))
    join = JoinGroupRequest(
        group_id=GROUP,
        member_id="",
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=10_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=(Protocol("range", b""),),
        require_known_member_id=False,
    )
    h.take(h.coordinator.handle_join_group(join, 999, h.now_ms))
    result = h.answers[999]
    assert isinstance(result, JoinGroupResult)
    assert result.error is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_offset_commit_checks_member_and_epoch():
    h = harness()
    a = h.join(("foo",))
    offsets = {TopicPartition("foo", 0): OffsetAndMetadata(offset=7, commit_timestamp_ms=h.now_ms)}

    def commit(member_id: str, epoch: int, request_id: int, version: int = 9) -> OffsetCommitResult:
        effects = h.coordinator.handle_commit_offsets(
            group_id=GROUP,
            member_id=member_id,
            generation_id=epoch,
            offsets=offsets,
            request_id=request_id,
            now_ms=h.now_ms,
            api_version=version,
        )
        h.take(effects)
        result = h.answers[request_id]
        assert isinstance(result, OffsetCommitResult)
        return result

    assert set(commit(a.member_id, 0, 501).errors.values()) == {Errors.STALE_MEMBER_EPOCH}
    assert set(commit("other", 1, 502).errors.values()) == {Errors.UNKNOWN_MEMBER_ID}
    assert set(commit("", -1, 503).errors.values()) == {Errors.UNKNOWN_MEMBER_ID}
    # ConsumerGroup.validateOffsetCommit: a consumer-protocol member needs OffsetCommit v9+.
    assert set(commit(a.member_id, 1, 505, 8).errors.values()) == {Errors.UNSUPPORTED_VERSION}
    assert set(commit(a.member_id, 1, 504).errors.values()) == {Errors.NONE}
    error, fetched = h.coordinator.fetch_offsets(GROUP, None)
    assert error is Errors.NONE and [f.offset.offset for f in fetched if f.offset] == [7]


def test_list_and_describe_groups_show_the_consumer_group():
    h = harness()
    h.join(("foo",))
    error, overviews = h.coordinator.list_groups(frozenset())
    assert error is Errors.NONE
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in overviews] == [
        (GROUP, "consumer", "Stable", "consumer")
    ]
    assert h.coordinator.list_groups(frozenset({"empty"}))[1] == []
    assert h.coordinator.describe_group(GROUP) == (
        Errors.NONE,
        h.coordinator.describe_group("x")[1],
    )
    error, group = h.coordinator.describe_consumer_group(GROUP)
    assert error is Errors.NONE and group is not None and group.assignor_name == "uniform"
    assert h.coordinator.describe_consumer_group("none")[0] is Errors.GROUP_ID_NOT_FOUND


def test_the_group_survives_a_coordinator_failover():
    h = harness()
    a = h.join(("foo",))
    b = h.join(("foo",))
    revoke = h.call(member_id=a.member_id, member_epoch=1, topic_partitions=a.assignment)
    before = h.coordinator.consumer_groups[GROUP]
    snapshot = (
        before.group_epoch,
        before.assignment_epoch,
        dict(before.target_assignment),
        {
            m: (x.member_epoch, x.state, x.assigned_partitions, x.partitions_pending_revocation)
            for m, x in before.members.items()
        },
        dict(before.subscription_metadata),
    )
    after = h.reload().consumer_groups[GROUP]
    assert snapshot == (
        after.group_epoch,
        after.assignment_epoch,
        dict(after.target_assignment),
        {
            m: (x.member_epoch, x.state, x.assigned_partitions, x.partitions_pending_revocation)
            for m, x in after.members.items()
        },
        dict(after.subscription_metadata),
    )
    # Reconciliation goes on where it was.
    assert revoke.assignment is not None
    acked = h.call(member_id=a.member_id, member_epoch=1, topic_partitions=revoke.assignment)
    assert acked.member_epoch == 2
    assert h.call(member_id=b.member_id, member_epoch=2).assignment
    # A member that left stays gone after another reload.
    h.call(member_id=b.member_id, member_epoch=-1)
    assert list(h.reload().consumer_groups[GROUP].members) == [a.member_id]


def commit_offsets(h: ConsumerHarness, member_id: str, epoch: int, *topics: str) -> None:
    offsets = {
        TopicPartition(name, 0): OffsetAndMetadata(offset=3, commit_timestamp_ms=h.now_ms)
        for name in topics
    }
    h.take(
        h.coordinator.handle_commit_offsets(
            group_id=GROUP,
            member_id=member_id,
            generation_id=epoch,
            offsets=offsets,
            request_id=900,
            now_ms=h.now_ms,
        )
    )


def test_delete_groups_refuses_a_consumer_group_with_members_and_deletes_an_empty_one():
    # GroupMetadataManagerTest.testConsumerGroupDelete / deleteGroups' NON_EMPTY_GROUP
    h = harness()
    a = h.join(("foo",))
    commit_offsets(h, a.member_id, 1, "foo")
    results, effects = h.coordinator.handle_delete_groups([GROUP, "nobody"], h.now_ms)
    assert results == {GROUP: Errors.NON_EMPTY_GROUP, "nobody": Errors.GROUP_ID_NOT_FOUND}
    h.call(member_id=a.member_id, member_epoch=-1)
    results, effects = h.coordinator.handle_delete_groups([GROUP], h.now_ms)
    assert results == {GROUP: Errors.NONE}
    h.take(effects)
    assert GROUP not in h.coordinator.consumer_groups
    assert h.coordinator.fetch_offsets(GROUP, None)[1] == []
    # Gone after a failover too: its tombstones are replayed.
    reloaded = h.reload()
    assert GROUP not in reloaded.consumer_groups and GROUP not in reloaded.groups


def test_offset_delete_keeps_the_subscribed_topics_offsets():
    # OffsetMetadataManagerTest.testDeleteOffsetsWithSubscribedTopics (GROUP_SUBSCRIBED_TO_TOPIC)
    h = harness()
    a = h.join(("foo",))
    commit_offsets(h, a.member_id, 1, "foo", "bar")
    error, errors, effects = h.coordinator.handle_delete_offsets(
        GROUP, [TopicPartition("foo", 0), TopicPartition("bar", 0)], h.now_ms
    )
    h.take(effects)
    assert error is Errors.NONE
    assert errors == {
        TopicPartition("foo", 0): Errors.GROUP_SUBSCRIBED_TO_TOPIC,
        TopicPartition("bar", 0): Errors.NONE,
    }
    fetched = h.coordinator.fetch_offsets(GROUP, None)[1]
    assert [f.topic_partition for f in fetched if f.offset] == [TopicPartition("foo", 0)]


def classic_join(h: ConsumerHarness, request_id: int, member_id: str = "") -> JoinGroupResult:
    join = JoinGroupRequest(
        group_id=GROUP,
        member_id=member_id,
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=10_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=(Protocol("range", b""),),
        require_known_member_id=False,
    )
    h.take(h.coordinator.handle_join_group(join, request_id, h.now_ms))
    result = h.answers[request_id]
    assert isinstance(result, JoinGroupResult)
    return result


def test_a_classic_group_whose_members_restart_with_the_consumer_protocol_keeps_its_offsets():
    """The conversion pykraft does: once the classic members have left (the group is an empty
    classic group holding offsets, Kafka's ``isSimpleGroup``), consumer members take the id over
    and resume from its offsets; and back again once the consumer group is empty."""
    h = harness()
    joined = classic_join(h, 801)
    assert joined.error is Errors.NONE
    h.take(
        h.coordinator.handle_sync_group(
            group_id=GROUP,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments={joined.member_id: b""},
            request_id=802,
            now_ms=h.now_ms,
        )
    )
    commit_offsets(h, joined.member_id, joined.generation_id, "foo")
    # A consumer member while the classic member is still there: not a consumer group.
    assert h.join(("foo",)).error is Errors.GROUP_ID_NOT_FOUND
    h.take(h.coordinator.handle_leave_group(GROUP, [(joined.member_id, None)], 803, h.now_ms))
    member = h.join(("foo",))
    assert member.error is Errors.NONE and member.assignment == ps(h, "foo", *range(6))
    fetched = h.coordinator.fetch_offsets(GROUP, None)[1]
    assert [(f.topic_partition, f.offset.offset) for f in fetched if f.offset] == [
        (TopicPartition("foo", 0), 3)
    ]
    # Back to classic once the consumer group is empty: its records are tombstoned.
    h.call(member_id=member.member_id, member_epoch=-1)
    assert classic_join(h, 804).error is Errors.NONE
    assert GROUP not in h.coordinator.consumer_groups
    assert [f.offset.offset for f in h.coordinator.fetch_offsets(GROUP, None)[1] if f.offset] == [3]
    assert GROUP not in h.reload().consumer_groups


def test_txn_offset_commit_checks_member_and_epoch_then_waits_for_the_marker():
    h = harness()
    a = h.join(("foo",))
    offsets = {TopicPartition("foo", 0): OffsetAndMetadata(offset=9, commit_timestamp_ms=h.now_ms)}

    def commit(epoch: int, request_id: int) -> OffsetCommitResult:
        h.take(
            h.coordinator.handle_txn_commit_offsets(
                group_id=GROUP,
                producer=TransactionalProducer(7, 0),
                member_id=a.member_id,
                generation_id=epoch,
                group_instance_id=None,
                offsets=offsets,
                request_id=request_id,
                now_ms=h.now_ms,
            )
        )
        result = h.answers[request_id]
        assert isinstance(result, OffsetCommitResult)
        return result

    assert set(commit(5, 601).errors.values()) == {Errors.STALE_MEMBER_EPOCH}
    assert set(commit(1, 602).errors.values()) == {Errors.NONE}
    assert [f.offset for f in h.coordinator.fetch_offsets(GROUP, None)[1]] == []
    h.coordinator.complete_transaction(0, 7, commit=True)
    fetched = h.coordinator.fetch_offsets(GROUP, None)[1]
    assert [f.offset.offset for f in fetched if f.offset] == [9]


def test_a_stale_load_installs_no_consumer_group():
    h = harness()
    h.join(("foo",))
    appended = list(h.appended)
    fresh = h.reload()
    # Leadership moves on (epoch 1) while an epoch-0 load is still replaying.
    fresh.unload(0, h.now_ms)
    fresh.begin_loading(0, 1, h.now_ms)
    replay = OffsetsReplay()
    for offset, append in enumerate(appended):
        replay.replay(LogRecord(offset, r.key, r.value) for r in append.records)
    fresh.complete_loading(0, 0, replay.loaded(h.now_ms), h.now_ms)
    assert GROUP not in fresh.consumer_groups
