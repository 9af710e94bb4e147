"""Offset commits and fetches, describing and listing groups, and loading a coordinator from
the records it wrote — Kafka's ``GroupCoordinatorTest`` / ``GroupMetadataManagerTest`` cases."""

from __future__ import annotations

from pykraft.coordinator.group.effects import Append, OffsetCommitResult
from pykraft.coordinator.group.offsets import LogRecord, load_groups
from pykraft.coordinator.group.records import (
    GroupMetadataValue,
    MemberRecord,
    OffsetAndMetadata,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
)
from pykraft.coordinator.group.state import GroupState
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.group.harness import GROUP, SESSION_TIMEOUT_MS, TOPIC0, TOPIC1, Harness


def fetched(
    h: Harness, partitions: list[TopicPartition] | None = None, group_id: str = GROUP
) -> dict[TopicPartition, int | None]:
    error, offsets = h.coordinator.fetch_offsets(group_id, partitions)
    assert error is Errors.NONE
    assert all(f.error is Errors.NONE for f in offsets)
    return {f.topic_partition: None if f.offset is None else f.offset.offset for f in offsets}


def log_of(appends: list[Append]) -> list[LogRecord]:
    """The records the appends would have put in the log, batch offsets as appended."""
    return [
        LogRecord(batch_offset, record.key, record.value)
        for batch_offset, append in enumerate(appends)
        for record in append.records
    ]


# ------------------------------------------------------------------ commits


def test_commit_offset_from_unknown_group() -> None:
    # testCommitOffsetFromUnknownGroup: a generation for a group that does not exist
    h = Harness()
    assert h.commit({TOPIC0: 1}, member_id="m", generation_id=1) == {
        TOPIC0: Errors.ILLEGAL_GENERATION
    }


def test_commit_offset_with_default_generation() -> None:
    # testCommitOffsetWithDefaultGeneration, testFetchOffsets: a simple consumer's commit
    h = Harness()
    assert h.commit({TOPIC0: 10, TOPIC1: 20}) == {TOPIC0: Errors.NONE, TOPIC1: Errors.NONE}
    assert h.group().state is GroupState.EMPTY and h.group().protocol_type is None
    assert fetched(h, [TOPIC0, TOPIC1]) == {TOPIC0: 10, TOPIC1: 20}


def test_fetch_offsets_of_unknown_group_and_partition() -> None:
    # testFetchOffsetForUnknownPartition, testFetchAllOffsets
    h = Harness()
    assert fetched(h, [TOPIC0], group_id="nobody") == {TOPIC0: None}
    assert fetched(h, None, group_id="nobody") == {}
    h.commit({TOPIC1: 3})
    assert fetched(h, [TOPIC0, TOPIC1]) == {TOPIC0: None, TOPIC1: 3}
    assert fetched(h, None) == {TOPIC1: 3}


def test_offsets_are_visible_only_once_appended() -> None:
    h = Harness()
    request = h.send_commit({TOPIC0: 5})
    assert h.result(request) is None and fetched(h, [TOPIC0]) == {TOPIC0: None}
    [append] = h.pending_appends
    assert [r.key for r in append.records] == [offset_commit_key(GROUP, TOPIC0)]
    h.complete_appends()
    assert h.result(request) == OffsetCommitResult({TOPIC0: Errors.NONE})
    assert fetched(h, [TOPIC0]) == {TOPIC0: 5}


def test_failed_append_is_mapped_and_not_cached() -> None:
    # GroupMetadataManager.storeOffsets: NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR,
    # NOT_ENOUGH_REPLICAS -> COORDINATOR_NOT_AVAILABLE
    h = Harness()
    request = h.send_commit({TOPIC0: 5})
    h.complete_appends(Errors.NOT_LEADER_OR_FOLLOWER)
    assert h.result(request) == OffsetCommitResult({TOPIC0: Errors.NOT_COORDINATOR})
    request = h.send_commit({TOPIC0: 6})
    h.complete_appends(Errors.NOT_ENOUGH_REPLICAS)
    assert h.result(request) == OffsetCommitResult({TOPIC0: Errors.COORDINATOR_NOT_AVAILABLE})
    assert fetched(h, [TOPIC0]) == {TOPIC0: None}


def test_metadata_too_large() -> None:
    # testCommitOffsetWithLargeMetadata-like: only that partition fails
    h = Harness(offset_metadata_max_bytes=4)
    big = OffsetAndMetadata(offset=1, metadata="12345", commit_timestamp_ms=0)
    errors = h.commit({TOPIC0: big, TOPIC1: 2})
    assert errors == {TOPIC0: Errors.OFFSET_METADATA_TOO_LARGE, TOPIC1: Errors.NONE}
    only_big = h.send_commit({TOPIC0: big})
    assert h.result(only_big) == OffsetCommitResult({TOPIC0: Errors.OFFSET_METADATA_TOO_LARGE})


def test_a_late_answer_does_not_replace_a_newer_commit() -> None:
    # GroupMetadata.onOffsetCommitAppend keeps the commit further along the log
    h = Harness()
    first, second = h.send_commit({TOPIC0: 1}), h.send_commit({TOPIC0: 2})
    older, newer = h.pending_appends
    h.pending_appends = []
    h.take(h.coordinator.on_append_done(newer.write_id, Errors.NONE, 8, h.now_ms))
    h.take(h.coordinator.on_append_done(older.write_id, Errors.NONE, 7, h.now_ms))
    assert h.result(first) is not None and h.result(second) is not None
    assert fetched(h, [TOPIC0]) == {TOPIC0: 2}


def test_member_commits() -> None:
    # testCommitOffsetInCompletingRebalance, and only members commit to a non-empty group
    h = Harness()
    member = h.join_new_member()
    generation = h.join_result(h.last_join).generation_id
    assert h.commit({TOPIC0: 1}, member_id=member, generation_id=generation) == {
        TOPIC0: Errors.REBALANCE_IN_PROGRESS
    }
    h.send_sync(member, generation, {member: b"a"})
    h.complete_appends()
    assert h.commit({TOPIC0: 1}, member_id=member, generation_id=generation) == {
        TOPIC0: Errors.NONE
    }
    assert h.commit({TOPIC0: 2}) == {TOPIC0: Errors.UNKNOWN_MEMBER_ID}
    assert h.commit({TOPIC0: 2}, member_id="x", generation_id=generation) == {
        TOPIC0: Errors.UNKNOWN_MEMBER_ID
    }
    assert h.commit({TOPIC0: 2}, member_id=member, generation_id=generation - 1) == {
        TOPIC0: Errors.ILLEGAL_GENERATION
    }
    assert fetched(h, [TOPIC0]) == {TOPIC0: 1}


def test_commit_after_group_is_empty() -> None:
    # testCommitOffsetsAfterGroupIsEmpty: the last member left; generation -1 commits work
    h = Harness()
    member, _ = h.stable_group_of_one()
    h.leave((member, None))
    assert h.commit({TOPIC0: 9}) == {TOPIC0: Errors.NONE}
    assert fetched(h, [TOPIC0]) == {TOPIC0: 9}


def test_empty_group_id_may_store_offsets() -> None:
    # isValidGroupId: OffsetCommit and OffsetFetch accept "" for old tools
    h = Harness()
    assert h.commit({TOPIC0: 4}, group_id="") == {TOPIC0: Errors.NONE}
    assert fetched(h, [TOPIC0], group_id="") == {TOPIC0: 4}


# ------------------------------------------------------------------ describe and list


def test_describe_groups() -> None:
    # testDescribeGroupInactiveGroup, testDescribeGroupStable, testDescribeGroupRebalancing,
    # testDescribeGroupWrongCoordinator
    h = Harness(num_partitions=2, load=False)
    h.load(h.coordinator.partition_for(GROUP), epoch=0)
    assert h.coordinator.describe_group(GROUP)[1].state == "Dead"
    member, _ = h.stable_group_of_one()
    error, summary = h.coordinator.describe_group(GROUP)
    assert (error, summary.state, summary.protocol_type, summary.protocol) == (
        Errors.NONE,
        "Stable",
        "consumer",
        "range",
    )
    [described] = summary.members
    assert (described.member_id, described.metadata, described.assignment) == (
        member,
        b"range-metadata",
        b"all",
    )
    h.send_join()  # a second member: rebalancing shows no metadata or protocol
    _, rebalancing = h.coordinator.describe_group(GROUP)
    assert (rebalancing.state, rebalancing.protocol) == ("PreparingRebalance", "")
    assert all(m.metadata == b"" for m in rebalancing.members)
    here = h.coordinator.partition_for(GROUP)
    other = next(g for g in map(str, range(100)) if h.coordinator.partition_for(g) != here)
    assert h.coordinator.describe_group(other)[0] is Errors.NOT_COORDINATOR


def test_list_groups() -> None:
    # testListGroupsIncludesStableGroups, KIP-518's states filter
    h = Harness()
    h.stable_group_of_one()
    h.commit({TOPIC0: 1}, group_id="offsets-only")
    error, groups = h.coordinator.list_groups(frozenset())
    assert error is Errors.NONE
    assert [(g.group_id, g.protocol_type, g.state) for g in groups] == [
        (GROUP, "consumer", "Stable"),
        ("offsets-only", "", "Empty"),
    ]
    _, stable = h.coordinator.list_groups(frozenset({"Stable"}))
    assert [g.group_id for g in stable] == [GROUP]
    h.take(h.coordinator.begin_loading(5, 0, h.now_ms)[1])
    assert h.coordinator.list_groups(frozenset())[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS


# ------------------------------------------------------------------ loading


def test_load_replays_what_the_coordinator_wrote() -> None:
    # GroupMetadataManagerTest.testLoadGroupWithTombstone / testLoadOffsetsAndGroup-like: a
    # new coordinator rebuilds the stable group and its offsets from the records alone
    first = Harness()
    member, generation = first.stable_group_of_one()
    first.commit({TOPIC0: 11}, member_id=member, generation_id=generation)
    first.commit({TOPIC0: 12, TOPIC1: 3}, member_id=member, generation_id=generation)
    first.commit({TOPIC0: 5}, group_id="simple")
    second = Harness(load=False)
    assert second.load(0, epoch=1, records=log_of(first.appended)) == ()
    group = second.group()
    assert (group.state, group.generation_id, group.leader_id, group.protocol_name) == (
        GroupState.STABLE,
        generation,
        member,
        "range",
    )
    assert group.members[member].assignment == b"all"
    assert fetched(second, None) == {TOPIC0: 12, TOPIC1: 3}
    assert fetched(second, None, group_id="simple") == {TOPIC0: 5}
    # The loaded member keeps its place by heartbeating, and loses it otherwise.
    assert second.heartbeat(member, generation) is Errors.NONE
    second.advance(SESSION_TIMEOUT_MS)
    assert second.group().state is GroupState.EMPTY


def test_load_applies_tombstones_and_reports_bad_records() -> None:
    member = MemberRecord(
        member_id="m",
        client_id="c",
        client_host="/h",
        rebalance_timeout_ms=1,
        session_timeout_ms=1,
        subscription=b"",
        assignment=b"",
    )
    no_protocol = GroupMetadataValue(
        protocol_type="consumer", generation=1, protocol=None, leader="m", members=(member,)
    )
    records = [
        LogRecord(0, offset_commit_key("g", TOPIC0), None),  # deleting nothing is fine
        LogRecord(1, group_metadata_key("gone"), None),
        LogRecord(2, b"\x00\x09junk", b""),
        LogRecord(3, None, b"x"),
        LogRecord(4, group_metadata_key("odd"), group_metadata_value(no_protocol)),
    ]
    loaded = load_groups(records, now_ms=0)
    assert loaded.groups == ()
    assert len(loaded.problems) == 3 and "batch at offset 2" in loaded.problems[0]
    assert "has members but no protocol" in loaded.problems[2]


def test_load_of_a_partition_that_moved_on_is_ignored() -> None:
    h = Harness(load=False)
    h.take(h.coordinator.begin_loading(0, 1, h.now_ms)[1])
    h.take(h.coordinator.unload(0, h.now_ms))
    effects, _ = h.coordinator.complete_loading(0, 1, load_groups([], 0), h.now_ms)
    assert effects.answers == [] and 0 not in h.coordinator.partitions
    assert h.join_result(h.send_join()).error is Errors.NOT_COORDINATOR


def test_begin_loading_twice_in_one_epoch_loads_once() -> None:
    h = Harness()
    needed, _ = h.coordinator.begin_loading(0, 0, h.now_ms)
    assert not needed
    needed, _ = h.coordinator.begin_loading(0, 1, h.now_ms)  # a new epoch: reload
    assert needed
