"""Writing what the cleaner keeps of a batch (Kafka's ``MemoryRecords.filterTo`` output).

A batch whose records are all kept, and that needs no delete horizon, is copied byte for byte.
Otherwise it is rebuilt the way Kafka's ``buildRetainedRecordsInto`` does: the same base offset,
the same last offset (``overrideLastOffset``: the producer's sequence range stays whole), the
same producer id, epoch, base sequence, partition leader epoch, transactional and control flags,
timestamp type and compression, holding only the kept records at their own offsets. KIP-534:
when the batch gets a delete horizon, the ``hasDeleteHorizonMs`` attribute (bit 6) is set and the
horizon is the batch's base timestamp, record timestamps staying exact as deltas from it.

A batch kept for its producer state but holding no record left is Kafka's empty header
(``DefaultRecordBatch.writeEmptyHeader``): no records, no compression, base timestamp -1.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from pykraft.storage.compression import compress
from pykraft.storage.record_batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CRC_POS,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CompressionType,
    encode_header,
    validate_batch,
)
from pykraft.storage.records import Record, decode_records
from pykraft.storage.varint import encode_varint, encode_varlong

NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
_UINT32 = struct.Struct(">I")


def read_batch(data: bytes) -> tuple[BatchHeader, list[Record]]:
    """The batch ``data`` (CRC checked) and its records at their own offsets: a batch the
    cleaner rebuilt keeps its records' offsets, so its deltas may have gaps, which
    ``storage.records`` reads as Kafka does (offset = base offset + offsetDelta)."""
    header = validate_batch(data)
    payload = memoryview(data)[BATCH_HEADER_SIZE : header.size_in_bytes]
    return header, decode_records(header, payload)


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """Kafka ``deleteHorizonMs()``: the base timestamp of a batch flagged with one."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None


def _field(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += b"\x01"  # zig-zag -1
    else:
        out += encode_varint(len(data))
        out += data


def encode_record(record: Record, base_offset: int, base_timestamp: int) -> bytes:
    """One v2 record at its own offset and timestamp (Kafka ``DefaultRecord.writeTo``)."""
    body = bytearray(b"\x00")
    body += encode_varlong(record.timestamp - base_timestamp)
    body += encode_varint(record.offset - base_offset)
    _field(body, record.key)
    _field(body, record.value)
    body += encode_varint(len(record.headers))
    for header in record.headers:
        _field(body, header.key.encode("utf-8"))
        _field(body, header.value)
    return encode_varint(len(body)) + body


def _with_crc(header: BatchHeader, payload: bytes) -> bytes:
    batch = bytearray(encode_header(header))
    batch += payload
    _UINT32.pack_into(batch, CRC_POS, crc32c.crc32c(memoryview(batch)[ATTRIBUTES_POS:]))
    return bytes(batch)


def rebuild_batch(
    original: BatchHeader, records: Sequence[Record], horizon_ms: int | None
) -> bytes:
    """``original`` holding only ``records`` (at least one), with ``horizon_ms`` as its
    delete horizon when given."""
    assert records, "a batch with no record left is written with empty_batch"
    attributes = original.attributes & ~DELETE_HORIZON_MASK
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = horizon_ms
    else:
        base_timestamp = records[0].timestamp
    if attributes & TIMESTAMP_TYPE_MASK:
        max_timestamp = original.max_timestamp  # LOG_APPEND_TIME: the batch's own time
    else:
        max_timestamp = max(record.timestamp for record in records)
    body = b"".join(encode_record(r, original.base_offset, base_timestamp) for r in records)
    compression = CompressionType(attributes & COMPRESSION_MASK)
    payload = compress(compression, body) if compression is not CompressionType.NONE else body
    header = BatchHeader(
        base_offset=original.base_offset,
        batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch=original.partition_leader_epoch,
        magic=original.magic,
        crc=0,
        attributes=attributes,
        last_offset_delta=original.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=original.producer_id,
        producer_epoch=original.producer_epoch,
        base_sequence=original.base_sequence,
        records_count=len(records),
    )
    return _with_crc(header, payload)


def empty_batch(original: BatchHeader) -> bytes:
    """Kafka ``writeEmptyHeader``: only ``original``'s header facts, no records."""
    attributes = original.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_MASK)
    header = BatchHeader(
        base_offset=original.base_offset,
        batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD,
        partition_leader_epoch=original.partition_leader_epoch,
        magic=original.magic,
        crc=0,
        attributes=attributes,
        last_offset_delta=original.last_offset_delta,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=original.max_timestamp,
        producer_id=original.producer_id,
        producer_epoch=original.producer_epoch,
        base_sequence=original.base_sequence,
        records_count=0,
    )
    return _with_crc(header, b"")
