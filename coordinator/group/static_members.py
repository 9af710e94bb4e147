"""Static membership of classic groups (KIP-345): a member named by ``group.instance.id``.

Theory of operation (Kafka 3.9's ``GroupCoordinator``: ``doStaticNewMemberJoinGroup``,
``updateStaticMemberAndRebalance``, ``validateCurrentMember``; ``GroupMetadata.replaceStaticMember``
and ``staticMembers``; the same rules as ``ClassicGroup`` in the new group coordinator)
------------------------------------------------------------------------------------------------
A static member joins with a ``group.instance.id`` (JoinGroup v5+). The group maps each instance
id to the member id holding it (``GroupMetadata.static_members``). The member id itself still
changes on every restart: a JoinGroup with an instance id and no member id gets a fresh member
id at once (``<instance id>-<suffix>``; never MEMBER_ID_REQUIRED, KIP-394 is for dynamic
members only).

* Unknown instance id: the member is added and the group rebalances, as a dynamic one.
* Known instance id (a restart, or a duplicate process): the old member id is *replaced*
  (``replace_static_member``): its member keeps its assignment under the new id, a JoinGroup or
  SyncGroup the old id still has parked is answered FENCED_INSTANCE_ID, and from now on any
  request naming the instance id with the old member id is FENCED_INSTANCE_ID
  (``validate_current_member``). What happens next depends on the group's state:

  - STABLE, and the protocol the group would select is the one it runs: no rebalance. The group
    record is stored with the new member id; once it is, the JoinGroup is answered with the
    current generation (``StaticRejoin``), the group's subscribed topics are computed again from
    the new subscription (as a reload of that record would), and the member's SyncGroup gets its
    old assignment.
    Below JoinGroup v9 the answer names the leader as it was before the replacement, so a
    restarted leader does not run an assignment a stable group would ignore; from v9 a restarted
    leader is told it leads and ``skip_assignment`` (KIP-814). If the store fails, the
    replacement is undone and the JoinGroup gets the store's error.
  - STABLE with a protocol change: the group rebalances.
  - COMPLETING_REBALANCE: the group rebalances (the leader may have assigned to the old id).
  - PREPARING_REBALANCE: the member simply waits for the join to complete.

A static member that stops sending requests is not removed when the join completes without it
(``rebalance.complete_join`` keeps static members): only its session timeout removes it, or a
LeaveGroup v3+ naming its instance id (administrative removal, with or without the member id).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pykraft.coordinator.group import rebalance
from pykraft.coordinator.group.consumer_protocol import subscribed_topics
from pykraft.coordinator.group.effects import NO_MEMBER_ID, JoinGroupResult, SyncGroupResult
from pykraft.coordinator.group.rebalance import JoiningMember, Step
from pykraft.coordinator.group.state import GroupMetadata, GroupState, MemberMetadata, Protocol
from pykraft.protocol.errors import Errors


def validate_current_member(
    group: GroupMetadata, member_id: str, group_instance_id: str | None
) -> Errors | None:
    """``validateCurrentMember``: an instance id must be held by ``member_id`` (else
    FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID when nobody holds it); the member must exist."""
    if group_instance_id is not None:
        current = group.static_members.get(group_instance_id)
        if current is None:
            return Errors.UNKNOWN_MEMBER_ID
        if current != member_id:
            return Errors.FENCED_INSTANCE_ID
    if not group.has(member_id):
        return Errors.UNKNOWN_MEMBER_ID
    return None


def new_static_member_id(group_instance_id: str, suffix: str) -> str:
    """``GroupMetadata.generateMemberId`` for a static member."""
    return f"{group_instance_id}-{suffix}"


def replace_static_member(
    group: GroupMetadata, group_instance_id: str, old_member_id: str, new_member_id: str, step: Step
) -> MemberMetadata:
    """``replaceStaticMember``: the member moves to ``new_member_id`` (same place in the member
    order, same assignment); what the old id still waits for is answered FENCED_INSTANCE_ID."""
    member = group.members[old_member_id]
    fenced = rebalance.join_error(old_member_id, Errors.FENCED_INSTANCE_ID)
    rebalance.answer_join(member, fenced, step)
    rebalance.answer_sync(member, SyncGroupResult(error=Errors.FENCED_INSTANCE_ID), step)
    member.member_id = new_member_id
    group.members = {
        (new_member_id if key == old_member_id else key): value
        for key, value in group.members.items()
    }
    if group.is_leader(old_member_id):
        group.leader_id = new_member_id
    if old_member_id in group.pending_sync_members:
        group.pending_sync_members.discard(old_member_id)
        group.pending_sync_members.add(new_member_id)
    group.static_members[group_instance_id] = new_member_id
    return member


@attrs.frozen(kw_only=True)
class StaticRejoin:
    """A known static member rejoined a STABLE group: its group record is being stored; the
    JoinGroup is answered once it is (``updateStaticMemberAndRebalance``' store callback)."""

    group: GroupMetadata
    group_instance_id: str
    old_member_id: str
    new_member_id: str
    # What the member had before, to undo the replacement when the store fails.
    old_protocols: tuple[Protocol, ...]
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    # The leader before the replacement: answered as leader below JoinGroup v9.
    leader_id: str | None
    # JoinGroup v9+ (KIP-814): a restarted leader is told to skip the assignment.
    supports_skipping_assignment: bool


# Store the group with each member's assignment; the StaticRejoin waits for that write.
StoreStaticRejoin = Callable[[StaticRejoin, Mapping[str, bytes]], None]


def join_known_static_member(
    group: GroupMetadata,
    group_instance_id: str,
    new_member_id: str,
    request: JoiningMember,
    request_id: int,
    supports_skipping_assignment: bool,
    store: StoreStaticRejoin,
    step: Step,
) -> None:
    """``updateStaticMemberAndRebalance``: a known instance id joined without a member id."""
    old_member_id = group.static_members[group_instance_id]
    leader_before = group.leader_id
    member = replace_static_member(group, group_instance_id, old_member_id, new_member_id, step)
    rebalance.schedule_heartbeat(member, step)
    pending = StaticRejoin(
        group=group,
        group_instance_id=group_instance_id,
        old_member_id=old_member_id,
        new_member_id=new_member_id,
        old_protocols=member.protocols,
        old_rebalance_timeout_ms=member.rebalance_timeout_ms,
        old_session_timeout_ms=member.session_timeout_ms,
        leader_id=leader_before,
        supports_skipping_assignment=supports_skipping_assignment,
    )
    member.protocols = request.protocols
    member.rebalance_timeout_ms = request.rebalance_timeout_ms
    member.session_timeout_ms = request.session_timeout_ms
    rebalance.await_join(member, request_id, step)
    state = group.state
    if state is GroupState.STABLE:
        if group.protocol_name == group.select_protocol():
            store(pending, {m.member_id: m.assignment for m in group.members.values()})
        else:
            rebalance.maybe_prepare_rebalance(group, step)
    elif state is GroupState.COMPLETING_REBALANCE:
        # The leader may have assigned to the old member id: assign again.
        rebalance.prepare_rebalance(group, step)
    else:
        assert state is GroupState.PREPARING_REBALANCE, f"a static member in a {state} group"


def complete_static_rejoin(pending: StaticRejoin, error: Errors, step: Step) -> None:
    """The group record of a ``StaticRejoin`` is stored (``error`` NONE) or failed."""
    group = pending.group
    member = group.members.get(pending.new_member_id)
    if member is None:
        return  # fenced again or gone meanwhile: its JoinGroup was answered then
    if error is not Errors.NONE:
        _undo_static_rejoin(pending, member, error, step)
        return
    # The stored record carries the member's new subscription and a reload computes the
    # subscribed topics from it (``loadGroup``): expiry and OffsetDelete must see them now, not
    # at the next generation.
    group.subscribed_topics = subscribed_topics(group)
    is_leader = group.is_leader(member.member_id)
    if pending.supports_skipping_assignment:
        result = rebalance.current_join_result(group, member.member_id)
        result = attrs.evolve(result, skip_assignment=is_leader)
    else:
        result = attrs.evolve(
            rebalance.current_join_result(group, member.member_id),
            members=(),
            leader_id=pending.leader_id or "",
        )
    rebalance.answer_join(member, result, step)


def _undo_static_rejoin(
    pending: StaticRejoin, member: MemberMetadata, error: Errors, step: Step
) -> None:
    """The store failed: the old member id holds the instance again; the JoinGroup gets the
    error with no member id (Kafka's revert in ``updateStaticMemberAndRebalance``)."""
    group = pending.group
    request_id = member.join_request
    member.join_request = None
    member.protocols = pending.old_protocols
    member.rebalance_timeout_ms = pending.old_rebalance_timeout_ms
    member.session_timeout_ms = pending.old_session_timeout_ms
    replace_static_member(
        group, pending.group_instance_id, pending.new_member_id, pending.old_member_id, step
    )
    rebalance.schedule_heartbeat(member, step)
    if request_id is not None:
        result = JoinGroupResult(
            member_id=NO_MEMBER_ID,
            error=error,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=pending.leader_id or "",
        )
        step.effects.answer(request_id, result)
