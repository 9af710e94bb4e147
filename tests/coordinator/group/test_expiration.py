"""Offset expiry (KIP-211) in the pure group coordinator, driven by its timer: Kafka's
``GroupMetadataManagerTest`` expiry cases (each test names the one it mirrors), the tombstones
they write, and what a reload of those tombstones brings back (nothing)."""

from __future__ import annotations

from pykraft.coordinator.group.expiration import expired_offsets, is_offset_expired
from pykraft.coordinator.group.records import GroupMetadataKey, OffsetAndMetadata, OffsetCommitKey
from pykraft.coordinator.group.state import GroupMetadata, GroupState, Protocol
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.group.harness import GROUP, SESSION_TIMEOUT_MS, Harness
from tests.coordinator.group.test_deletion import replayed_log, subscription, tombstones

RETENTION_MS = 60_000
INTERVAL_MS = 1_000
FOO0, FOO1, FOO2 = (TopicPartition("foo", p) for p in range(3))
BAR0, BAR1 = TopicPartition("bar", 0), TopicPartition("bar", 1)


def harness(load: bool = True) -> Harness:
    return Harness(
        load=load,
        offsets_retention_ms=RETENTION_MS,
        offsets_retention_check_interval_ms=INTERVAL_MS,
    )


def offset(h: Harness, value: int, expire_after_ms: int | None = None) -> OffsetAndMetadata:
    expire = None if expire_after_ms is None else h.now_ms + expire_after_ms
    return OffsetAndMetadata(offset=value, commit_timestamp_ms=h.now_ms, expire_timestamp_ms=expire)


def check(h: Harness) -> None:
    """Let the expiry task run once (the next check is at most one interval away)."""
    h.advance(INTERVAL_MS)


def committed(h: Harness, *partitions: TopicPartition) -> dict[TopicPartition, int | None]:
    fetched = h.fetch(list(partitions))
    return {tp: None if f.offset is None else f.offset.offset for tp, f in fetched.items()}


def keep_alive(h: Harness, member_id: str, generation: int, ms: int) -> None:
    """Let ``ms`` pass while the member heartbeats (its session stays open)."""
    step_ms = SESSION_TIMEOUT_MS // 2
    for _ in range(ms // step_ms):
        h.advance(step_ms)
        assert h.heartbeat(member_id, generation) is Errors.NONE
    h.advance(ms % step_ms)


def consumer_member(h: Harness, *topics: str, group_id: str = GROUP) -> tuple[str, int]:
    """A STABLE group of one ``consumer`` member subscribed to ``topics``."""
    protocols = (Protocol("range", subscription(*topics)),)
    first = h.join_result(
        h.send_join(require_known_member_id=True, protocols=protocols, group_id=group_id)
    )
    joined = h.join_result(h.send_join(first.member_id, protocols=protocols, group_id=group_id))
    h.send_sync(first.member_id, joined.generation_id, {first.member_id: b""}, group_id=group_id)
    h.complete_appends()
    assert h.group(group_id).state is GroupState.STABLE
    return first.member_id, joined.generation_id


def test_is_offset_expired() -> None:
    # OffsetExpirationConditionImpl.isOffsetExpired: an explicit expire timestamp wins
    def value(expire: int | None) -> OffsetAndMetadata:
        return OffsetAndMetadata(offset=1, commit_timestamp_ms=100, expire_timestamp_ms=expire)

    cases = [
        # (expire timestamp, base timestamp, now, expired?)
        (None, None, 100 + RETENTION_MS - 1, False),
        (None, None, 100 + RETENTION_MS, True),  # commit timestamp + retention
        (None, 500, 100 + RETENTION_MS, False),  # base: when the group became empty
        (None, 500, 500 + RETENTION_MS, True),
        (150, None, 149, False),
        (150, 10_000_000, 150, True),  # the explicit timestamp ignores the base
    ]
    for expire, base, now, expected in cases:
        assert is_offset_expired(value(expire), base, now, RETENTION_MS) is expected, (expire, base)


def test_expire_offset() -> None:
    # testExpireOffset: explicit expire timestamps (OffsetCommit v2-v4), only one passed
    h = harness()
    h.commit({FOO0: offset(h, 37, expire_after_ms=1), FOO1: offset(h, 37, expire_after_ms=3000)})
    before = len(h.appended)
    check(h)
    assert committed(h, FOO0, FOO1) == {FOO0: None, FOO1: 37}
    assert tombstones(h.appended[before:]) == [OffsetCommitKey(GROUP, FOO0)]
    assert h.group().state is GroupState.EMPTY


def test_expire_group_with_offsets_only() -> None:
    # testExpireGroupWithOffsetsOnly: the group goes with its offsets, no group tombstone
    h = harness()
    h.commit({FOO0: offset(h, 37, expire_after_ms=1), FOO1: offset(h, 37, expire_after_ms=3)})
    before = len(h.appended)
    check(h)
    assert GROUP not in h.coordinator.groups
    assert tombstones(h.appended[before:]) == [
        OffsetCommitKey(GROUP, FOO0),
        OffsetCommitKey(GROUP, FOO1),
    ]


def test_group_metadata_removal() -> None:
    # testGroupMetadataRemoval: an EMPTY group with generations and no offsets goes DEAD at the
    # next check, with a tombstone for its group record
    h = harness()
    member_id, _ = h.stable_group_of_one()
    h.leave((member_id, None))
    h.complete_appends()
    assert h.group().state is GroupState.EMPTY
    before = len(h.appended)
    check(h)
    assert GROUP not in h.coordinator.groups
    assert tombstones(h.appended[before:]) == [GroupMetadataKey(GROUP)]


def test_offset_expiration_of_simple_consumer() -> None:
    # testOffsetExpirationOfSimpleConsumer: retention counts from the commit
    h = harness()
    h.commit({FOO0: 37})
    h.advance(RETENTION_MS - 1)
    assert committed(h, FOO0) == {FOO0: 37}
    h.advance(INTERVAL_MS)
    assert GROUP not in h.coordinator.groups
    assert committed(h, FOO0) == {FOO0: None}


def test_offset_expiration_semantics() -> None:
    # testOffsetExpirationSemantics: nothing expires while the group has members; once EMPTY,
    # explicit expire timestamps first, the others retention after the group became empty
    h = harness()
    member_id, generation = consumer_member(h, "foo")
    h.commit(
        {
            FOO0: offset(h, 37, expire_after_ms=1),
            FOO1: offset(h, 37, expire_after_ms=3 * INTERVAL_MS),
            FOO2: offset(h, 37),
        },
        member_id=member_id,
        generation_id=generation,
    )
    # Every commit gets older than the retention, but the group lives.
    keep_alive(h, member_id, generation, RETENTION_MS + 2)
    assert committed(h, FOO0, FOO1, FOO2) == {FOO0: 37, FOO1: 37, FOO2: 37}
    h.leave((member_id, None))
    h.complete_appends()
    emptied_ms = h.group().state_timestamp_ms
    check(h)  # FOO0 and FOO1 had explicit timestamps, both passed
    assert committed(h, FOO0, FOO1, FOO2) == {FOO0: None, FOO1: None, FOO2: 37}
    h.advance(emptied_ms + RETENTION_MS - 1 - h.now_ms)  # every check so far was too early
    assert committed(h, FOO2) == {FOO2: 37}
    h.advance(INTERVAL_MS + 1)
    assert GROUP not in h.coordinator.groups  # all offsets gone: DEAD, with its tombstone
    assert GroupMetadataKey(GROUP) in tombstones(h.appended)


def test_offset_expiration_of_active_group_semantics() -> None:
    # testOffsetExpirationOfActiveGroupSemantics: a STABLE consumer group keeps the offsets
    # of subscribed topics; the others expire retention after their commit
    h = harness()
    member_id, generation = consumer_member(h, "foo")
    h.commit(
        {FOO0: 37, FOO1: 37, BAR0: 37, BAR1: 37}, member_id=member_id, generation_id=generation
    )
    before = len(h.appended)
    keep_alive(h, member_id, generation, RETENTION_MS + INTERVAL_MS)
    assert committed(h, FOO0, FOO1, BAR0, BAR1) == {FOO0: 37, FOO1: 37, BAR0: None, BAR1: None}
    assert tombstones(h.appended[before:]) == [
        OffsetCommitKey(GROUP, BAR0),
        OffsetCommitKey(GROUP, BAR1),
    ]
    assert h.group().state is GroupState.STABLE


def test_nothing_expires_while_rebalancing_or_for_other_protocol_types() -> None:
    # removeExpiredOffsets' last case: members of another protocol type, or not STABLE
    group = GroupMetadata(GROUP, GroupState.EMPTY, 0)
    group.protocol_type = "connect"
    group.transition_to(GroupState.PREPARING_REBALANCE, 0)
    h = harness()
    h.commit({FOO0: 1})
    group.offsets.update(h.group().offsets)
    assert expired_offsets(group, 10 * RETENTION_MS, RETENTION_MS) == []
    group.protocol_type = "consumer"
    assert expired_offsets(group, 10 * RETENTION_MS, RETENTION_MS) == []
    group.transition_to(GroupState.EMPTY, 0)
    assert expired_offsets(group, 10 * RETENTION_MS, RETENTION_MS) == [FOO0]


def test_pending_commit_does_not_expire() -> None:
    # getExpiredOffsets skips partitions with a pending offset commit
    h = harness()
    h.commit({FOO0: 1})
    h.now_ms += RETENTION_MS
    h.send_commit({FOO0: 2})  # in flight, not yet appended
    assert expired_offsets(h.group(), h.now_ms, RETENTION_MS) == []
    h.complete_appends()
    assert committed(h, FOO0) == {FOO0: 2}


def test_expired_offsets_stay_expired_after_a_reload() -> None:
    # The tombstones replay: a new coordinator of the partition has neither the expired offsets
    # nor their group, and keeps a group that emptied later with the time it became EMPTY (group
    # value v3's current_state_timestamp), so its offsets expire when they would have live.
    h = harness()
    member_id, generation = consumer_member(h, "foo")
    h.commit({FOO0: 5}, member_id=member_id, generation_id=generation)
    h.leave((member_id, None))
    h.complete_appends()
    h.advance(RETENTION_MS // 2)
    keep = TopicPartition("keep", 0)
    other_id, other_generation = consumer_member(h, "keep", group_id="other")
    h.commit({keep: 6}, member_id=other_id, generation_id=other_generation, group_id="other")
    h.leave((other_id, None), group_id="other")
    h.complete_appends()
    other_emptied_ms = h.group("other").state_timestamp_ms
    assert other_emptied_ms == h.now_ms
    h.advance(RETENTION_MS // 2 + INTERVAL_MS)
    assert GROUP not in h.coordinator.groups
    assert h.group("other").state is GroupState.EMPTY
    live_offset = h.fetch([keep], group_id="other")[keep].offset
    assert live_offset is not None and live_offset.offset == 6
    reloaded = harness(load=False)
    reloaded.now_ms = h.now_ms
    reloaded.load(0, epoch=1, records=replayed_log(h))
    assert GROUP not in reloaded.coordinator.groups
    assert set(reloaded.coordinator.groups) == {"other"}
    assert reloaded.group("other").state_timestamp_ms == other_emptied_ms
    assert reloaded.fetch([keep], group_id="other")[keep].offset == live_offset
    # Both expire the survivor at the same check: retention after it became EMPTY.
    for each in (h, reloaded):
        each.advance(other_emptied_ms + RETENTION_MS - 1 - each.now_ms)
        assert "other" in each.coordinator.groups
        each.advance(INTERVAL_MS + 1)
        assert "other" not in each.coordinator.groups


def test_the_check_runs_every_interval_once_a_partition_is_loaded() -> None:
    # offsets.retention.check.interval.ms: the first check one interval after loading
    h = harness()
    assert h.coordinator.next_offset_expiration_ms == h.now_ms + INTERVAL_MS
    assert h.coordinator.next_deadline_ms() == h.now_ms + INTERVAL_MS
    h.advance(INTERVAL_MS)
    assert h.coordinator.next_offset_expiration_ms == h.now_ms + INTERVAL_MS
    idle = Harness(load=False)
    assert idle.coordinator.next_deadline_ms() is None
