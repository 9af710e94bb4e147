"""Classic and consumer groups side by side in one coordinator (KIP-848).

``UnifiedGroupCoordinator`` is the classic ``GroupCoordinator`` plus a ``ClassicMembersCore``
(``coordinator.group.consumer_groups`` with ``consumer_classic_members``): consumer group ids
live in ``consumer_groups``, classic ones in ``groups``; one id is one kind of group, as in
Kafka 3.9's ``GroupMetadataManager``:

* ConsumerGroupHeartbeat on an id held by a classic group with members: the group is upgraded
  online when ``group.consumer.migration.policy`` allows it and the group can convert
  (``coordinator.group.consumer_migration``), else GROUP_ID_NOT_FOUND. A classic group holding
  only offsets is taken over at once.
* JoinGroup on an id held by a consumer group with members: the member joins as a classic
  member, whatever the migration policy (Kafka 3.9's ``classicGroupJoin``: the policy governs
  conversions only). An empty consumer group gives the id up (its tombstones written). The
  last consumer-protocol member leaving a group of classic members downgrades it (policy
  downgrade/bidirectional).
* Offsets: a consumer group's committed offsets are kept where the classic ones are, in an
  EMPTY ``GroupMetadata`` of the same id that is never shown as a group; the classic APIs on a
  consumer group are ``coordinator.group.classic_apis``' (a consumer-protocol member committing
  below OffsetCommit v9 is UNSUPPORTED_VERSION; OffsetFetch v9's member id and epoch are
  checked as ``validateOffsetFetch`` does).
* ListGroups shows consumer groups with type ``consumer`` and their state; DescribeGroups of a
  consumer group answers it DEAD with no error, as Kafka 3.9's ``describeGroups`` does for a
  group that is not classic.

Timers, loading, unloading and appends are the classic manager's, extended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pykraft.coordinator.group import rebalance
from pykraft.coordinator.group.classic_apis import ClassicApisOnConsumerGroups
from pykraft.coordinator.group.consumer_classic_members import ClassicMembersCore
from pykraft.coordinator.group.consumer_group import (
    ConsumerGroup,
)
from pykraft.coordinator.group.consumer_heartbeat import (
    ConsumerGroupConfig,
    ConsumerGroupHeartbeatRequest,
    is_simple_group,
    refused,
    request_error,
)
from pykraft.coordinator.group.consumer_member import JOIN_GROUP_MEMBER_EPOCH
from pykraft.coordinator.group.consumer_migration import downgraded_members
from pykraft.coordinator.group.consumer_protocol import subscribed_topics
from pykraft.coordinator.group.consumer_records import (
    TopicMetadata,
    group_tombstones,
    member_tombstones,
)
from pykraft.coordinator.group.consumer_writes import GroupSnapshot, PendingConsumerWrite
from pykraft.coordinator.group.coordinator import JoinGroupRequest
from pykraft.coordinator.group.effects import (
    Append,
    CoordinatorRecord,
    Effects,
)
from pykraft.coordinator.group.manager import OwnedPartition, PartitionStatus
from pykraft.coordinator.group.offsets import LoadedGroups, group_record
from pykraft.coordinator.group.rebalance import GroupConfig, join_error
from pykraft.coordinator.group.state import GroupMetadata, GroupState
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors

_DOWNGRADES = frozenset({"downgrade", "bidirectional"})


class UnifiedGroupCoordinator(ClassicApisOnConsumerGroups):
    def __init__(
        self,
        config: GroupConfig,
        new_member_suffix: Callable[[], str],
        consumer_config: ConsumerGroupConfig | None = None,
    ) -> None:
        super().__init__(config, new_member_suffix)
        self.consumer = ClassicMembersCore(
            config,
            consumer_config or ConsumerGroupConfig(),
            new_member_id=new_member_suffix,
            new_write=self._new_write,  # type: ignore[arg-type]
            partition_for=self.partition_for,
        )

    def update_topics(self, topics: Mapping[str, TopicMetadata]) -> None:
        """The broker's image changed: subscriptions are matched against these topics."""
        self.consumer.topics = topics

    # ------------------------------------------------------------------ consumer protocol

    def handle_consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, request_id: int, now_ms: int
    ) -> Effects:
        effects = Effects()
        refusal = request_error(request, self.consumer.consumer_config)
        if refusal is not None:
            effects.answer(request_id, refused(refusal))
            return effects
        error = self.validate_group_status(request.group_id, ApiKey.CONSUMER_GROUP_HEARTBEAT)
        if error is not None:
            effects.answer(request_id, refused((error, None)))
            return effects
        classic = self.groups.get(request.group_id)
        before = self.consumer.snapshot(request.group_id, classic)
        upgrade: list[CoordinatorRecord] = []
        if (
            classic is not None
            and not is_simple_group(classic)
            and request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
            and request.group_id not in self.consumer_groups
            and self.consumer.maybe_upgrade(classic, upgrade, now_ms) is not None
        ):
            # The classic group's members now live in the consumer group; its offsets stay.
            self._keep_offsets_only(classic, now_ms)
            classic = None
        self.consumer.heartbeat(request, classic, request_id, now_ms, effects, upgrade, before)
        if request.is_leave:
            self._maybe_downgrade(request.group_id, now_ms, effects)
        return effects

    def _maybe_downgrade(self, group_id: str, now_ms: int, effects: Effects) -> None:
        """A consumer group left with classic members only becomes classic again
        (``convertToClassicGroup``; see ``coordinator.group.consumer_migration``)."""
        group = self.consumer_groups.get(group_id)
        if group is None or self.consumer.consumer_config.migration_policy not in _DOWNGRADES:
            return
        if len(group.members) > self.config.group_max_size:
            return
        session_timeout_ms = self.consumer.consumer_config.session_timeout_ms
        found = downgraded_members(group, self.consumer.topics, session_timeout_ms)
        if found is None:
            return
        protocol, members = found
        # A failed write puts the consumer group and the offsets holder back (``_restore``).
        holder = self.groups.get(group_id)
        before = self.consumer.snapshot(group_id, holder)
        written: list[CoordinatorRecord] = []
        for member_id in sorted(group.members):
            written.extend(member_tombstones(group_id, member_id))
        written.extend(group_tombstones(group_id))
        self.consumer.unload_group(group_id)
        if holder is None:
            classic = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
        else:
            classic = self._keep_offsets_only(holder, now_ms)  # the holder stays as it was
        step = self._step(now_ms)
        for member in members:
            classic.add(member)
            rebalance.schedule_heartbeat(member, step)
        classic.protocol_name = protocol
        classic.generation_id = group.group_epoch
        classic.subscribed_topics = subscribed_topics(classic)
        assignments = {m.member_id: m.assignment for m in members}
        written.append(group_record(classic, assignments))
        write_id = self._new_write(PendingConsumerWrite(None, None, before))  # type: ignore[arg-type]
        partition = self.partition_for(group_id)
        effects.appends.append(Append(write_id, partition, tuple(written), now_ms))
        rebalance.prepare_rebalance(classic, step)
        # Not a new group's first rebalance: its members have their rebalance timeout to rejoin.
        classic.initial_join = None
        classic.join_deadline_ms = now_ms + classic.rebalance_timeout_ms()
        effects.merge(step.effects)

    def _keep_offsets_only(self, classic: GroupMetadata, now_ms: int) -> GroupMetadata:
        """Replace ``classic`` by a new EMPTY group holding its offsets."""
        holder = GroupMetadata(classic.group_id, GroupState.EMPTY, now_ms)
        holder.offsets.update(classic.offsets)
        holder.pending_offset_commits.update(classic.pending_offset_commits)
        holder.pending_txn_offset_commits.update(classic.pending_txn_offset_commits)
        self.groups[classic.group_id] = holder
        return holder

    def describe_consumer_group(self, group_id: str) -> tuple[Errors, ConsumerGroup | None]:
        """ConsumerGroupDescribe of one group (``consumerGroupDescribe``)."""
        error = self.validate_group_status(group_id, ApiKey.CONSUMER_GROUP_DESCRIBE)
        if error is not None:
            return error, None
        group = self.consumer_groups.get(group_id)
        if group is None:
            return Errors.GROUP_ID_NOT_FOUND, None
        return Errors.NONE, group

    # ------------------------------------------------------------------ classic APIs

    def handle_join_group(self, request: JoinGroupRequest, request_id: int, now_ms: int) -> Effects:
        group = self.consumer_groups.get(request.group_id)
        if group is None or self.validate_group_status(request.group_id, ApiKey.JOIN_GROUP):
            return super().handle_join_group(request, request_id, now_ms)
        if group.members:
            timeout = request.session_timeout_ms
            config = self.config
            if not (
                config.group_min_session_timeout_ms
                <= timeout
                <= config.group_max_session_timeout_ms
            ):
                effects = Effects()
                result = join_error(request.member_id, Errors.INVALID_SESSION_TIMEOUT)
                effects.answer(request_id, result)
                return effects
            return self.consumer.classic_join(group, request, request_id, now_ms)
        effects = self._delete_consumer_group(group, now_ms)
        effects.merge(super().handle_join_group(request, request_id, now_ms))
        return effects

    # ------------------------------------------------------------------ manager hooks

    def on_append_done(
        self, write_id: int, error: Errors, base_offset: int, now_ms: int
    ) -> Effects:
        pending = self._writes.get(write_id)
        if not isinstance(pending, PendingConsumerWrite):
            return super().on_append_done(write_id, error, base_offset, now_ms)
        del self._writes[write_id]
        effects = Effects()
        if error is not Errors.NONE and pending.before is not None:
            self._fail_later_writes(write_id, pending.before.group_id, error, effects)
            self._restore(pending.before, now_ms)
        self.consumer.on_append_done(pending, error, effects)
        return effects

    def _fail_later_writes(
        self, write_id: int, group_id: str, error: Errors, effects: Effects
    ) -> None:
        """The group's writes after a failed one were built on state now reverted: each is
        answered with the error at once, and its completion ignored."""
        for later_id, later in sorted(self._writes.items()):
            if (
                later_id > write_id
                and isinstance(later, PendingConsumerWrite)
                and later.before is not None
                and later.before.group_id == group_id
            ):
                self._writes[later_id] = PendingConsumerWrite(None, None)  # type: ignore[assignment]
                self.consumer.on_append_done(later, error, effects)

    def _restore(self, snapshot: GroupSnapshot, now_ms: int) -> None:
        """The group as it was before a failed write: the consumer group, and the classic
        group of that id (an upgraded one, or the offsets holder) put back with the offsets
        committed since; a classic group a downgrade made since goes back to holding offsets
        only."""
        self.consumer.restore(snapshot)
        classic, current = snapshot.classic, self.groups.get(snapshot.group_id)
        if classic is not None:
            if current is not None and current is not classic:
                classic.offsets.update(current.offsets)
            self.groups[snapshot.group_id] = classic
        elif current is not None and (current.members or not current.is_(GroupState.EMPTY)):
            self._keep_offsets_only(current, now_ms)

    def poll(self, now_ms: int) -> Effects:
        effects = super().poll(now_ms)
        before = {g: set(group.members) for g, group in self.consumer_groups.items()}
        self.consumer.poll(now_ms, effects)
        for group_id, members in before.items():
            group = self.consumer_groups.get(group_id)
            if group is not None and set(group.members) != members:
                self._maybe_downgrade(group_id, now_ms, effects)
        return effects

    def next_deadline_ms(self) -> int | None:
        deadlines = [super().next_deadline_ms(), self.consumer.next_deadline_ms()]
        return min((d for d in deadlines if d is not None), default=None)

    def complete_loading(
        self, partition: int, epoch: int, loaded: LoadedGroups, now_ms: int
    ) -> tuple[Effects, tuple[str, ...]]:
        effects, problems = super().complete_loading(partition, epoch, loaded, now_ms)
        if self.partitions.get(partition) == OwnedPartition(PartitionStatus.ACTIVE, epoch):
            mine = [
                g for g in loaded.consumer_groups if self.partition_for(g.group_id) == partition
            ]
            self.consumer.install(mine, now_ms)
        return effects, problems

    def unload(self, partition: int, now_ms: int) -> Effects:
        self.consumer.unload(partition)
        return super().unload(partition, now_ms)
