"""The ``__consumer_offsets`` records of consumer groups (KIP-848), Kafka 3.9's bytes.

Kafka's schemas (``group-coordinator/src/main/resources/common/message``); every key is an
int16 record type then non-flexible fields (int16-length strings), every value an int16 version
(0) then flexible fields (compact strings and arrays, 16-byte uuids, a tagged-field section
after each struct). A null value is a tombstone.

  key 3  ConsumerGroupMetadataKey               group    value: Epoch int32
  key 4  ConsumerGroupPartitionMetadataKey      group    value: Topics [TopicId uuid,
         TopicName string, NumPartitions int32, PartitionMetadata [Partition int32,
         Racks [string]]]
  key 5  ConsumerGroupMemberMetadataKey         group, member   value: InstanceId?, RackId?,
         ClientId, ClientHost, SubscribedTopicNames [string], SubscribedTopicRegex?,
         RebalanceTimeoutMs int32, ServerAssignor? (+ tagged 0: ClassicMemberMetadata, skipped)
  key 6  ConsumerGroupTargetAssignmentMetadataKey  group  value: AssignmentEpoch int32
  key 7  ConsumerGroupTargetAssignmentMemberKey group, member   value: TopicPartitions
         [TopicId uuid, Partitions [int32]]
  key 8  ConsumerGroupCurrentMemberAssignmentKey group, member  value: MemberEpoch int32,
         PreviousMemberEpoch int32, State int8, AssignedPartitions [..],
         PartitionsPendingRevocation [..]

Topic ids are the metadata image's Kafka base64 strings here and 16 raw bytes in the records.
The classic records (key versions 0-2) are ``coordinator.group.records``'.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import attrs

from pykraft.coordinator.group.assignors import Assignment
from pykraft.coordinator.group.consumer_member import ConsumerGroupMember, MemberState
from pykraft.coordinator.group.effects import CoordinatorRecord
from pykraft.coordinator.group.records import CoordinatorRecordError
from pykraft.coordinator.record_reader import RecordReader
from pykraft.metadata.records import kafka_string_to_uuid, uuid_to_kafka_string

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_KEY_TYPES = range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1)
_MEMBER_KEYS = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)
VALUE_VERSION = 0
_CLASSIC_MEMBER_METADATA_TAG = 0
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")


@attrs.frozen
class ConsumerKey:
    record_type: int
    group_id: str
    # Set for the member records (5, 7, 8).
    member_id: str | None = None


@attrs.frozen
class TopicMetadata:
    """Kafka's ``TopicMetadata`` of a group's subscription: what its assignment was built on."""

    topic_id: str
    topic_name: str
    num_partitions: int


@attrs.frozen
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


ConsumerValue = (
    int | tuple[TopicMetadata, ...] | ConsumerGroupMember | Assignment | CurrentAssignment
)


# ------------------------------------------------------------------ writing


class _Out:
    def __init__(self) -> None:
        self.out = bytearray()

    def raw(self, data: bytes) -> _Out:
        self.out += data
        return self

    def int8(self, value: int) -> _Out:
        return self.raw(struct.pack(">b", value))

    def int16(self, value: int) -> _Out:
        return self.raw(_INT16.pack(value))

    def int32(self, value: int) -> _Out:
        return self.raw(_INT32.pack(value))

    def uvarint(self, value: int) -> _Out:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)
        return self

    def string(self, value: str) -> _Out:
        data = value.encode("utf-8")
        return self.int16(len(data)).raw(data)

    def compact_string(self, value: str | None) -> _Out:
        if value is None:
            return self.uvarint(0)
        data = value.encode("utf-8")
        return self.uvarint(len(data) + 1).raw(data)

    def count(self, size: int) -> _Out:
        return self.uvarint(size + 1)

    def no_tags(self) -> _Out:
        return self.uvarint(0)


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    out = _Out().int16(record_type).string(group_id)
    if member_id is not None:
        out.string(member_id)
    return bytes(out.out)


def _value(out: _Out) -> bytes:
    return bytes(out.no_tags().out)


def _topic_partitions(out: _Out, assignment: Assignment) -> _Out:
    topics = [(t, sorted(ps)) for t, ps in sorted(assignment.items()) if ps]
    out.count(len(topics))
    for topic_id, partitions in topics:
        out.raw(kafka_string_to_uuid(topic_id)).count(len(partitions))
        for partition in partitions:
            out.int32(partition)
        out.no_tags()
    return out


def group_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    value = _Out().int16(VALUE_VERSION).int32(epoch)
    return CoordinatorRecord(_key(GROUP_METADATA, group_id), _value(value))


def partition_metadata_record(
    group_id: str, topics: Mapping[str, TopicMetadata]
) -> CoordinatorRecord:
    out = _Out().int16(VALUE_VERSION).count(len(topics))
    for _, topic in sorted(topics.items()):
        out.raw(kafka_string_to_uuid(topic.topic_id)).compact_string(topic.topic_name)
        out.int32(topic.num_partitions).count(0).no_tags()
    return CoordinatorRecord(_key(PARTITION_METADATA, group_id), _value(out))


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    out = _Out().int16(VALUE_VERSION).compact_string(member.instance_id)
    out.compact_string(member.rack_id).compact_string(member.client_id)
    out.compact_string(member.client_host).count(len(member.subscribed_topic_names))
    for name in member.subscribed_topic_names:
        out.compact_string(name)
    out.compact_string(member.subscribed_topic_regex).int32(member.rebalance_timeout_ms)
    out.compact_string(member.server_assignor_name)
    key = _key(MEMBER_METADATA, group_id, member.member_id)
    if member.classic_protocols is None:
        return CoordinatorRecord(key, _value(out))
    # Tagged field 0, ClassicMemberMetadata, a nullable struct: the generated code writes its
    # size + 1, a presence varint 1, then SessionTimeoutMs int32 and SupportedProtocols
    # [Name string, Metadata bytes] (ConsumerGroupMemberMetadataValue.json, Kafka 3.9).
    session_timeout_ms = member.classic_session_timeout_ms
    struct_out = _Out().int32(-1 if session_timeout_ms is None else session_timeout_ms)
    struct_out.count(len(member.classic_protocols))
    for name, metadata in member.classic_protocols:
        struct_out.compact_string(name).uvarint(len(metadata) + 1).raw(metadata).no_tags()
    body = bytes(struct_out.no_tags().out)
    out.uvarint(1).uvarint(_CLASSIC_MEMBER_METADATA_TAG).uvarint(len(body) + 1).uvarint(1)
    out.raw(body)
    return CoordinatorRecord(key, bytes(out.out))


def target_assignment_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    value = _Out().int16(VALUE_VERSION).int32(epoch)
    return CoordinatorRecord(_key(TARGET_ASSIGNMENT_METADATA, group_id), _value(value))


def target_assignment_member_record(
    group_id: str, member_id: str, assignment: Assignment
) -> CoordinatorRecord:
    out = _topic_partitions(_Out().int16(VALUE_VERSION), assignment)
    return CoordinatorRecord(_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), _value(out))


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    out = _Out().int16(VALUE_VERSION).int32(member.member_epoch)
    out.int32(member.previous_member_epoch).int8(member.state.value)
    _topic_partitions(out, member.assigned_partitions)
    _topic_partitions(out, member.partitions_pending_revocation)
    key = _key(CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id)
    return CoordinatorRecord(key, _value(out))


def tombstone(record_type: int, group_id: str, member_id: str | None = None) -> CoordinatorRecord:
    return CoordinatorRecord(_key(record_type, group_id, member_id), None)


def member_tombstones(group_id: str, member_id: str) -> tuple[CoordinatorRecord, ...]:
    """Kafka's order when a member leaves: current assignment, target, then its metadata."""
    return tuple(
        tombstone(t, group_id, member_id)
        for t in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)
    )


def group_tombstones(group_id: str) -> tuple[CoordinatorRecord, ...]:
    """An empty group's deletion (``ConsumerGroup.createGroupTombstoneRecords``)."""
    return tuple(
        tombstone(t, group_id)
        for t in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, GROUP_METADATA)
    )


# ------------------------------------------------------------------ reading


class _In(RecordReader):
    def __init__(self, data: bytes, what: str) -> None:
        super().__init__(data, what, CoordinatorRecordError)

    def string(self) -> str:
        return self.text(self.int16())

    def compact_string(self) -> str | None:
        size = self.uvarint() - 1
        return None if size == -1 else self.text(size)

    def required_string(self) -> str:
        value = self.compact_string()
        if value is None:
            raise CoordinatorRecordError(f"{self.what}: a non-nullable string is null")
        return value

    def count(self) -> int:
        size = self.uvarint() - 1
        if size < 0:
            raise CoordinatorRecordError(f"{self.what}: a null array")
        return size

    def topic_id(self) -> str:
        return uuid_to_kafka_string(self.take(16))

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def is_consumer_group_key(data: bytes) -> bool:
    """Does this ``__consumer_offsets`` key name a consumer group record (types 3-8)?"""
    return len(data) >= 2 and _INT16.unpack_from(data)[0] in CONSUMER_KEY_TYPES


def decode_consumer_key(data: bytes) -> ConsumerKey:
    reader = _In(data, "consumer group record key")
    record_type = reader.int16()
    if record_type not in CONSUMER_KEY_TYPES:
        raise CoordinatorRecordError(f"record key version {record_type} is not a consumer key")
    group_id = reader.string()
    member_id = reader.string() if record_type in _MEMBER_KEYS else None
    reader.end()
    return ConsumerKey(record_type, group_id, member_id)


def _read_topic_partitions(reader: _In) -> dict[str, frozenset[int]]:
    assignment = {}
    for _ in range(reader.count()):
        topic_id = reader.topic_id()
        assignment[topic_id] = frozenset(reader.int32() for _ in range(reader.count()))
        reader.tags()
    return assignment


def decode_consumer_value(key: ConsumerKey, data: bytes) -> ConsumerValue:
    """The value of a consumer group record (never a tombstone: the caller checks)."""
    reader = _In(data, f"consumer group record value of type {key.record_type}")
    version = reader.int16()
    if version != VALUE_VERSION:
        raise CoordinatorRecordError(f"{reader.what}: version {version} is not readable (0)")
    value = _decode_fields(key, reader)
    classic = None
    if key.record_type == MEMBER_METADATA:
        classic = _member_tags(reader)
    else:
        reader.tags()
    reader.end()
    if classic is not None and isinstance(value, ConsumerGroupMember):
        protocols, session_timeout_ms = classic
        return attrs.evolve(
            value, classic_protocols=protocols, classic_session_timeout_ms=session_timeout_ms
        )
    return value


def _member_tags(reader: _In) -> tuple[tuple[tuple[str, bytes], ...], int] | None:
    """The member record's tagged fields: tag 0 is ClassicMemberMetadata (its protocols and
    session timeout; absent or null: None), others skipped."""
    classic = None
    for _ in range(reader.uvarint()):
        tag, size = reader.uvarint(), reader.uvarint()
        body = reader.take(size)
        if tag != _CLASSIC_MEMBER_METADATA_TAG:
            continue
        inner = _In(body, f"{reader.what}, ClassicMemberMetadata")
        if inner.uvarint() <= 0:  # null
            classic = None
            continue
        session_timeout_ms = inner.int32()
        protocols = []
        for _ in range(inner.count()):
            name = inner.required_string()
            protocols.append((name, inner.take(inner.uvarint() - 1)))
            inner.tags()
        inner.tags()
        inner.end()
        classic = tuple(protocols), session_timeout_ms
    return classic


def _decode_fields(key: ConsumerKey, reader: _In) -> ConsumerValue:
    record_type = key.record_type
    if record_type in (GROUP_METADATA, TARGET_ASSIGNMENT_METADATA):
        return reader.int32()
    if record_type == PARTITION_METADATA:
        return tuple(_read_topic_metadata(reader) for _ in range(reader.count()))
    if record_type == TARGET_ASSIGNMENT_MEMBER:
        return _read_topic_partitions(reader)
    assert key.member_id is not None
    if record_type == MEMBER_METADATA:
        return _read_member(key.member_id, reader)
    member_epoch, previous_epoch, state = reader.int32(), reader.int32(), reader.int8()
    try:
        member_state = MemberState(state)
    except ValueError:
        raise CoordinatorRecordError(f"{reader.what}: unknown member state {state}") from None
    assigned = _read_topic_partitions(reader)
    return CurrentAssignment(
        member_epoch, previous_epoch, member_state, assigned, _read_topic_partitions(reader)
    )


def _read_topic_metadata(reader: _In) -> TopicMetadata:
    topic_id, name, count = reader.topic_id(), reader.required_string(), reader.int32()
    for _ in range(reader.count()):
        reader.int32()
        for _ in range(reader.count()):
            reader.required_string()
        reader.tags()
    reader.tags()
    return TopicMetadata(topic_id, name, count)


def _read_member(member_id: str, reader: _In) -> ConsumerGroupMember:
    instance_id, rack_id = reader.compact_string(), reader.compact_string()
    client_id, client_host = reader.required_string(), reader.required_string()
    names = tuple(reader.required_string() for _ in range(reader.count()))
    regex, rebalance_timeout_ms = reader.compact_string(), reader.int32()
    return ConsumerGroupMember(
        member_id=member_id,
        instance_id=instance_id,
        rack_id=rack_id,
        client_id=client_id,
        client_host=client_host,
        subscribed_topic_names=names,
        subscribed_topic_regex=regex,
        rebalance_timeout_ms=rebalance_timeout_ms,
        server_assignor_name=reader.compact_string(),
    )
