"""One member of a consumer group (KIP-848) and its reconciliation towards the target assignment.

Theory of operation (Kafka's ``ConsumerGroupMember``, ``MemberState`` and
``CurrentAssignmentBuilder``)
------------------------------------------------------------------------------------------
A member holds ``assigned_partitions`` (what it may consume now) and
``partitions_pending_revocation`` (what it must give up before anything else happens); both are
"owned" by it, so no other member is given them. The group's target assignment (epoch ``E``)
says what it should own. Reconciling moves it there in steps, revoke before assign:

* ``STABLE``: it owns its target at epoch ``E``. A newer target epoch starts a new step.
* ``UNREVOKED_PARTITIONS``: it owns partitions the target takes away. It keeps its member epoch
  (one more after a revocation it just finished: Kafka's ``build`` passes ``memberEpoch + 1``)
  and only the partitions it may retain, and waits until a heartbeat's owned partitions show
  the revoked ones are gone (or its rebalance timeout fences it).
  -> next step once revoked.
* ``UNRELEASED_PARTITIONS``: it is at epoch ``E`` but some target partitions are still owned by
  another member (not yet revoked there); it gets them as they are released.
  -> ``STABLE`` once it has them all; -> next step on a newer target epoch.
* ``UNKNOWN``: never produced here; Kafka's placeholder for an unreadable state.

Each step (``compute_next_assignment``): retained = current ∩ target; pending revocation =
current - target; a target partition not yet owned is assigned only when no member owns it
(its partition epoch is -1). Revocations first: while any, the member stays at its epoch;
otherwise it moves to epoch ``E``, UNRELEASED while a target partition is still held elsewhere.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

import attrs

from pykraft.coordinator.group.assignors import Assignment

NO_PARTITION_EPOCH = -1
# The member epoch a heartbeat sends to join, to leave, and a static member to leave for now.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.Enum):
    """Kafka's ``MemberState`` with its record values (``ConsumerGroupCurrentMemberAssignment``'s
    ``State``)."""

    STABLE = 1
    UNREVOKED_PARTITIONS = 2
    UNRELEASED_PARTITIONS = 3
    UNKNOWN = 0

    @property
    def label(self) -> str:
        return self.name


EMPTY_ASSIGNMENT: Assignment = {}


@attrs.frozen(kw_only=True)
class ConsumerGroupMember:
    """Kafka's ``ConsumerGroupMember`` (immutable: every change is a new value)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor_name: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned_partitions: Assignment = attrs.field(factory=dict)
    partitions_pending_revocation: Assignment = attrs.field(factory=dict)
    # A member still on the classic protocol (JoinGroup/SyncGroup) inside a consumer group,
    # KIP-848's online upgrade: its JoinGroup protocols (name, metadata), Kafka's
    # ClassicMemberMetadata; None for a consumer-protocol member.
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None
    # Its JoinGroup session timeout (ClassicMemberMetadata's SessionTimeoutMs); None for a
    # consumer-protocol member.
    classic_session_timeout_ms: int | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_protocols is not None

    def owned(self) -> set[tuple[str, int]]:
        """Every partition this member holds: assigned and not yet revoked."""
        return _pairs(self.assigned_partitions) | _pairs(self.partitions_pending_revocation)


def _pairs(assignment: Assignment) -> set[tuple[str, int]]:
    return {(topic, p) for topic, partitions in assignment.items() for p in partitions}


def _from_pairs(pairs: set[tuple[str, int]]) -> dict[str, frozenset[int]]:
    by_topic: dict[str, set[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, set()).add(partition)
    return {topic: frozenset(partitions) for topic, partitions in sorted(by_topic.items())}


def normalize(assignment: Assignment) -> dict[str, frozenset[int]]:
    """Drop empty topics so equal assignments compare equal."""
    return {t: frozenset(ps) for t, ps in sorted(assignment.items()) if ps}


def is_subset(owned: Assignment | None, assignment: Assignment) -> bool:
    """Kafka's ``isSubset``: every partition of ``owned`` is in ``assignment``."""
    if owned is None:
        return False
    return _pairs(owned) <= _pairs(assignment)


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    current_partition_epoch: Callable[[str, int], int],
    owned_topic_partitions: Assignment | None,
) -> ConsumerGroupMember:
    """``CurrentAssignmentBuilder.build``: the member's next state. ``owned_topic_partitions``
    is what its heartbeat says it owns (None: the heartbeat did not say)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return compute_next_assignment(
                member, target_epoch, target, current_partition_epoch, owned_topic_partitions
            )
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(member.partitions_pending_revocation, owned_topic_partitions):
            return member
        # Revoked: the member moves on to the next epoch (CAB ``memberEpoch() + 1``).
        return compute_next_assignment(
            member,
            target_epoch,
            target,
            current_partition_epoch,
            owned_topic_partitions,
            revoking_epoch=member.member_epoch + 1,
        )
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return compute_next_assignment(
            member, target_epoch, target, current_partition_epoch, owned_topic_partitions
        )
    raise AssertionError(f"member {member.member_id} is in state {member.state.name}")


def _still_owns(revoked: Assignment, owned: Assignment | None) -> bool:
    """``ownsRevokedPartitions``: without a list in the heartbeat, assume it still owns them."""
    if owned is None:
        return True
    return bool(_pairs(owned) & _pairs(revoked))


def compute_next_assignment(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    current_partition_epoch: Callable[[str, int], int],
    owned_topic_partitions: Assignment | None = None,
    revoking_epoch: int | None = None,
) -> ConsumerGroupMember:
    """``CurrentAssignmentBuilder.computeNextAssignment`` (see the module docstring). A
    partition this member itself is revoking is not "unreleased" when the target gives it back;
    revocation is skipped when the heartbeat shows the member no longer owns those partitions.
    ``revoking_epoch``: the member epoch while it revokes (default: its own; one more after a
    revocation just done)."""
    current = _pairs(member.assigned_partitions)
    wanted = _pairs(target)
    revoking = _pairs(member.partitions_pending_revocation)
    assigned = current & wanted
    pending_revocation = current - wanted
    unreleased = False
    for topic, partition in sorted(wanted - current):
        epoch = current_partition_epoch(topic, partition)
        if epoch == NO_PARTITION_EPOCH or (topic, partition) in revoking:
            assigned.add((topic, partition))
        else:
            unreleased = True
    if pending_revocation and _still_owns(_from_pairs(pending_revocation), owned_topic_partitions):
        # Revoke first: keep the epoch; the newly freed partitions come in the next step.
        return attrs.evolve(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            previous_member_epoch=member.member_epoch,
            member_epoch=member.member_epoch if revoking_epoch is None else revoking_epoch,
            assigned_partitions=_from_pairs(current & wanted),
            partitions_pending_revocation=_from_pairs(pending_revocation),
        )
    return attrs.evolve(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        previous_member_epoch=member.member_epoch,
        member_epoch=target_epoch,
        assigned_partitions=_from_pairs(assigned),
        partitions_pending_revocation={},
    )


def assignment_changed(before: ConsumerGroupMember, after: ConsumerGroupMember) -> bool:
    return normalize(before.assigned_partitions) != normalize(after.assigned_partitions)


def total_partitions(assignment: Mapping[str, frozenset[int]]) -> int:
    return sum(len(ps) for ps in assignment.values())
