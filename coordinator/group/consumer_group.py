"""One consumer group of the consumer group protocol (KIP-848): epochs, members, target.

Theory of operation (Kafka's ``ConsumerGroup`` and ``TargetAssignmentBuilder``)
-----------------------------------------------------------------------------
Three epochs move the group. The *group epoch* is bumped whenever what the assignment depends
on changes: a member joins or leaves, a subscription changes, a subscribed topic's partition
count changes (or a topic matching a regex appears). The *target assignment epoch* catches up
with it when the assignor computes a new target (``compute_target_assignment``). Each member's
*member epoch* catches up with the target epoch as the member reconciles
(``coordinator.group.consumer_member``).

``ConsumerGroupState`` is derived, never set (``ConsumerGroup.maybeUpdateGroupState``):

  EMPTY        no members
  ASSIGNING    group epoch > target assignment epoch (a new target is due)
  RECONCILING  some member is not STABLE at the target epoch
  STABLE       every member owns its target at the target epoch
  DEAD         the group is gone (deleted, or its partition unloaded): never shown here

``partition_epochs`` records which member owns each partition (Kafka's
``currentPartitionEpoch``, a partition -> member epoch map): a partition is given to a new owner
only once no member owns it. Invariant: no partition is owned by two members; ``update_member``
asserts it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping

from pykraft.coordinator.group import consumer_records as records
from pykraft.coordinator.group.assignors import (
    Assignment,
    AssignmentSpec,
    MemberSubscription,
    assign,
)
from pykraft.coordinator.group.consumer_member import (
    NO_PARTITION_EPOCH,
    ConsumerGroupMember,
    MemberState,
    normalize,
)
from pykraft.coordinator.group.consumer_records import TopicMetadata
from pykraft.coordinator.group.effects import CoordinatorRecord


class ConsumerGroupState(enum.Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState``; values are what ListGroups shows."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


CONSUMER_PROTOCOL_TYPE = "consumer"


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        # member id -> its partitions in the target assignment of ``assignment_epoch``.
        self.target_assignment: dict[str, Assignment] = {}
        # topic name -> the metadata the group epoch was computed on.
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        # Invariant: (topic id, partition) -> epoch of the one member owning it.
        self.partition_epochs: dict[tuple[str, int], int] = {}
        self.partition_owners: dict[tuple[str, int], str] = {}
        # The assignor of the last target assignment (ConsumerGroupDescribe's AssignorName).
        self.assignor_name = ""

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def current_partition_epoch(self, topic_id: str, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), NO_PARTITION_EPOCH)

    def target_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, {})

    # ------------------------------------------------------------------ members

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, moving its partitions' ownership with it."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        for topic_partition in sorted(member.owned()):
            owner = self.partition_owners.get(topic_partition)
            assert owner is None, (
                f"{topic_partition} of group {self.group_id} is owned by {owner} and "
                f"{member.member_id}"
            )
            self.partition_owners[topic_partition] = member.member_id
            self.partition_epochs[topic_partition] = member.member_epoch
        self.members[member.member_id] = member

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
        self.target_assignment.pop(member_id, None)
        return member

    def _release(self, member: ConsumerGroupMember) -> None:
        for topic_partition in member.owned():
            if self.partition_owners.get(topic_partition) == member.member_id:
                del self.partition_owners[topic_partition]
                del self.partition_epochs[topic_partition]

    def member_by_instance_id(self, instance_id: str) -> ConsumerGroupMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    # ------------------------------------------------------------------ subscriptions

    def subscribed_topic_names(
        self, topics: Iterable[str], members: Iterable[ConsumerGroupMember] | None = None
    ) -> set[str]:
        """Every topic some member subscribes to: by name, or matched by its regex among the
        image's ``topics`` (RE2J ``matches()`` is a full match: Python ``re.fullmatch``)."""
        chosen = list(self.members.values()) if members is None else list(members)
        names: set[str] = set()
        patterns = set()
        for member in chosen:
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                patterns.add(member.subscribed_topic_regex)
        existing = list(topics)
        for pattern in sorted(patterns):
            compiled = compile_regex(pattern)
            if compiled is not None:
                names.update(t for t in existing if compiled.fullmatch(t))
        return names

    def member_topic_ids(
        self, member: ConsumerGroupMember, metadata: Mapping[str, TopicMetadata]
    ) -> frozenset[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            compiled = compile_regex(member.subscribed_topic_regex)
            if compiled is not None:
                names.update(t for t in metadata if compiled.fullmatch(t))
        return frozenset(metadata[name].topic_id for name in names if name in metadata)

    def refresh_subscription_metadata(
        self, topics: Mapping[str, TopicMetadata], written: list[CoordinatorRecord]
    ) -> bool:
        """The subscribed topics' metadata from the image; True (and a record) if it changed."""
        names = self.subscribed_topic_names(topics)
        metadata = {name: topics[name] for name in sorted(names) if name in topics}
        if metadata == self.subscription_metadata:
            return False
        self.subscription_metadata = metadata
        written.append(records.partition_metadata_record(self.group_id, metadata))
        return True

    # ------------------------------------------------------------------ target assignment

    def preferred_assignor(self, default: str) -> str:
        """``preferredServerAssignor``, else ``default``: the assignor most members ask for
        (ties by name)."""
        asked: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor_name is not None:
                asked[member.server_assignor_name] = asked.get(member.server_assignor_name, 0) + 1
        if not asked:
            return default
        return min(asked, key=lambda name: (-asked[name], name))

    def maybe_compute_target_assignment(
        self, assignor: str, written: list[CoordinatorRecord]
    ) -> None:
        """When the group epoch is ahead of the target's: a new target, writing the members
        whose target changed, then the target epoch."""
        if self.group_epoch <= self.assignment_epoch:
            return
        target = self.compute_target_assignment(assignor)
        for member_id, assignment in sorted(target.items()):
            if self.target_assignment.get(member_id) != assignment:
                written.append(
                    records.target_assignment_member_record(self.group_id, member_id, assignment)
                )
        self.target_assignment = dict(target)
        self.assignment_epoch = self.group_epoch
        self.assignor_name = assignor
        written.append(records.target_assignment_epoch_record(self.group_id, self.group_epoch))

    def compute_target_assignment(self, assignor: str) -> dict[str, Assignment]:
        """``TargetAssignmentBuilder.build``: the members' new targets at ``group_epoch``
        (the caller writes the members whose target changed, then the epoch)."""
        metadata = self.subscription_metadata
        spec = AssignmentSpec(
            members={
                member_id: MemberSubscription(
                    self.member_topic_ids(member, metadata), self.target_of(member_id)
                )
                for member_id, member in self.members.items()
            },
            partition_counts={t.topic_id: t.num_partitions for t in metadata.values()},
        )
        computed = assign(assignor, spec)
        return {member_id: normalize(computed.get(member_id, {})) for member_id in self.members}


def compile_regex(pattern: str) -> re.Pattern[str] | None:
    """A subscription regex, or None when Python cannot compile it. Kafka uses RE2J: RE2 has
    no backreferences or lookaround (such patterns are refused by Kafka, accepted here) and
    Python's ``re`` lacks RE2's ``\\pN``-style classes; plain topic patterns agree."""
    try:
        return re.compile(pattern)
    except re.error:
        return None
