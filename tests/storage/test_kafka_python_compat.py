"""Our record batches against kafka-python's (``kafka.record.default_records``), both ways.

kafka-python is an independent implementation of KIP-98 RecordBatch v2 used by real producers;
a batch one side builds must validate and decode to the same records on the other side. Where
both use the same compressor settings (none, xerial snappy, lz4 frame with independent blocks,
zstd) the bytes must be identical; gzip embeds nothing variable in our output but kafka-python
stamps the current time into the gzip header, so there only the records are compared.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from pykraft.storage.record_batch import CompressionType, iter_batches, validate_batch
from pykraft.storage.records import (
    ControlRecordType,
    Header,
    Record,
    SimpleRecord,
    build_batch,
    build_control_batch,
    iter_records,
)

T0 = 1_700_000_000_000
BYTE_IDENTICAL = [
    CompressionType.NONE,
    CompressionType.SNAPPY,
    CompressionType.LZ4,
    CompressionType.ZSTD,
]
# Compressible values, so kafka-python does not fall back to an uncompressed batch.
RECORDS = [
    SimpleRecord(b"payload-" * 40, b"key-1", T0, (Header("trace", b"abc"), Header("nil", None))),
    SimpleRecord(None, None, T0 + 7),
    SimpleRecord(b"payload-" * 40, b"", T0 - 2),
    SimpleRecord(b"x" * 70_000, b"big", T0 + 300),  # spans several snappy/lz4 blocks
]

records_strategy = st.lists(
    st.builds(
        SimpleRecord,
        value=st.none() | st.binary(max_size=200),
        key=st.none() | st.binary(max_size=50),
        timestamp=st.integers(min_value=-1, max_value=2**45),
        headers=st.lists(
            st.builds(Header, st.text(max_size=8), st.none() | st.binary(max_size=16)),
            max_size=3,
        ).map(tuple),
    ),
    min_size=1,
    max_size=12,
)


def kafka_python_batch(
    records: list[SimpleRecord],
    compression: CompressionType,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(compression),
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=2**30,
    )
    for offset_delta, record in enumerate(records):
        headers = [(header.key, header.value) for header in record.headers]
        builder.append(offset_delta, record.timestamp, record.key, record.value, headers)
    return bytes(builder.build())


def decoded_by_kafka_python(batch: bytes) -> list[Record]:
    reader = DefaultRecordBatch(bytearray(batch))
    assert reader.validate_crc()
    return [
        Record(
            r.offset,
            r.timestamp,
            r.key,
            r.value,
            tuple(Header(key, value) for key, value in r.headers),
        )
        for r in reader
    ]


def expected(records: list[SimpleRecord], base_offset: int = 0) -> list[Record]:
    return [
        Record(base_offset + i, r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]


@pytest.mark.parametrize("compression", list(CompressionType))
def test_kafka_python_batches_validate_and_decode(compression: CompressionType) -> None:
    batch = kafka_python_batch(
        RECORDS, compression, producer_id=11, producer_epoch=2, base_sequence=5, transactional=True
    )
    header = validate_batch(batch)
    assert header.compression is compression
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (11, 2, 5)
    assert header.is_transactional
    assert (header.base_timestamp, header.max_timestamp) == (T0, T0 + 300)
    assert list(iter_records(batch)) == expected(RECORDS)


@pytest.mark.parametrize("compression", list(CompressionType))
def test_our_batches_decode_with_kafka_python(compression: CompressionType) -> None:
    batch = build_batch(
        RECORDS, compression=compression, producer_id=11, producer_epoch=2, base_sequence=5
    )
    reader = DefaultRecordBatch(bytearray(batch))
    assert reader.compression_type == compression
    assert (reader.producer_id, reader.producer_epoch, reader.base_sequence) == (11, 2, 5)
    assert decoded_by_kafka_python(batch) == expected(RECORDS)


@pytest.mark.parametrize("compression", BYTE_IDENTICAL)
def test_same_input_gives_the_same_bytes(compression: CompressionType) -> None:
    # kafka-python leaves partitionLeaderEpoch 0 for the broker to stamp.
    ours = build_batch(RECORDS, compression=compression, partition_leader_epoch=0)
    assert ours == kafka_python_batch(RECORDS, compression)


def test_gzip_batches_agree_on_everything_but_the_gzip_header_time() -> None:
    ours = build_batch(RECORDS, compression=CompressionType.GZIP, partition_leader_epoch=0)
    theirs = kafka_python_batch(RECORDS, CompressionType.GZIP)
    assert list(iter_records(ours)) == list(iter_records(theirs))
    assert decoded_by_kafka_python(ours) == decoded_by_kafka_python(theirs)


def test_control_batch_reads_as_a_kafka_python_control_record() -> None:
    batch = build_control_batch(
        ControlRecordType.ABORT, producer_id=3, producer_epoch=1, timestamp=T0
    )
    reader = DefaultRecordBatch(bytearray(batch))
    assert reader.validate_crc() and reader.is_control_batch and reader.is_transactional
    [marker] = list(reader)
    assert (marker.version, marker.type, marker.abort, marker.commit) == (0, 0, True, False)


def test_memory_records_of_several_batches_both_ways() -> None:
    builder = MemoryRecordsBuilder(
        magic=2, compression_type=int(CompressionType.LZ4), batch_size=2**20
    )
    for record in RECORDS:
        builder.append(
            record.timestamp, record.key, record.value, [(h.key, h.value) for h in record.headers]
        )
    builder.close()
    theirs = bytes(builder.buffer())
    ours = build_batch(RECORDS[:2]) + build_batch(RECORDS[2:], base_offset=2)
    assert [h.records_count for _, h in iter_batches(theirs)] == [4]
    assert list(iter_records(theirs)) == expected(RECORDS)
    batches = list(MemoryRecords(ours))
    assert [batch.base_offset for batch in batches] == [0, 2]
    assert [r.offset for batch in batches for r in batch] == [0, 1, 2, 3]


@pytest.mark.parametrize("compression", list(CompressionType))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_strategy)
def test_property_kafka_python_and_we_agree(
    compression: CompressionType, records: list[SimpleRecord]
) -> None:
    theirs = kafka_python_batch(records, compression)
    assert list(iter_records(theirs)) == expected(records)
    ours = build_batch(records, compression=compression, partition_leader_epoch=0)
    assert decoded_by_kafka_python(ours) == expected(records)
    if validate_batch(theirs).compression is compression and compression in BYTE_IDENTICAL:
        assert ours == theirs


def test_partition_leader_epoch_and_base_offset_patches_keep_kafka_python_happy() -> None:
    # Both fields lie outside the CRC (KIP-98), so a broker may stamp them.
    batch = bytearray(kafka_python_batch(RECORDS[:2], CompressionType.ZSTD))
    struct.pack_into(">q", batch, 0, 1234)
    struct.pack_into(">i", batch, 12, 9)
    assert validate_batch(batch).partition_leader_epoch == 9
    assert [r.offset for r in iter_records(batch)] == [1234, 1235]
    assert [r.offset for r in decoded_by_kafka_python(bytes(batch))] == [1234, 1235]
