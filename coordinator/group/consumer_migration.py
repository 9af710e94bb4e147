"""Online upgrade of a classic group to a consumer group (KIP-848), and the classic members
such a group keeps until they restart with the new protocol.

Theory of operation (Kafka's ``GroupMetadataManager`` with ``group.consumer.migration.policy``
upgrade or bidirectional: ``validateOnlineUpgrade``, ``convertToConsumerGroup``,
``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup``, ``classicGroupLeaveToConsumerGroup``)
------------------------------------------------------------------------------------------
Upgrade: the first ConsumerGroupHeartbeat for a STABLE classic group of protocol type
``consumer`` converts it: each classic member becomes a consumer group member that still uses
the classic protocol (its JoinGroup protocols kept as ClassicMemberMetadata), subscribed to the
topics of its ConsumerProtocolSubscription, owning the partitions of its
ConsumerProtocolAssignment at member epoch = the generation; the group epoch and target
assignment epoch are the generation, the target the current assignment. The classic group
record is tombstoned, the consumer group's records are written. A group that cannot convert
(mid-rebalance, another protocol type, unreadable metadata, overlapping assignments) stays
classic, and the heartbeat gets GROUP_ID_NOT_FOUND as before.

A classic member inside a consumer group is driven by the classic APIs:

* JoinGroup: updates its subscription from its protocol metadata, joins the group epoch, runs
  the assignor if due, reconciles given the partitions its subscription says it still owns
  (``ownedPartitions``, v1+: a cooperative consumer keeps its partitions across a rejoin; an
  eager one owns none) and answers at once with generation = its member epoch, no leader role
  (it never assigns), the first of its protocols. An unknown member joining with JoinGroup v4+
  and no ``group.instance.id`` first gets MEMBER_ID_REQUIRED and a member id; a static member
  joining with an unknown member id replaces its instance id's holder at once.
* SyncGroup: its assigned partitions as a ConsumerProtocolAssignment (at its subscription's
  version); ILLEGAL_GENERATION unless at its member epoch; REBALANCE_IN_PROGRESS when the
  group epoch moved past it and it is not revoking.
* Heartbeat: REBALANCE_IN_PROGRESS when it must rejoin: the group epoch moved past its epoch, it
  must revoke, or partitions it waits for have been released.
* LeaveGroup: removed with tombstones, one new group epoch per request; a consumer-protocol
  member named there is UNKNOWN_MEMBER_ID.

SyncGroup, Heartbeat and LeaveGroup find a static member by its instance id. Its session timeout
is its JoinGroup's; it must send SyncGroup within its rebalance timeout after a JoinGroup, and
rejoin within it after being told to (``coordinator.group.consumer_timers``).

Downgrade (policy downgrade or bidirectional, ``validateOnlineDowngrade`` /
``convertToClassicGroup``): when the last consumer-protocol member leaves or is fenced and only
classic members remain, the consumer group's records are tombstoned and the classic group is
rebuilt at generation = the group epoch, each member with its protocols and its partitions as
its assignment, then a rebalance starts (its members rejoin as in any classic group).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

import attrs

from pykraft.coordinator.group import consumer_records as records
from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_member import ConsumerGroupMember, MemberState, normalize
from pykraft.coordinator.group.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    subscription_rack,
    topics_of,
)
from pykraft.coordinator.group.consumer_records import TopicMetadata
from pykraft.coordinator.group.effects import CoordinatorRecord
from pykraft.coordinator.group.records import group_metadata_key
from pykraft.coordinator.group.state import GroupMetadata, GroupState, MemberMetadata, Protocol

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
# ConsumerProtocolAssignment's versions (all with the same layout of what is read here).
_MAX_ASSIGNMENT_VERSION = 3


# ------------------------------------------------------------------ the embedded protocol


def subscription_version(metadata: bytes) -> int:
    """A ConsumerProtocolSubscription's version (0 when unreadable)."""
    if len(metadata) < 2:
        return 0
    version: int = _INT16.unpack_from(metadata)[0]
    return max(version, 0)


def decode_assignment(data: bytes) -> dict[str, set[int]] | None:
    """A ConsumerProtocolAssignment's partitions by topic name; None when it does not parse.
    An empty assignment (a member that got none) is no partitions."""
    if not data:
        return {}
    try:
        position = 2
        (count,) = _INT32.unpack_from(data, position)
        position += 4
        assigned: dict[str, set[int]] = {}
        for _ in range(max(count, 0)):
            (size,) = _INT16.unpack_from(data, position)
            name = data[position + 2 : position + 2 + size].decode("utf-8")
            position += 2 + size
            (partitions,) = _INT32.unpack_from(data, position)
            position += 4
            for _ in range(max(partitions, 0)):
                assigned.setdefault(name, set()).add(_INT32.unpack_from(data, position)[0])
                position += 4
    except (struct.error, UnicodeDecodeError):
        return None
    return assigned


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment (no user data) at ``version`` (capped at 3)."""
    out = bytearray(_INT16.pack(min(version, _MAX_ASSIGNMENT_VERSION)))
    out += _INT32.pack(len(partitions))
    for name, numbers in sorted(partitions.items()):
        encoded = name.encode("utf-8")
        ordered = sorted(numbers)
        out += _INT16.pack(len(encoded)) + encoded + _INT32.pack(len(ordered))
        for number in ordered:
            out += _INT32.pack(number)
    out += _INT32.pack(-1)  # user_data: null
    return bytes(out)


def subscribed_names(protocols: tuple[tuple[str, bytes], ...]) -> tuple[str, ...] | None:
    """The topics of a classic member's subscription (its first protocol's metadata)."""
    if not protocols:
        return None
    topics = topics_of(CONSUMER_PROTOCOL_TYPE, [protocols[0][1]])
    return None if topics is None else tuple(sorted(topics))


# ------------------------------------------------------------------ the upgrade


def convert_classic_group(
    classic: GroupMetadata, topics: Mapping[str, TopicMetadata], assignor: str
) -> ConsumerGroup | None:
    """``convertToConsumerGroup``: the classic group as a consumer group, or None when it
    cannot be converted (``validateOnlineUpgrade``)."""
    protocol = classic.protocol_name
    if (
        not classic.is_(GroupState.STABLE)
        or classic.protocol_type != CONSUMER_PROTOCOL_TYPE
        or protocol is None
    ):
        return None
    group = ConsumerGroup(classic.group_id)
    epoch = classic.generation_id
    for member in sorted(classic.members.values(), key=lambda m: m.member_id):
        converted = _converted_member(member, protocol, epoch, topics)
        if converted is None or converted.owned() & set(group.partition_owners):
            return None
        group.update_member(converted)
        group.target_assignment[converted.member_id] = converted.assigned_partitions
    group.group_epoch = group.assignment_epoch = epoch
    names = group.subscribed_topic_names(topics)
    group.subscription_metadata = {n: topics[n] for n in sorted(names) if n in topics}
    group.assignor_name = assignor
    return group


def _converted_member(
    member: MemberMetadata, protocol: str, epoch: int, topics: Mapping[str, TopicMetadata]
) -> ConsumerGroupMember | None:
    protocols = tuple((p.name, p.metadata) for p in member.protocols)
    chosen = ((protocol, member.metadata(protocol)),)
    names = subscribed_names(chosen)
    assigned_by_name = decode_assignment(member.assignment)
    if names is None or assigned_by_name is None:
        return None
    assigned = {
        topics[name].topic_id: frozenset(p for p in ps if p < topics[name].num_partitions)
        for name, ps in assigned_by_name.items()
        if name in topics
    }
    return ConsumerGroupMember(
        member_id=member.member_id,
        instance_id=member.group_instance_id,
        rack_id=subscription_rack(chosen[0][1]),
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        subscribed_topic_names=names,
        state=MemberState.STABLE,
        member_epoch=epoch,
        previous_member_epoch=epoch,
        assigned_partitions=normalize(assigned),
        classic_protocols=protocols,
        classic_session_timeout_ms=member.session_timeout_ms,
    )


def converted_group_records(group: ConsumerGroup) -> list[CoordinatorRecord]:
    """The classic group's tombstone, then every record of the new consumer group in Kafka's
    ``createConsumerGroupRecords`` order."""
    gid = group.group_id
    written = [CoordinatorRecord(group_metadata_key(gid), None)]
    members = [group.members[m] for m in sorted(group.members)]
    written += [records.member_metadata_record(gid, m) for m in members]
    written.append(records.group_epoch_record(gid, group.group_epoch))
    written.append(records.partition_metadata_record(gid, group.subscription_metadata))
    written += [
        records.target_assignment_member_record(gid, m.member_id, group.target_of(m.member_id))
        for m in members
    ]
    written.append(records.target_assignment_epoch_record(gid, group.assignment_epoch))
    written += [records.current_assignment_record(gid, m) for m in members]
    return written


def classic_member_from_join(
    member: ConsumerGroupMember,
    protocols: tuple[tuple[str, bytes], ...],
    names: tuple[str, ...],
    *,
    instance_id: str | None,
    client_id: str,
    client_host: str,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
) -> ConsumerGroupMember:
    """The member as a JoinGroup describes it (``ConsumerGroupMember.Builder`` in
    ``classicGroupJoinToConsumerGroup``: ``maybeUpdateInstanceId``, ``maybeUpdateRackId``
    from the subscription, and the rest)."""
    rack_id = subscription_rack(protocols[0][1]) if protocols else None
    return attrs.evolve(
        member,
        instance_id=instance_id if instance_id is not None else member.instance_id,
        rack_id=rack_id if rack_id is not None else member.rack_id,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=names,
        classic_protocols=protocols,
        classic_session_timeout_ms=session_timeout_ms,
    )


def downgraded_members(
    group: ConsumerGroup, topics: Mapping[str, TopicMetadata], default_session_timeout_ms: int
) -> tuple[str, list[MemberMetadata]] | None:
    """The classic members of a consumer group left with classic members only, and the
    protocol they all support (the first member's first one that every member lists); None
    when they share none."""
    members = [group.members[m] for m in sorted(group.members)]
    if not members or any(m.classic_protocols is None for m in members):
        return None
    first = members[0].classic_protocols
    assert first is not None
    common = [
        name
        for name, _ in first
        if all(name in {n for n, _ in m.classic_protocols or ()} for m in members)
    ]
    if not common:
        return None
    names = {t.topic_id: t.topic_name for t in topics.values()}
    classic = []
    for member in members:
        protocols = member.classic_protocols or ()
        chosen = dict(protocols)[common[0]]
        assigned = {
            names[t]: partitions
            for t, partitions in member.assigned_partitions.items()
            if t in names
        }
        session_timeout_ms = member.classic_session_timeout_ms or default_session_timeout_ms
        classic.append(
            MemberMetadata(
                member_id=member.member_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                session_timeout_ms=session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=tuple(Protocol(n, md) for n, md in protocols),
                assignment=encode_assignment(assigned, subscription_version(chosen)),
            )
        )
    return common[0], classic
