"""A consumer group's writes in flight (KIP-848), and the state to go back to when one fails.

Kafka's coordinator runtime applies a write's records to its in-memory timeline at once and,
when the append fails, reverts the timeline to the last written offset
(``CoordinatorRuntime``'s ``SnapshotRegistry.revertToSnapshot``): memory never runs ahead of
the log. pykraft keeps the group as it was before each write (``GroupSnapshot``: a copy of the
group's tables; members are frozen values, so copying the dicts suffices) and, when an append
fails, restores the group from the earliest failed write and fails the group's later writes
still in flight (their records were built on the state that is now gone).
"""

from __future__ import annotations

import attrs

from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_timers import MemberDeadlines
from pykraft.coordinator.group.effects import Result
from pykraft.coordinator.group.state import GroupMetadata


@attrs.frozen
class GroupSnapshot:
    """One group before a write: None where it did not exist; ``classic`` the classic group an
    upgrade in this write replaced (restored with it)."""

    group_id: str
    group: ConsumerGroup | None
    deadlines: dict[str, MemberDeadlines]
    classic: GroupMetadata | None = None


@attrs.frozen
class PendingConsumerWrite:
    # None: a timer's write (a fenced member); nobody waits.
    request_id: int | None
    # A ConsumerGroupHeartbeat's answer, or a classic member's (JoinGroup, SyncGroup, ...).
    result: Result | None
    # The group before this write; None: nothing to restore (a group's own removal).
    before: GroupSnapshot | None = None


def copy_group(group: ConsumerGroup) -> ConsumerGroup:
    """A copy sharing nothing mutable with ``group`` (its members are immutable values)."""
    copy = ConsumerGroup(group.group_id)
    copy.group_epoch = group.group_epoch
    copy.assignment_epoch = group.assignment_epoch
    copy.members = dict(group.members)
    copy.target_assignment = dict(group.target_assignment)
    copy.subscription_metadata = dict(group.subscription_metadata)
    copy.partition_epochs = dict(group.partition_epochs)
    copy.partition_owners = dict(group.partition_owners)
    copy.assignor_name = group.assignor_name
    return copy
