"""The group membership protocol over every group this broker coordinates (Kafka's
``GroupCoordinator``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
TxnOffsetCommit).

Theory of operation
-------------------
``GroupCoordinator`` adds the request handling to ``GroupMetadataManager`` (placement, loading,
writes, timers; DeleteGroups and OffsetDelete in ``GroupDeletion``). Every handler takes the
request's fields, the request id the shell chose and ``now_ms``, and returns ``Effects``: the
answer to this request may be among them, or come with a later call (a JoinGroup parked until
the rebalance completes, a SyncGroup until the leader's assignment is stored, an OffsetCommit
until its records are). Group membership follows
``coordinator.group.rebalance``; offsets follow ``coordinator.group.offsets``, transactional
ones ``coordinator.group.transactions``.

Static members (``group.instance.id``, KIP-345) follow ``coordinator.group.static_members``:
every handler checks a request's instance id with ``validate_current_member`` as Kafka does, so a
replaced member id is FENCED_INSTANCE_ID.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from pykraft.coordinator.group import rebalance, static_members
from pykraft.coordinator.group.commits import OffsetCommits
from pykraft.coordinator.group.effects import (
    NO_MEMBER_ID,
    Effects,
    HeartbeatResult,
    LeaveGroupResult,
    MemberLeaveResult,
    SyncGroupResult,
)
from pykraft.coordinator.group.rebalance import Step
from pykraft.coordinator.group.state import GroupMetadata, GroupState, MemberMetadata, Protocol
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors


@attrs.frozen(kw_only=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    # JoinGroup v4+: a new member first gets its id with MEMBER_ID_REQUIRED (KIP-394).
    require_known_member_id: bool
    # JoinGroup v5+: a static member's group.instance.id (KIP-345).
    group_instance_id: str | None = None
    # JoinGroup v9+: a restarted static leader may be told to skip the assignment (KIP-814).
    supports_skipping_assignment: bool = False


class GroupCoordinator(OffsetCommits):
    def handle_join_group(self, request: JoinGroupRequest, request_id: int, now_ms: int) -> Effects:
        step = self._step(now_ms)
        error = self._join_error(request)
        if error is not None:
            step.effects.answer(request_id, rebalance.join_error(request.member_id, error))
            return step.effects
        is_unknown = request.member_id == NO_MEMBER_ID
        group = self.groups.get(request.group_id)
        if group is None:
            group = GroupMetadata(request.group_id, GroupState.EMPTY, now_ms)
            self.groups[request.group_id] = group
        if not self._accept_joining_member(group, request.member_id):
            rebalance.drop_member(group, request.member_id, step)
            result = rebalance.join_error(NO_MEMBER_ID, Errors.GROUP_MAX_SIZE_REACHED)
            step.effects.answer(request_id, result)
        elif is_unknown:
            self._join_new_member(group, request, request_id, step)
        else:
            self._join_current_member(group, request, request_id, step)
        rebalance.maybe_complete_join(group, step)
        self._maybe_forget(group)
        return step.effects

    def _join_error(self, request: JoinGroupRequest) -> Errors | None:
        error = self.validate_group_status(request.group_id, ApiKey.JOIN_GROUP)
        if error is not None:
            return error
        config = self.config
        timeout = request.session_timeout_ms
        if (
            not config.group_min_session_timeout_ms
            <= timeout
            <= config.group_max_session_timeout_ms
        ):
            return Errors.INVALID_SESSION_TIMEOUT
        if request.member_id != NO_MEMBER_ID and request.group_id not in self.groups:
            return Errors.UNKNOWN_MEMBER_ID  # only a new member may create the group
        return None

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """``acceptJoiningMember``: new members only while the group is below group.max.size."""
        max_size = self.config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or (
                group.num_awaiting_join() < max_size
            )
        return group.has(member_id) or len(group.members) < max_size

    def _join_new_member(
        self, group: GroupMetadata, request: JoinGroupRequest, request_id: int, step: Step
    ) -> None:
        error = self._protocol_error(group, request)
        if error is not None:
            step.effects.answer(request_id, rebalance.join_error(NO_MEMBER_ID, error))
            return
        instance_id = request.group_instance_id
        if instance_id is not None:
            self._join_new_static_member(group, request, instance_id, request_id, step)
            return
        member_id = f"{request.client_id}-{self._new_member_suffix()}"
        if request.require_known_member_id:
            group.pending_members[member_id] = step.now_ms + request.session_timeout_ms
            result = rebalance.join_error(member_id, Errors.MEMBER_ID_REQUIRED)
            step.effects.answer(request_id, result)
            return
        member = _new_member(member_id, request)
        rebalance.add_member_and_rebalance(group, member, request_id, step)

    def _join_new_static_member(
        self,
        group: GroupMetadata,
        request: JoinGroupRequest,
        instance_id: str,
        request_id: int,
        step: Step,
    ) -> None:
        """``doStaticNewMemberJoinGroup``: a new member id at once (no MEMBER_ID_REQUIRED)."""
        member_id = static_members.new_static_member_id(instance_id, self._new_member_suffix())
        if instance_id not in group.static_members:
            member = _new_member(member_id, request)
            rebalance.add_member_and_rebalance(group, member, request_id, step)
            return
        static_members.join_known_static_member(
            group,
            instance_id,
            member_id,
            request,
            request_id,
            request.supports_skipping_assignment,
            lambda pending, assignment: self._store_group(pending.group, assignment, step, pending),
            step,
        )

    def _protocol_error(self, group: GroupMetadata, request: JoinGroupRequest) -> Errors | None:
        if group.is_(GroupState.DEAD):
            # Unloaded meanwhile: the member finds the coordinator again.
            return Errors.COORDINATOR_NOT_AVAILABLE
        if not group.supports_protocols(request.protocol_type, request.protocols):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _join_current_member(
        self, group: GroupMetadata, request: JoinGroupRequest, request_id: int, step: Step
    ) -> None:
        """``doCurrentMemberJoinGroup``: a pending member joins for real; any other member id
        must pass ``validateCurrentMember`` (a duplicate instance is FENCED_INSTANCE_ID)."""
        member_id, instance_id = request.member_id, request.group_instance_id
        error = self._protocol_error(group, request)
        if error is None and member_id in group.pending_members:
            # A pending member id was handed to a dynamic member (Kafka: IllegalStateException).
            error = Errors.UNKNOWN_SERVER_ERROR if instance_id is not None else None
            if error is None:
                joined = _new_member(member_id, request)
                rebalance.add_member_and_rebalance(group, joined, request_id, step)
                return
        if error is None:
            error = static_members.validate_current_member(group, member_id, instance_id)
        if error is not None:
            step.effects.answer(request_id, rebalance.join_error(member_id, error))
            return
        member = group.members[member_id]
        state, unchanged = group.state, member.matches(request.protocols)
        if state is GroupState.PREPARING_REBALANCE:
            rejoin = True
        elif state is GroupState.COMPLETING_REBALANCE:
            rejoin = not unchanged
        elif state is GroupState.STABLE:
            # The leader rejoining forces a rebalance: that is how it asks for one when the
            # topics it assigns change without any member's metadata changing.
            rejoin = group.is_leader(member_id) or not unchanged
        else:
            result = rebalance.join_error(member_id, Errors.UNKNOWN_MEMBER_ID)
            step.effects.answer(request_id, result)
            return
        if rejoin:
            rebalance.update_member_and_rebalance(group, member, request, request_id, step)
        else:
            # Same metadata (the first answer got lost): this generation's answer again.
            step.effects.answer(request_id, rebalance.current_join_result(group, member_id))

    # ------------------------------------------------------------------ SyncGroup

    def handle_sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        request_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> Effects:
        step = self._step(now_ms)
        error = self.validate_group_status(group_id, ApiKey.SYNC_GROUP)
        if error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the old coordinator: rejoin (older clients
            # do not know COORDINATOR_LOAD_IN_PROGRESS here).
            error = Errors.REBALANCE_IN_PROGRESS
        group = self.groups.get(group_id)
        if error is None:
            error = _sync_error(
                group, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            )
        if error is not None or group is None:
            step.effects.answer(request_id, SyncGroupResult(error=error or Errors.NONE))
            return step.effects
        member = group.members[member_id]
        if group.is_(GroupState.COMPLETING_REBALANCE):
            rebalance.await_sync(member, request_id, step)
            rebalance.remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                assignment = {m: assignments.get(m, b"") for m in group.members}
                step.store_group(group, assignment)
        else:  # STABLE: the assignment is known already
            rebalance.remove_pending_sync_member(group, member_id)
            result = SyncGroupResult(
                error=Errors.NONE,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment=member.assignment,
            )
            step.effects.answer(request_id, result)
            rebalance.schedule_heartbeat(member, step)
        return step.effects

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup

    def handle_heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        request_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> Effects:
        step = self._step(now_ms)
        error = self.validate_group_status(group_id, ApiKey.HEARTBEAT)
        if error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
            error = Errors.NONE  # the group is still loading: answer blindly
        if error is None:
            group = self.groups.get(group_id)
            error = self._heartbeat(group, member_id, group_instance_id, generation_id, step)
        step.effects.answer(request_id, HeartbeatResult(error))
        return step.effects

    def _heartbeat(
        self,
        group: GroupMetadata | None,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        step: Step,
    ) -> Errors:
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = static_members.validate_current_member(group, member_id, instance_id)
        if error is not None:
            return error
        member = group.members[member_id]
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        rebalance.schedule_heartbeat(member, step)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def handle_leave_group(
        self,
        group_id: str,
        members: Iterable[tuple[str, str | None]],
        request_id: int,
        now_ms: int,
    ) -> Effects:
        """``members``: (member id, group instance id) pairs (one for LeaveGroup v0-v2)."""
        step = self._step(now_ms)
        error = self.validate_group_status(group_id, ApiKey.LEAVE_GROUP)
        group = self.groups.get(group_id)
        if error is not None:
            result = LeaveGroupResult(error)
        elif group is None:
            result = LeaveGroupResult(
                Errors.NONE,
                tuple(MemberLeaveResult(m, i, Errors.UNKNOWN_MEMBER_ID) for m, i in members),
            )
        elif group.is_(GroupState.DEAD):
            result = LeaveGroupResult(Errors.COORDINATOR_NOT_AVAILABLE)
        else:
            leaves = tuple(
                MemberLeaveResult(m, i, self._leave(group, m, i, step)) for m, i in members
            )
            result = LeaveGroupResult(Errors.NONE, leaves)
        step.effects.answer(request_id, result)
        return step.effects

    def _leave(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, step: Step
    ) -> Errors:
        """One member of ``handleLeaveGroup``; v3+ may name a static member by its instance id
        alone (administrative removal)."""
        if member_id == NO_MEMBER_ID:
            current = None if instance_id is None else group.static_members.get(instance_id)
            if current is None:
                return Errors.UNKNOWN_MEMBER_ID
            rebalance.remove_member_and_update_group(group, current, step)
            return Errors.NONE
        if member_id in group.pending_members:
            rebalance.remove_pending_member_and_update_group(group, member_id, step)
            return Errors.NONE
        error = static_members.validate_current_member(group, member_id, instance_id)
        if error is not None:
            return error
        rebalance.remove_member_and_update_group(group, member_id, step)
        return Errors.NONE


def _new_member(member_id: str, request: JoinGroupRequest) -> MemberMetadata:
    return MemberMetadata(
        member_id=member_id,
        group_instance_id=request.group_instance_id,
        client_id=request.client_id,
        client_host=request.client_host,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=request.protocols,
    )


def _sync_error(
    group: GroupMetadata | None,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
    protocol_type: str | None,
    protocol_name: str | None,
) -> Errors | None:
    """``validateSyncGroup`` plus the states that refuse a SyncGroup."""
    if group is None:
        return Errors.UNKNOWN_MEMBER_ID
    if group.is_(GroupState.DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    error = static_members.validate_current_member(group, member_id, instance_id)
    if error is not None:
        return error
    if generation_id != group.generation_id:
        return Errors.ILLEGAL_GENERATION
    if protocol_type is not None and protocol_type != group.protocol_type:
        return Errors.INCONSISTENT_GROUP_PROTOCOL
    if protocol_name is not None and protocol_name != group.protocol_name:
        return Errors.INCONSISTENT_GROUP_PROTOCOL
    if group.is_(GroupState.EMPTY):
        return Errors.UNKNOWN_MEMBER_ID
    if group.is_(GroupState.PREPARING_REBALANCE):
        return Errors.REBALANCE_IN_PROGRESS
    return None
