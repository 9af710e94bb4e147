"""The online upgrade of a classic group (KIP-848), mirroring ``GroupMetadataManagerTest``'s
``testUpgradeFromClassicGroup...`` / ``testClassicGroupJoinWithConsumerGroup...`` /
``testClassicGroupHeartbeatToConsumerGroup...`` / ``testClassicGroupLeaveToConsumerGroup...``:
a consumer member's first heartbeat converts a stable classic group; its classic members go on
through JoinGroup, SyncGroup, Heartbeat and LeaveGroup until they leave."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

from pykraft.coordinator.group.consumer_group import ConsumerGroupState
from pykraft.coordinator.group.consumer_migration import decode_assignment, encode_assignment
from pykraft.coordinator.group.coordinator import JoinGroupRequest
from pykraft.coordinator.group.effects import (
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    SyncGroupResult,
)
from pykraft.coordinator.group.records import OffsetAndMetadata, group_metadata_key
from pykraft.coordinator.group.state import Protocol
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.group.consumer_harness import GROUP, ConsumerHarness, topic

FOO = topic("foo", 6)


def subscription(*topics: str, owned: Mapping[str, Iterable[int]] | None = None) -> bytes:
    """ConsumerProtocolSubscription v1: version, topics, null user data, owned partitions."""
    out = struct.pack(">hi", 1, len(topics))
    for name in topics:
        out += struct.pack(">h", len(name)) + name.encode()
    out += struct.pack(">ii", -1, len(owned or {}))
    for name, partitions in (owned or {}).items():
        numbers = sorted(partitions)
        out += struct.pack(">h", len(name)) + name.encode() + struct.pack(">i", len(numbers))
        out += b"".join(struct.pack(">i", p) for p in numbers)
    return out


class Classic:
    def __init__(self, h: ConsumerHarness) -> None:
        self.h = h
        self.ids = 700

    def rid(self) -> int:
        self.ids += 1
        return self.ids

    def join(
        self,
        member_id: str = "",
        session_timeout_ms: int = 10_000,
        *,
        instance_id: str | None = None,
        owned: Mapping[str, Iterable[int]] | None = None,
        require_known_member_id: bool = False,
    ) -> JoinGroupResult:
        request = JoinGroupRequest(
            group_id=GROUP,
            member_id=member_id,
            client_id="classic",
            client_host="/10.0.0.1",
            rebalance_timeout_ms=10_000,
            session_timeout_ms=session_timeout_ms,
            protocol_type="consumer",
            protocols=(Protocol("range", subscription("foo", owned=owned)),),
            require_known_member_id=require_known_member_id,
            group_instance_id=instance_id,
        )
        rid = self.rid()
        self.h.take(self.h.coordinator.handle_join_group(request, rid, self.h.now_ms))
        result = self.h.answers[rid]
        assert isinstance(result, JoinGroupResult)
        return result

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
    ) -> SyncGroupResult:
        rid = self.rid()
        effects = self.h.coordinator.handle_sync_group(
            group_id=GROUP,
            generation_id=generation,
            member_id=member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=assignments or {},
            request_id=rid,
            now_ms=self.h.now_ms,
            group_instance_id=instance_id,
        )
        self.h.take(effects)
        result = self.h.answers[rid]
        assert isinstance(result, SyncGroupResult)
        return result

    def heartbeat(self, member_id: str, generation: int, instance_id: str | None = None) -> Errors:
        rid = self.rid()
        effects = self.h.coordinator.handle_heartbeat(
            GROUP, member_id, generation, rid, self.h.now_ms, instance_id
        )
        self.h.take(effects)
        result = self.h.answers[rid]
        assert isinstance(result, HeartbeatResult)
        return result.error

    def leave(self, member_id: str, instance_id: str | None = None) -> LeaveGroupResult:
        return self.leave_many([(member_id, instance_id)])

    def leave_many(self, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        rid = self.rid()
        effects = self.h.coordinator.handle_leave_group(GROUP, members, rid, self.h.now_ms)
        self.h.take(effects)
        result = self.h.answers[rid]
        assert isinstance(result, LeaveGroupResult)
        return result


def stable_classic_group(h: ConsumerHarness) -> tuple[Classic, str, int]:
    """One classic member owning foo 0-5 at generation 1, with a committed offset."""
    classic = Classic(h)
    joined = classic.join()
    member_id, generation = joined.member_id, joined.generation_id
    assignment = encode_assignment({"foo": range(6)}, 1)
    assert classic.sync(member_id, generation, {member_id: assignment}).error is Errors.NONE
    offsets = {TopicPartition("foo", 0): OffsetAndMetadata(offset=4, commit_timestamp_ms=0)}
    h.take(
        h.coordinator.handle_commit_offsets(
            group_id=GROUP,
            member_id=member_id,
            generation_id=generation,
            offsets=offsets,
            request_id=699,
            now_ms=h.now_ms,
        )
    )
    return classic, member_id, generation


def test_assignment_bytes_round_trip() -> None:
    data = encode_assignment({"foo": [2, 0], "bar": [1]}, 3)
    assert data[:2] == b"\x00\x03"
    assert decode_assignment(data) == {"foo": {0, 2}, "bar": {1}}
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x05") is None
    assert decode_assignment(b"") == {}


def test_a_consumer_member_upgrades_a_stable_classic_group() -> None:
    h = ConsumerHarness([FOO])
    classic, old_id, generation = stable_classic_group(h)
    start = len(h.appended)
    joined = h.join(("foo",))
    assert joined.error is Errors.NONE
    assert joined.member_epoch == generation + 1 and joined.assignment == {}
    group = h.coordinator.consumer_groups[GROUP]
    assert set(group.members) == {old_id, joined.member_id}
    assert group.members[old_id].uses_classic_protocol
    assert group.members[old_id].assigned_partitions == {FOO.topic_id: frozenset(range(6))}
    # The classic group's record is tombstoned first, in the same batch.
    first = h.appended[start].records[0]
    assert (first.key, first.value) == (group_metadata_key(GROUP), None)
    # Its offsets stay; the classic group is no longer listed.
    fetched = h.coordinator.fetch_offsets(GROUP, None)[1]
    assert [f.offset.offset for f in fetched if f.offset] == [4]
    listed = h.coordinator.list_groups(frozenset())[1]
    assert [(g.group_id, g.group_type) for g in listed] == [(GROUP, "consumer")]

    # The classic member is told to rejoin, rejoins at the new epoch having revoked three.
    assert classic.heartbeat(old_id, generation) is Errors.REBALANCE_IN_PROGRESS
    rejoined = classic.join(old_id)
    assert rejoined.error is Errors.NONE and rejoined.generation_id == generation + 1
    assert rejoined.leader_id == "" and rejoined.protocol_name == "range"
    synced = classic.sync(old_id, rejoined.generation_id)
    kept = decode_assignment(synced.assignment)
    assert kept is not None and len(kept["foo"]) == 3
    assert classic.heartbeat(old_id, rejoined.generation_id) is Errors.NONE
    assert classic.sync(old_id, generation).error is Errors.ILLEGAL_GENERATION

    # The consumer member gets the other three.
    got = h.call(member_id=joined.member_id, member_epoch=joined.member_epoch)
    assert got.assignment == {FOO.topic_id: frozenset(set(range(6)) - kept["foo"])}
    assert h.coordinator.consumer_groups[GROUP].state is ConsumerGroupState.STABLE

    # A failover keeps the classic member as a classic member.
    reloaded = h.reload().consumer_groups[GROUP]
    assert reloaded.members[old_id].classic_protocols == (("range", subscription("foo")),)

    # Leaving (the member restarts with the new protocol) frees its partitions.
    left = classic.leave(old_id)
    assert [m.error for m in left.members] == [Errors.NONE]
    final = h.call(member_id=joined.member_id, member_epoch=joined.member_epoch)
    assert final.assignment == {FOO.topic_id: frozenset(range(6))}


def test_no_upgrade_while_the_policy_is_disabled() -> None:
    h = ConsumerHarness([FOO], migration_policy="disabled")
    stable_classic_group(h)
    assert h.join(("foo",)).error is Errors.GROUP_ID_NOT_FOUND
    assert GROUP not in h.coordinator.consumer_groups
    # The policy governs conversions only: Kafka 3.9's classicGroupJoin sends every join to
    # a non-empty consumer group to classicGroupJoinToConsumerGroup.
    other = ConsumerHarness([FOO], migration_policy="disabled")
    other.join(("foo",))
    assert Classic(other).join().error is Errors.NONE


def test_no_upgrade_of_a_rebalancing_group() -> None:
    h = ConsumerHarness([FOO])
    classic = Classic(h)
    classic.join()  # joined, not synced: COMPLETING_REBALANCE
    assert h.join(("foo",)).error is Errors.GROUP_ID_NOT_FOUND


def test_a_new_classic_member_joins_a_consumer_group() -> None:
    h = ConsumerHarness([FOO])
    consumer = h.join(("foo",))
    classic = Classic(h)
    joined = classic.join()
    assert joined.error is Errors.NONE and joined.generation_id == 2
    synced = classic.sync(joined.member_id, joined.generation_id)
    assert decode_assignment(synced.assignment) == {}  # all six still with the consumer
    h.call(member_id=consumer.member_id, member_epoch=1)  # told to revoke three
    owned = h.coordinator.consumer_groups[GROUP].members[consumer.member_id].assigned_partitions
    h.call(member_id=consumer.member_id, member_epoch=1, topic_partitions=owned)
    # Released: the classic member is told to rejoin, and gets them.
    assert classic.heartbeat(joined.member_id, 2) is Errors.REBALANCE_IN_PROGRESS
    again = classic.join(joined.member_id)
    got = decode_assignment(classic.sync(joined.member_id, again.generation_id).assignment)
    assert got is not None and len(got["foo"]) == 3
    # Its session timeout is its JoinGroup's.
    h.advance(10_001)
    assert joined.member_id not in h.coordinator.consumer_groups[GROUP].members


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    # GroupMetadataManagerTest.testLastConsumerProtocolMemberLeavingConsumerGroup
    h = ConsumerHarness([FOO])
    classic, old_id, generation = stable_classic_group(h)
    joined = h.join(("foo",))
    h.call(member_id=joined.member_id, member_epoch=-1)
    assert GROUP not in h.coordinator.consumer_groups
    group = h.coordinator.groups[GROUP]
    assert group.state.value == "PreparingRebalance"
    # generation: the group epoch after the leave (the join and the leave each bumped it)
    assert group.generation_id == generation + 2 and group.protocol_name == "range"
    # The classic member rejoins as in any classic rebalance and gets its partitions.
    assert classic.heartbeat(old_id, generation + 2) is Errors.REBALANCE_IN_PROGRESS
    rejoined = classic.join(old_id)
    assert rejoined.error is Errors.NONE and rejoined.leader_id == old_id
    assignment = encode_assignment({"foo": range(6)}, 1)
    synced = classic.sync(old_id, rejoined.generation_id, {old_id: assignment})
    assert synced.error is Errors.NONE and synced.assignment == assignment
    fetched = h.coordinator.fetch_offsets(GROUP, None)[1]
    assert [f.offset.offset for f in fetched if f.offset] == [4]
    # A failover finds the classic group, not the consumer one.
    reloaded = h.reload()
    assert GROUP not in reloaded.consumer_groups
    assert reloaded.groups[GROUP].generation_id == rejoined.generation_id


def test_no_downgrade_under_the_upgrade_policy() -> None:
    h = ConsumerHarness([FOO], migration_policy="upgrade")
    stable_classic_group(h)
    joined = h.join(("foo",))
    h.call(member_id=joined.member_id, member_epoch=-1)
    assert GROUP in h.coordinator.consumer_groups


def test_an_upgraded_classic_member_that_goes_silent_is_fenced() -> None:
    # GroupMetadataManager.convertToConsumerGroup schedules each converted member's session
    # timeout (its classic session timeout); GroupMetadataManagerTest
    # .testSessionTimeoutExpirationForClassicMemberAfterUpgrade... in spirit.
    h = ConsumerHarness([FOO])
    _, old_id, _ = stable_classic_group(h)
    joined = h.join(("foo",))
    group = h.coordinator.consumer_groups[GROUP]
    h.advance(9_999)
    h.call(member_id=joined.member_id, member_epoch=joined.member_epoch)
    assert old_id in group.members
    h.advance(2)  # its JoinGroup session timeout was 10 s
    assert old_id not in group.members
    h.call(member_id=joined.member_id, member_epoch=joined.member_epoch)
    assert group.target_of(joined.member_id) == {FOO.topic_id: frozenset(range(6))}


def test_a_failover_keeps_a_classic_members_session_timeout():
    # ClassicMemberMetadata.SessionTimeoutMs is replayed: after a failover the classic member
    # still times out after its JoinGroup's 10 s, not group.consumer.session.timeout.ms.
    h = ConsumerHarness([FOO])
    _, old_id, _ = stable_classic_group(h)
    joined = h.join(("foo",))
    group = h.reload().consumer_groups[GROUP]
    assert group.members[old_id].classic_session_timeout_ms == 10_000
    h.advance(9_000)
    h.call(member_id=joined.member_id, member_epoch=joined.member_epoch)
    h.advance(1_001)
    assert old_id not in group.members
