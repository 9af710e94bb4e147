"""The ``__consumer_offsets`` record formats, byte for byte from Kafka's message schemas
(OffsetCommitKey/Value, GroupMetadataKey/Value), and what pykraft refuses to read."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.coordinator.group.records import (
    CoordinatorRecordError,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from pykraft.storage.topic_partition import TopicPartition


def s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_is_version_1_group_topic_partition() -> None:
    key = offset_commit_key("g", TopicPartition("pets", 3))
    assert key == b"\x00\x01" + s("g") + s("pets") + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetCommitKey("g", TopicPartition("pets", 3))
    # Version 0 keys (Kafka before 0.9's coordinator) read the same way.
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetCommitKey("g", TopicPartition("pets", 3))


def test_group_metadata_key_is_version_2_group() -> None:
    assert group_metadata_key("g") == b"\x00\x02" + s("g")
    assert decode_key(group_metadata_key("g")) == GroupMetadataKey("g")


def test_offset_commit_value_v3() -> None:
    value = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="m", commit_timestamp_ms=1000)
    data = offset_commit_value(value)
    expected = struct.pack(">hqi", 3, 42, 5) + s("m") + struct.pack(">q", 1000)
    assert data == expected
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_with_expire_timestamp_is_v1() -> None:
    # GroupMetadataManager.offsetCommitValue: an explicit expire timestamp needs v1.
    value = OffsetAndMetadata(offset=7, metadata="", commit_timestamp_ms=10, expire_timestamp_ms=99)
    data = offset_commit_value(value)
    assert data == struct.pack(">hq", 1, 7) + s("") + struct.pack(">qq", 10, 99)
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_v0_and_v2_have_no_epoch() -> None:
    body = struct.pack(">q", 7) + s("x") + struct.pack(">q", 10)
    for version in (0, 2):
        value = decode_offset_commit_value(struct.pack(">h", version) + body)
        assert (value.offset, value.leader_epoch, value.metadata) == (7, -1, "x")


MEMBER = MemberRecord(
    member_id="c-1",
    client_id="c",
    client_host="/127.0.0.1",
    rebalance_timeout_ms=30_000,
    session_timeout_ms=10_000,
    subscription=b"sub",
    assignment=b"asg",
)


def test_group_metadata_value_v3() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="c-1",
        current_state_timestamp_ms=1234,
        members=(MEMBER,),
    )
    data = group_metadata_value(value)
    expected = (
        struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 4) + s("range") + s("c-1")
        + struct.pack(">qi", 1234, 1)
        + s("c-1") + b"\xff\xff" + s("c") + s("/127.0.0.1") + struct.pack(">ii", 30_000, 10_000)
        + struct.pack(">i", 3) + b"sub" + struct.pack(">i", 3) + b"asg"
    )  # fmt: skip
    assert data == expected
    assert decode_group_metadata_value(data) == value


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue(protocol_type="consumer", generation=2, protocol=None, leader=None)
    data = group_metadata_value(value)
    assert data == struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 2) + b"\xff\xff" * 2 + (
        struct.pack(">qi", -1, 0)
    )
    assert decode_group_metadata_value(data) == value


def test_group_metadata_value_v0_reads_without_rebalance_timeout() -> None:
    data = (
        struct.pack(">h", 0) + s("consumer") + struct.pack(">i", 1) + s("range") + s("c-1")
        + struct.pack(">i", 1) + s("c-1") + s("c") + s("/h") + struct.pack(">i", 6000)
        + struct.pack(">i", 0) + struct.pack(">i", 0)
    )  # fmt: skip
    value = decode_group_metadata_value(data)
    assert value.current_state_timestamp_ms == -1
    assert value.members[0].rebalance_timeout_ms == value.members[0].session_timeout_ms == 6000


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x07" + s("g"), "key version 7"),
        (b"\x00\x02", "needs 2 bytes"),
        (b"\x00\x02" + s("g") + b"x", "1 bytes left"),
        (b"\x00\x01\x00\x05ab", "needs 5 bytes"),
    ],
)
def test_bad_keys(data: bytes, message: str) -> None:
    with pytest.raises(CoordinatorRecordError, match=message):
        decode_key(data)


def cs(text: str | None) -> bytes:
    """A compact (flexible) string: its length plus one as an unsigned varint; 0 is null."""
    if text is None:
        return b"\x00"
    data = text.encode()
    return bytes([len(data) + 1]) + data


def test_flexible_offset_value_v4_is_read_and_its_tagged_fields_skipped() -> None:
    # KIP-915: OffsetCommitValue v4 is v3's fields, flexible; Kafka 3.9 reads it
    plain = struct.pack(">hqi", 4, 42, 5) + cs("m") + struct.pack(">q", 1000) + b"\x00"
    expected = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="m", commit_timestamp_ms=1000)
    assert decode_offset_commit_value(plain) == expected
    # One unknown tagged field: tag 0, a 16-byte value (a topic id, say).
    tagged = plain[:-1] + b"\x01\x00\x10" + bytes(16)
    assert decode_offset_commit_value(tagged) == expected


def test_flexible_group_value_v4_is_read() -> None:
    member = (
        cs("c-1") + cs(None) + cs("client") + cs("/10.0.0.1") + struct.pack(">ii", 30000, 10000)
        + b"\x04sub" + b"\x05asgn" + b"\x00"
    )  # fmt: skip
    data = (
        struct.pack(">h", 4) + cs("consumer") + struct.pack(">i", 3) + cs("range") + cs("c-1")
        + struct.pack(">q", 1234) + b"\x02" + member + b"\x00"
    )  # fmt: skip
    value = decode_group_metadata_value(data)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == (
        "consumer",
        3,
        "range",
        "c-1",
    )
    assert value.members == (
        MemberRecord(
            member_id="c-1",
            client_id="client",
            client_host="/10.0.0.1",
            rebalance_timeout_ms=30000,
            session_timeout_ms=10000,
            subscription=b"sub",
            assignment=b"asgn",
        ),
    )


def test_unknown_and_broken_flexible_values_are_refused() -> None:
    with pytest.raises(CoordinatorRecordError, match="version 5 is not readable"):
        decode_offset_commit_value(struct.pack(">hq", 5, 0))
    with pytest.raises(CoordinatorRecordError, match="varint longer than 5 bytes"):
        decode_offset_commit_value(struct.pack(">hqi", 4, 1, 1) + b"\xff" * 6)
    with pytest.raises(CoordinatorRecordError, match="needs"):
        decode_group_metadata_value(struct.pack(">h", 4) + cs("consumer")[:3])


def test_written_values_are_the_versions_kafka_3_9_writes() -> None:
    # GroupMetadataManager.offsetCommitValue / groupMetadataValue past IBP 2.3: offsets v3
    # (v1 with an expire timestamp), groups v3 whatever their state
    plain = OffsetAndMetadata(offset=1, commit_timestamp_ms=2)
    expiring = OffsetAndMetadata(offset=1, commit_timestamp_ms=2, expire_timestamp_ms=3)
    empty = GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None)
    assert offset_commit_value(plain)[:2] == struct.pack(">h", 3)
    assert offset_commit_value(expiring)[:2] == struct.pack(">h", 1)
    assert group_metadata_value(empty)[:2] == struct.pack(">h", 3)


def test_negative_member_count_is_refused() -> None:
    data = struct.pack(">h", 3) + s("c") + struct.pack(">i", 1) + b"\xff\xff\xff\xff"
    with pytest.raises(CoordinatorRecordError, match="-1 members"):
        decode_group_metadata_value(data + struct.pack(">qi", 0, -1))


text = st.text(max_size=20)


@given(
    offset=st.integers(0, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
    metadata=text,
    timestamp=st.integers(-1, 2**62),
    expire=st.none() | st.integers(0, 2**62),
)
def test_offset_values_round_trip(
    offset: int, epoch: int, metadata: str, timestamp: int, expire: int | None
) -> None:
    value = OffsetAndMetadata(
        offset=offset,
        leader_epoch=epoch if expire is None else -1,  # v1 has no epoch
        metadata=metadata,
        commit_timestamp_ms=timestamp,
        expire_timestamp_ms=expire,
    )
    assert decode_offset_commit_value(offset_commit_value(value)) == value


@given(group=text, topic=text, partition=st.integers(0, 2**31 - 1))
def test_keys_round_trip(group: str, topic: str, partition: int) -> None:
    tp = TopicPartition(topic, partition)
    assert decode_key(offset_commit_key(group, tp)) == OffsetCommitKey(group, tp)
    assert decode_key(group_metadata_key(group)) == GroupMetadataKey(group)
