"""Committed offsets and the group records: validation, records to write, replay of a partition.

Kafka's ``GroupMetadataManager`` (``storeOffsets``, ``storeGroup``, ``getOffsets``,
``doLoadGroupsAndOffsets``):

* an OffsetCommit is checked (``validate_offset_commit``): a commit from a member must name a
  current member and generation; a commit with generation -1 and no member id (the "simple"
  consumer that only stores offsets) is allowed while the group has no members. Each partition's
  metadata must fit ``offset.metadata.max.bytes`` (else OFFSET_METADATA_TOO_LARGE); the others
  become OffsetCommit records appended as one batch, and only once the append is acknowledged
  (acks=-1) do the offsets enter the cache and the client get NONE;
* the group is stored (a GroupMetadata record) when a generation becomes EMPTY and when the
  leader's SyncGroup brings the assignment;
* append errors are mapped as Kafka maps them, so clients see coordinator errors they retry;
* ``fetch_offsets`` answers OffsetFetch from the committed offsets; with ``require_stable``
  (OffsetFetch v7+, KIP-447) a partition with a commit still in flight or in an open
  transaction answers UNSTABLE_OFFSET_COMMIT (retriable) instead;
* ``OffsetsReplay`` replays a ``__consumer_offsets`` partition in log order: the last record of a
  key wins, a tombstone deletes. Offsets in a transactional batch wait under their producer id
  until that producer's marker: COMMIT makes them committed unless a commit further along the
  log is there already, ABORT drops them; transactions still open at the end stay pending in
  their groups (``loadGroupsAndOffsets``' ``pendingOffsets``). Groups with members load
  STABLE, others EMPTY; offsets of a group without a group record make an EMPTY group that
  only stores offsets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_protocol import subscribed_topics
from pykraft.coordinator.group.consumer_records import is_consumer_group_key
from pykraft.coordinator.group.consumer_replay import ConsumerGroupsReplay
from pykraft.coordinator.group.effects import CoordinatorRecord
from pykraft.coordinator.group.records import (
    CoordinatorRecordError,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetAndMetadata,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from pykraft.coordinator.group.state import (
    CommittedOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    Protocol,
)
from pykraft.coordinator.group.static_members import validate_current_member
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"
NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""


@attrs.frozen
class LogRecord:
    """A record read back from ``__consumer_offsets``, with its batch's base offset."""

    batch_offset: int
    key: bytes | None
    value: bytes | None
    # The producer of the transactional batch holding it; None outside transactions.
    producer_id: int | None = None


@attrs.frozen
class TransactionMarker:
    """A control batch read back: ``producer_id``'s transaction ended here."""

    batch_offset: int
    producer_id: int
    # The control record's type (``ControlRecordType``: 0 ABORT, 1 COMMIT); None when its key
    # cannot be read.
    control_type: int | None


COMMIT_MARKER = 1


@attrs.frozen
class FetchedOffset:
    """One partition of an OffsetFetch answer (Kafka's ``OffsetFetchResponse.PartitionData``):
    the committed offset, None when nothing is committed or (``error``) it is not stable."""

    topic_partition: TopicPartition
    offset: OffsetAndMetadata | None
    error: Errors = Errors.NONE


@attrs.frozen
class LoadedGroups:
    groups: tuple[GroupMetadata, ...]
    # Why records were skipped (malformed or of an unknown version): one line each.
    problems: tuple[str, ...] = ()
    # KIP-848 consumer groups (record key versions 3-8, ``consumer_replay``).
    consumer_groups: tuple[ConsumerGroup, ...] = ()


# ------------------------------------------------------------------ commits


def validate_offset_commit(
    group: GroupMetadata,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None = None,
    is_transactional: bool = False,
) -> Errors | None:
    """``GroupCoordinator.validateOffsetCommit`` (Kafka 3.9): generation -1 on an EMPTY group
    is an admin client or a consumer without group management; a member id, generation or
    instance id that is set must match a current member (``validate_current_member``: a
    replaced static member is FENCED_INSTANCE_ID). Without any of them only an EMPTY group takes
    a commit, unless it is transactional (TxnOffsetCommit below v3 carries no member)."""
    if group.is_(GroupState.DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and group.is_(GroupState.EMPTY):
        return None
    if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
        error = validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = Errors.ILLEGAL_GENERATION
        return error
    if not is_transactional and not group.is_(GroupState.EMPTY):
        # Only members may commit to a group that has members.
        return Errors.UNKNOWN_MEMBER_ID
    return None


def metadata_too_large(offset: OffsetAndMetadata, max_bytes: int) -> bool:
    """``validateOffsetMetadataLength`` (Kafka counts the metadata string's characters)."""
    return len(offset.metadata) > max_bytes


def offset_commit_records(
    group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
) -> tuple[CoordinatorRecord, ...]:
    return tuple(
        CoordinatorRecord(offset_commit_key(group_id, tp), offset_commit_value(offset))
        for tp, offset in offsets.items()
    )


def offset_append_error(error: Errors) -> Errors:
    """``storeOffsets``' mapping of an append error to what the committing client sees."""
    if error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.INVALID_COMMIT_OFFSET_SIZE
    return error


def group_append_error(error: Errors) -> Errors:
    """``storeGroup``'s mapping: a timed-out store asks the members to rejoin."""
    if error is Errors.REQUEST_TIMED_OUT:
        return Errors.REBALANCE_IN_PROGRESS
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.UNKNOWN_SERVER_ERROR
    return offset_append_error(error)


def group_record(group: GroupMetadata, assignment: Mapping[str, bytes] | None) -> CoordinatorRecord:
    """The GroupMetadata record of ``group`` with ``assignment`` (``groupMetadataValue``)."""
    assignment = assignment or {}
    protocol = group.protocol_name
    members = tuple(
        MemberRecord(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            session_timeout_ms=member.session_timeout_ms,
            subscription=member.metadata(protocol) if protocol is not None else b"",
            assignment=assignment.get(member.member_id, b""),
        )
        for member in group.members.values()
    )
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=protocol,
        leader=group.leader_id,
        current_state_timestamp_ms=group.state_timestamp_ms,
        members=members,
    )
    return CoordinatorRecord(group_metadata_key(group.group_id), group_metadata_value(value))


def fetch_offsets(
    group: GroupMetadata | None,
    partitions: Iterable[TopicPartition] | None,
    require_stable: bool = False,
) -> list[FetchedOffset]:
    """``getOffsets``: the asked partitions (None: all the group has committed), no offset
    where nothing is committed — whatever the group's state, since simple consumers commit
    without one. ``require_stable``: UNSTABLE_OFFSET_COMMIT where a commit is pending."""
    if group is None:
        return [FetchedOffset(tp, None) for tp in partitions or ()]
    wanted = sorted(group.offsets) if partitions is None else partitions
    return [
        FetchedOffset(tp, None, Errors.UNSTABLE_OFFSET_COMMIT)
        if require_stable and group.has_pending_offset_commits_for(tp)
        else FetchedOffset(tp, group.offset(tp))
        for tp in wanted
    ]


# ------------------------------------------------------------------ loading


class OffsetsReplay:
    """Replays one partition's records, chunk by chunk in log order, keeping only the latest
    value of each key (a log without compaction holds every commit ever made)."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        # Producer id -> the offsets of its open transaction, by (group, partition).
        self.pending: dict[int, dict[tuple[str, TopicPartition], CommittedOffset]] = {}
        self.values: dict[str, GroupMetadataValue | None] = {}
        self.problems: list[str] = []
        self.records = 0
        self.consumer_groups = ConsumerGroupsReplay()

    def replay(self, records: Iterable[LogRecord | TransactionMarker]) -> None:
        for record in records:
            self.records += 1
            if isinstance(record, TransactionMarker):
                self._end_transaction(record)
                continue
            try:
                self._replay(record)
            except CoordinatorRecordError as error:
                self.problems.append(
                    f"record in the batch at offset {record.batch_offset}: {error}"
                )

    def _replay(self, record: LogRecord) -> None:
        if record.key is None:
            raise CoordinatorRecordError("a record without a key")
        if is_consumer_group_key(record.key):
            self.consumer_groups.replay(record.key, record.value)
            return
        key = decode_key(record.key)
        if isinstance(key, GroupMetadataKey):
            value = None if record.value is None else decode_group_metadata_value(record.value)
            if value is not None and value.members and value.protocol is None:
                raise CoordinatorRecordError(f"group {key.group!r} has members but no protocol")
            self.values[key.group] = value
            return
        if record.producer_id is not None:
            staged = self.pending.setdefault(record.producer_id, {})
            if record.value is None:
                staged.pop((key.group, key.topic_partition), None)
            else:
                offset = decode_offset_commit_value(record.value)
                committed = CommittedOffset(record.batch_offset, offset)
                staged[(key.group, key.topic_partition)] = committed
            return
        group_offsets = self.offsets.setdefault(key.group, {})
        if record.value is None:
            group_offsets.pop(key.topic_partition, None)
            if not group_offsets:
                del self.offsets[key.group]
            return
        offset = decode_offset_commit_value(record.value)
        group_offsets[key.topic_partition] = CommittedOffset(record.batch_offset, offset)

    def _end_transaction(self, marker: TransactionMarker) -> None:
        """A marker settles its producer's open transaction: only COMMIT keeps the offsets
        (Kafka drops them on any other control record, as here)."""
        staged = self.pending.pop(marker.producer_id, {})
        if marker.control_type is None:
            self.problems.append(
                f"control record at offset {marker.batch_offset}: unreadable key, "
                f"the transaction of producer {marker.producer_id} is taken as aborted"
            )
        if marker.control_type != COMMIT_MARKER:
            return
        for (group_id, topic_partition), committed in staged.items():
            group_offsets = self.offsets.setdefault(group_id, {})
            current = group_offsets.get(topic_partition)
            if current is None or _logged_before(current, committed):
                group_offsets[topic_partition] = committed

    def loaded(self, now_ms: int) -> LoadedGroups:
        """The groups the records describe: with a live group record, with offsets, or with
        offsets of a transaction still open."""
        live = {group_id for group_id, value in self.values.items() if value is not None}
        open_groups = {group_id for staged in self.pending.values() for group_id, _ in staged}
        groups = []
        for group_id in sorted(set(self.offsets) | live | open_groups):
            group = _group_from(group_id, self.values.get(group_id), now_ms)
            group.offsets.update(self.offsets.get(group_id, {}))
            for producer_id, staged in sorted(self.pending.items()):
                mine = {tp: c for (g, tp), c in staged.items() if g == group_id}
                if mine:
                    group.pending_txn_offset_commits[producer_id] = mine
            groups.append(group)
        consumer_groups = self.consumer_groups.groups()
        return LoadedGroups(tuple(groups), tuple(self.problems), consumer_groups)


def load_groups(records: Iterable[LogRecord | TransactionMarker], now_ms: int) -> LoadedGroups:
    """Replay one partition's records, in log order, into groups with their offsets."""
    replay = OffsetsReplay()
    replay.replay(records)
    return replay.loaded(now_ms)


def _logged_before(current: CommittedOffset, candidate: CommittedOffset) -> bool:
    """Replayed offsets always know their record's offset."""
    assert current.record_offset is not None and candidate.record_offset is not None
    return current.record_offset < candidate.record_offset


def _group_from(group_id: str, value: GroupMetadataValue | None, now_ms: int) -> GroupMetadata:
    """``GroupMetadata.loadGroup``: STABLE with members, else EMPTY."""
    if value is None:
        return GroupMetadata(group_id, GroupState.EMPTY, now_ms)
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    timestamp_ms = value.current_state_timestamp_ms
    group = GroupMetadata(group_id, state, timestamp_ms if timestamp_ms >= 0 else now_ms)
    group.generation_id = value.generation
    group.protocol_name = value.protocol
    for record in value.members:
        protocols = (Protocol(value.protocol or "", record.subscription),)
        group.add(
            MemberMetadata(
                member_id=record.member_id,
                group_instance_id=record.group_instance_id,
                client_id=record.client_id,
                client_host=record.client_host,
                rebalance_timeout_ms=record.rebalance_timeout_ms,
                session_timeout_ms=record.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=protocols,
                assignment=record.assignment,
            )
        )
    group.protocol_type = value.protocol_type or None
    # add() made the first member leader; the record names the real one.
    if value.leader is not None and value.leader in group.members:
        group.leader_id = value.leader
    group.subscribed_topics = subscribed_topics(group)
    return group
