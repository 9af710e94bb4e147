"""The classic APIs when their group id is a consumer group's (KIP-848), as Kafka 3.9's
``GroupMetadataManager`` / ``OffsetMetadataManager`` answer them; the base of
``coordinator.group.unified.UnifiedGroupCoordinator`` (read its docstring first).

SyncGroup, Heartbeat and LeaveGroup of a classic member inside a consumer group go to
``ClassicMembersCore``; OffsetCommit and TxnOffsetCommit check the member id and member epoch;
DeleteGroups, OffsetDelete, DescribeGroups and ListGroups see consumer groups as Kafka does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pykraft.coordinator.group.consumer_classic_members import ClassicMembersCore
from pykraft.coordinator.group.consumer_group import CONSUMER_PROTOCOL_TYPE, ConsumerGroup
from pykraft.coordinator.group.consumer_member import ConsumerGroupMember
from pykraft.coordinator.group.consumer_records import group_tombstones
from pykraft.coordinator.group.consumer_writes import PendingConsumerWrite
from pykraft.coordinator.group.coordinator import GroupCoordinator
from pykraft.coordinator.group.effects import (
    Append,
    Effects,
    OffsetCommitResult,
    TransactionalProducer,
)
from pykraft.coordinator.group.offsets import FetchedOffset
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.state import GroupMetadata, GroupState
from pykraft.coordinator.group.views import DEAD_GROUP, GroupOverview, GroupSummary
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

# OffsetCommit v9 (KIP-848) carries the member epoch; a consumer-protocol member needs it.
CONSUMER_PROTOCOL_OFFSET_COMMIT_VERSION = 9


class ClassicApisOnConsumerGroups(GroupCoordinator):
    consumer: ClassicMembersCore

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return self.consumer.groups

    def _delete_consumer_group(self, group: ConsumerGroup, now_ms: int) -> Effects:
        """An empty consumer group gives its id up: its records become tombstones."""
        effects = Effects()
        self.consumer.unload_group(group.group_id)
        write_id = self._new_write(PendingConsumerWrite(None, None))  # type: ignore[arg-type]
        partition = self.partition_for(group.group_id)
        tombstones = group_tombstones(group.group_id)
        effects.appends.append(Append(write_id, partition, tombstones, now_ms))
        return effects

    def _consumer_group_for(self, group_id: str, api: ApiKey) -> ConsumerGroup | None:
        """The consumer group a classic API addresses (None: the classic path answers)."""
        group = self.consumer_groups.get(group_id)
        if group is None or self.validate_group_status(group_id, api) is not None:
            return None
        return group

    def _offsets_holder(self, group_id: str, now_ms: int) -> GroupMetadata:
        """The EMPTY classic group holding a consumer group's offsets (made on first use)."""
        holder = self.groups.get(group_id)
        if holder is None:
            holder = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
        return holder

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
        group = self._consumer_group_for(group_id, ApiKey.SYNC_GROUP)
        if group is None:
            return super().handle_sync_group(
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                assignments=assignments,
                request_id=request_id,
                now_ms=now_ms,
                group_instance_id=group_instance_id,
            )
        return self.consumer.classic_sync(
            group,
            member_id=member_id,
            instance_id=group_instance_id,
            generation_id=generation_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            request_id=request_id,
            now_ms=now_ms,
        )

    def handle_heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        request_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> Effects:
        group = self._consumer_group_for(group_id, ApiKey.HEARTBEAT)
        if group is None:
            return super().handle_heartbeat(
                group_id, member_id, generation_id, request_id, now_ms, group_instance_id
            )
        return self.consumer.classic_heartbeat(
            group, member_id, group_instance_id, generation_id, request_id, now_ms
        )

    def handle_leave_group(
        self,
        group_id: str,
        members: Iterable[tuple[str, str | None]],
        request_id: int,
        now_ms: int,
    ) -> Effects:
        group = self._consumer_group_for(group_id, ApiKey.LEAVE_GROUP)
        if group is None:
            return super().handle_leave_group(group_id, members, request_id, now_ms)
        return self.consumer.classic_leave(group, members, request_id, now_ms)

    def handle_commit_offsets(
        self,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        request_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
        api_version: int = CONSUMER_PROTOCOL_OFFSET_COMMIT_VERSION,
    ) -> Effects:
        """OffsetCommit; ``api_version``: the request's (a consumer-protocol member must
        use v9+)."""
        group = self._consumer_group_for(group_id, ApiKey.OFFSET_COMMIT)
        if group is None:
            return super().handle_commit_offsets(
                group_id=group_id,
                member_id=member_id,
                generation_id=generation_id,
                offsets=offsets,
                request_id=request_id,
                now_ms=now_ms,
                group_instance_id=group_instance_id,
            )
        error = _offset_commit_error(group, member_id, generation_id, api_version)
        return self._commit_consumer_group_offsets(group_id, error, offsets, request_id, now_ms)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        require_stable: bool = False,
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[Errors, list[FetchedOffset]]:
        """OffsetFetch; of a consumer group, v9's member id and epoch are checked
        (``ConsumerGroup.validateOffsetFetch``: anyone without both is let through)."""
        group = self._consumer_group_for(group_id, ApiKey.OFFSET_FETCH)
        if group is not None and not (member_id is None and member_epoch < 0):
            member = group.members.get(member_id or "")
            if member is None:
                return Errors.UNKNOWN_MEMBER_ID, []
            error = _member_epoch_error(member, member_epoch)
            if error is not None:
                return error, []
        return super().fetch_offsets(group_id, partitions, require_stable)

    def handle_delete_groups(
        self, group_ids: Iterable[str], now_ms: int
    ) -> tuple[dict[str, Errors], Effects]:
        """DeleteGroups: a consumer group with members is NON_EMPTY_GROUP; an empty one goes
        with its records (tombstones) and its committed offsets (``deleteGroups``)."""
        asked = list(dict.fromkeys(group_ids))
        effects = Effects()
        decided: dict[str, Errors] = {}
        for group_id in asked:
            group = self._consumer_group_for(group_id, ApiKey.DELETE_GROUPS)
            if group is None:
                continue
            if group.members:
                decided[group_id] = Errors.NON_EMPTY_GROUP
                continue
            effects.merge(self._delete_consumer_group(group, now_ms))
            decided[group_id] = Errors.NONE
        # The classic groups asked for, and the offsets of the consumer groups just deleted.
        rest = [
            g for g in asked if g not in decided or (decided[g] is Errors.NONE and g in self.groups)
        ]
        results, classic_effects = super().handle_delete_groups(rest, now_ms)
        effects.merge(classic_effects)
        return {g: decided.get(g) or results[g] for g in asked}, effects

    def handle_delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition], now_ms: int
    ) -> tuple[Errors, dict[TopicPartition, Errors], Effects]:
        """OffsetDelete on a consumer group: a partition of a topic it subscribes to is
        GROUP_SUBSCRIBED_TO_TOPIC, members or not; the others are deleted
        (``OffsetMetadataManager.deleteOffsets`` over ``ConsumerGroup.isSubscribedToTopic``)."""
        group = self._consumer_group_for(group_id, ApiKey.OFFSET_DELETE)
        if group is None:
            return super().handle_delete_offsets(group_id, partitions, now_ms)
        subscribed = set(group.subscription_metadata) | group.subscribed_topic_names(())
        errors = {
            tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp.topic in subscribed
        }
        eligible = [tp for tp in partitions if tp not in errors]
        effects = Effects()
        if eligible and group_id in self.groups:
            _, deleted, effects = super().handle_delete_offsets(group_id, eligible, now_ms)
            errors.update(deleted)
        errors.update({tp: Errors.NONE for tp in eligible if tp not in errors})
        return Errors.NONE, errors, effects

    def handle_txn_commit_offsets(
        self,
        *,
        group_id: str,
        producer: TransactionalProducer,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        request_id: int,
        now_ms: int,
    ) -> Effects:
        """TxnOffsetCommit from a consumer group's member (KIP-447 with KIP-848): the same
        member and epoch checks as OffsetCommit, then the classic transactional path."""
        group = self._consumer_group_for(group_id, ApiKey.TXN_OFFSET_COMMIT)
        if group is None:
            return super().handle_txn_commit_offsets(
                group_id=group_id,
                producer=producer,
                member_id=member_id,
                generation_id=generation_id,
                group_instance_id=group_instance_id,
                offsets=offsets,
                request_id=request_id,
                now_ms=now_ms,
            )
        error = _offset_commit_error(group, member_id, generation_id)
        return self._commit_consumer_group_offsets(
            group_id, error, offsets, request_id, now_ms, producer
        )

    def _commit_consumer_group_offsets(
        self,
        group_id: str,
        error: Errors | None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        request_id: int,
        now_ms: int,
        producer: TransactionalProducer | None = None,
    ) -> Effects:
        """A consumer group's (Txn)OffsetCommit once checked: ``error`` for every partition,
        else stored in the group's offsets holder (transactionally for a ``producer``)."""
        step = self._step(now_ms)
        if error is not None:
            step.effects.answer(request_id, OffsetCommitResult(dict.fromkeys(offsets, error)))
        else:
            holder = self._offsets_holder(group_id, now_ms)
            self._store_offsets(holder, offsets, request_id, step, producer)
        return step.effects

    def describe_group(self, group_id: str) -> tuple[Errors, GroupSummary]:
        if self._consumer_group_for(group_id, ApiKey.DESCRIBE_GROUPS) is not None:
            return Errors.NONE, DEAD_GROUP
        return super().describe_group(group_id)

    def list_groups(self, states: frozenset[str]) -> tuple[Errors, list[GroupOverview]]:
        error, overviews = super().list_groups(states)
        if error is Errors.COORDINATOR_NOT_AVAILABLE:
            return error, overviews
        listed = [g for g in overviews if g.group_id not in self.consumer_groups]
        lowered = {state.lower() for state in states}
        for group in self.consumer_groups.values():
            state = group.state.value
            if not states or state.lower() in lowered:
                listed.append(
                    GroupOverview(group.group_id, CONSUMER_PROTOCOL_TYPE, state, "consumer")
                )
        return error, sorted(listed, key=lambda g: g.group_id)


def _offset_commit_error(
    group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int | None = None
) -> Errors | None:
    """``ConsumerGroup.validateOffsetCommit``: an admin commit (epoch < 0) only to an empty
    group; else a known member at its current epoch (``validateMemberEpoch``: a classic member's
    mismatch is ILLEGAL_GENERATION, a consumer member's STALE_MEMBER_EPOCH). A consumer-protocol
    member's OffsetCommit (``api_version``; None: TxnOffsetCommit, not checked) below v9 is
    UNSUPPORTED_VERSION."""
    if member_epoch < 0 and not group.members:
        return None
    member = group.members.get(member_id)
    if member is None:
        return Errors.UNKNOWN_MEMBER_ID
    if (
        api_version is not None
        and api_version < CONSUMER_PROTOCOL_OFFSET_COMMIT_VERSION
        and not member.uses_classic_protocol
    ):
        return Errors.UNSUPPORTED_VERSION
    return _member_epoch_error(member, member_epoch)


def _member_epoch_error(member: ConsumerGroupMember, member_epoch: int) -> Errors | None:
    """``validateMemberEpoch``: a classic member's mismatch is ILLEGAL_GENERATION, a consumer
    member's STALE_MEMBER_EPOCH."""
    if member_epoch == member.member_epoch:
        return None
    if member.uses_classic_protocol:
        return Errors.ILLEGAL_GENERATION
    return Errors.STALE_MEMBER_EPOCH
