"""The leader's record walk (Kafka's LogValidator) and its Hypothesis property (issue 9).

Property: any bytes given to the batch validator are either rejected with a typed error or
decode to exactly the declared records, and never inflate past the bound. Mutated valid
batches (flipped, inserted, deleted bytes, then the CRC fixed up) carry the property past the
CRC check into the records.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.storage.compression import InflatedSizeLimitError, decompress
from pykraft.storage.log_validator import (
    AppendOrigin,
    InvalidRecordError,
    LogError,
    validate_leader_batches,
)
from pykraft.storage.record_batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    CRC_POS,
    BatchHeader,
    CompressionType,
    CorruptRecordError,
    encode_header,
    validate_batch,
)
from pykraft.storage.record_walk import MIN_RECORD_BYTES, max_inflated_bytes
from pykraft.storage.records import SimpleRecord, build_batch, decode_records, validate_records
from pykraft.storage.varint import encode_varint
from tests.storage.test_records import records_strategy

T0 = 1_700_000_000_000
BIG = 1 << 30


def batch_of(
    records: bytes,
    count: int,
    compression: CompressionType = CompressionType.NONE,
    last_offset_delta: int | None = None,
) -> bytes:
    """A batch with a correct CRC around ``records`` (already compressed if flagged)."""
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    header = BatchHeader(
        0,
        BATCH_HEADER_SIZE - 12 + len(records),
        0,
        2,
        0,
        int(compression),
        delta,
        T0,
        T0,
        -1,
        -1,
        -1,
        count,
    )
    batch = bytearray(encode_header(header) + records)
    fix_crc(batch)
    return bytes(batch)


def fix_crc(batch: bytearray) -> None:
    struct.pack_into(">I", batch, CRC_POS, crc32c.crc32c(bytes(batch[ATTRIBUTES_POS:])))


def validate(batch: bytes) -> None:
    validate_leader_batches(
        batch, max_message_bytes=BIG, segment_bytes=BIG, origin=AppendOrigin.CLIENT
    )


def record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


def section(count: int) -> bytes:
    batch = build_batch([SimpleRecord(b"v%d" % i, timestamp=T0) for i in range(count)])
    return batch[BATCH_HEADER_SIZE:]


TWO = section(2)


@pytest.mark.parametrize(
    ("records", "count", "message"),
    [
        (TWO, 1000, "1000 records cannot fit"),  # count over 2 records
        (TWO, 2**31 - 1, "records cannot fit"),  # the largest count
        (section(3), 2, "bytes remain after the declared 2 records"),  # more than declared
        (TWO[:-1], 2, "runs 1 past the end"),  # truncated record
        (b"\xff" * 5 + TWO, 1, "longer than 5 bytes"),  # 6-byte varint
        (b"\xff\xff\xff\xff\x7f" + TWO, 1, "overflows int32"),  # varint beyond int32
        (record(b"\x00\x00\x00\x01\x02v\x00") * 2, 2, "offsetDelta 0"),  # repeated delta
        (record(b"\x00\x00\x04\x01\x02v\x00"), 1, "offsetDelta 2"),  # delta off the header
        (TWO + b"\x00" * 8, 1, "bytes remain"),  # garbage after records
    ],
)
def test_records_that_contradict_the_header_are_invalid_record(
    records: bytes, count: int, message: str
) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        validate(batch_of(records, count))


@pytest.mark.parametrize("compression", [c for c in CompressionType if c])
def test_lies_inside_compressed_batches_are_invalid_record_too(
    compression: CompressionType,
) -> None:
    from pykraft.storage.compression import compress

    for records, count in ((TWO, 3), (TWO, 1), (TWO[:-1], 2)):
        with pytest.raises(InvalidRecordError, match="of the decompressed records"):
            validate(batch_of(compress(compression, records), count, compression))


@pytest.mark.parametrize("compression", [c for c in CompressionType if c])
def test_a_codec_flag_over_other_bytes_is_invalid_record(compression: CompressionType) -> None:
    with pytest.raises(InvalidRecordError, match=f"{compression.name.lower()} data is corrupt"):
        validate(batch_of(TWO, 2, compression))


def test_honest_batches_of_every_codec_pass() -> None:
    records = [SimpleRecord(b"x" * 300, key=b"k", timestamp=T0 + i) for i in range(50)]
    for compression in CompressionType:
        batch = build_batch(records, compression=compression)
        [validated] = validate_leader_batches(
            batch, max_message_bytes=len(batch), segment_bytes=BIG, origin=AppendOrigin.CLIENT
        )
        assert validated.header.records_count == 50


def test_a_declared_count_that_cannot_fit_the_bound_is_refused_before_inflating() -> None:
    from pykraft.storage.compression import compress

    header_bytes = batch_of(compress(CompressionType.ZSTD, TWO), 2**31 - 1, CompressionType.ZSTD)
    header = BatchHeader(*struct.unpack_from(">qiibIhiqqqhii", header_bytes))
    limit = max_inflated_bytes(header.size_in_bytes)
    assert header.records_count * MIN_RECORD_BYTES > limit
    with pytest.raises(InflatedSizeLimitError, match="records need at least"):
        validate_records(header, header_bytes[BATCH_HEADER_SIZE:], max_bytes=limit)


# ---------------------------------------------------------------------------------- property


def mutated(batch: bytes, data: st.DataObject) -> bytes:
    """``batch`` with a few bytes flipped, inserted or deleted in its records, CRC fixed up;
    sometimes with a lying record count or codec flag."""
    body = bytearray(batch)
    for _ in range(data.draw(st.integers(0, 3), label="edits")):
        index = data.draw(st.integers(BATCH_HEADER_SIZE, max(len(body) - 1, BATCH_HEADER_SIZE)))
        edit = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if edit == "flip" and index < len(body):
            body[index] ^= data.draw(st.integers(1, 255))
        elif edit == "insert":
            body[index:index] = data.draw(st.binary(min_size=1, max_size=4))
        elif index < len(body):
            del body[index : index + data.draw(st.integers(1, 4))]
    count = data.draw(st.sampled_from([None, 0, 1, 2, 1000, 2**31 - 1]), label="count")
    if count is not None:
        struct.pack_into(">i", body, 57, count)
        struct.pack_into(">i", body, 23, max(count - 1, 0))
    if data.draw(st.booleans(), label="recodec"):
        body[22] = (body[22] & ~0x07) | data.draw(st.integers(0, 4), label="codec")
    struct.pack_into(">i", body, 8, len(body) - 12)
    fix_crc(body)
    return bytes(body)


def check_property(batch: bytes) -> None:
    try:
        [validated] = validate_leader_batches(
            batch, max_message_bytes=BIG, segment_bytes=BIG, origin=AppendOrigin.CLIENT
        )
    except (CorruptRecordError, LogError):
        return  # rejected with a typed error
    header = validated.header
    payload = batch[BATCH_HEADER_SIZE : header.size_in_bytes]
    limit = max_inflated_bytes(header.size_in_bytes)
    if header.compression is not CompressionType.NONE:
        assert len(decompress(header.compression, payload, max_bytes=limit)) <= limit
    records = decode_records(header, payload)
    assert [r.offset for r in records] == list(range(header.records_count))


@settings(max_examples=400, deadline=None)
@given(raw=st.binary(max_size=300))
def test_property_any_bytes_are_rejected_or_decode_to_the_declared_records(raw: bytes) -> None:
    check_property(raw)


@pytest.mark.parametrize("compression", list(CompressionType))
@settings(max_examples=150, deadline=None)
@given(records=records_strategy, data=st.data())
def test_property_mutated_batches_are_rejected_or_decode_to_the_declared_records(
    compression: CompressionType, records: list[SimpleRecord], data: st.DataObject
) -> None:
    check_property(mutated(build_batch(records, compression=compression), data))


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00\x80\x00\x01\x02v\x00",  # offsetDelta 0 in two bytes
        b"\x00\x00\x00\x81\x00\x02v\x00",  # null key (-1) in two bytes
        b"\x00\x00\x00\x01\x82\x00v\x00",  # value length 1 in two bytes
        b"\x00\x80\x80\x00\x00\x01\x02v\x00",  # timestampDelta 0 in three bytes
    ],
)
def test_over_long_varints_are_read_like_kafka_and_the_checked_decoder(body: bytes) -> None:
    """Kafka's ``ByteUtils.readVarint`` accepts any encoding of at most 5 bytes; so must the
    walk, or valid batches would be refused (and the walk would disagree with the decoder)."""
    batch = batch_of(record(body), 1)
    validate(batch)
    [decoded] = decode_records(validate_batch(batch), batch[BATCH_HEADER_SIZE:])
    assert (decoded.offset, decoded.key, decoded.value) == (0, None, b"v")
