"""The records of ``__consumer_offsets``: Kafka's key and value formats, bytes in and out.

Every record key starts with an int16 *key version* naming the record type, every value with an
int16 value version, then the fields of Kafka's generated schemas
(``group-coordinator/src/main/resources/common/message``), big-endian, non-flexible:

  key 0 or 1  OffsetCommitKey     group string, topic string, partition int32
  key 2       GroupMetadataKey    group string
  value of an offset commit (OffsetCommitValue)
      v0  offset int64, metadata string, commit_timestamp int64
      v1  v0 + expire_timestamp int64 (after commit_timestamp)
      v2  = v0
      v3  offset int64, leader_epoch int32, metadata string, commit_timestamp int64
  value of a group (GroupMetadataValue)
      protocol_type string, generation int32, protocol nullable string, leader nullable string,
      current_state_timestamp int64 (v2+), members: int32 count of
      member_id string, group_instance_id nullable string (v3+), client_id string,
      client_host string, rebalance_timeout int32 (v1+), session_timeout int32,
      subscription bytes, assignment bytes

      v4 of both values (KIP-915): v3's fields, flexible (varint-length compact strings, bytes
      and arrays, tagged fields after each struct); Kafka 3.9 reads it, 4.x may write it

A null value is a tombstone: the offset or the group was deleted (DeleteGroups, OffsetDelete).

What pykraft writes is what Kafka 3.9's broker writes (``GroupMetadataManager.offsetCommitValue``
and ``groupMetadataValue`` at metadata version 3.x, whose inter-broker protocol is past 2.3):
offset keys at version 1, offset values at v3 (v1 when the commit carries an expire timestamp,
OffsetCommit v2-v4's ``retention_time_ms``), group keys at 2 and group values at v3 — for an
empty group too, with null protocol and leader. That is what lag monitors decode: Burrow 1.3.0
and later read group values v0-v3 and offset values v0, v1, v3 (v4 since 1.9.5); Burrow 1.2.x
stops at group v2 and so cannot read any Kafka broker since 2.3 either. Every version 0-4 is
read back; anything else, or anything malformed, raises ``CoordinatorRecordError``.
"""

from __future__ import annotations

import struct

import attrs

from pykraft.storage.topic_partition import TopicPartition

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
_OFFSET_KEY_VERSIONS = (0, 1)
_OFFSET_VALUE_VERSION = 3
_OFFSET_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3
_HIGHEST_READABLE_VALUE_VERSION = 4
_FIRST_FLEXIBLE_VALUE_VERSION = 4
_MAX_VARINT_BYTES = 5
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class CoordinatorRecordError(ValueError):
    """A ``__consumer_offsets`` record that is malformed or of a version pykraft cannot read."""


@attrs.frozen
class OffsetCommitKey:
    group: str
    topic_partition: TopicPartition


@attrs.frozen
class GroupMetadataKey:
    group: str


@attrs.frozen(kw_only=True)
class OffsetAndMetadata:
    """Kafka's ``OffsetAndMetadata``: one committed offset of one partition."""

    offset: int
    # -1 when the client did not say (OffsetCommit below v6, or an unknown epoch).
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int
    # Only commits with an explicit retention (OffsetCommit v2-v4) carry one.
    expire_timestamp_ms: int | None = None


@attrs.frozen(kw_only=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None = None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@attrs.frozen(kw_only=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = NO_TIMESTAMP
    members: tuple[MemberRecord, ...] = ()


# ------------------------------------------------------------------ primitive codec


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def int16(self, value: int) -> _Writer:
        self.out += _INT16.pack(value)
        return self

    def int32(self, value: int) -> _Writer:
        self.out += _INT32.pack(value)
        return self

    def int64(self, value: int) -> _Writer:
        self.out += _INT64.pack(value)
        return self

    def string(self, value: str | None) -> _Writer:
        if value is None:
            return self.int16(-1)
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise CoordinatorRecordError(f"a string of {len(data)} bytes does not fit an int16")
        self.int16(len(data))
        self.out += data
        return self

    def bytes(self, value: bytes) -> _Writer:
        self.int32(len(value))
        self.out += value
        return self


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.position = 0
        self.what = what

    def _take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise CoordinatorRecordError(
                f"{self.what}: needs {size} bytes at byte {self.position}, has {len(self.data)}"
            )
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def int16(self) -> int:
        value: int = _INT16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack(self._take(8))[0]
        return value

    def uvarint(self) -> int:
        """An unsigned varint (flexible versions' lengths and tags)."""
        value = 0
        for index in range(_MAX_VARINT_BYTES):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                return value
        raise CoordinatorRecordError(f"{self.what}: a varint longer than {_MAX_VARINT_BYTES} bytes")

    def nullable_string(self, flexible: bool = False) -> str | None:
        size = self.uvarint() - 1 if flexible else self.int16()
        if size == -1:
            return None
        try:
            return self._take(size).decode("utf-8")
        except UnicodeDecodeError as error:
            raise CoordinatorRecordError(f"{self.what}: a string is not UTF-8 ({error})") from None

    def string(self, flexible: bool = False) -> str:
        value = self.nullable_string(flexible)
        if value is None:
            raise CoordinatorRecordError(f"{self.what}: a non-nullable string is null")
        return value

    def bytes(self, flexible: bool = False) -> bytes:
        return self._take(self.uvarint() - 1 if flexible else self.int32())

    def count(self, flexible: bool) -> int:
        """An array's length (a compact array's is stored plus one)."""
        return self.uvarint() - 1 if flexible else self.int32()

    def tagged_fields(self, flexible: bool) -> None:
        """Skip a flexible struct's tagged fields (none of them is known here)."""
        if not flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            self._take(self.uvarint())

    def end(self) -> None:
        if self.position != len(self.data):
            raise CoordinatorRecordError(
                f"{self.what}: {len(self.data) - self.position} bytes left after the last field"
            )


# ------------------------------------------------------------------ keys


def offset_commit_key(group: str, topic_partition: TopicPartition) -> bytes:
    writer = _Writer().int16(OFFSET_COMMIT_KEY_VERSION).string(group)
    return bytes(writer.string(topic_partition.topic).int32(topic_partition.partition).out)


def group_metadata_key(group: str) -> bytes:
    return bytes(_Writer().int16(GROUP_METADATA_KEY_VERSION).string(group).out)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    reader = _Reader(data, "record key")
    version = reader.int16()
    if version in _OFFSET_KEY_VERSIONS:
        group, topic, partition = reader.string(), reader.string(), reader.int32()
        reader.end()
        return OffsetCommitKey(group, TopicPartition(topic, partition))
    if version == GROUP_METADATA_KEY_VERSION:
        group = reader.string()
        reader.end()
        return GroupMetadataKey(group)
    raise CoordinatorRecordError(f"record key version {version} is not an offset or group key")


# ------------------------------------------------------------------ offset values


def offset_commit_value(value: OffsetAndMetadata) -> bytes:
    if value.expire_timestamp_ms is not None:
        writer = _Writer().int16(_OFFSET_VALUE_VERSION_WITH_EXPIRE).int64(value.offset)
        writer.string(value.metadata).int64(value.commit_timestamp_ms)
        return bytes(writer.int64(value.expire_timestamp_ms).out)
    writer = _Writer().int16(_OFFSET_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
    return bytes(writer.string(value.metadata).int64(value.commit_timestamp_ms).out)


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    reader = _Reader(data, "offset commit value")
    version = _value_version(reader)
    flexible = version >= _FIRST_FLEXIBLE_VALUE_VERSION
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string(flexible)
    commit_timestamp_ms = reader.int64()
    expire_timestamp_ms = reader.int64() if version == 1 else None
    reader.tagged_fields(flexible)
    reader.end()
    return OffsetAndMetadata(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp_ms=commit_timestamp_ms,
        expire_timestamp_ms=expire_timestamp_ms,
    )


# ------------------------------------------------------------------ group values


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    writer = _Writer().int16(GROUP_METADATA_VALUE_VERSION).string(value.protocol_type)
    writer.int32(value.generation).string(value.protocol).string(value.leader)
    writer.int64(value.current_state_timestamp_ms).int32(len(value.members))
    for member in value.members:
        writer.string(member.member_id).string(member.group_instance_id)
        writer.string(member.client_id).string(member.client_host)
        writer.int32(member.rebalance_timeout_ms).int32(member.session_timeout_ms)
        writer.bytes(member.subscription).bytes(member.assignment)
    return bytes(writer.out)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    reader = _Reader(data, "group metadata value")
    version = _value_version(reader)
    flexible = version >= _FIRST_FLEXIBLE_VALUE_VERSION
    protocol_type = reader.string(flexible)
    generation = reader.int32()
    protocol, leader = reader.nullable_string(flexible), reader.nullable_string(flexible)
    timestamp_ms = reader.int64() if version >= 2 else NO_TIMESTAMP
    count = reader.count(flexible)
    if count < 0:
        raise CoordinatorRecordError(f"group metadata value: {count} members")
    members = tuple(_decode_member(reader, version, flexible) for _ in range(count))
    reader.tagged_fields(flexible)
    reader.end()
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp_ms=timestamp_ms,
        members=members,
    )


def _decode_member(reader: _Reader, version: int, flexible: bool) -> MemberRecord:
    member_id = reader.string(flexible)
    group_instance_id = reader.nullable_string(flexible) if version >= 3 else None
    client_id, client_host = reader.string(flexible), reader.string(flexible)
    rebalance_timeout_ms = reader.int32() if version >= 1 else -1
    session_timeout_ms = reader.int32()
    if rebalance_timeout_ms == -1:
        # v0 had none: Kafka loads the session timeout in its place.
        rebalance_timeout_ms = session_timeout_ms
    member = MemberRecord(
        member_id=member_id,
        group_instance_id=group_instance_id,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=session_timeout_ms,
        subscription=reader.bytes(flexible),
        assignment=reader.bytes(flexible),
    )
    reader.tagged_fields(flexible)
    return member


def _value_version(reader: _Reader) -> int:
    version = reader.int16()
    if not 0 <= version <= _HIGHEST_READABLE_VALUE_VERSION:
        raise CoordinatorRecordError(
            f"{reader.what} version {version} is not readable (0-{_HIGHEST_READABLE_VALUE_VERSION})"
        )
    return version
