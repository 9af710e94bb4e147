"""Consumer groups (KIP-848) beside the classic ones in one coordinator: the heartbeat, leaving,
timeouts, describing, and the classic APIs' answers for a consumer group.

Theory of operation (Kafka 3.9's ``GroupMetadataManager.consumerGroupHeartbeat``)
--------------------------------------------------------------------------------
One heartbeat, one pass, in Kafka's order:

1. Check the request (``consumer_heartbeat.request_error``) and that this broker coordinates the
   group. A classic group with members that could not be upgraded (``unified``) owns the id:
   GROUP_ID_NOT_FOUND ("not a consumer group"). A classic group holding only offsets is shared:
   its offsets stay where they are (``self.groups``), the consumer group lives beside them.
2. Find the member: epoch 0 joins (a new member id, GROUP_MAX_SIZE_REACHED past
   ``group.consumer.max.size``, UNRELEASED_INSTANCE_ID for an instance id another live member
   holds); otherwise by its instance id when it has one (UNKNOWN_MEMBER_ID,
   FENCED_INSTANCE_ID: ``validate_member``), else by its member id, then FENCED_MEMBER_EPOCH
   (``member_epoch_error``).
3. Update the member from the heartbeat (null fields: unchanged). A new member, a changed
   subscription, or changed metadata of the subscribed topics (a regex matching a topic created
   since) bumps the *group epoch*.
4. Group epoch ahead of the target assignment epoch: run the assignor
   (``ConsumerGroup.compute_target_assignment``) and write the members whose target changed.
5. Reconcile the member (``consumer_member.reconcile``); write its current assignment if it
   changed; arm its session timeout, and its rebalance timeout while it must revoke.
6. Answer with its member epoch, ``group.consumer.heartbeat.interval.ms`` and, for a full
   heartbeat or a changed assignment, the partitions it may consume.

Records are applied to memory at once (Kafka replays them into its timeline); the answer waits
until they are appended (``PendingConsumerWrite``), as Kafka's runtime completes a write only
after the log has it; a failed append restores the group as it was before the write
(``coordinator.group.consumer_writes``). Leaving (epoch -1), a session timeout, and a
rebalance timeout (partitions not revoked in time) remove the member with tombstones and bump
the group epoch; a static member leaving with epoch -2 keeps its place and assigned partitions
(not those pending revocation) until its session times out or its instance id rejoins under a
new member id, taking over at member epoch 0 without a new group epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from pykraft.coordinator.group import consumer_records as records
from pykraft.coordinator.group.assignors import Assignment
from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_heartbeat import (
    ConsumerGroupConfig,
    ConsumerGroupHeartbeatRequest,
    Refusal,
    assignment_record_changed,
    failed,
    is_simple_group,
    member_epoch_error,
    metadata_changed,
    refused,
    subscription_changed,
    updated_member,
    validate_member,
)
from pykraft.coordinator.group.consumer_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
    assignment_changed,
    reconcile,
)
from pykraft.coordinator.group.consumer_records import TopicMetadata
from pykraft.coordinator.group.consumer_timers import MemberTimers
from pykraft.coordinator.group.consumer_writes import (
    GroupSnapshot,
    PendingConsumerWrite,
    copy_group,
)
from pykraft.coordinator.group.effects import (
    Append,
    ConsumerGroupHeartbeatResult,
    CoordinatorRecord,
    Effects,
    Result,
)
from pykraft.coordinator.group.offsets import group_append_error
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.state import GroupMetadata
from pykraft.protocol.errors import Errors


class ConsumerGroupCore:
    """The consumer groups of one coordinator. It shares the classic manager's placement and
    writes through the two callables it is handed."""

    def __init__(
        self,
        config: GroupConfig,
        consumer_config: ConsumerGroupConfig,
        *,
        new_member_id: Callable[[], str],
        new_write: Callable[[PendingConsumerWrite], int],
        partition_for: Callable[[str], int],
    ) -> None:
        self.config = config
        self.consumer_config = consumer_config
        self.groups: dict[str, ConsumerGroup] = {}
        # topic name -> id and partition count, from the broker's metadata image.
        self.topics: Mapping[str, TopicMetadata] = {}
        self.timers = MemberTimers()
        self._new_member_id = new_member_id
        self._new_write = new_write
        self._partition_for = partition_for

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(
        self,
        request: ConsumerGroupHeartbeatRequest,
        classic: GroupMetadata | None,
        request_id: int,
        now_ms: int,
        effects: Effects,
        written_before: Iterable[CoordinatorRecord] = (),
        before: GroupSnapshot | None = None,
    ) -> None:
        """``consumerGroupHeartbeat``, after the request's checks (``request_error``) and the
        group's status (``validate_group_status``), both the caller's; ``written_before``: the
        records of an upgrade of the group just done (written first, in the same batch), and
        ``before`` the group as it was before that upgrade."""
        if before is None:
            before = self.snapshot(request.group_id)
        if classic is not None and not is_simple_group(classic):
            message = f"Group {request.group_id} is not a consumer group."
            effects.answer(request_id, refused((Errors.GROUP_ID_NOT_FOUND, message)))
            return
        written: list[CoordinatorRecord] = list(written_before)
        if request.is_leave:
            outcome = self._leave(request, now_ms, written)
        else:
            outcome = self._join_or_heartbeat(request, now_ms, written)
        result = outcome if isinstance(outcome, ConsumerGroupHeartbeatResult) else refused(outcome)
        self._write(before, written, request_id, result, now_ms, effects)

    def _join_or_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, now_ms: int, written: list[CoordinatorRecord]
    ) -> ConsumerGroupHeartbeatResult | Refusal:
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                return Errors.GROUP_ID_NOT_FOUND, f"Consumer group {request.group_id} not found."
            group = ConsumerGroup(request.group_id)
        found = self._member_for(group, request, written)
        if not isinstance(found[0], ConsumerGroupMember):
            return found
        member, replaced = found
        is_new = member.member_id not in group.members
        updated = updated_member(member, request)
        self.groups[group.group_id] = group
        reconciled = self._update_and_reconcile(
            group, member, updated, request.topic_partitions, written, replaced=replaced
        )
        self._arm_timers(group.group_id, reconciled, now_ms, changed=reconciled != updated)
        show = request.is_full or is_new or assignment_changed(member, reconciled)
        return ConsumerGroupHeartbeatResult(
            error=Errors.NONE,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.consumer_config.heartbeat_interval_ms,
            assignment=dict(reconciled.assigned_partitions) if show else None,
        )

    def _update_and_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        owned: Assignment | None,
        written: list[CoordinatorRecord],
        *,
        replaced: bool = False,
    ) -> ConsumerGroupMember:
        """Steps 3-5 of a heartbeat or a classic member's JoinGroup: write the member, bump
        the group epoch if its subscription (or the subscribed topics) changed, compute the
        target if due, reconcile the member given what it ``owned``. A static member's new
        incarnation (``replaced``) is no new member: it keeps its place."""
        gid = group.group_id
        is_new = member.member_id not in group.members
        bump = (is_new and not replaced) or subscription_changed(member, updated)
        if is_new or metadata_changed(member, updated):
            written.append(records.member_metadata_record(gid, updated))
        group.update_member(updated)
        if group.refresh_subscription_metadata(self.topics, written) or bump:
            self._bump_group_epoch(group, written)
        group.maybe_compute_target_assignment(self._assignor_for(group), written)
        reconciled = reconcile(
            updated,
            group.assignment_epoch,
            group.target_of(updated.member_id),
            group.current_partition_epoch,
            owned,
        )
        if is_new or assignment_record_changed(updated, reconciled):
            group.update_member(reconciled)
            written.append(records.current_assignment_record(gid, reconciled))
        return reconciled

    def _member_for(
        self,
        group: ConsumerGroup,
        request: ConsumerGroupHeartbeatRequest,
        written: list[CoordinatorRecord],
    ) -> tuple[ConsumerGroupMember, bool] | Refusal:
        """The member this heartbeat is from, and whether it replaces a static member."""
        if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            found = validate_member(group, request.member_id, request.instance_id)
            if not isinstance(found, ConsumerGroupMember):
                return found
            refusal = member_epoch_error(found, request.member_epoch, request.topic_partitions)
            return (found, False) if refusal is None else refusal
        member = group.members.get(request.member_id) if request.member_id else None
        if member is not None:
            # A known member rejoining: it gave up its partitions; it starts over.
            restarted = attrs.evolve(
                member,
                member_epoch=0,
                previous_member_epoch=0,
                state=MemberState.STABLE,
                assigned_partitions={},
                partitions_pending_revocation={},
            )
            return restarted, False
        if len(group.members) >= self.consumer_config.max_size:
            return (
                Errors.GROUP_MAX_SIZE_REACHED,
                "The consumer group has reached its maximum capacity of "
                f"{self.consumer_config.max_size} members.",
            )
        member_id = request.member_id or self._new_member_id()
        holder = None
        if request.instance_id is not None:
            holder = group.member_by_instance_id(request.instance_id)
        if holder is None:
            return ConsumerGroupMember(member_id=member_id), False
        if holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return (
                Errors.UNRELEASED_INSTANCE_ID,
                f"Static member {holder.member_id} with instance id {request.instance_id} "
                f"is still in group {group.group_id}.",
            )
        return self._replace_static_member(group, holder, member_id, written), True

    def _replace_static_member(
        self,
        group: ConsumerGroup,
        old: ConsumerGroupMember,
        member_id: str,
        written: list[CoordinatorRecord],
    ) -> ConsumerGroupMember:
        """``getOrMaybeSubscribeStaticConsumerGroupMember`` + ``replaceMember``: the new member
        id takes over the old one's partitions and target assignment at member epoch 0 and
        reconciles from there; the group epoch does not move."""
        target = group.target_of(old.member_id)
        self._remove(group, old.member_id, written)
        group.target_assignment[member_id] = target
        written.append(records.target_assignment_member_record(group.group_id, member_id, target))
        return attrs.evolve(old, member_id=member_id, member_epoch=0, previous_member_epoch=0)

    def _leave(
        self, request: ConsumerGroupHeartbeatRequest, now_ms: int, written: list[CoordinatorRecord]
    ) -> ConsumerGroupHeartbeatResult | Refusal:
        """``consumerGroupLeave``: -1 removes the member; -2 (a static member, found by its
        instance id) keeps its place and assigned partitions until its session times out
        (``consumerGroupStaticMemberGroupLeave``: epoch -2, nothing pending revocation)."""
        group = self.groups.get(request.group_id)
        if group is None:
            return Errors.GROUP_ID_NOT_FOUND, f"Consumer group {request.group_id} not found."
        found = validate_member(group, request.member_id, request.instance_id)
        if not isinstance(found, ConsumerGroupMember):
            return found
        member = found
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            left = attrs.evolve(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                partitions_pending_revocation={},
            )
            group.update_member(left)
            written.append(records.current_assignment_record(group.group_id, left))
            self.timers.of(group.group_id, member.member_id, now_ms).rebalance_ms = None
        else:
            self._fence(group, member.member_id, written)
        return ConsumerGroupHeartbeatResult(
            error=Errors.NONE, member_id=member.member_id, member_epoch=request.member_epoch
        )

    # ------------------------------------------------------------------ group changes

    def _fence(
        self, group: ConsumerGroup, member_id: str, written: list[CoordinatorRecord]
    ) -> None:
        """``removeMember`` + a group epoch bump: the member's partitions are free again."""
        self._remove(group, member_id, written)
        group.refresh_subscription_metadata(self.topics, written)
        self._bump_group_epoch(group, written)

    @staticmethod
    def _bump_group_epoch(group: ConsumerGroup, written: list[CoordinatorRecord]) -> None:
        group.group_epoch += 1
        written.append(records.group_epoch_record(group.group_id, group.group_epoch))

    def _remove(
        self, group: ConsumerGroup, member_id: str, written: list[CoordinatorRecord]
    ) -> None:
        group.remove_member(member_id)
        self.timers.remove(group.group_id, member_id)
        written.extend(records.member_tombstones(group.group_id, member_id))

    def _assignor_for(self, group: ConsumerGroup) -> str:
        return group.preferred_assignor(self.consumer_config.assignors[0])

    # ------------------------------------------------------------------ timers

    def _arm_timers(
        self, group_id: str, member: ConsumerGroupMember, now_ms: int, changed: bool = False
    ) -> None:
        """A heartbeat: the session restarts; the rebalance timer follows the reconciliation
        (``coordinator.group.consumer_timers``)."""
        self.timers.session(group_id, member, now_ms, self.consumer_config.session_timeout_ms)
        self.timers.reconciled(group_id, member, now_ms, changed)

    def next_deadline_ms(self) -> int | None:
        return self.timers.next_deadline_ms()

    def poll(self, now_ms: int, effects: Effects) -> None:
        """Fence every member one of whose timers has expired."""
        for group_id, member_id in self.timers.expired(now_ms):
            group = self.groups.get(group_id)
            if group is None or member_id not in group.members:
                self.timers.remove(group_id, member_id)
                continue
            before = self.snapshot(group_id)
            written: list[CoordinatorRecord] = []
            self._fence(group, member_id, written)
            self._write(before, written, None, None, now_ms, effects)

    def _write(
        self,
        before: GroupSnapshot,
        written: list[CoordinatorRecord],
        request_id: int | None,
        result: Result | None,
        now_ms: int,
        effects: Effects,
    ) -> None:
        if not written or result is None or getattr(result, "error", None) is not Errors.NONE:
            if request_id is not None and result is not None:
                effects.answer(request_id, result)
            if not written:
                return
            result, request_id = None, None
        write_id = self._new_write(PendingConsumerWrite(request_id, result, before))
        append = Append(write_id, self._partition_for(before.group_id), tuple(written), now_ms)
        effects.appends.append(append)

    @staticmethod
    def on_append_done(pending: PendingConsumerWrite, error: Errors, effects: Effects) -> None:
        """Answer the write's request: its result once appended, else the append's error
        (the caller has restored the group: ``restore``)."""
        if pending.request_id is None or pending.result is None:
            return
        if error is Errors.NONE:
            effects.answer(pending.request_id, pending.result)
        else:
            effects.answer(pending.request_id, failed(pending.result, group_append_error(error)))

    def snapshot(self, group_id: str, classic: GroupMetadata | None = None) -> GroupSnapshot:
        """The group as it is now, to go back to if the next write fails."""
        group = self.groups.get(group_id)
        copy = None if group is None else copy_group(group)
        return GroupSnapshot(group_id, copy, self.timers.of_group(group_id), classic)

    def restore(self, snapshot: GroupSnapshot) -> None:
        """Back to ``snapshot`` after a failed write (``revertLastWrittenOffset``)."""
        group_id = snapshot.group_id
        self.groups.pop(group_id, None)
        if snapshot.group is not None:
            self.groups[group_id] = copy_group(snapshot.group)
        self.timers.replace_group(group_id, snapshot.deadlines)

    # ------------------------------------------------------------------ loading

    def install(self, groups: Iterable[ConsumerGroup], now_ms: int) -> None:
        """Groups replayed from a partition's log: every member's session starts now. The
        assignor is not in the records: it is the one the members ask for, as Kafka derives
        ``preferredServerAssignor`` from them."""
        for group in groups:
            group.assignor_name = self._assignor_for(group)
            self.groups[group.group_id] = group
            for member in group.members.values():
                self._arm_timers(group.group_id, member, now_ms)

    def unload(self, partition: int) -> None:
        for group_id in [g for g in self.groups if self._partition_for(g) == partition]:
            self.unload_group(group_id)

    def unload_group(self, group_id: str) -> None:
        self.groups.pop(group_id, None)
        self.timers.replace_group(group_id, {})
