"""Deleting groups and committed offsets: DeleteGroups (KIP-229), OffsetDelete (KIP-496) and
offset expiry (KIP-211).

Theory of operation (Kafka 3.9's ``GroupCoordinator.handleDeleteGroups`` /
``handleDeleteOffsets`` over ``GroupMetadataManager.cleanupGroupMetadata``)
-----------------------------------------------------------------------------------------
Both start with the group's status (``validate_group_status``: INVALID_GROUP_ID,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS); DeleteGroups
accepts the empty group id, as Kafka's ``isValidGroupId`` does. A group this coordinator does not
hold, or holds DEAD, is GROUP_ID_NOT_FOUND.

* DeleteGroups: only an EMPTY group may go. It becomes DEAD, leaves the cache, and every offset
  it had is dropped (staged and transactional ones too); a group with members is
  NON_EMPTY_GROUP.
* OffsetDelete: in an EMPTY group every partition asked for is deleted. In a group with members
  of protocol type ``consumer`` a partition of a topic the group subscribes to is
  GROUP_SUBSCRIBED_TO_TOPIC and the others are deleted (``GroupMetadata.subscribedTopics``, from
  ``coordinator.group.consumer_protocol``); a group of another protocol type with members is
  NON_EMPTY_GROUP for the whole request. An EMPTY group left without offsets becomes DEAD and
  leaves the cache as well.

What is deleted is written to ``__consumer_offsets`` as tombstones (null values): one per
offset that was committed and, for a group that went DEAD, one for its group record, so replaying
the partition (``offsets.OffsetsReplay``) on a new coordinator or after a restart does not bring
it back. The answer does not wait for that append: Kafka's ``cleanupGroupMetadata`` appends
the tombstones to the leader without waiting for followers and only logs a failure; here the
shell appends them (acks=-1) and ``on_append_done`` ignores the outcome (``PendingCleanup``).

Offset expiry runs the same cleanup over every group every
``offsets.retention.check.interval.ms`` (Kafka's ``delete-expired-group-metadata`` task), the
first run one interval after a partition is loaded: the offsets ``expiration.expired_offsets``
names are removed and an EMPTY group without offsets left goes DEAD — the same tombstones as
OffsetDelete and DeleteGroups. ``poll`` runs it when due; ``next_deadline_ms`` includes it.

As Kafka 3.9's ``cleanupGroupMetadata``, a group that never had a generation gets no group
tombstone: it only stored offsets and no record of it was ever written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from pykraft.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from pykraft.coordinator.group.effects import Append, CoordinatorRecord, Effects
from pykraft.coordinator.group.expiration import expired_offsets
from pykraft.coordinator.group.manager import GroupMetadataManager, PendingCleanup
from pykraft.coordinator.group.offsets import LoadedGroups
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.records import group_metadata_key, offset_commit_key
from pykraft.coordinator.group.state import GroupMetadata, GroupState
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition


class GroupDeletion(GroupMetadataManager):
    def __init__(self, config: GroupConfig, new_member_suffix: Callable[[], str]) -> None:
        super().__init__(config, new_member_suffix)
        # When offset expiry runs next; None until a partition of __consumer_offsets is loaded.
        self.next_offset_expiration_ms: int | None = None

    def handle_delete_groups(
        self, group_ids: Iterable[str], now_ms: int
    ) -> tuple[dict[str, Errors], Effects]:
        """``handleDeleteGroups``: one result per distinct group id, in the order asked."""
        effects = Effects()
        results: dict[str, Errors] = {}
        for group_id in group_ids:
            if group_id in results:
                continue
            error = self.validate_group_status(group_id, ApiKey.DELETE_GROUPS)
            group = self.groups.get(group_id)
            if error is None:
                error = self._delete_group_error(group)
            if error is None and group is not None:
                group.transition_to(GroupState.DEAD, now_ms)
                self._cleanup(group, None, now_ms, effects)
            results[group_id] = error or Errors.NONE
        return results, effects

    @staticmethod
    def _delete_group_error(group: GroupMetadata | None) -> Errors | None:
        if group is None or group.is_(GroupState.DEAD):
            return Errors.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return Errors.NON_EMPTY_GROUP
        return None

    def handle_delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition], now_ms: int
    ) -> tuple[Errors, dict[TopicPartition, Errors], Effects]:
        """``handleDeleteOffsets``: the group's error, else one error per partition asked."""
        effects = Effects()
        error = self.validate_group_status(group_id, ApiKey.OFFSET_DELETE)
        group = self.groups.get(group_id)
        if error is None and (group is None or group.is_(GroupState.DEAD)):
            error = Errors.GROUP_ID_NOT_FOUND
        if error is not None or group is None:
            return error or Errors.GROUP_ID_NOT_FOUND, {}, effects
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
            refused: dict[TopicPartition, Errors] = {}
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = group.subscribed_topics
            refused = {
                tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC
                for tp in partitions
                if subscribed is None or tp.topic in subscribed
            }
            eligible = [tp for tp in partitions if tp not in refused]
        else:
            return Errors.NON_EMPTY_GROUP, {}, effects
        if eligible:
            self._cleanup(group, eligible, now_ms, effects)
        errors = dict(refused)
        errors.update(dict.fromkeys(eligible, Errors.NONE))
        return Errors.NONE, errors, effects

    # ------------------------------------------------------------------ expiry (KIP-211)

    def expire_offsets(self, now_ms: int) -> Effects:
        """``cleanupGroupMetadata`` with ``removeExpiredOffsets``: every group here loses its
        expired offsets; EMPTY groups left without any go DEAD."""
        effects = Effects()
        retention_ms = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if group.is_(GroupState.DEAD):
                continue
            expired = expired_offsets(group, now_ms, retention_ms)
            self._cleanup(group, expired, now_ms, effects)
        return effects

    def poll(self, now_ms: int) -> Effects:
        effects = super().poll(now_ms)
        due_ms = self.next_offset_expiration_ms
        if due_ms is not None and due_ms <= now_ms:
            effects.merge(self.expire_offsets(now_ms))
            self.next_offset_expiration_ms = (
                now_ms + self.config.offsets_retention_check_interval_ms
            )
        return effects

    def next_deadline_ms(self) -> int | None:
        deadlines = (super().next_deadline_ms(), self.next_offset_expiration_ms)
        return min((d for d in deadlines if d is not None), default=None)

    def complete_loading(
        self, partition: int, epoch: int, loaded: LoadedGroups, now_ms: int
    ) -> tuple[Effects, tuple[str, ...]]:
        result = super().complete_loading(partition, epoch, loaded, now_ms)
        if self.next_offset_expiration_ms is None and partition in self.partitions:
            interval_ms = self.config.offsets_retention_check_interval_ms
            self.next_offset_expiration_ms = now_ms + interval_ms
        return result

    def _cleanup(
        self,
        group: GroupMetadata,
        partitions: Iterable[TopicPartition] | None,
        now_ms: int,
        effects: Effects,
    ) -> None:
        """``cleanupGroupMetadata`` of one group: drop the offsets of ``partitions`` (None: all),
        retire an EMPTY group left without offsets, and append the tombstones."""
        removed = _remove_offsets(group, partitions)
        if group.is_(GroupState.EMPTY) and not group.has_offsets():
            group.transition_to(GroupState.DEAD, now_ms)
        group_id = group.group_id
        records = [CoordinatorRecord(offset_commit_key(group_id, tp), None) for tp in removed]
        if group.is_(GroupState.DEAD) and self.groups.get(group_id) is group:
            del self.groups[group_id]
            self.producer_groups.forget_group(group_id)
            if group.generation_id > 0:
                # A group without a generation only stored offsets: it has no record.
                records.append(CoordinatorRecord(group_metadata_key(group_id), None))
        if records:
            write_id = self._new_write(PendingCleanup(group_id))
            partition = self.partition_for(group_id)
            effects.appends.append(Append(write_id, partition, tuple(records), now_ms))


def _remove_offsets(
    group: GroupMetadata, partitions: Iterable[TopicPartition] | None
) -> list[TopicPartition]:
    """``GroupMetadata.removeOffsets``: forget each partition's committed, in-flight and
    transactional offsets; the partitions that had a committed offset, in order. A producer's
    open transaction stays known (if empty) until its marker, as in Kafka's ``hasOffsets``."""
    wanted = sorted(group.offsets) if partitions is None else list(dict.fromkeys(partitions))
    if partitions is None:
        group.pending_offset_commits.clear()
        group.pending_txn_offset_commits.clear()
    removed = []
    for tp in wanted:
        group.pending_offset_commits.pop(tp, None)
        for staged in group.pending_txn_offset_commits.values():
            staged.pop(tp, None)
        if group.offsets.pop(tp, None) is not None:
            removed.append(tp)
    return removed
