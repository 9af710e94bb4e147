"""The classic APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for the classic members of a
consumer group, and the online upgrade that puts them there; the rules are
``coordinator.group.consumer_migration``'s (read its docstring first).

``ClassicMembersCore`` is ``ConsumerGroupCore`` plus these handlers; every answer goes through
the core's ``_write`` (answered once the records are appended).
"""

from __future__ import annotations

from collections.abc import Iterable

from pykraft.coordinator.group import consumer_records as records
from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_groups import ConsumerGroupCore
from pykraft.coordinator.group.consumer_heartbeat import (
    assignment_record_changed,
    subscription_changed,
)
from pykraft.coordinator.group.consumer_member import (
    NO_PARTITION_EPOCH,
    ConsumerGroupMember,
    MemberState,
    reconcile,
)
from pykraft.coordinator.group.consumer_migration import (
    classic_member_from_join,
    convert_classic_group,
    converted_group_records,
    encode_assignment,
    subscribed_names,
    subscription_version,
)
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
        """``classicGroupJoinToConsumerGroup`` (the status and session timeout were checked)."""
        effects = Effects()
        snapshot = self.snapshot(group.group_id)
        refusal = self._classic_join_error(group, request)
        if refusal is not None:
            effects.answer(request_id, JoinGroupResult(member_id=request.member_id, error=refusal))
            return effects
        member_id = request.member_id or self._new_member_id()
        if request.member_id == NO_MEMBER_ID and request.require_known_member_id:
            result = JoinGroupResult(member_id=member_id, error=Errors.MEMBER_ID_REQUIRED)
            effects.answer(request_id, result)
            return effects
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        names = subscribed_names(protocols)
        assert names is not None  # _classic_join_error checked it
        before = group.members.get(member_id) or ConsumerGroupMember(member_id=member_id)
        is_new = member_id not in group.members
        updated = classic_member_from_join(
            before,
            protocols,
            names,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
        )
        written: list[CoordinatorRecord] = []
        if updated != before or is_new:
            written.append(records.member_metadata_record(group.group_id, updated))
        group.update_member(updated)
        bump = self._refresh_subscription_metadata(group, written)
        if is_new or subscription_changed(before, updated) or bump:
            group.group_epoch += 1
            written.append(records.group_epoch_record(group.group_id, group.group_epoch))
        self._maybe_compute_target_assignment(group, written)
        # A classic consumer revokes before it rejoins: it owns nothing it was asked to give up.
        reconciled = reconcile(
            updated,
            group.assignment_epoch,
            group.target_of(member_id),
            group.current_partition_epoch,
            {},
        )
        if is_new or assignment_record_changed(updated, reconciled):
            group.update_member(reconciled)
            written.append(records.current_assignment_record(group.group_id, reconciled))
        self._arm_timers(group.group_id, reconciled, now_ms)
        result = JoinGroupResult(
            member_id=member_id,
            error=Errors.NONE,
            generation_id=reconciled.member_epoch,
            protocol_type=request.protocol_type,
            protocol_name=protocols[0][0],
        )
        self._write(snapshot, written, request_id, result, now_ms, effects)
        return effects

    def _classic_join_error(self, group: ConsumerGroup, request: JoinGroupRequest) -> Errors | None:
        if self.consumer_config.migration_policy not in UPGRADE_POLICIES:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        if request.protocol_type != "consumer" or not request.protocols:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        protocols = tuple((p.name, p.metadata) for p in request.protocols)
        if subscribed_names(protocols) is None:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        known = request.member_id != NO_MEMBER_ID and request.member_id in group.members
        if not known and len(group.members) >= self.consumer_config.max_size:
            return Errors.GROUP_MAX_SIZE_REACHED
        if known and not group.members[request.member_id].uses_classic_protocol:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return None

    # ------------------------------------------------------------------ SyncGroup, Heartbeat

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, generation_id: int
    ) -> ConsumerGroupMember | Errors:
        member = group.members.get(member_id)
        if member is None or not member.uses_classic_protocol:
            return Errors.UNKNOWN_MEMBER_ID
        if generation_id != member.member_epoch:
            return Errors.ILLEGAL_GENERATION
        return member

    def classic_sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        generation_id: int,
        protocol_name: str | None,
        request_id: int,
    ) -> Effects:
        """``classicGroupSyncToConsumerGroup``: the member's partitions, by topic name."""
        effects = Effects()
        found = self._classic_member(group, member_id, generation_id)
        if isinstance(found, Errors):
            effects.answer(request_id, SyncGroupResult(error=found))
            return effects
        assert found.classic_protocols is not None
        chosen = found.classic_protocols[0]
        if protocol_name is not None and protocol_name != chosen[0]:
            effects.answer(request_id, SyncGroupResult(error=Errors.INCONSISTENT_GROUP_PROTOCOL))
            return effects
        names = {t.topic_id: t.topic_name for t in self.topics.values()}
        by_name = {
            names[topic_id]: partitions
            for topic_id, partitions in found.assigned_partitions.items()
            if topic_id in names
        }
        assignment = encode_assignment(by_name, subscription_version(chosen[1]))
        result = SyncGroupResult(
            error=Errors.NONE,
            protocol_type="consumer",
            protocol_name=chosen[0],
            assignment=assignment,
        )
        effects.answer(request_id, result)
        return effects

    def classic_heartbeat(
        self, group: ConsumerGroup, member_id: str, generation_id: int, now_ms: int
    ) -> Errors:
        """``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS when it must
        rejoin to move on."""
        found = self._classic_member(group, member_id, generation_id)
        if isinstance(found, Errors):
            return found
        self._arm_timers(group.group_id, found, now_ms)
        if (
            found.member_epoch < group.group_epoch
            or found.state is MemberState.UNREVOKED_PARTITIONS
            or (found.state is MemberState.UNRELEASED_PARTITIONS and _released(group, found))
        ):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def classic_heartbeat_effects(
        self, group: ConsumerGroup, member_id: str, generation_id: int, request_id: int, now_ms: int
    ) -> Effects:
        effects = Effects()
        error = self.classic_heartbeat(group, member_id, generation_id, now_ms)
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
        """``classicGroupLeaveToConsumerGroup``: each member removed as a consumer member
        leaving; an unknown one is UNKNOWN_MEMBER_ID."""
        effects = Effects()
        snapshot = self.snapshot(group.group_id)
        written: list[CoordinatorRecord] = []
        results = []
        for member_id, instance_id in members:
            member = group.members.get(member_id)
            if member is None:
                results.append(MemberLeaveResult(member_id, instance_id, Errors.UNKNOWN_MEMBER_ID))
                continue
            self._fence(group, member_id, written)
            results.append(MemberLeaveResult(member_id, instance_id, Errors.NONE))
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
