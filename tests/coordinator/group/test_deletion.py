"""DeleteGroups and OffsetDelete in the pure coordinator — Kafka's ``GroupCoordinatorTest``
cases (``testDeleteGroups*``, ``testDeleteOffset*``) and the tombstones a reload replays."""

from __future__ import annotations

import struct

from pykraft.coordinator.group.consumer_protocol import topics_of
from pykraft.coordinator.group.effects import Append
from pykraft.coordinator.group.offsets import LogRecord
from pykraft.coordinator.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_key,
)
from pykraft.coordinator.group.state import GroupState, Protocol
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.group.harness import GROUP, TOPIC0, TOPIC1, Harness

OTHER = TopicPartition("birds", 0)


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription: version, topics, null user_data (v1: owned partitions)."""
    out = struct.pack(">hi", version, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        out += struct.pack(">i", 0)  # no owned partitions
    return out


def delete_groups(h: Harness, *group_ids: str) -> dict[str, Errors]:
    results, effects = h.coordinator.handle_delete_groups(group_ids, h.now_ms)
    h.take(effects)
    return results


def delete_offsets(
    h: Harness, *partitions: TopicPartition, group_id: str = GROUP
) -> tuple[Errors, dict[TopicPartition, Errors]]:
    error, errors, effects = h.coordinator.handle_delete_offsets(
        group_id, list(partitions), h.now_ms
    )
    h.take(effects)
    return error, errors


def tombstones(appends: list[Append]) -> list[OffsetCommitKey | GroupMetadataKey]:
    return [decode_key(r.key) for a in appends for r in a.records if r.value is None]


def replayed_log(h: Harness) -> list[LogRecord]:
    return [
        LogRecord(offset, record.key, record.value)
        for offset, append in enumerate(h.appended)
        for record in append.records
    ]


def consumer_group(h: Harness, *topics: str) -> str:
    """A STABLE group of one member of protocol type consumer subscribed to ``topics``."""
    protocols = (Protocol("range", subscription(*topics)),)
    first = h.join_result(h.send_join(require_known_member_id=True, protocols=protocols))
    joined = h.join_result(h.send_join(first.member_id, protocols=protocols))
    h.send_sync(first.member_id, joined.generation_id, {first.member_id: b""})
    h.complete_appends()
    assert h.group().state is GroupState.STABLE
    return first.member_id


# ------------------------------------------------------------------ DeleteGroups


def test_delete_empty_group_with_stored_offsets_writes_tombstones() -> None:
    # testDeleteEmptyGroupWithStoredOffsets; a group that only stored offsets (generation 0)
    # never had a group record, so no group tombstone (testExpireGroupWithOffsetsOnly)
    h = Harness()
    assert h.commit({TOPIC0: 5, TOPIC1: 6}) == {TOPIC0: Errors.NONE, TOPIC1: Errors.NONE}
    before = len(h.appended)
    assert delete_groups(h, GROUP) == {GROUP: Errors.NONE}
    assert GROUP not in h.coordinator.groups
    assert tombstones(h.appended[before:]) == [
        OffsetCommitKey(GROUP, TOPIC0),
        OffsetCommitKey(GROUP, TOPIC1),
    ]
    assert h.coordinator.describe_group(GROUP)[1].state == "Dead"
    assert h.coordinator.list_groups(frozenset())[1] == []


def test_delete_empty_group_after_its_member_left() -> None:
    # testDeleteEmptyGroup: a group whose last member left (EMPTY, generation 2)
    h = Harness()
    member_id, _ = h.stable_group_of_one()
    assert h.leave((member_id, None)).members[0].error is Errors.NONE
    h.complete_appends()
    assert h.group().state is GroupState.EMPTY
    assert delete_groups(h, GROUP) == {GROUP: Errors.NONE}
    assert tombstones(h.pending_appends) == [GroupMetadataKey(GROUP)]


def test_delete_non_empty_group() -> None:
    # testDeleteNonEmptyGroup
    h = Harness()
    h.stable_group_of_one()
    h.commit({TOPIC0: 1}, member_id=h.group().leader_id or "", generation_id=1)
    before = len(h.appended)
    assert delete_groups(h, GROUP) == {GROUP: Errors.NON_EMPTY_GROUP}
    assert h.group().state is GroupState.STABLE
    assert h.appended[before:] == []
    assert h.fetch([TOPIC0])[TOPIC0].offset is not None


def test_delete_unknown_invalid_and_foreign_groups() -> None:
    # testDeleteGroupWithInvalidGroupId / WithWrongCoordinator / of a group never seen; the
    # empty id is a valid DeleteGroups id (isValidGroupId)
    h = Harness(num_partitions=2, load=False)
    h.load(0, epoch=0)
    mine = next(g for g in ("a", "b", "c", "d") if h.coordinator.partition_for(g) == 0)
    foreign = next(g for g in ("a", "b", "c", "d") if h.coordinator.partition_for(g) == 1)
    results = delete_groups(h, mine, foreign, mine)
    assert results == {mine: Errors.GROUP_ID_NOT_FOUND, foreign: Errors.NOT_COORDINATOR}
    assert h.appended == []


def test_delete_groups_while_loading_and_when_stopped() -> None:
    h = Harness(load=False)
    needed, _ = h.coordinator.begin_loading(0, 0, h.now_ms)
    assert needed
    assert delete_groups(h, GROUP) == {GROUP: Errors.COORDINATOR_LOAD_IN_PROGRESS}
    h.coordinator.shutdown(h.now_ms)
    assert delete_groups(h, GROUP) == {GROUP: Errors.COORDINATOR_NOT_AVAILABLE}


def test_delete_groups_answers_each_group_on_its_own() -> None:
    h = Harness()
    h.commit({TOPIC0: 1}, group_id="idle")
    h.stable_group_of_one()
    results = delete_groups(h, "idle", GROUP, "ghost")
    assert results == {
        "idle": Errors.NONE,
        GROUP: Errors.NON_EMPTY_GROUP,
        "ghost": Errors.GROUP_ID_NOT_FOUND,
    }
    assert delete_groups(h, "idle") == {"idle": Errors.GROUP_ID_NOT_FOUND}


def test_a_deleted_group_stays_deleted_after_a_reload() -> None:
    # The tombstones are what a new coordinator replays (doLoadGroupsAndOffsets).
    h = Harness()
    h.commit({TOPIC0: 5}, group_id="gone")
    h.commit({TOPIC0: 7}, group_id="kept")
    delete_groups(h, "gone")
    h.complete_appends()
    log = replayed_log(h)
    h.coordinator.unload(0, h.now_ms)
    h.load(0, epoch=1, records=log)
    assert "gone" not in h.coordinator.groups
    assert h.fetch([TOPIC0], group_id="kept")[TOPIC0].offset is not None
    error, summary = h.coordinator.describe_group("gone")
    assert (error, summary.state) == (Errors.NONE, "Dead")


def test_a_commit_in_flight_does_not_revive_a_deleted_group() -> None:
    h = Harness()
    h.commit({TOPIC0: 1})
    commit = h.send_commit({TOPIC1: 2})
    # The group is EMPTY with a write in flight: DeleteGroups removes it all the same.
    assert delete_groups(h, GROUP) == {GROUP: Errors.NONE}
    h.complete_appends()
    assert h.result(commit) is not None
    assert GROUP not in h.coordinator.groups


def test_a_group_can_be_created_again_after_deletion() -> None:
    h = Harness()
    h.commit({TOPIC0: 1})
    delete_groups(h, GROUP)
    assert h.commit({TOPIC0: 9}) == {TOPIC0: Errors.NONE}
    assert h.fetch([TOPIC0])[TOPIC0].offset is not None


# ------------------------------------------------------------------ OffsetDelete


def test_delete_offset_of_empty_group() -> None:
    # testDeleteOffsetOfEmptyConsumerGroup: the partition goes, the group stays (offsets left)
    h = Harness()
    h.commit({TOPIC0: 5, TOPIC1: 6})
    before = len(h.appended)
    assert delete_offsets(h, TOPIC0) == (Errors.NONE, {TOPIC0: Errors.NONE})
    assert tombstones(h.appended[before:]) == [OffsetCommitKey(GROUP, TOPIC0)]
    assert h.fetch([TOPIC0, TOPIC1])[TOPIC0].offset is None
    assert h.group().state is GroupState.EMPTY


def test_deleting_the_last_offsets_of_an_empty_group_retires_it() -> None:
    # cleanupGroupMetadata: an EMPTY group left without offsets goes DEAD, with a tombstone
    # for its group record (it had generations)
    h = Harness()
    member_id, generation = h.stable_group_of_one()
    h.commit({TOPIC0: 5}, member_id=member_id, generation_id=generation)
    h.leave((member_id, None))
    h.complete_appends()
    before = len(h.appended)
    assert delete_offsets(h, TOPIC0, TOPIC1) == (
        Errors.NONE,
        {TOPIC0: Errors.NONE, TOPIC1: Errors.NONE},
    )
    assert GROUP not in h.coordinator.groups
    assert tombstones(h.appended[before:]) == [
        OffsetCommitKey(GROUP, TOPIC0),
        GroupMetadataKey(GROUP),
    ]


def test_delete_offset_of_stable_consumer_group() -> None:
    # testDeleteOffsetOfStableConsumerGroup: subscribed topics are refused, others deleted
    h = Harness()
    member_id = consumer_group(h, "pets")
    assert h.group().subscribed_topics == frozenset({"pets"})
    h.commit({TOPIC0: 1, OTHER: 2}, member_id=member_id, generation_id=1)
    error, errors = delete_offsets(h, TOPIC0, OTHER)
    assert error is Errors.NONE
    assert errors == {TOPIC0: Errors.GROUP_SUBSCRIBED_TO_TOPIC, OTHER: Errors.NONE}
    fetched = h.fetch([TOPIC0, OTHER])
    assert fetched[TOPIC0].offset is not None and fetched[OTHER].offset is None
    assert h.group().state is GroupState.STABLE


def test_delete_offset_of_consumer_group_with_unparsable_subscription() -> None:
    # testDeleteOffsetOfConsumerGroupWithUnparsableProtocol: every topic counts as subscribed
    h = Harness()
    first = h.join_result(h.send_join(require_known_member_id=True))
    h.send_join(first.member_id)
    assert h.group().subscribed_topics is None
    error, errors = delete_offsets(h, TOPIC0, OTHER)
    assert error is Errors.NONE
    assert errors == {
        TOPIC0: Errors.GROUP_SUBSCRIBED_TO_TOPIC,
        OTHER: Errors.GROUP_SUBSCRIBED_TO_TOPIC,
    }


def test_delete_offset_of_non_empty_non_consumer_group() -> None:
    # testDeleteOffsetOfNonEmptyNonConsumerGroup
    h = Harness()
    first = h.join_result(h.send_join(require_known_member_id=True, protocol_type="connect"))
    h.send_join(first.member_id, protocol_type="connect")
    assert delete_offsets(h, TOPIC0) == (Errors.NON_EMPTY_GROUP, {})


def test_delete_offset_of_unknown_dead_and_invalid_groups() -> None:
    # testDeleteOffsetOfNonExistingGroup, testDeleteOffsetOfDeadConsumerGroup
    h = Harness()
    assert delete_offsets(h, TOPIC0, group_id="ghost") == (Errors.GROUP_ID_NOT_FOUND, {})
    assert delete_offsets(h, TOPIC0, group_id="") == (Errors.INVALID_GROUP_ID, {})
    h.commit({TOPIC0: 1})
    delete_groups(h, GROUP)
    assert delete_offsets(h, TOPIC0) == (Errors.GROUP_ID_NOT_FOUND, {})


def test_delete_offsets_where_the_group_is_not_served() -> None:
    h = Harness(num_partitions=2, load=False)
    loading = next(g for g in ("a", "b", "c", "d") if h.coordinator.partition_for(g) == 0)
    foreign = next(g for g in ("a", "b", "c", "d") if h.coordinator.partition_for(g) == 1)
    h.coordinator.begin_loading(0, 0, h.now_ms)
    assert delete_offsets(h, TOPIC0, group_id=loading) == (Errors.COORDINATOR_LOAD_IN_PROGRESS, {})
    assert delete_offsets(h, TOPIC0, group_id=foreign) == (Errors.NOT_COORDINATOR, {})


def test_deleted_offsets_stay_deleted_after_a_reload() -> None:
    h = Harness()
    h.commit({TOPIC0: 5, TOPIC1: 6})
    delete_offsets(h, TOPIC0)
    h.complete_appends()
    log = replayed_log(h)
    h.coordinator.unload(0, h.now_ms)
    h.load(0, epoch=1, records=log)
    fetched = h.fetch([TOPIC0, TOPIC1])
    assert fetched[TOPIC0].offset is None
    offset = fetched[TOPIC1].offset
    assert offset is not None and offset.offset == 6


def test_delete_offsets_drops_a_transaction_s_staged_offset() -> None:
    # removeOffsets also forgets pendingTransactionalOffsetCommits of the partition
    h = Harness()
    h.commit({TOPIC1: 3})
    h.txn_commit({TOPIC0: 8})
    delete_offsets(h, TOPIC0)
    h.coordinator.complete_transaction(0, 1000, commit=True)
    assert h.fetch([TOPIC0])[TOPIC0].offset is None


# ------------------------------------------------------------------ subscriptions


def test_subscribed_topics_follow_kafka_compute_subscribed_topics() -> None:
    both = [subscription("a", "b"), subscription("c", version=0)]
    assert topics_of("consumer", both) == frozenset({"a", "b", "c"})
    assert topics_of("consumer", []) == frozenset()
    assert topics_of("consumer", None) is None
    assert topics_of("connect", [subscription("a")]) is None
    assert topics_of("consumer", [b"\x00\x00\x00\x00\x00\x01\x00\x05ab"]) is None
    assert topics_of("consumer", [b"\xff\xff"]) is None
    assert topics_of("consumer", [subscription("a")[:-8]]) is None  # no user_data
