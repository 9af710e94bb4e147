"""Rebuilding consumer groups (KIP-848) from ``__consumer_offsets`` (Kafka's
``GroupMetadataManager.replay`` of the consumer group records).

Records come in log order; the latest value of each key wins and a tombstone removes it. Once
the whole partition is read, ``groups()`` assembles each group: its epoch (key 3), subscription
metadata (4), members (5, with their current assignment, 8), target assignment (6, 7). A member
record without a group epoch record is kept as Kafka keeps it (the group exists from its first
record). A current assignment (or a target) without member metadata is dropped: Kafka writes a
member's metadata before its assignment and tombstones it last (``removeMember``), and its
replay of such a record finds no member (``getOrMaybeCreateMember(memberId, false)``). A group
whose epoch record is a tombstone is gone, with whatever else it had. The assignor name is not
in the records (``ConsumerGroupCore.install`` derives it from the members).
"""

from __future__ import annotations

import attrs

from pykraft.coordinator.group import consumer_records as rec
from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_member import ConsumerGroupMember, normalize


@attrs.define
class _Replayed:
    epoch: int | None = None
    assignment_epoch: int = 0
    topics: tuple[rec.TopicMetadata, ...] = ()
    members: dict[str, ConsumerGroupMember] = attrs.Factory(dict)
    current: dict[str, rec.CurrentAssignment] = attrs.Factory(dict)
    targets: dict[str, dict[str, frozenset[int]]] = attrs.Factory(dict)


class ConsumerGroupsReplay:
    def __init__(self) -> None:
        self._groups: dict[str, _Replayed] = {}

    def replay(self, key_bytes: bytes, value_bytes: bytes | None) -> None:
        """One record; raises ``CoordinatorRecordError`` for a malformed one."""
        key = rec.decode_consumer_key(key_bytes)
        value = None if value_bytes is None else rec.decode_consumer_value(key, value_bytes)
        group = self._groups.setdefault(key.group_id, _Replayed())
        member_id = key.member_id or ""
        record_type = key.record_type
        if record_type == rec.GROUP_METADATA:
            if value is None:
                del self._groups[key.group_id]
                return
            assert isinstance(value, int)
            group.epoch = value
        elif record_type == rec.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = value if isinstance(value, int) else 0
        elif record_type == rec.PARTITION_METADATA:
            group.topics = value if isinstance(value, tuple) else ()
        elif record_type == rec.MEMBER_METADATA:
            _put(group.members, member_id, value, ConsumerGroupMember)
        elif record_type == rec.CURRENT_MEMBER_ASSIGNMENT:
            _put(group.current, member_id, value, rec.CurrentAssignment)
        else:
            if value is None:
                group.targets.pop(member_id, None)
            else:
                assert isinstance(value, dict)
                group.targets[member_id] = normalize(value)

    def groups(self) -> tuple[ConsumerGroup, ...]:
        return tuple(
            _build(group_id, r)
            for group_id, r in sorted(self._groups.items())
            if r.epoch is not None or r.members
        )


def _put(table: dict, member_id: str, value: object, kind: type) -> None:  # type: ignore[type-arg]
    if value is None:
        table.pop(member_id, None)
    else:
        assert isinstance(value, kind)
        table[member_id] = value


def _build(group_id: str, replayed: _Replayed) -> ConsumerGroup:
    group = ConsumerGroup(group_id)
    group.group_epoch = replayed.epoch or 0
    group.assignment_epoch = replayed.assignment_epoch
    group.subscription_metadata = {t.topic_name: t for t in replayed.topics}
    for member_id, member in sorted(replayed.members.items()):
        current = replayed.current.get(member_id)
        if current is not None:
            member = attrs.evolve(
                member,
                member_epoch=current.member_epoch,
                previous_member_epoch=current.previous_member_epoch,
                state=current.state,
                assigned_partitions=normalize(current.assigned_partitions),
                partitions_pending_revocation=normalize(current.partitions_pending_revocation),
            )
        group.update_member(member)
    group.target_assignment = {
        m: t for m, t in sorted(replayed.targets.items()) if m in group.members
    }
    return group
