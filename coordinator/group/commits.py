"""OffsetCommit and TxnOffsetCommit into the group coordinator (Kafka's
``GroupCoordinator.handleCommitOffsets`` / ``handleTxnCommitOffsets``): the group's status,
``offsets.validate_offset_commit`` (a static member's instance id is checked as Kafka's
``validateCurrentMember`` does), then ``GroupMetadataManager._store_offsets``. A commit from a
member restarts its session.
"""

from __future__ import annotations

from collections.abc import Mapping

from pykraft.coordinator.group import rebalance
from pykraft.coordinator.group.deletion import GroupDeletion
from pykraft.coordinator.group.effects import Effects, OffsetCommitResult, TransactionalProducer
from pykraft.coordinator.group.offsets import validate_offset_commit
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.state import GroupMetadata, GroupState
from pykraft.coordinator.group.transactions import validate_txn_offset_commit
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition


class OffsetCommits(GroupDeletion):
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
    ) -> Effects:
        step = self._step(now_ms)
        error = self.validate_group_status(group_id, ApiKey.OFFSET_COMMIT)
        group = self.groups.get(group_id)
        if error is None and group is None:
            if generation_id >= 0:
                error = Errors.ILLEGAL_GENERATION  # an old generation of a group gone since
            else:
                group = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
                self.groups[group_id] = group
        if error is None and group is not None:
            error = validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is None and group is not None and group.is_(GroupState.COMPLETING_REBALANCE):
            # The member knows the new generation but has no assignment yet.
            error = Errors.REBALANCE_IN_PROGRESS
        if error is not None or group is None:
            failed = {tp: error or Errors.NONE for tp in offsets}
            step.effects.answer(request_id, OffsetCommitResult(failed))
            if group is not None:
                self._maybe_forget(group)
            return step.effects
        member = group.members.get(member_id)
        if member is not None:
            rebalance.schedule_heartbeat(member, step)
        self._store_offsets(group, offsets, request_id, step)
        self._maybe_forget(group)
        return step.effects

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
        """``handleTxnCommitOffsets``: an unknown group is created EMPTY; the offsets wait in
        the group for the transaction's marker (``complete_transaction``)."""
        step = self._step(now_ms)
        error = self.validate_group_status(group_id, ApiKey.TXN_OFFSET_COMMIT)
        if error is not None:
            step.effects.answer(request_id, OffsetCommitResult(dict.fromkeys(offsets, error)))
            return step.effects
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
        error = validate_txn_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            step.effects.answer(request_id, OffsetCommitResult(dict.fromkeys(offsets, error)))
        else:
            self._store_offsets(group, offsets, request_id, step, producer)
        self._maybe_forget(group)
        return step.effects
