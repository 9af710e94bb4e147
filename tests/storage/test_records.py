"""Records inside RecordBatch v2: varints, build/iterate round trips, codecs, corrupt input.

Byte layouts follow KIP-98 and Kafka's ``DefaultRecord``/``DefaultRecordBatch``; varint vectors
follow Kafka's ``ByteUtilsTest``.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.storage import records as records_module
from pykraft.storage.compression import XERIAL_MAGIC, compress
from pykraft.storage.record_batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    BatchHeader,
    CompressionType,
    CorruptRecordError,
    TimestampType,
    encode_header,
    validate_batch,
)
from pykraft.storage.records import (
    ControlRecordType,
    Header,
    Record,
    SimpleRecord,
    build_batch,
    build_control_batch,
    decode_records,
    decompress,
    iter_records,
)
from pykraft.storage.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

T0 = 1_700_000_000_000


# ------------------------------------------------------------------------------------ varints


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (8191, "fe7f"),
        (-8192, "ff7f"),
        (8192, "808001"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
    ],
)
def test_varint_matches_kafka_byte_utils(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded), 0, "f") == (value, len(encoded) // 2)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (2**63 - 1, "feffffffffffffffff01"),
        (-(2**63), "ffffffffffffffffff01"),
        (-(2**31) - 1, "8180808010"),
        (T0, None),
    ],
)
def test_varlong_matches_kafka_byte_utils(value: int, encoded: str | None) -> None:
    raw = encode_varlong(value)
    if encoded is not None:
        assert raw.hex() == encoded
    assert decode_varlong(raw, 0, "f") == (value, len(raw))


@pytest.mark.parametrize(
    ("raw", "decoder", "message"),
    [
        ("", decode_varint, "truncated after 0 bytes"),
        ("8080", decode_varint, "truncated after 2 bytes"),
        ("ffffffffff01", decode_varint, "longer than 5 bytes"),
        ("ffffffff1f", decode_varint, "overflows int32"),
        ("ffffffffffffffffff03", decode_varlong, "overflows int64"),
        ("ffffffffffffffffffff01", decode_varlong, "longer than 10 bytes"),
    ],
)
def test_bad_varints_name_field_and_position(raw: str, decoder, message: str) -> None:
    data = b"\x00" + bytes.fromhex(raw)
    with pytest.raises(CorruptRecordError) as caught:
        decoder(data, 1, "offsetDelta")
    assert caught.value.field == "offsetDelta"
    assert caught.value.position == 1
    assert message in str(caught.value)


def test_varint_respects_end_limit() -> None:
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varint(b"\x80\x01", 0, "length", end=1)


# ---------------------------------------------------------------------------------- round trip

RECORDS = [
    SimpleRecord(b"hello", b"abc", T0, (Header("trace", b"1"), Header("empty", None))),
    SimpleRecord(None, None, T0 + 500),
    SimpleRecord(b"x" * 40_000, b"", T0 - 3),
    SimpleRecord(b"", timestamp=T0 + 1),
]


@pytest.mark.parametrize("compression", list(CompressionType))
def test_build_then_iterate_round_trips(compression: CompressionType) -> None:
    batch = build_batch(RECORDS, base_offset=100, compression=compression, partition_leader_epoch=7)
    header = validate_batch(batch)
    assert header.compression is compression
    assert (header.base_offset, header.last_offset, header.records_count) == (100, 103, 4)
    assert (header.base_timestamp, header.max_timestamp) == (T0, T0 + 500)
    assert header.partition_leader_epoch == 7
    assert list(iter_records(batch)) == [
        Record(100 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(RECORDS)
    ]


def test_iterates_batch_at_a_position_inside_a_buffer() -> None:
    first = build_batch([SimpleRecord(b"a")])
    second = build_batch([SimpleRecord(b"b")], base_offset=1)
    buf = memoryview(bytearray(first + second))
    assert [r.value for r in iter_records(buf, len(first))] == [b"b"]


def test_producer_fields_and_flags_are_written() -> None:
    batch = build_batch(
        [SimpleRecord(b"v")] * 3,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        is_transactional=True,
    )
    header = validate_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 10)
    assert header.last_sequence == 12
    assert header.is_transactional and not header.is_control


def test_log_append_time_batches_report_max_timestamp_for_every_record() -> None:
    # DefaultRecordBatch: with LOG_APPEND_TIME every record's timestamp is the batch maxTimestamp.
    batch = build_batch(
        [SimpleRecord(b"a", timestamp=5), SimpleRecord(b"b", timestamp=9)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    assert validate_batch(batch).timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in iter_records(batch)] == [9, 9]


@pytest.mark.parametrize("control_type", list(ControlRecordType))
def test_control_batch_is_an_end_txn_marker(control_type: ControlRecordType) -> None:
    batch = build_control_batch(
        control_type,
        producer_id=9,
        producer_epoch=2,
        timestamp=T0,
        base_offset=50,
        coordinator_epoch=4,
    )
    header = validate_batch(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 2, -1)
    [record] = list(iter_records(batch))
    # Key: version 0, type; value: EndTransactionMarker version 0, coordinatorEpoch.
    assert record == Record(
        50, T0, struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, 4), ()
    )


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])


def test_snappy_is_xerial_framed_and_raw_snappy_is_read_too() -> None:
    import snappy

    data = bytes(range(256)) * 300  # > 32 KiB: several xerial blocks
    framed = compress(CompressionType.SNAPPY, data)
    assert framed.startswith(XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01")
    assert decompress(CompressionType.SNAPPY, framed, max_bytes=len(data)) == data
    assert decompress(CompressionType.SNAPPY, snappy.compress(data), max_bytes=len(data)) == data


# ------------------------------------------------------------------------------ corrupt input


def raw_batch(
    records: bytes, count: int, compression: CompressionType = CompressionType.NONE
) -> bytes:
    """A batch with a correct header and CRC around arbitrary record bytes."""
    payload = compress(compression, records)
    header = BatchHeader(
        0,
        BATCH_HEADER_SIZE - 12 + len(payload),
        0,
        2,
        0,
        int(compression),
        max(count - 1, 0),
        T0,
        T0,
        -1,
        -1,
        -1,
        count,
    )
    batch = bytearray(encode_header(header) + payload)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


GOOD = record(b"\x00\x00\x00\x04k1\x04v1\x00")  # attrs, tsDelta 0, offDelta 0, key, value, 0 hdrs


@pytest.mark.parametrize(
    ("records", "count", "field", "position"),
    [
        (b"\x80", 1, "length", 0),  # truncated varint
        (encode_varint(100) + b"\x00" * 5, 1, "length", 0),  # length past the end
        (encode_varint(0), 1, "length", 0),  # empty record
        (GOOD, 2, "recordsCount", len(GOOD)),  # fewer records than count
        (GOOD + b"\x00", 1, "records", len(GOOD)),  # trailing garbage
        (record(b"\x00\x00\x00\x14k1\x04v1\x00"), 1, "keyLength", 4),  # key past the record
        (record(b"\x00\x00\x00\x03\x04v1\x00"), 1, "keyLength", 4),  # key length -2
        (record(b"\x00\x00\x00\x04k1\x0ev1\x00"), 1, "valueLength", 7),  # value past the record
        (record(b"\x00\x00\x00\x01\x01\x7e"), 1, "headersCount", 6),  # 63 headers
        (record(b"\x00\x00\x00\x01\x01\x02\x02\xff\x01"), 1, "headerKey", 7),  # not UTF-8
        (record(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 1, "headerKeyLength", 7),  # null key
        (record(b"\x00\x00\x00\x01\x01\x00\x00"), 1, "length", 0),  # unused bytes in record
        (record(b"\x00\x00\xff\xff\xff\xff\xff\x01\x01\x01\x00"), 1, "offsetDelta", 3),
        (record(b"\x00\x80\x80"), 1, "timestampDelta", 2),
    ],
)
def test_malformed_records_name_field_and_absolute_position(
    records: bytes, count: int, field: str, position: int
) -> None:
    batch = raw_batch(records, count)
    with pytest.raises(CorruptRecordError) as caught:
        list(iter_records(batch))
    assert caught.value.field == field, str(caught.value)
    assert caught.value.position == BATCH_HEADER_SIZE + position, str(caught.value)


def test_well_formed_raw_record_decodes() -> None:
    assert list(iter_records(raw_batch(GOOD, 1))) == [Record(0, T0, b"k1", b"v1", ())]


@pytest.mark.parametrize("compression", [c for c in CompressionType if c])
def test_malformed_records_inside_compressed_batch_report_the_batch(
    compression: CompressionType,
) -> None:
    batch = raw_batch(GOOD + b"\x00", 1, compression)
    with pytest.raises(CorruptRecordError, match="of the decompressed records") as caught:
        list(iter_records(batch))
    assert (caught.value.field, caught.value.position) == ("records", 0)


@pytest.mark.parametrize("compression", [c for c in CompressionType if c])
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_undecompressable_payload_is_a_corrupt_record(
    compression: CompressionType, damage: str
) -> None:
    good = compress(compression, GOOD * 20)
    payload = b"garbage bytes here!!" if damage == "garbage" else good[: len(good) // 2]
    with pytest.raises(CorruptRecordError) as caught:
        decompress(compression, payload, max_bytes=1 << 20)
    assert caught.value.field == "records"
    assert compression.name.lower() in caught.value.message


def test_bad_crc_is_reported_before_any_record() -> None:
    batch = bytearray(build_batch([SimpleRecord(b"v")]))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as caught:
        iter_records(batch)
    assert caught.value.field == "crc"


def test_build_batch_rejects_a_timestamp_delta_beyond_int64() -> None:
    records = [SimpleRecord(b"a", timestamp=-(2**62)), SimpleRecord(b"b", timestamp=2**62)]
    with pytest.raises(ValueError, match="too far from"):
        build_batch(records)


# ---------------------------------------------------------------------------------- properties

records_strategy = st.lists(
    st.builds(
        SimpleRecord,
        value=st.none() | st.binary(max_size=300),
        key=st.none() | st.binary(max_size=40),
        # Any two timestamps in this range differ by at most INT64_MAX, so every timestampDelta
        # fits its varlong; wider spreads are rejected by build_batch (tested below).
        timestamp=st.integers(min_value=-(2**62), max_value=2**62 - 1),
        headers=st.lists(
            st.builds(Header, st.text(max_size=10), st.none() | st.binary(max_size=20)),
            max_size=4,
        ).map(tuple),
    ),
    min_size=1,
    max_size=15,
)


@pytest.mark.parametrize("compression", list(CompressionType))
@settings(max_examples=60, deadline=None)
@given(records=records_strategy, base_offset=st.integers(0, 2**62))
def test_property_build_then_iterate_round_trips(
    compression: CompressionType, records: list[SimpleRecord], base_offset: int
) -> None:
    batch = build_batch(records, base_offset=base_offset, compression=compression)
    assert list(iter_records(batch)) == [
        Record(base_offset + i, r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]


# Fields parse_header checks before the CRC: damage there may be reported under their name.
HEADER_FIELDS = {"crc", "attributes", "lastOffsetDelta", "recordsCount"}


@pytest.mark.parametrize("compression", list(CompressionType))
@settings(max_examples=60, deadline=None)
@given(records=records_strategy, data=st.data())
def test_property_any_damage_inside_the_crc_range_is_caught(
    compression: CompressionType, records: list[SimpleRecord], data: st.DataObject
) -> None:
    batch = bytearray(build_batch(records, compression=compression))
    index = data.draw(st.integers(ATTRIBUTES_POS, len(batch) - 1), label="index")
    batch[index] ^= data.draw(st.integers(1, 255), label="xor")
    with pytest.raises(CorruptRecordError) as caught:
        validate_batch(batch)
    assert caught.value.field in HEADER_FIELDS


@settings(max_examples=300, deadline=None)
@given(records=records_strategy, data=st.data())
def test_property_damaged_records_raise_only_corrupt_record_error(
    records: list[SimpleRecord], data: st.DataObject
) -> None:
    """Fast and checked decoders agree on damaged record bytes (with a fixed-up CRC)."""
    body = bytearray(build_batch(records)[BATCH_HEADER_SIZE:])
    for _ in range(data.draw(st.integers(1, 3), label="damages")):
        index = data.draw(st.integers(0, len(body) - 1), label="index")
        body[index] = data.draw(st.integers(0, 255), label="byte")
    cut = data.draw(st.integers(0, len(body)), label="cut")
    count = data.draw(st.sampled_from([len(records), len(records) + 1, max(len(records) - 1, 0)]))
    batch = raw_batch(bytes(body[:cut] + body[cut + data.draw(st.integers(0, 2)) :]), count)
    header = validate_batch(batch)
    args = (batch[BATCH_HEADER_SIZE:], count, 0, T0, None)
    fast = records_module._decode_fast(*args)
    try:
        checked = records_module._decode_checked(*args)
    except CorruptRecordError:
        assert fast is None
        with pytest.raises(CorruptRecordError):
            decode_records(header, batch[BATCH_HEADER_SIZE:])
    else:
        assert fast is None or fast == checked
        assert decode_records(header, batch[BATCH_HEADER_SIZE:]) == checked


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=64), count=st.integers(0, 4))
def test_property_random_bytes_never_crash_the_decoder(payload: bytes, count: int) -> None:
    header = validate_batch(raw_batch(payload, count))
    try:
        decode_records(header, payload)
    except CorruptRecordError as error:
        assert error.field
