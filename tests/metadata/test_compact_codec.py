"""The compact Raft-entry encoding of records: positional rows, as strict as the JSON codec."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata.codec import MetadataCodecError, encode_record, record_to_json
from pykraft.metadata.compact_codec import decode_records, encode_records, json_lines
from pykraft.metadata.records import (
    RECORD_CLASSES,
    BrokerEndpoint,
    BrokerFeature,
    ConfigRecord,
    ConfigResourceType,
    LeaderRecoveryState,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from tests.metadata.strategies import ANY_RECORD, RECORD_STRATEGIES

TOPIC_ID = "ThIaNwRnSM2Nt9Mx1v0RvA"  # Kafka's TopicsImageTest FOO_UUID


def round_trip(records: list[Any]) -> tuple[Any, ...]:
    return decode_records(encode_records(records), len(records))


@pytest.mark.parametrize("record_class", RECORD_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=60)
@given(data=st.data())
def test_round_trip_every_record_type(record_class, data) -> None:
    record = data.draw(RECORD_STRATEGIES[record_class])
    (decoded,) = round_trip([record])
    assert decoded == record
    # Equality alone would accept a list for a tuple or 1 for True: the types must survive.
    names = [field.name for field in attrs.fields(record_class)]
    assert [type(getattr(decoded, n)) for n in names] == [type(getattr(record, n)) for n in names]
    assert encode_record(decoded) == encode_record(record)


@given(st.lists(ANY_RECORD, min_size=1, max_size=20))
def test_batches_round_trip_in_order(records) -> None:
    assert round_trip(records) == tuple(records)


@given(st.lists(ANY_RECORD, min_size=1, max_size=20))
def test_transcoded_json_lines_are_the_json_codecs_lines(records) -> None:
    # What the records endpoint serves from a committed entry, without building records.
    assert json_lines(encode_records(records)) == tuple(
        encode_record(record).encode() for record in records
    )


def test_the_shape_is_one_array_of_positional_rows() -> None:
    records: list[MetadataRecord] = [
        TopicRecord(name="pets", topic_id=TOPIC_ID),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2), isr=(1,), leader=1),
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(1, 2)),
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id="i",
            broker_epoch=7,
            fenced=False,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),),
            features=(
                BrokerFeature(
                    name="metadata.version", min_supported_version=1, max_supported_version=20
                ),
            ),
        ),
        NoOpRecord(),
    ]
    assert json.loads(encode_records(records)) == [
        [2, 0, "pets", TOPIC_ID],
        [3, 0, 0, TOPIC_ID, [1, 2], [1], [], [], 1, 0, 0, 0],
        [5, 0, 0, TOPIC_ID, [1, 2], -2, None, None, None, -1],
        [
            0,
            0,
            1,
            "i",
            7,
            [["PLAINTEXT", "h", 9092, 0]],
            [["metadata.version", 1, 20]],
            None,
            False,
            False,
        ],
        [20, 0],
    ]


def test_payloads_are_ascii_and_keep_lone_surrogates() -> None:
    record = RegisterBrokerRecord(broker_id=1, incarnation_id="\ud800é", broker_epoch=1)
    payload = encode_records([record])
    assert payload.isascii()
    assert round_trip([record]) == (record,)


def test_int_enum_members_become_plain_ints() -> None:
    records = [
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="pets",
            name="retention.ms",
            value=None,
        ),
        PartitionRecord(
            partition_id=0,
            topic_id=TOPIC_ID,
            replicas=(1,),
            isr=(1,),
            leader=1,
            leader_recovery_state=LeaderRecoveryState.RECOVERING,
        ),
    ]
    decoded = round_trip(records)
    assert decoded == tuple(records)
    assert type(decoded[0].resource_type) is int
    assert type(decoded[1].leader_recovery_state) is int


def test_encoding_refuses_values_outside_the_schema_and_names_the_record() -> None:
    good = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1)
    bad = attrs.evolve(good, leader_epoch=-(2**31) - 1)
    with pytest.raises(
        MetadataCodecError, match="record 1: PartitionRecord field 'leaderEpoch' must fit in int32"
    ):
        encode_records([good, bad])
    with pytest.raises(MetadataCodecError, match="record 0: not a metadata record"):
        encode_records([record_to_json(good)])  # type: ignore[list-item]


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=5)
    | st.sampled_from([TOPIC_ID, 0, 3, 20, -1, 2**31]),
    lambda children: st.lists(children, max_size=12),
    max_leaves=40,
)


@settings(max_examples=500)
@given(rows=st.lists(JSON_VALUES, max_size=4), count=st.integers(0, 4))
def test_any_json_decodes_to_records_or_a_codec_error(rows, count) -> None:
    # What a buggy or hostile proposer could write: never any other exception.
    try:
        records = decode_records(json.dumps(rows).encode(), count)
    except MetadataCodecError:
        return
    assert len(records) == count
    assert decode_records(encode_records(list(records)), count) == records


@given(st.binary(max_size=64))
def test_any_bytes_decode_to_records_or_a_codec_error(payload) -> None:
    with contextlib.suppress(MetadataCodecError):
        decode_records(payload, 1)


@settings(max_examples=500)
@given(record=ANY_RECORD, data=st.data())
def test_a_valid_row_with_one_value_replaced_decodes_or_is_refused(record, data) -> None:
    (row,) = json.loads(encode_records([record]))
    position = data.draw(st.integers(0, len(row) - 1))
    row[position] = data.draw(JSON_VALUES)
    try:
        (decoded,) = decode_records(json.dumps([row]).encode(), 1)
    except MetadataCodecError:
        return
    # Accepted only if it is exactly a valid record of that row.
    assert json.loads(encode_records([decoded])) == [row]


def test_a_row_ending_in_a_tagged_field_at_its_default_is_refused() -> None:
    # One row per record: encode_records leaves trailing defaults out, so a row that spells one
    # out was not written by it (Hypothesis found [.., [2], []] accepted as the row without []).
    topic_id = "ThIaNwRnSM2Nt9Mx1v0RvA"
    record = PartitionRecord(
        partition_id=0,
        topic_id=topic_id,
        replicas=(1, 2),
        isr=(1,),
        leader=1,
        eligible_leader_replicas=(2,),
    )
    (row,) = json.loads(encode_records([record]))
    assert row[-1] == [2]
    with pytest.raises(MetadataCodecError, match="'lastKnownElr' holds its default"):
        decode_records(json.dumps([[*row, []]]).encode(), 1)
    assert decode_records(json.dumps([row]).encode(), 1) == (record,)


def test_rows_leave_empty_elr_tags_out_and_read_them_back_as_empty() -> None:
    # KIP-966's tagged fields: a PartitionRecord without ELR state keeps the row it always had.
    topic_id = "ThIaNwRnSM2Nt9Mx1v0RvA"
    plain = PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(1, 2), isr=(1,), leader=1)
    row = json.loads(encode_records([plain]))[0]
    assert len(row) == 2 + 10
    assert decode_records(encode_records([plain]), 1) == (plain,)
    only_last = attrs.evolve(plain, last_known_elr=(2,))
    row = json.loads(encode_records([only_last]))[0]
    assert row[-2:] == [[], [2]]
    assert decode_records(encode_records([only_last]), 1) == (only_last,)
    assert json_lines(encode_records([only_last])) == (encode_record(only_last).encode(),)
