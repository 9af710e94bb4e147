"""The consumer group records of ``__consumer_offsets`` (KIP-848), bytes checked by hand against
Kafka 3.9's schemas (``ConsumerGroup*Key/Value.json``: keys non-flexible, values flexible)."""

from __future__ import annotations

import pytest

from pykraft.coordinator.group import consumer_records as rec
from pykraft.coordinator.group.consumer_member import ConsumerGroupMember, MemberState
from pykraft.coordinator.group.offsets import LogRecord, OffsetsReplay
from pykraft.coordinator.group.records import CoordinatorRecordError
from pykraft.metadata.records import uuid_to_kafka_string

RAW_ID = bytes(range(16))
TOPIC_ID = uuid_to_kafka_string(RAW_ID)


def test_group_epoch_record_bytes():
    record = rec.group_epoch_record("g", 5)
    assert record.key == bytes.fromhex("0003000167")
    # version 0, Epoch int32, no tagged fields
    assert record.value == bytes.fromhex("00000000000500")


def test_target_assignment_member_record_bytes():
    record = rec.target_assignment_member_record("g", "m", {TOPIC_ID: frozenset({2, 0})})
    assert record.key == bytes.fromhex("000700016700016d")
    assert record.value == (
        bytes.fromhex("000002")  # version, compact array of one topic
        + RAW_ID
        + bytes.fromhex("03000000000000000200")  # partitions, struct tags
        + bytes.fromhex("00")  # value tags
    )


def test_member_metadata_record_bytes_and_back():
    member = ConsumerGroupMember(
        member_id="m",
        client_id="c",
        client_host="h",
        subscribed_topic_names=("t",),
        rebalance_timeout_ms=30_000,
        server_assignor_name="range",
    )
    record = rec.member_metadata_record("g", member)
    assert record.key == bytes.fromhex("000500016700016d")
    assert record.value == bytes.fromhex(
        "0000"  # version
        "00"
        "00"  # InstanceId, RackId: null
        "0263"
        "0268"  # ClientId "c", ClientHost "h"
        "02"
        "0274"  # SubscribedTopicNames ["t"]
        "00"  # SubscribedTopicRegex null
        "00007530"  # RebalanceTimeoutMs 30000
        "0672616e6765"  # ServerAssignor "range"
        "00"
    )
    key = rec.decode_consumer_key(record.key)
    assert key == rec.ConsumerKey(rec.MEMBER_METADATA, "g", "m")
    assert record.value is not None
    assert rec.decode_consumer_value(key, record.value) == member


def test_current_assignment_record_bytes_and_back():
    member = ConsumerGroupMember(
        member_id="m",
        state=MemberState.UNREVOKED_PARTITIONS,
        member_epoch=3,
        previous_member_epoch=2,
        assigned_partitions={TOPIC_ID: frozenset({1})},
        partitions_pending_revocation={},
    )
    record = rec.current_assignment_record("g", member)
    assert record.value == (
        bytes.fromhex("000000000003000000020202") + RAW_ID + bytes.fromhex("0200000001000100")
    )
    key = rec.decode_consumer_key(record.key)
    assert record.value is not None
    assert rec.decode_consumer_value(key, record.value) == rec.CurrentAssignment(
        3, 2, MemberState.UNREVOKED_PARTITIONS, {TOPIC_ID: frozenset({1})}, {}
    )


def test_partition_metadata_round_trip():
    topics = {"t": rec.TopicMetadata(TOPIC_ID, "t", 6)}
    record = rec.partition_metadata_record("g", topics)
    key = rec.decode_consumer_key(record.key)
    assert record.value is not None
    assert rec.decode_consumer_value(key, record.value) == (topics["t"],)


def test_tombstones_in_kafkas_order():
    keys = [rec.decode_consumer_key(r.key).record_type for r in rec.member_tombstones("g", "m")]
    assert keys == [
        rec.CURRENT_MEMBER_ASSIGNMENT,
        rec.TARGET_ASSIGNMENT_MEMBER,
        rec.MEMBER_METADATA,
    ]
    assert all(r.value is None for r in rec.group_tombstones("g"))


@pytest.mark.parametrize(
    "key, value",
    [
        (bytes.fromhex("0003000167"), bytes.fromhex("00010000000500")),  # version 1
        (bytes.fromhex("0003000167"), bytes.fromhex("0000000000")),  # truncated
        (bytes.fromhex("0003000167"), bytes.fromhex("00000000000500ff")),  # trailing
        (bytes.fromhex("000800016700016d"), bytes.fromhex("0000000000010000000007010100")),
    ],
)
def test_malformed_values_raise(key, value):
    with pytest.raises(CoordinatorRecordError):
        rec.decode_consumer_value(rec.decode_consumer_key(key), value)


def test_key_types():
    assert rec.is_consumer_group_key(bytes.fromhex("0003000167"))
    assert not rec.is_consumer_group_key(bytes.fromhex("0002000167"))
    assert not rec.is_consumer_group_key(b"\x00")
    with pytest.raises(CoordinatorRecordError):
        rec.decode_consumer_key(bytes.fromhex("0005000167"))  # a member key without member id


def test_a_bad_record_is_a_problem_not_a_failed_load():
    replay = OffsetsReplay()
    good = rec.group_epoch_record("g", 4)
    replay.replay(
        [
            LogRecord(0, bytes.fromhex("0003000167"), bytes.fromhex("0009")),
            LogRecord(1, good.key, good.value),
        ]
    )
    loaded = replay.loaded(0)
    assert len(loaded.problems) == 1
    assert [(g.group_id, g.group_epoch) for g in loaded.consumer_groups] == [("g", 4)]


def test_a_group_epoch_tombstone_removes_the_group():
    replay = OffsetsReplay()
    member = rec.member_metadata_record("g", ConsumerGroupMember(member_id="m"))
    epoch = rec.group_epoch_record("g", 1)
    records = [member, epoch, *rec.member_tombstones("g", "m"), *rec.group_tombstones("g")]
    replay.replay(LogRecord(i, r.key, r.value) for i, r in enumerate(records))
    assert replay.loaded(0).consumer_groups == ()


def test_classic_member_metadata_tag_bytes_and_back():
    # ConsumerGroupMemberMetadataValue.json tag 0: ClassicMemberMetadata, a nullable struct
    # {SessionTimeoutMs int32, SupportedProtocols [Name, Metadata]}; the generated writer puts
    # size + 1 and a presence varint 1 before it.
    member = ConsumerGroupMember(
        member_id="m",
        client_id="c",
        client_host="h",
        subscribed_topic_names=("t",),
        rebalance_timeout_ms=30_000,
        classic_protocols=(("range", b"\x01\x02"),),
        classic_session_timeout_ms=10_000,
    )
    record = rec.member_metadata_record("g", member)
    head = bytes.fromhex("0000000002630268020274000000753000")  # as above, no assignor
    assert record.value == head + bytes.fromhex(
        "01"  # one tagged field
        "00"  # tag 0
        "11"  # size 16 + 1
        "01"  # not null
        "00002710"  # SessionTimeoutMs 10000
        "02"  # SupportedProtocols: one
        "0672616e6765"  # Name "range"
        "030102"  # Metadata, 2 bytes
        "00"  # protocol tags
        "00"  # struct tags
    )
    key = rec.decode_consumer_key(record.key)
    assert rec.decode_consumer_value(key, record.value) == member
    # A null ClassicMemberMetadata (presence 0) is a consumer-protocol member.
    null_tag = head + bytes.fromhex("01000100")  # one tag: 0, size 1, null
    plain = rec.decode_consumer_value(key, null_tag)
    assert isinstance(plain, ConsumerGroupMember) and plain.classic_protocols is None


def test_an_assignment_without_member_metadata_is_dropped_on_replay():
    # Kafka writes a member's metadata first and tombstones it last (removeMember); its replay
    # of an assignment for no member finds none (getOrMaybeCreateMember(memberId, false)).
    member = ConsumerGroupMember(member_id="m", member_epoch=3, assigned_partitions={})
    ghost = ConsumerGroupMember(member_id="ghost", member_epoch=3)
    records = [
        rec.group_epoch_record("g", 3),
        rec.member_metadata_record("g", member),
        rec.current_assignment_record("g", member),
        rec.current_assignment_record("g", ghost),
        rec.target_assignment_member_record("g", "ghost", {TOPIC_ID: frozenset({0})}),
    ]
    replay = OffsetsReplay()
    replay.replay(LogRecord(i, r.key, r.value) for i, r in enumerate(records))
    (group,) = replay.loaded(0).consumer_groups
    assert list(group.members) == ["m"] and group.target_assignment == {}
