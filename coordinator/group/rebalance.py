"""The rebalance protocol over one group: joins, generations, assignments and timers.

Theory of operation (Kafka's ``GroupCoordinator`` for classic groups; ``static_members``
adds what differs for members with a ``group.instance.id``)
-------------------------------------------------------------------------------------------
A rebalance starts (``prepare_rebalance``) when a member joins, the leader rejoins, a member's
metadata changes, or a member leaves or fails. The group goes to PREPARING_REBALANCE and waits
for every member to send JoinGroup again, at most the largest rebalance timeout of its members
(Kafka's ``DelayedJoin``). A group that was EMPTY waits ``group.initial.rebalance.delay.ms``
first, and again each time a new member arrived during the wait, until the rebalance timeout is
used up (``InitialDelayedJoin``). Then ``complete_join`` drops the members that did not rejoin,
starts the next generation with the protocol most members prefer, answers every waiting
JoinGroup (the leader's answer lists the members) and expects a SyncGroup from each member
within the rebalance timeout (``DelayedSync``: members that do not send one are removed and the
group rebalances again). The leader's SyncGroup carries the assignment; once stored in
``__consumer_offsets`` every waiting SyncGroup gets its member's share and the group is STABLE.

Sessions: every member has a heartbeat deadline (``session.timeout.ms`` after its last
heartbeat, JoinGroup answer, SyncGroup answer or offset commit). When it passes the member is
removed and the group rebalances, unless the member is waiting in a rebalance (its JoinGroup or
SyncGroup is parked here). A member that joined but has no generation yet expires after
``NEW_MEMBER_JOIN_TIMEOUT_MS``; a member id handed out with MEMBER_ID_REQUIRED (JoinGroup v4+)
is forgotten after the session timeout unless it joins.

Everything here is a function of a group, a ``Step`` (the time, the ``Effects`` being collected
and how to store the group) and the request's data.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping

import attrs

from pykraft.coordinator.group.effects import (
    NO_MEMBER_ID,
    Effects,
    JoinedMember,
    JoinGroupResult,
    SyncGroupResult,
)
from pykraft.coordinator.group.state import (
    GroupMetadata,
    GroupState,
    InitialJoin,
    MemberMetadata,
    Protocol,
)
from pykraft.protocol.errors import Errors

# GroupCoordinator.NewMemberJoinTimeoutMs: a new member's JoinGroup may wait this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# Kafka's group.max.size default (Int.MaxValue): no limit unless configured.
GROUP_MAX_SIZE = 2**31 - 1


class JoiningMember(typing.Protocol):
    """What a JoinGroup says about the member (``coordinator.JoinGroupRequest``)."""

    @property
    def protocols(self) -> tuple[Protocol, ...]: ...

    @property
    def rebalance_timeout_ms(self) -> int: ...

    @property
    def session_timeout_ms(self) -> int: ...


# Store the group's record: (group, each member's assignment, or None for an empty group).
StoreGroup = Callable[[GroupMetadata, Mapping[str, bytes] | None], None]


@attrs.frozen(kw_only=True)
class GroupConfig:
    """The broker properties of the group coordinator, with Kafka's defaults."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = GROUP_MAX_SIZE
    # offset.metadata.max.bytes
    offset_metadata_max_bytes: int = 4096
    offsets_topic_num_partitions: int = 50
    # Used when this broker creates __consumer_offsets (only once that many brokers are alive).
    offsets_topic_replication_factor: int = 3
    # offsets.retention.minutes (7 days) in ms, and offsets.retention.check.interval.ms (KIP-211).
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600_000


@attrs.define
class Step:
    """One call into the coordinator: its time, what it collects, how it stores a group."""

    now_ms: int
    config: GroupConfig
    store_group: StoreGroup
    effects: Effects = attrs.Factory(Effects)


# ------------------------------------------------------------------ answering waiters


def answer_join(member: MemberMetadata, result: JoinGroupResult, step: Step) -> None:
    """``maybeInvokeJoinCallback``."""
    if member.join_request is not None:
        step.effects.answer(member.join_request, result)
        member.join_request = None


def answer_sync(member: MemberMetadata, result: SyncGroupResult, step: Step) -> bool:
    """``maybeInvokeSyncCallback``; True when the member was waiting."""
    if member.sync_request is None:
        return False
    step.effects.answer(member.sync_request, result)
    member.sync_request = None
    return True


def await_join(member: MemberMetadata, request_id: int, step: Step) -> None:
    """Park a JoinGroup; one the member sent before and gave up on is answered now, so every
    request gets exactly one answer (Kafka drops the earlier callback)."""
    answer_join(member, join_error(member.member_id, Errors.REBALANCE_IN_PROGRESS), step)
    member.join_request = request_id


def await_sync(member: MemberMetadata, request_id: int, step: Step) -> None:
    answer_sync(member, SyncGroupResult(error=Errors.REBALANCE_IN_PROGRESS), step)
    member.sync_request = request_id


def join_error(member_id: str, error: Errors) -> JoinGroupResult:
    return JoinGroupResult(member_id=member_id, error=error)


def current_join_result(group: GroupMetadata, member_id: str) -> JoinGroupResult:
    """This generation's JoinGroup answer for ``member_id`` (members only for the leader)."""
    members: tuple[JoinedMember, ...] = ()
    if group.is_leader(member_id):
        assert group.protocol_name is not None
        protocol = group.protocol_name
        members = tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in group.members.values()
        )
    return JoinGroupResult(
        member_id=member_id,
        error=Errors.NONE,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id or "",
        members=members,
    )


def schedule_heartbeat(member: MemberMetadata, step: Step, timeout_ms: int | None = None) -> None:
    """``completeAndScheduleNextExpiration``: the session starts again now."""
    timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
    member.heartbeat_deadline_ms = step.now_ms + timeout


# ------------------------------------------------------------------ joining


def add_member_and_rebalance(
    group: GroupMetadata, member: MemberMetadata, request_id: int, step: Step
) -> None:
    member.is_new = True
    if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
        group.new_member_added = True  # lets the initial delay wait once more
    group.add(member)
    member.join_request = request_id
    # The session cannot run yet (no member id on the client); a new member's JoinGroup
    # may wait this long instead, then it is dropped and must join again.
    schedule_heartbeat(member, step, NEW_MEMBER_JOIN_TIMEOUT_MS)
    maybe_prepare_rebalance(group, step)


def update_member_and_rebalance(
    group: GroupMetadata,
    member: MemberMetadata,
    request: JoiningMember,
    request_id: int,
    step: Step,
) -> None:
    """``updateMemberAndRebalance``; the new timeouts count too (Kafka 3.7's
    ``ClassicGroup.updateMember``)."""
    member.protocols = request.protocols
    member.rebalance_timeout_ms = request.rebalance_timeout_ms
    member.session_timeout_ms = request.session_timeout_ms
    await_join(member, request_id, step)
    maybe_prepare_rebalance(group, step)


def maybe_prepare_rebalance(group: GroupMetadata, step: Step) -> None:
    if group.can_rebalance():
        prepare_rebalance(group, step)


def prepare_rebalance(group: GroupMetadata, step: Step) -> None:
    if group.is_(GroupState.COMPLETING_REBALANCE):
        reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS, step)
    group.pending_sync_members.clear()
    group.sync_deadline_ms = None
    was_empty = group.is_(GroupState.EMPTY)
    group.transition_to(GroupState.PREPARING_REBALANCE, step.now_ms)
    if was_empty:
        delay_ms = step.config.group_initial_rebalance_delay_ms
        remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
        group.initial_join = InitialJoin(delay_ms=delay_ms, remaining_ms=remaining_ms)
        group.join_deadline_ms = step.now_ms + delay_ms
    else:
        group.join_deadline_ms = step.now_ms + group.rebalance_timeout_ms()
        maybe_complete_join(group, step)


def maybe_complete_join(group: GroupMetadata, step: Step) -> None:
    """``DelayedJoin.tryComplete``: done once every member rejoined (the initial delay only
    ends at its deadline)."""
    if (
        group.is_(GroupState.PREPARING_REBALANCE)
        and group.initial_join is None
        and group.has_all_members_joined()
    ):
        complete_join(group, step)


def expire_join(group: GroupMetadata, step: Step) -> None:
    """The join deadline passed: the initial delay waits again or the join completes."""
    initial = group.initial_join
    if initial is not None and group.new_member_added and initial.remaining_ms != 0:
        group.new_member_added = False
        delay_ms = min(step.config.group_initial_rebalance_delay_ms, initial.remaining_ms)
        remaining_ms = max(initial.remaining_ms - initial.delay_ms, 0)
        group.initial_join = InitialJoin(delay_ms=delay_ms, remaining_ms=remaining_ms)
        group.join_deadline_ms = step.now_ms + delay_ms
        return
    complete_join(group, step)


def complete_join(group: GroupMetadata, step: Step) -> None:
    """``onCompleteJoin``: drop the dynamic members that did not rejoin (a static one stays
    until its session expires, KIP-345), start the next generation, answer."""
    for member in group.not_yet_rejoined_members():
        if member.group_instance_id is None:
            drop_member(group, member.member_id, step)
    if group.is_(GroupState.DEAD):
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Only static members can be here (dynamic ones were dropped above): wait again.
        group.initial_join = None
        group.join_deadline_ms = step.now_ms + group.rebalance_timeout_ms()
        return
    group.init_next_generation(step.now_ms)
    if group.is_(GroupState.EMPTY):
        step.store_group(group, None)
        return
    for member in group.members.values():
        answer_join(member, current_join_result(group, member.member_id), step)
        schedule_heartbeat(member, step)
        member.is_new = False
        group.pending_sync_members.add(member.member_id)
    group.sync_generation = group.generation_id
    group.sync_deadline_ms = step.now_ms + group.rebalance_timeout_ms()


# ------------------------------------------------------------------ syncing


def remove_pending_sync_member(group: GroupMetadata, member_id: str) -> None:
    group.pending_sync_members.discard(member_id)
    if not group.pending_sync_members:
        group.sync_deadline_ms = None  # DelayedSync completes: everyone synced


def set_and_propagate_assignment(
    group: GroupMetadata, assignment: Mapping[str, bytes], step: Step
) -> None:
    assert group.is_(GroupState.COMPLETING_REBALANCE)
    for member in group.members.values():
        member.assignment = assignment.get(member.member_id, b"")
    propagate_assignment(group, Errors.NONE, step)


def reset_and_propagate_assignment_error(group: GroupMetadata, error: Errors, step: Step) -> None:
    assert group.is_(GroupState.COMPLETING_REBALANCE)
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(group, error, step)


def propagate_assignment(group: GroupMetadata, error: Errors, step: Step) -> None:
    ok = error is Errors.NONE
    for member in group.members.values():
        result = SyncGroupResult(
            error=error,
            protocol_type=group.protocol_type if ok else None,
            protocol_name=group.protocol_name if ok else None,
            assignment=member.assignment,
        )
        if answer_sync(member, result, step):
            # A session that expired while the member waited was ignored: restart it.
            schedule_heartbeat(member, step)


# ------------------------------------------------------------------ leaving and expiring


def drop_member(group: GroupMetadata, member_id: str, step: Step) -> None:
    """Remove a member; a request it still has parked is answered UNKNOWN_MEMBER_ID."""
    member = group.remove(member_id)
    if member is None:
        return
    answer_join(member, join_error(NO_MEMBER_ID, Errors.UNKNOWN_MEMBER_ID), step)
    answer_sync(member, SyncGroupResult(error=Errors.UNKNOWN_MEMBER_ID), step)
    member.heartbeat_deadline_ms = None


def remove_member_and_update_group(group: GroupMetadata, member_id: str, step: Step) -> None:
    drop_member(group, member_id, step)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        maybe_prepare_rebalance(group, step)
    elif group.is_(GroupState.PREPARING_REBALANCE):
        maybe_complete_join(group, step)


def remove_pending_member_and_update_group(
    group: GroupMetadata, member_id: str, step: Step
) -> None:
    group.remove(member_id)
    if group.is_(GroupState.PREPARING_REBALANCE):
        maybe_complete_join(group, step)


def expire(group: GroupMetadata, step: Step) -> None:
    """Act on every deadline of ``group`` that has passed by ``step.now_ms``."""
    now_ms = step.now_ms
    for member_id, pending_deadline in list(group.pending_members.items()):
        if pending_deadline <= now_ms and member_id in group.pending_members:
            remove_pending_member_and_update_group(group, member_id, step)
    for member in list(group.members.values()):
        deadline = member.heartbeat_deadline_ms
        if deadline is None or deadline > now_ms or not group.has(member.member_id):
            continue
        member.heartbeat_deadline_ms = None
        if not member.has_satisfied_heartbeat():
            remove_member_and_update_group(group, member.member_id, step)
    if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
        expire_join(group, step)
    if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
        expire_sync(group, step)


def expire_sync(group: GroupMetadata, step: Step) -> None:
    """``onExpirePendingSync``: members that sent no SyncGroup in time are removed."""
    group.sync_deadline_ms = None
    if group.sync_generation != group.generation_id or group.state not in (
        GroupState.COMPLETING_REBALANCE,
        GroupState.STABLE,
    ):
        return
    missing = sorted(group.pending_sync_members)
    if not missing:
        return
    for member_id in missing:
        drop_member(group, member_id, step)
    prepare_rebalance(group, step)


def next_deadline_ms(group: GroupMetadata) -> int | None:
    deadlines = list(group.pending_members.values())
    for member in group.members.values():
        if member.heartbeat_deadline_ms is not None:
            deadlines.append(member.heartbeat_deadline_ms)
    for deadline in (group.join_deadline_ms, group.sync_deadline_ms):
        if deadline is not None:
            deadlines.append(deadline)
    return min(deadlines, default=None)
