"""The JSON record codec and the Raft batch encoding (DESIGN.md §3.2)."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata.codec import (
    MAX_BATCH_RECORDS,
    MetadataCodecError,
    decode_batch,
    decode_record,
    decode_records,
    encode_batch,
    encode_record,
    record_to_json,
)
from pykraft.metadata.records import (
    RECORD_CLASSES,
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    kafka_string_to_uuid,
    uuid_to_kafka_string,
)
from tests.metadata.strategies import ANY_RECORD, RECORD_STRATEGIES

TOPIC_ID = "ThIaNwRnSM2Nt9Mx1v0RvA"  # Kafka's TopicsImageTest FOO_UUID


def test_every_record_type_has_a_strategy() -> None:
    assert set(RECORD_STRATEGIES) == set(RECORD_CLASSES)


@pytest.mark.parametrize("record_class", RECORD_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=60)
@given(data=st.data())
def test_round_trip_every_record_type(record_class, data) -> None:
    record = data.draw(RECORD_STRATEGIES[record_class])
    line = encode_record(record)
    assert "\n" not in line
    decoded = decode_record(line)
    assert decoded == record
    # Equality alone would accept a list for a tuple or 1 for True; the types must survive too.
    assert record_to_json(decoded) == record_to_json(record)
    names = [field.name for field in attrs.fields(record_class)]
    assert [type(getattr(decoded, n)) for n in names] == [type(getattr(record, n)) for n in names]


@given(ANY_RECORD)
def test_round_trip_through_bytes(record) -> None:
    assert decode_record(encode_record(record).encode("utf-8")) == record


@settings(max_examples=300)
@given(ANY_RECORD)
def test_lines_are_exactly_json_dumps_of_the_object(record) -> None:
    # encode_record formats lines from a per-type template; the reference is the plain
    # json.dumps of the flat object, byte for byte (ensure_ascii, no spaces, schema order).
    reference = json.dumps(record_to_json(record), separators=(",", ":"))
    assert encode_record(record) == reference


def test_int_enum_values_are_written_as_plain_ints() -> None:
    # The controller builds some records from IntEnum members (ConfigResourceType.TOPIC).
    record = ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name="pets", name="retention.ms", value="1"
    )
    line = encode_record(record)
    assert '"resourceType":2,' in line
    decoded = decode_record(line)
    assert decoded == record and type(decoded.resource_type) is int


# (a record whose values its Kafka schema does not allow, a fragment of the error)
UNENCODABLE = [
    (
        PartitionRecord(partition_id=2**31, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1),
        "field 'partitionId' must fit in int32",
    ),
    (
        PartitionRecord(partition_id=0, topic_id="pets", replicas=(1,), isr=(1,), leader=1),
        "field 'topicId' must be a Kafka uuid string",
    ),
    (
        PartitionRecord(
            partition_id=0,
            topic_id=TOPIC_ID,
            replicas=(1.5,),  # type: ignore[arg-type]
            isr=(1,),
            leader=1,
        ),
        "field 'replicas' must be an integer (int32), got 1.5",
    ),
    (
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=True),
        "field 'leader' must be an integer (int32), got True",
    ),
    (
        ConfigRecord(resource_type=2, resource_name="t", name=None, value="1"),  # type: ignore
        "field 'name' must be a string, got None",
    ),
    (
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id="i",
            broker_epoch=1,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=70_000),),
        ),
        "field 'endPoints' must fit in uint16",
    ),
]


@pytest.mark.parametrize(("record", "fragment"), UNENCODABLE)
def test_a_record_outside_its_schema_is_never_written(record, fragment: str) -> None:
    with pytest.raises(MetadataCodecError) as error:
        encode_record(record)
    assert fragment in str(error.value)


def test_only_metadata_records_are_encoded() -> None:
    with pytest.raises(MetadataCodecError, match="not a metadata record"):
        encode_record("NoOpRecord")  # type: ignore[arg-type]


def test_json_shape_is_flat_with_kafka_camel_case_names() -> None:
    record = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2), isr=(1,), leader=1)
    assert json.loads(encode_record(record)) == {
        "type": "PartitionRecord",
        "version": 0,
        "partitionId": 0,
        "topicId": TOPIC_ID,
        "replicas": [1, 2],
        "isr": [1],
        "removingReplicas": [],
        "addingReplicas": [],
        "leader": 1,
        "leaderRecoveryState": 0,
        "leaderEpoch": 0,
        "partitionEpoch": 0,
    }


def test_nulls_are_written_so_the_shape_never_varies() -> None:
    change = json.loads(encode_record(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID)))
    assert change == {
        "type": "PartitionChangeRecord",
        "version": 0,
        "partitionId": 1,
        "topicId": TOPIC_ID,
        "isr": None,
        "leader": -2,
        "replicas": None,
        "removingReplicas": None,
        "addingReplicas": None,
        "leaderRecoveryState": -1,
    }


def test_elr_fields_are_tagged_absent_when_empty_and_read_as_empty() -> None:
    # KIP-966: EligibleLeaderReplicas / LastKnownElr are tagged fields of Kafka's
    # PartitionRecord.json and PartitionChangeRecord.json: a record without ELR state is written
    # exactly as before, and a line without them (an older file) reads them as empty / unchanged.
    plain = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2), isr=(1,), leader=1)
    assert "eligibleLeaderReplicas" not in encode_record(plain)
    with_elr = attrs.evolve(plain, eligible_leader_replicas=(2,), last_known_elr=(3,))
    line = encode_record(with_elr)
    assert json.loads(line)["eligibleLeaderReplicas"] == [2]
    assert json.loads(line)["lastKnownElr"] == [3]
    assert decode_record(line) == with_elr
    assert json.loads(line) == json.loads(json.dumps(record_to_json(with_elr)))
    # An empty list is a change (ELR cleared) in a PartitionChangeRecord; null is "unchanged".
    cleared = PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, eligible_leader_replicas=())
    assert json.loads(encode_record(cleared))["eligibleLeaderReplicas"] == []
    assert "lastKnownElr" not in encode_record(cleared)
    assert decode_record(encode_record(cleared)) == cleared
    assert decode_record(encode_record(plain)) == plain  # its ELR fields read as empty


def test_an_unknown_extra_field_is_still_refused_next_to_tagged_ones() -> None:
    obj = json.loads(encode_record(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID)))
    obj["elr"] = [1]
    with pytest.raises(MetadataCodecError, match="unknown fields \\['elr'\\]"):
        decode_record(json.dumps(obj))
    del obj["elr"], obj["isr"]
    with pytest.raises(MetadataCodecError, match="missing fields \\['isr'\\]"):
        decode_record(json.dumps(obj))


def test_nested_endpoints_use_camel_case() -> None:
    record = RegisterBrokerRecord(
        broker_id=1,
        incarnation_id="i",
        broker_epoch=7,
        end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0),),
    )
    assert json.loads(encode_record(record))["endPoints"] == [
        {"name": "PLAINTEXT", "host": "h", "port": 9092, "securityProtocol": 0}
    ]


def test_lone_surrogates_round_trip_and_lines_stay_ascii() -> None:
    record = RegisterBrokerRecord(broker_id=1, incarnation_id="\ud800é", broker_epoch=1)
    line = encode_record(record)
    assert line.isascii()
    assert decode_record(line) == record


def valid_partition(**changes: object) -> str:
    obj = record_to_json(
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1)
    )
    obj.update(changes)
    return json.dumps(obj)


def without(field: str) -> str:
    obj = json.loads(valid_partition())
    del obj[field]
    return json.dumps(obj)


# (line, a fragment the error message must contain)
BAD_LINES = [
    ("not json", "not valid JSON"),
    ("", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"type": "StrangeRecord", "version": 0}', "unknown metadata record type 'StrangeRecord'"),
    ('{"version": 0}', "unknown metadata record type None"),
    ('{"type": 3, "version": 0}', "unknown metadata record type 3"),
    ('{"type": "NoOpRecord", "version": 1}', "NoOpRecord version 1 is not supported"),
    ('{"type": "NoOpRecord", "version": "0"}', "NoOpRecord version '0' is not supported"),
    ('{"type": "NoOpRecord"}', "NoOpRecord version None is not supported"),
    (without("leader"), "missing fields ['leader']"),
    (valid_partition(colour="red"), "unknown fields ['colour']"),
    (valid_partition(leader="1"), "field 'leader' must be an integer (int32), got '1'"),
    (valid_partition(leader=True), "field 'leader' must be an integer (int32), got True"),
    (valid_partition(leader=1.0), "field 'leader' must be an integer"),
    (valid_partition(leader=2**31), "field 'leader' must fit in int32"),
    (valid_partition(replicas=[1, "2"]), "field 'replicas' must be an integer"),
    (valid_partition(replicas=None), "field 'replicas' must be a list, got None"),
    (valid_partition(topicId="not-a-uuid"), "field 'topicId' must be a Kafka uuid string"),
    (valid_partition(topicId="ThIaNwRnSM2Nt9Mx1v0RvB"), "not a canonical Kafka uuid string"),
    (valid_partition(leaderRecoveryState=7), "field 'leaderRecoveryState' must be one of [0, 1]"),
    ('{"type": "FenceBrokerRecord", "version": 0, "id": 1, "epoch": 2.5}', "field 'epoch'"),
    (
        '{"type": "ConfigRecord", "version": 0, "resourceType": 300, "resourceName": "t",'
        ' "name": "k", "value": null}',
        "field 'resourceType' must fit in int8",
    ),
    (
        '{"type": "RegisterBrokerRecord", "version": 0, "brokerId": 1, "incarnationId": "i",'
        ' "brokerEpoch": 1, "endPoints": [{"name": "a"}], "features": [], "rack": null,'
        ' "fenced": true, "inControlledShutdown": false}',
        "objects need exactly the keys",
    ),
    (
        '{"type": "RegisterBrokerRecord", "version": 0, "brokerId": 1, "incarnationId": "i",'
        ' "brokerEpoch": 1, "endPoints": [], "features": [], "rack": null,'
        ' "fenced": 1, "inControlledShutdown": false}',
        "field 'fenced' must be true or false, got 1",
    ),
    (
        '{"type": "BrokerRegistrationChangeRecord", "version": 0, "brokerId": 1, "brokerEpoch": 1,'
        ' "fenced": 2, "inControlledShutdown": 0}',
        "field 'fenced' must be one of [-1, 0, 1]",
    ),
]


@pytest.mark.parametrize(("line", "fragment"), BAD_LINES)
def test_bad_lines_raise_a_clear_codec_error(line: str | bytes, fragment: str) -> None:
    with pytest.raises(MetadataCodecError) as error:
        decode_record(line)
    assert fragment in str(error.value)


def test_deeply_nested_json_is_a_codec_error_not_a_crash() -> None:
    with pytest.raises(MetadataCodecError):
        decode_record("[" * 100_000 + "]" * 100_000)


def test_kafka_uuid_strings_match_kafkas_form() -> None:
    # Uuid.toString is URL-safe base64 without padding; TopicsImageTest's ids are in that form.
    raw = kafka_string_to_uuid("tgHBnRglT5W_RlENnuG5vg")
    assert len(raw) == 16
    assert uuid_to_kafka_string(raw) == "tgHBnRglT5W_RlENnuG5vg"
    with pytest.raises(ValueError):
        uuid_to_kafka_string(b"short")


@given(st.lists(ANY_RECORD, max_size=8))
def test_many_lines_decode_with_one_parse(records) -> None:
    lines = [encode_record(record).encode() for record in records]
    assert decode_records(lines) == records


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (b'{"type":"NoOpRecord","version":0},{"type":"NoOpRecord","version":0}', "not valid JSON"),
        (b"", "not valid JSON"),
        (b'{"type":"NoOpRecord","version":1}', "NoOpRecord version 1 is not supported"),
        ('{"type":"NoOpRecord","version":0}'.encode("utf-16"), "not valid JSON together"),
    ],
)
def test_one_bad_line_among_many_is_named(bad: bytes, fragment: str) -> None:
    noop = encode_record(NoOpRecord()).encode()
    with pytest.raises(MetadataCodecError, match=fragment):
        decode_records([noop, bad, noop])


@given(st.lists(ANY_RECORD, max_size=8))
def test_batch_round_trip(records) -> None:
    for expected in (None, -1, 41):
        batch = decode_batch(encode_batch(records, expected_last_offset=expected))
        assert list(batch.records) == records
        assert batch.expected_last_offset == expected


def test_empty_batch_round_trips() -> None:
    assert decode_batch(encode_batch([])).records == ()


BAD_BATCHES = [
    (b"\xff", "not UTF-8"),
    (b"nonsense", "header is not valid JSON"),
    (b"[]", "header is malformed"),
    (b'{"batch": 9, "expectedLastOffset": null, "count": 0}', "format 9 is not supported"),
    (b'{"batch": 0, "expectedLastOffset": "x", "count": 0}', "expectedLastOffset must be an int"),
    (b'{"batch": 0, "expectedLastOffset": null, "count": -1}', "count must be 0..10000"),
    (
        b'{"batch": 0, "expectedLastOffset": null, "count": 2}\n{"type":"NoOpRecord","version":0}',
        "header says 2 records, found 1",
    ),
    (
        b'{"batch": 0, "expectedLastOffset": null, "count": 1}\n{"type":"NoOpRecord"}',
        "NoOpRecord version None",
    ),
]


@pytest.mark.parametrize(("blob", "fragment"), BAD_BATCHES)
def test_bad_batches_raise_a_clear_codec_error(blob: bytes, fragment: str) -> None:
    with pytest.raises(MetadataCodecError) as error:
        decode_batch(blob)
    assert fragment in str(error.value)


def test_a_batch_is_bounded() -> None:
    # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP.
    encode_batch([NoOpRecord()] * MAX_BATCH_RECORDS)
    with pytest.raises(MetadataCodecError, match="at most 10000 records"):
        encode_batch([NoOpRecord()] * (MAX_BATCH_RECORDS + 1))
