"""Transactional offset commits (KIP-98, KIP-447): who may make one, and where they wait.

Theory of operation (Kafka's ``GroupCoordinator.handleTxnCommitOffsets``,
``GroupMetadataManager.storeOffsets`` with a producer id and ``handleTxnCompletion``)
------------------------------------------------------------------------------------
A transactional producer sends its consumer group's offsets with TxnOffsetCommit after
AddOffsetsToTxn made the group's ``__consumer_offsets`` partition part of its transaction.

1. ``validate_txn_offset_commit`` checks the request against the group. Unlike OffsetCommit,
   an unknown group is created (EMPTY) and a request without member id and generation is
   accepted even while the group has members: TxnOffsetCommit below v3 carries neither. From v3
   (KIP-447) a member id or generation that is set must match the group's.
2. The offsets are appended as one *transactional* batch carrying the producer's id and epoch
   (``effects.TransactionalProducer``), and staged in the group under the producer id
   (``GroupMetadata.prepare_txn_offset_commit``); the batch's log offset is noted when the append
   is acknowledged. ``ProducerGroups`` remembers which groups hold offsets of which producer.
3. The transaction coordinator writes a COMMIT or ABORT marker to the partition (WriteTxnMarkers);
   once it is appended, ``GroupMetadataManager.complete_transaction`` settles every group of that
   partition holding the producer's offsets: COMMIT makes them the committed offsets, ABORT
   drops them (``GroupMetadata.complete_pending_txn_offset_commit``).

Loading replays the same rules from the log (``offsets.OffsetsReplay``): offsets in a
transactional batch wait for their producer's marker; transactions still open at the end of the
log stay pending and are settled by the marker still to come.
"""

from __future__ import annotations

from pykraft.coordinator.group.offsets import validate_offset_commit
from pykraft.coordinator.group.state import GroupMetadata
from pykraft.protocol.errors import Errors

UNKNOWN_MEMBER_ID = ""


def validate_txn_offset_commit(
    group: GroupMetadata,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
) -> Errors | None:
    """``GroupCoordinator.validateOffsetCommit`` with ``isTransactional = true``: a
    ``group_instance_id`` must be held by ``member_id`` (else FENCED_INSTANCE_ID, or
    UNKNOWN_MEMBER_ID when no member holds it, ``validateCurrentMember``); older
    TxnOffsetCommit versions carry no member, and transactional commits need none."""
    return validate_offset_commit(
        group, generation_id, member_id, group_instance_id, is_transactional=True
    )


class ProducerGroups:
    """Kafka's ``openGroupsForProducer``: for each producer id, the groups on this coordinator
    that hold offsets of its open transaction."""

    def __init__(self) -> None:
        # Invariant: no empty set is kept.
        self._groups: dict[int, set[str]] = {}

    def add(self, producer_id: int, group_id: str) -> None:
        self._groups.setdefault(producer_id, set()).add(group_id)

    def remove(self, producer_id: int, group_id: str) -> None:
        groups = self._groups.get(producer_id)
        if groups is None:
            return
        groups.discard(group_id)
        if not groups:
            del self._groups[producer_id]

    def groups_of(self, producer_id: int) -> list[str]:
        """The producer's groups, in name order (a deterministic order to settle them in)."""
        return sorted(self._groups.get(producer_id, ()))

    def forget_group(self, group_id: str) -> None:
        """``removeGroupFromAllProducers``: the group was unloaded."""
        for producer_id in list(self._groups):
            self.remove(producer_id, group_id)

    def producers(self) -> frozenset[int]:
        return frozenset(self._groups)
