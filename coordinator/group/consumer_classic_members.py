"""The classic APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for the classic members of a
consumer group, and the online upgrade that puts them there; the rules are
``coordinator.group.consumer_migration``'s (read its docstring first).

``ClassicMembersCore`` is ``ConsumerGroupCore`` plus these handlers; every answer that writes
goes through the core's ``_write`` (answered once the records are appended). A member is found
as Kafka's ``validateConsumerGroupMember`` finds it: by its ``group.instance.id`` when it sends
one (``consumer_heartbeat.validate_member``), else by its member id.
"""

from __future__ import annotations

from collections.abc import Iterable

from pykraft.coordinator.group.assignors import Assignment
from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_groups import ConsumerGroupCore
from pykraft.coordinator.group.consumer_heartbeat import Refusal, validate_member
from pykraft.coordinator.group.consumer_member import (
    NO_PARTITION_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from pykraft.coordinator.group.consumer_migration import (
    classic_member_from_join,
    convert_classic_group,
    converted_group_records,
    encode_assignment,
    subscribed_names,
    subscription_version,
)
from pykraft.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, owned_partitions
from pykraft.coordinator.group.coordinator import JoinGroupRequest
from pykraft.coordinator.group.effects import (
    NO_MEMBER_ID,
    CoordinatorRecord,
    Effects,
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    MemberLeaveResult,
    SyncGroupResult,
)
from pykraft.coordinator.group.state import GroupMetadata
from pykraft.protocol.errors import Errors

UPGRADE_POLICIES = frozenset({"upgrade", "bidirectional"})


class ClassicMembersCore(ConsumerGroupCore):
    # ------------------------------------------------------------------ the upgrade

    def maybe_upgrade(
        self, classic: GroupMetadata, written: list[CoordinatorRecord], now_ms: int
    ) -> ConsumerGroup | None:
        """Convert ``classic`` for a consumer member's first heartbeat, when the policy and
        the group allow it; the conversion's records go to ``written``. Each converted member's
        session timer starts now with its JoinGroup session timeout (``convertToConsumerGroup``
        schedules ``scheduleConsumerGroupSessionTimeout`` per member)."""
        if self.consumer_config.migration_policy not in UPGRADE_POLICIES:
            return None
        if len(classic.members) >= self.consumer_config.max_size:
            return None
        group = convert_classic_group(classic, self.topics, self.consumer_config.assignors[0])
        if group is None:
            return None
        written.extend(converted_group_records(group))
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._arm_timers(group.group_id, member, now_ms)
        return group

    # ------------------------------------------------------------------ JoinGroup

    def classic_join(
        self, group: ConsumerGroup, request: JoinGroupRequest, request_id: int, now_ms: int
    ) -> Effects:
        """``classicGroupJoinToConsumerGroup`` (the status and session timeout were checked):
        the member (a static one found, or replacing its instance's holder at once, by its
        instance id) takes its subscription and what it still owns from its protocol metadata,
        then joins and reconciles as a heartbeat does; its sync timer starts."""
        effects = Effects()
        snapshot = self.snapshot(group.group_id)
        instance_id = request.group_instance_id
        is_unknown = request.member_id == NO_MEMBER_ID
        member_id = request.member_id or self._new_member_id()
        refusal = self._classic_join_error(group, request, member_id)
        if refusal is None and is_unknown and instance_id is None:
            # ``requiresKnownMemberId``: JoinGroup v4+ without an instance id.
            refusal = Errors.MEMBER_ID_REQUIRED if request.require_known_member_id else None
        written: list[CoordinatorRecord] = []
        found = (
            self._classic_member_for_join(group, member_id, instance_id, is_unknown, written)
            if refusal is None
            else refusal
        )
        if not isinstance(found, tuple) or not isinstance(found[0], ConsumerGroupMember):
            error = found if isinstance(found, Errors) else found[0]
            answer_id = member_id if error is Errors.MEMBER_ID_REQUIRED else request.member_id
            effects.answer(request_id, JoinGroupResult(member_id=answer_id, error=error))
            return effects
        member, replaced = found
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        names = subscribed_names(protocols)
        assert names is not None  # _classic_join_error checked it
        updated = classic_member_from_join(
            member,
            protocols,
            names,
            instance_id=instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
        )
        owned = self._owned_topic_ids(protocols[0][1])
        reconciled = self._update_and_reconcile(
            group, member, updated, owned, written, replaced=replaced
        )
        self._arm_timers(group.group_id, reconciled, now_ms)
        self.timers.joined(group.group_id, reconciled, now_ms)
        result = JoinGroupResult(
            member_id=reconciled.member_id,
            error=Errors.NONE,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
        )
        self._write(snapshot, written, request_id, result, now_ms, effects)
        return effects

    def _classic_member_for_join(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        is_unknown: bool,
        written: list[CoordinatorRecord],
    ) -> tuple[ConsumerGroupMember, bool] | Refusal:
        """``getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember(..., useClassicProtocol)``:
        the member, and whether it replaced its instance id's previous holder."""
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id=member_id), False
        holder = group.member_by_instance_id(instance_id)
        if is_unknown:
            if holder is None:
                return ConsumerGroupMember(member_id=member_id), False
            # A classic member's new incarnation replaces the old one at once (no
            # UNRELEASED_INSTANCE_ID: the classic protocol has no temporary leave).
            return self._replace_static_member(group, holder, member_id, written), True
        found = validate_member(group, member_id, instance_id)
        return (found, False) if isinstance(found, ConsumerGroupMember) else found

    def _owned_topic_ids(self, metadata: bytes) -> Assignment:
        """``toTopicPartitions(subscription.ownedPartitions())``: by topic id, topics the
        image does not know dropped."""
        return {
            self.topics[name].topic_id: partitions
            for name, partitions in owned_partitions(metadata).items()
            if name in self.topics
        }

    def _classic_join_error(
        self, group: ConsumerGroup, request: JoinGroupRequest, member_id: str
    ) -> Errors | None:
        """``throwIfConsumerGroupIsFull`` and ``throwIfClassicProtocolIsNotSupported``. Kafka
        3.9's ``classicGroupJoin`` sends every join to a non-empty consumer group here, whatever
        ``group.consumer.migration.policy`` says (the policy governs conversions only)."""
        if member_id not in group.members and len(group.members) >= self.consumer_config.max_size:
            return Errors.GROUP_MAX_SIZE_REACHED
        if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not request.protocols:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        if subscribed_names(protocols) is None:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        classic = [m for m in group.members.values() if m.classic_protocols is not None]
        if not any(
            all(name in {n for n, _ in m.classic_protocols or ()} for m in classic)
            for name, _ in protocols
        ):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return None

    # ------------------------------------------------------------------ SyncGroup, Heartbeat

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> ConsumerGroupMember | Errors:
        """``validateConsumerGroupMember``, ``throwIfMemberDoesNotUseClassicProtocol``,
        ``throwIfGenerationIdUnmatched``."""
        found = validate_member(group, member_id, instance_id)
        if not isinstance(found, ConsumerGroupMember):
            return found[0]
        if not found.uses_classic_protocol:
            return Errors.UNKNOWN_MEMBER_ID
        if generation_id != found.member_epoch:
            return Errors.ILLEGAL_GENERATION
        return found

    def classic_sync(
        self,
        group: ConsumerGroup,
        *,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        request_id: int,
        now_ms: int,
    ) -> Effects:
        """``classicGroupSyncToConsumerGroup``: the member's partitions, by topic name;
        REBALANCE_IN_PROGRESS when the group moved on and it is not revoking
        (``throwIfRebalanceInProgress``, which starts its join timer)."""
        effects = Effects()
        found = self._classic_member(group, member_id, instance_id, generation_id)
        if isinstance(found, Errors):
            effects.answer(request_id, SyncGroupResult(error=found))
            return effects
        assert found.classic_protocols is not None
        chosen = found.classic_protocols[0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != chosen[0]
        ):
            effects.answer(request_id, SyncGroupResult(error=Errors.INCONSISTENT_GROUP_PROTOCOL))
            return effects
        gid = group.group_id
        if (
            group.group_epoch > found.member_epoch
            and found.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self.timers.join_if_absent(gid, found, now_ms)
            effects.answer(request_id, SyncGroupResult(error=Errors.REBALANCE_IN_PROGRESS))
            return effects
        self.timers.synced(gid, found.member_id, now_ms)
        self._arm_timers(gid, found, now_ms)
        names = {t.topic_id: t.topic_name for t in self.topics.values()}
        by_name = {
            names[topic_id]: partitions
            for topic_id, partitions in found.assigned_partitions.items()
            if topic_id in names
        }
        assignment = encode_assignment(by_name, subscription_version(chosen[1]))
        result = SyncGroupResult(
            error=Errors.NONE,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=chosen[0],
            assignment=assignment,
        )
        effects.answer(request_id, result)
        return effects

    def classic_heartbeat(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        request_id: int,
        now_ms: int,
    ) -> Effects:
        """``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS when it must
        rejoin to move on (and its join timer starts)."""
        effects = Effects()
        found = self._classic_member(group, member_id, instance_id, generation_id)
        if isinstance(found, Errors):
            effects.answer(request_id, HeartbeatResult(found))
            return effects
        self._arm_timers(group.group_id, found, now_ms)
        error = Errors.NONE
        if (
            found.member_epoch < group.group_epoch
            or found.state is MemberState.UNREVOKED_PARTITIONS
            or (found.state is MemberState.UNRELEASED_PARTITIONS and _released(group, found))
        ):
            error = Errors.REBALANCE_IN_PROGRESS
            self.timers.join_if_absent(group.group_id, found, now_ms)
        effects.answer(request_id, HeartbeatResult(error))
        return effects

    # ------------------------------------------------------------------ LeaveGroup

    def classic_leave(
        self,
        group: ConsumerGroup,
        members: Iterable[tuple[str, str | None]],
        request_id: int,
        now_ms: int,
    ) -> Effects:
        """``classicGroupLeaveToConsumerGroup``: each classic member named (by member id, or
        by instance id: an empty member id is an administrative removal) is removed; a
        consumer-protocol member is UNKNOWN_MEMBER_ID. One group epoch bump for the request."""
        effects = Effects()
        snapshot = self.snapshot(group.group_id)
        written: list[CoordinatorRecord] = []
        results = []
        for member_id, instance_id in members:
            found = validate_member(group, member_id, instance_id, admin=True)
            if isinstance(found, ConsumerGroupMember) and not found.uses_classic_protocol:
                found = Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} uses the consumer protocol."
            if not isinstance(found, ConsumerGroupMember):
                results.append(MemberLeaveResult(member_id, instance_id, found[0]))
                continue
            self._remove(group, found.member_id, written)
            results.append(MemberLeaveResult(found.member_id, instance_id, Errors.NONE))
        if written:
            group.refresh_subscription_metadata(self.topics, written)
            self._bump_group_epoch(group, written)
        result = LeaveGroupResult(Errors.NONE, tuple(results))
        self._write(snapshot, written, request_id, result, now_ms, effects)
        return effects


def _released(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """``!waitingOnUnreleasedPartition``: every target partition it lacks is free now."""
    for topic_id, partitions in group.target_of(member.member_id).items():
        for partition in partitions - member.assigned_partitions.get(topic_id, frozenset()):
            if group.current_partition_epoch(topic_id, partition) != NO_PARTITION_EPOCH:
                return False
    return True
