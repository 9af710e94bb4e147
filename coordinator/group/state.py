"""One consumer group's state: members, generation, protocol — Kafka's ``GroupMetadata``.

Theory of operation
-------------------
A group is in one ``GroupState`` (Kafka's classic group states, ``GroupMetadata.scala``):

* ``EMPTY``: no members (a new group, the last member left, or a group only used to store
  offsets). -> PREPARING_REBALANCE when a member joins; -> DEAD when unloaded.
* ``PREPARING_REBALANCE``: members are (re)joining; JoinGroup answers wait until every member
  has rejoined or the rebalance timeout passes. -> COMPLETING_REBALANCE when the next
  generation starts with members; -> EMPTY when it starts with none; -> DEAD when unloaded.
* ``COMPLETING_REBALANCE``: the JoinGroup answers went out; waiting for the leader's SyncGroup
  with the assignment. -> STABLE once it is stored; -> PREPARING_REBALANCE when a member
  joins, leaves or fails; -> DEAD when unloaded.
* ``STABLE``: every member has its assignment. -> PREPARING_REBALANCE when a member joins
  (the leader, or one with new metadata), leaves or fails; -> DEAD when unloaded.
* ``DEAD``: the group is gone from this coordinator (its ``__consumer_offsets`` partition moved
  away, or it was deleted). Nothing leaves DEAD.

``GroupMetadata.transition_to`` is the one place the state changes; it checks
``VALID_PREVIOUS_STATES`` (Kafka's ``validPreviousStates``) and raises
``IllegalGroupStateTransition`` naming both states. A group loaded from the log starts EMPTY or
STABLE (Kafka's ``GroupMetadata.loadGroup``).

Waiting requests are not callbacks here: a member records the id of the JoinGroup
(``join_request``) or SyncGroup (``sync_request``) it waits on, and
``coordinator.group.coordinator`` answers those ids through its ``Effects``. Time is only ever a
parameter (``now_ms``).

Offsets (``GroupMetadata.scala``): ``offsets`` holds what is committed. Writes in flight are
counted per partition (``pending_offset_commits``, Kafka's ``pendingOffsetCommits``); a
transactional commit (KIP-98) stays in ``pending_txn_offset_commits`` under its producer id
(Kafka's ``pendingTransactionalOffsetCommits``) until the transaction's marker is written:
``complete_pending_txn_offset_commit`` moves it into ``offsets`` on COMMIT (unless a commit
further along the log is already there) and drops it on ABORT. OffsetFetch with
``require_stable`` (KIP-447) asks ``has_pending_offset_commits_for``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import attrs

from pykraft.coordinator.group.consumer_protocol import subscribed_topics
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.storage.topic_partition import TopicPartition


class GroupState(enum.Enum):
    # Values are Kafka's state names, as DescribeGroups and ListGroups show them.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class IllegalGroupStateTransition(RuntimeError):
    """A bug: the coordinator tried a state change the group state machine does not allow."""

    def __init__(self, group_id: str, source: GroupState, target: GroupState) -> None:
        allowed = ", ".join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))
        super().__init__(
            f"group {group_id!r} must be in one of {{{allowed}}} to move to {target.value}, "
            f"but it is {source.value}"
        )


@attrs.frozen
class Protocol:
    """One entry of a JoinGroup's protocol list: an assignor name and its member metadata."""

    name: str
    metadata: bytes


@attrs.frozen
class CommittedOffset:
    """Kafka's ``CommitRecordMetadataAndOffset``: an offset and the log offset of its record
    (None while only staged), so a late answer never replaces a newer commit."""

    record_offset: int | None
    value: OffsetAndMetadata


@attrs.frozen
class InitialJoin:
    """Kafka's ``InitialDelayedJoin``: a new group waits ``delay_ms`` more for members while
    new ones keep arriving and ``remaining_ms`` of the rebalance timeout is left."""

    delay_ms: int
    remaining_ms: int


@attrs.define(kw_only=True)
class MemberMetadata:
    """Kafka's ``MemberMetadata``; ``group_instance_id`` set makes it static (KIP-345)."""

    member_id: str
    group_instance_id: str | None = None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    # The request id of the JoinGroup / SyncGroup waiting for an answer, else None.
    join_request: int | None = None
    sync_request: int | None = None
    # Joined but not yet in a generation: may expire while waiting (NewMemberJoinTimeoutMs).
    is_new: bool = False
    # The member is removed when this passes without a heartbeat; None: nothing scheduled.
    heartbeat_deadline_ms: int | None = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_request is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_request is not None

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols

    def metadata(self, protocol_name: str) -> bytes:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        raise AssertionError(f"member {self.member_id} does not support {protocol_name}")

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for protocol in self.protocols:
            if protocol.name in candidates:
                return protocol.name
        raise AssertionError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether an expiring session spares the member (``MemberMetadata.hasSatisfiedHeartbeat``
        at expiry time): a new member expires, one waiting in a rebalance does not."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


class GroupMetadata:
    """One group's membership and offsets; ``transition_to`` is its only state change."""

    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        # Kafka's subscribedTopics (None: unknown) per generation; OffsetDelete keeps these.
        self.subscribed_topics: frozenset[str] | None = None
        # Insertion order decides the next leader when the leader leaves (Kafka: any member).
        self.members: dict[str, MemberMetadata] = {}
        # Kafka's staticMembers: group.instance.id -> the member id holding it (KIP-345).
        # Invariant: each value is a key of members whose group_instance_id is the key.
        self.static_members: dict[str, str] = {}
        # Member ids handed out with MEMBER_ID_REQUIRED -> when they expire.
        self.pending_members: dict[str, int] = {}
        self.pending_sync_members: set[str] = set()
        self.new_member_added = False
        # Invariant: join_deadline_ms is set exactly when state is PREPARING_REBALANCE.
        self.join_deadline_ms: int | None = None
        self.initial_join: InitialJoin | None = None
        # Set while some member of generation sync_generation has not sent SyncGroup.
        self.sync_deadline_ms: int | None = None
        self.sync_generation = -1
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        # Invariant: every count is positive (a partition without writes in flight is absent).
        self.pending_offset_commits: dict[TopicPartition, int] = {}
        # Producer id -> its open transaction's offsets; record_offset None until appended.
        self.pending_txn_offset_commits: dict[int, dict[TopicPartition, CommittedOffset]] = {}

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, generation "
            f"{self.generation_id}, members {list(self.members)})"
        )

    # ------------------------------------------------------------------ state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupStateTransition(self.group_id, self.state, target)
        self.state = target
        self.state_timestamp_ms = now_ms
        if target is not GroupState.PREPARING_REBALANCE:
            self.join_deadline_ms = None
            self.initial_join = None

    # ------------------------------------------------------------------ members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        """Kafka's ``add``: the first member sets the protocol type and becomes leader."""
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type, "protocol type checked on join"
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        return member

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return not self.not_yet_rejoined_members() and not self.pending_members

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick a member that did; False when none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ protocols

    def _supporting(self, protocol_name: str) -> int:
        return sum(
            1 for m in self.members.values() if any(p.name == protocol_name for p in m.protocols)
        )

    def candidate_protocols(self) -> frozenset[str]:
        """The protocols every member supports."""
        names = {p.name for m in self.members.values() for p in m.protocols}
        return frozenset(n for n in names if self._supporting(n) == len(self.members))

    def supports_protocols(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        """Whether a member with these protocols may join (``supportsProtocols``)."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self._supporting(p.name) == len(self.members) for p in protocols
        )

    def select_protocol(self) -> str:
        """Each member votes for its preferred common protocol; the most votes win. Kafka
        breaks ties by hash-map order; here the tie goes to the first member's preference."""
        assert self.members, "cannot select a protocol for an empty group"
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self, now_ms: int) -> None:
        """Kafka's ``initNextGeneration``: a new generation with a protocol (or an empty one)."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()
        self.sync_deadline_ms = None
        self.subscribed_topics = subscribed_topics(self)

    # ------------------------------------------------------------------ offsets

    def offset(self, topic_partition: TopicPartition) -> OffsetAndMetadata | None:
        committed = self.offsets.get(topic_partition)
        return None if committed is None else committed.value

    def has_offsets(self) -> bool:
        """Kafka's ``hasOffsets``: committed, in flight, or pending in a transaction."""
        return bool(self.offsets or self.pending_offset_commits or self.pending_txn_offset_commits)

    def on_offset_commit_append(
        self, topic_partition: TopicPartition, committed: CommittedOffset
    ) -> None:
        """Keep the commit unless a record further along the log is already cached."""
        current = self.offsets.get(topic_partition)
        if current is None or _older(current, committed):
            self.offsets[topic_partition] = committed

    def prepare_offset_commit(self, partitions: Iterable[TopicPartition]) -> None:
        """A non-transactional write of these partitions' offsets has started."""
        for topic_partition in partitions:
            in_flight = self.pending_offset_commits.get(topic_partition, 0)
            self.pending_offset_commits[topic_partition] = in_flight + 1

    def finish_offset_write(self, partitions: Iterable[TopicPartition]) -> None:
        """That write ended (stored or failed)."""
        for topic_partition in partitions:
            in_flight = self.pending_offset_commits.pop(topic_partition, 0) - 1
            if in_flight > 0:
                self.pending_offset_commits[topic_partition] = in_flight

    # ------------------------------------------------------------------ transactional offsets

    def prepare_txn_offset_commit(
        self, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """``prepareTxnOffsetCommit``: stage the offsets of ``producer_id``'s transaction; a
        later commit of the same partition in the same transaction replaces the earlier one."""
        staged = self.pending_txn_offset_commits.setdefault(producer_id, {})
        for topic_partition, offset in offsets.items():
            staged[topic_partition] = CommittedOffset(None, offset)

    def on_txn_offset_commit_append(
        self, producer_id: int, topic_partition: TopicPartition, committed: CommittedOffset
    ) -> None:
        """``onTxnOffsetCommitAppend``: the staged offset's record is in the log at
        ``committed.record_offset`` (ignored when the transaction ended meanwhile or a later
        commit of the partition replaced it)."""
        staged = self.pending_txn_offset_commits.get(producer_id, {})
        current = staged.get(topic_partition)
        if current is not None and current.value == committed.value:
            staged[topic_partition] = committed

    def fail_pending_txn_offset_commit(
        self, producer_id: int, topic_partition: TopicPartition
    ) -> None:
        """``failPendingTxnOffsetCommit``: the record was not written; the client retries."""
        staged = self.pending_txn_offset_commits.get(producer_id)
        if staged is None:
            return
        staged.pop(topic_partition, None)
        if not staged:
            del self.pending_txn_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, commit: bool) -> None:
        """``completePendingTxnOffsetCommit``: the transaction's marker is in the log. COMMIT
        materializes each staged offset unless a commit whose record lies further along the log
        is cached already (Kafka's order is the log's); ABORT drops them."""
        staged = self.pending_txn_offset_commits.pop(producer_id, {})
        if not commit:
            return
        for topic_partition, committed in staged.items():
            # A record still unacknowledged (a client that ended its transaction without
            # waiting for the TxnOffsetCommit answer) was appended before the marker, so the
            # log commits it too: cached with an unknown record offset, which any later
            # commit replaces (Kafka raises IllegalStateException here instead).
            self.on_offset_commit_append(topic_partition, committed)

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offset_commits

    def has_pending_offset_commits_for(self, topic_partition: TopicPartition) -> bool:
        """``hasPendingOffsetCommitsForTopicPartition``: a write in flight or a transaction
        still open for the partition (OffsetFetch with ``require_stable``, KIP-447)."""
        return topic_partition in self.pending_offset_commits or any(
            topic_partition in staged for staged in self.pending_txn_offset_commits.values()
        )


def _older(current: CommittedOffset, candidate: CommittedOffset) -> bool:
    if current.record_offset is None or candidate.record_offset is None:
        return True
    return current.record_offset < candidate.record_offset
