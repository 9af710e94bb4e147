"""The groups this broker coordinates, where they live, and what is written about them.

Theory of operation (Kafka's ``GroupMetadataManager`` and the placement half of
``GroupCoordinator``)
-------------------------------------------------------------------------------------------
A group belongs to partition ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`` of
``__consumer_offsets``; the broker leading that partition coordinates it. Per partition this
manager is in one ``PartitionStatus``:

* not owned (absent): requests for its groups get NOT_COORDINATOR (clients look up the
  coordinator again). -> LOADING when this broker is elected leader (``begin_loading``).
* ``LOADING``: the shell replays the partition's log; requests get COORDINATOR_LOAD_IN_PROGRESS
  (SyncGroup: REBALANCE_IN_PROGRESS, Heartbeat: NONE, as Kafka answers older clients).
  -> ACTIVE with the loaded groups (``complete_loading``); -> absent when leadership moves on.
* ``ACTIVE``: requests are served. -> absent when leadership moves away (``unload``: every group
  of the partition goes DEAD and each parked JoinGroup/SyncGroup is answered NOT_COORDINATOR).

Writes: a group record or a batch of offset commits becomes an ``Append`` with a write id; the
shell appends it with acks=-1 and reports back through ``on_append_done``, which completes the
SyncGroup, OffsetCommit or TxnOffsetCommit waiting for it. Transactional offsets then wait for
their transaction's marker (``complete_transaction``; see ``coordinator.group.transactions``).
``poll`` acts on passed deadlines (sessions, joins, syncs) and ``next_deadline_ms`` says when
to call it next. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping

import attrs

from pykraft.coordinator.group import rebalance, static_members
from pykraft.coordinator.group.effects import (
    Append,
    Effects,
    OffsetCommitResult,
    SyncGroupResult,
    TransactionalProducer,
)
from pykraft.coordinator.group.offsets import (
    FetchedOffset,
    LoadedGroups,
    fetch_offsets,
    group_append_error,
    group_record,
    metadata_too_large,
    offset_append_error,
    offset_commit_records,
)
from pykraft.coordinator.group.rebalance import GroupConfig, Step
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.state import CommittedOffset, GroupMetadata, GroupState
from pykraft.coordinator.group.static_members import StaticRejoin
from pykraft.coordinator.group.transactions import ProducerGroups
from pykraft.coordinator.group.views import DEAD_GROUP, NO_GROUP, summary

# Re-exported: the group handlers read these names from here.
from pykraft.coordinator.group.views import GroupOverview as GroupOverview
from pykraft.coordinator.group.views import GroupSummary as GroupSummary
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.java_hash import java_string_hash, kafka_abs
from pykraft.storage.topic_partition import TopicPartition

# APIs that accept an empty group id (Kafka's isValidGroupId: old offset tools use it).
_EMPTY_GROUP_ID_APIS = frozenset(
    {ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS}
)


class PartitionStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@attrs.frozen
class OwnedPartition:
    status: PartitionStatus
    # The partition's leader epoch when this broker became its leader (coordinator epoch).
    epoch: int


@attrs.frozen
class _PendingGroupStore:
    group: GroupMetadata
    generation_id: int
    # None: the record of a generation that became EMPTY (nobody waits for it).
    assignment: Mapping[str, bytes] | None


@attrs.frozen
class _PendingOffsetCommit:
    group: GroupMetadata
    request_id: int
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    # Partitions already decided (OFFSET_METADATA_TOO_LARGE) before the append.
    decided: Mapping[TopicPartition, Errors]
    # A TxnOffsetCommit's producer; None for an OffsetCommit.
    producer: TransactionalProducer | None = None


@attrs.frozen
class PendingCleanup:
    """Tombstones of deleted offsets or groups (``cleanupGroupMetadata``): nobody waits."""

    group_id: str


_Write = _PendingGroupStore | _PendingOffsetCommit | PendingCleanup | StaticRejoin


class GroupMetadataManager:
    def __init__(self, config: GroupConfig, new_member_suffix: Callable[[], str]) -> None:
        self.config = config
        # Makes member ids unique: "<client id>-<suffix>" (Kafka: a random UUID).
        self._new_member_suffix = new_member_suffix
        self.num_partitions = config.offsets_topic_num_partitions
        self.groups: dict[str, GroupMetadata] = {}
        self.partitions: dict[int, OwnedPartition] = {}
        self.active = True
        self._writes: dict[int, _Write] = {}
        self._next_write_id = 0
        self.producer_groups = ProducerGroups()

    # ------------------------------------------------------------------ placement

    def partition_for(self, group_id: str) -> int:
        return kafka_abs(java_string_hash(group_id)) % self.num_partitions

    def validate_group_status(self, group_id: str | None, api: ApiKey) -> Errors | None:
        """``validateGroupStatus``: valid id, coordinator running, partition loaded here."""
        if group_id is None or (group_id == "" and api not in _EMPTY_GROUP_ID_APIS):
            return Errors.INVALID_GROUP_ID
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE
        owned = self.partitions.get(self.partition_for(group_id))
        if owned is None:
            return Errors.NOT_COORDINATOR
        if owned.status is PartitionStatus.LOADING:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def _step(self, now_ms: int) -> Step:
        step = Step(now_ms, self.config, store_group=lambda group, assignment: None)
        step.store_group = lambda group, assignment: self._store_group(group, assignment, step)
        return step

    def _new_write(self, pending: _Write) -> int:
        self._next_write_id += 1
        self._writes[self._next_write_id] = pending
        return self._next_write_id

    def _store_group(
        self,
        group: GroupMetadata,
        assignment: Mapping[str, bytes] | None,
        step: Step,
        pending: StaticRejoin | None = None,
    ) -> None:
        """``storeGroup``; ``pending`` waits for the write (default: the generation's syncs)."""
        waiting = (
            _PendingGroupStore(group, group.generation_id, assignment)
            if pending is None
            else pending
        )
        write_id = self._new_write(waiting)
        record = group_record(group, assignment)
        partition = self.partition_for(group.group_id)
        step.effects.appends.append(Append(write_id, partition, (record,), step.now_ms))

    # ------------------------------------------------------------------ offsets

    def _store_offsets(
        self,
        group: GroupMetadata,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        request_id: int,
        step: Step,
        producer: TransactionalProducer | None = None,
    ) -> None:
        """``storeOffsets``: the valid offsets become one batch (a transactional one of
        ``producer`` for a TxnOffsetCommit), staged in the group until it is appended."""
        max_bytes = self.config.offset_metadata_max_bytes
        decided = {
            tp: Errors.OFFSET_METADATA_TOO_LARGE
            for tp, offset in offsets.items()
            if metadata_too_large(offset, max_bytes)
        }
        valid = {tp: offset for tp, offset in offsets.items() if tp not in decided}
        if not valid:
            step.effects.answer(request_id, OffsetCommitResult(decided))
            return
        pending = _PendingOffsetCommit(group, request_id, valid, decided, producer)
        write_id = self._new_write(pending)
        if producer is None:
            group.prepare_offset_commit(valid)
        else:
            self.producer_groups.add(producer.producer_id, group.group_id)
            group.prepare_txn_offset_commit(producer.producer_id, valid)
        records = offset_commit_records(group.group_id, valid)
        partition = self.partition_for(group.group_id)
        append = Append(write_id, partition, records, step.now_ms, producer)
        step.effects.appends.append(append)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        require_stable: bool = False,
    ) -> tuple[Errors, list[FetchedOffset]]:
        """OffsetFetch for one group (``partitions`` None: every committed partition);
        ``require_stable`` (KIP-447): UNSTABLE_OFFSET_COMMIT where a commit is pending."""
        error = self.validate_group_status(group_id, ApiKey.OFFSET_FETCH)
        if error is not None:
            return error, []
        return Errors.NONE, fetch_offsets(self.groups.get(group_id), partitions, require_stable)

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> list[str]:
        """``handleTxnCompletion``: ``producer_id``'s COMMIT (``commit``) or ABORT marker is in
        ``partition``'s log; settle its offsets in that partition's groups. Returns the groups
        settled. A group that moved away meanwhile is settled by its new coordinator's load."""
        settled = []
        for group_id in self.producer_groups.groups_of(producer_id):
            if self.partition_for(group_id) != partition:
                continue
            self.producer_groups.remove(producer_id, group_id)
            group = self.groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                continue
            group.complete_pending_txn_offset_commit(producer_id, commit)
            settled.append(group_id)
            self._maybe_forget(group)
        return settled

    # ------------------------------------------------------------------ appends

    def on_append_done(
        self, write_id: int, error: Errors, base_offset: int, now_ms: int
    ) -> Effects:
        """The shell's report on an ``Append``: NONE once committed, else the append error."""
        step = self._step(now_ms)
        pending = self._writes.pop(write_id)
        if isinstance(pending, _PendingOffsetCommit):
            self._offsets_stored(pending, offset_append_error(error), base_offset, step)
        elif isinstance(pending, _PendingGroupStore):
            self._group_stored(pending, group_append_error(error), step)
        elif isinstance(pending, StaticRejoin) and self.groups.get(pending.group.group_id) is (
            pending.group
        ):
            static_members.complete_static_rejoin(pending, group_append_error(error), step)
        return step.effects

    def _offsets_stored(
        self, pending: _PendingOffsetCommit, error: Errors, base_offset: int, step: Step
    ) -> None:
        group, producer = pending.group, pending.producer
        live = self.groups.get(group.group_id) is group and not group.is_(GroupState.DEAD)
        if producer is None:
            group.finish_offset_write(pending.offsets)
            if error is Errors.NONE and live:
                for tp, offset in pending.offsets.items():
                    group.on_offset_commit_append(tp, CommittedOffset(base_offset, offset))
        elif live:
            self._txn_offsets_stored(group, producer.producer_id, pending, error, base_offset)
        errors = {tp: error for tp in pending.offsets}
        errors.update(pending.decided)
        step.effects.answer(pending.request_id, OffsetCommitResult(errors))

    def _txn_offsets_stored(
        self,
        group: GroupMetadata,
        producer_id: int,
        pending: _PendingOffsetCommit,
        error: Errors,
        base_offset: int,
    ) -> None:
        """``putCacheCallback`` of a TxnOffsetCommit: note where the records are, or unstage
        them when the append failed (the client retries)."""
        for tp, offset in pending.offsets.items():
            if error is Errors.NONE:
                group.on_txn_offset_commit_append(
                    producer_id, tp, CommittedOffset(base_offset, offset)
                )
            else:
                group.fail_pending_txn_offset_commit(producer_id, tp)
        if not group.has_pending_offset_commits_from_producer(producer_id):
            self.producer_groups.remove(producer_id, group.group_id)
        self._maybe_forget(group)

    def _group_stored(self, pending: _PendingGroupStore, error: Errors, step: Step) -> None:
        group = pending.group
        if pending.assignment is None or self.groups.get(group.group_id) is not group:
            return  # an EMPTY generation's record: nobody waits; or the group moved away
        # Another member may have joined meanwhile: only this generation's sync completes.
        if not group.is_(GroupState.COMPLETING_REBALANCE):
            return
        if group.generation_id != pending.generation_id:
            return
        if error is not Errors.NONE:
            rebalance.reset_and_propagate_assignment_error(group, error, step)
            rebalance.maybe_prepare_rebalance(group, step)
            return
        rebalance.set_and_propagate_assignment(group, pending.assignment, step)
        group.transition_to(GroupState.STABLE, step.now_ms)

    # ------------------------------------------------------------------ describe, list

    def describe_group(self, group_id: str) -> tuple[Errors, GroupSummary]:
        error = self.validate_group_status(group_id, ApiKey.DESCRIBE_GROUPS)
        if error is not None:
            return error, NO_GROUP
        group = self.groups.get(group_id)
        return Errors.NONE, DEAD_GROUP if group is None else summary(group)

    def list_groups(self, states: frozenset[str]) -> tuple[Errors, list[GroupOverview]]:
        """ListGroups: every group here, those in ``states`` when it is not empty."""
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        loading = any(p.status is PartitionStatus.LOADING for p in self.partitions.values())
        overviews = [
            GroupOverview(group.group_id, group.protocol_type or "", group.state.value)
            for group in sorted(self.groups.values(), key=lambda g: g.group_id)
            if not states or group.state.value in states
        ]
        return (Errors.COORDINATOR_LOAD_IN_PROGRESS if loading else Errors.NONE), overviews

    # ------------------------------------------------------------------ time

    def poll(self, now_ms: int) -> Effects:
        """Act on every deadline that has passed: sessions, joins, syncs, pending members."""
        step = self._step(now_ms)
        for group in list(self.groups.values()):
            rebalance.expire(group, step)
            self._maybe_forget(group)
        return step.effects

    def next_deadline_ms(self) -> int | None:
        deadlines = [rebalance.next_deadline_ms(group) for group in self.groups.values()]
        return min((d for d in deadlines if d is not None), default=None)

    def _maybe_forget(self, group: GroupMetadata) -> None:
        """Drop a group that never had a generation and holds nothing (its first member only
        got a member id, then went away): nothing of it was ever written."""
        if (
            group.is_(GroupState.EMPTY)
            and group.generation_id == 0
            and not group.pending_members
            and not group.has_offsets()
            and self.groups.get(group.group_id) is group
        ):
            del self.groups[group.group_id]

    # ------------------------------------------------------------------ loading

    def begin_loading(self, partition: int, epoch: int, now_ms: int) -> tuple[bool, Effects]:
        """This broker now leads ``partition`` in leader epoch ``epoch``; True when its log
        must be replayed (not already loaded or loading in this epoch)."""
        owned = self.partitions.get(partition)
        if owned is not None and owned.epoch == epoch:
            return False, Effects()
        effects = self.unload(partition, now_ms) if owned is not None else Effects()
        self.partitions[partition] = OwnedPartition(PartitionStatus.LOADING, epoch)
        return True, effects

    def complete_loading(
        self, partition: int, epoch: int, loaded: LoadedGroups, now_ms: int
    ) -> tuple[Effects, tuple[str, ...]]:
        """Install the groups replayed from ``partition`` (``offsets.OffsetsReplay``); ignored
        when the partition moved on meanwhile. Returns the effects and the problems met."""
        owned = self.partitions.get(partition)
        if owned != OwnedPartition(PartitionStatus.LOADING, epoch):
            return Effects(), ()
        step = self._step(now_ms)
        problems = list(loaded.problems)
        for group in loaded.groups:
            if self.partition_for(group.group_id) != partition:
                problems.append(
                    f"group {group.group_id!r} does not belong to partition {partition}"
                )
                continue
            self.groups[group.group_id] = group
            for producer_id in group.pending_txn_offset_commits:
                self.producer_groups.add(producer_id, group.group_id)
            for member in group.members.values():
                rebalance.schedule_heartbeat(member, step)
            if len(group.members) > self.config.group_max_size:
                rebalance.prepare_rebalance(group, step)
        self.partitions[partition] = OwnedPartition(PartitionStatus.ACTIVE, epoch)
        return step.effects, tuple(problems)

    def unload(self, partition: int, now_ms: int) -> Effects:
        """Leadership of ``partition`` moved away: its groups go DEAD, waiters re-find."""
        step = self._step(now_ms)
        self.partitions.pop(partition, None)
        for group in [
            g for g in self.groups.values() if self.partition_for(g.group_id) == partition
        ]:
            group.transition_to(GroupState.DEAD, now_ms)
            for member in group.members.values():
                rebalance.answer_join(
                    member, rebalance.join_error(member.member_id, Errors.NOT_COORDINATOR), step
                )
                rebalance.answer_sync(member, SyncGroupResult(error=Errors.NOT_COORDINATOR), step)
            del self.groups[group.group_id]
            self.producer_groups.forget_group(group.group_id)
        return step.effects

    def shutdown(self, now_ms: int) -> Effects:
        effects = Effects()
        for partition in sorted(self.partitions):
            effects.merge(self.unload(partition, now_ms))
        self.active = False
        return effects
