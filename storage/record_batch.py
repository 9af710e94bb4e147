"""Kafka RecordBatch v2 (magic 2) headers: parse, validate, patch.

A batch is stored byte-for-byte as the client sent it. The broker only reads the
61-byte header, checks lengths and the CRC32C, and patches the two fields that sit
outside the CRC: ``baseOffset`` and ``partitionLeaderEpoch`` (KIP-98 layout; see
../shared/KAFKA_FORMATS.md). Record-level decoding lives in ``storage.records``.

Every malformed input raises ``CorruptRecordError`` naming the field; nothing here
crashes on bad bytes, and nothing here writes to disk.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator

import attrs
import crc32c

# Offsets of header fields within a batch (big-endian).
BASE_OFFSET_POS = 0
BATCH_LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
# The length field counts the bytes after itself: from partitionLeaderEpoch to the end.
LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32
BATCH_HEADER_SIZE = 61
# The smallest legal batchLength: a header with zero records.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
CURRENT_MAGIC = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40


class CompressionType(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class CorruptRecordError(ValueError):
    """A batch is malformed. ``field`` names what is wrong, ``position`` where it is."""

    def __init__(self, field: str, message: str, position: int = 0) -> None:
        super().__init__(f"{field}: {message} (at byte {position})")
        self.field = field
        self.message = message
        self.position = position


@attrs.frozen
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        """Bytes the whole batch occupies in a log file."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Kafka wraps sequences at Int32.MAX; -1 when the batch has no sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Read and sanity-check the header at ``position``; does not check the CRC."""
    available = len(buf) - position
    if available < LOG_OVERHEAD:
        raise CorruptRecordError("batchLength", f"only {available} bytes left, need 12", position)
    if available < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            "header", f"only {available} bytes left, a v2 header needs 61", position
        )
    fields = _HEADER.unpack_from(buf, position)
    # Checked on the unpacked fields (every append reads every header: issue 18's hot path).
    _, batch_length, _, magic, _, attributes, last_offset_delta = fields[:7]
    records_count = fields[12]
    if magic != CURRENT_MAGIC:
        raise CorruptRecordError("magic", f"{magic} is not supported, need 2", position)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            "batchLength",
            f"{batch_length} is below the minimum {MIN_BATCH_LENGTH}",
            position,
        )
    if batch_length + LOG_OVERHEAD > available:
        raise CorruptRecordError(
            "batchLength",
            f"batch claims {batch_length + LOG_OVERHEAD} bytes but only {available} remain",
            position,
        )
    if records_count < 0:
        raise CorruptRecordError("recordsCount", f"{records_count} is negative", position)
    if last_offset_delta < 0:
        raise CorruptRecordError("lastOffsetDelta", f"{last_offset_delta} is negative", position)
    if records_count > 0 and last_offset_delta < records_count - 1:
        raise CorruptRecordError(
            "lastOffsetDelta",
            f"{last_offset_delta} is below recordsCount - 1 ({records_count - 1})",
            position,
        )
    if attributes & COMPRESSION_MASK > CompressionType.ZSTD:
        raise CorruptRecordError(
            "attributes", f"unknown compression codec {attributes & 7}", position
        )
    return BatchHeader(*fields)


def compute_crc(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> int:
    start = position + ATTRIBUTES_POS
    end = position + header.size_in_bytes
    return int(crc32c.crc32c(memoryview(buf)[start:end]))


def validate_batch(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the header at ``position`` and check the CRC32C over attributes..end."""
    header = parse_header(buf, position)
    actual = compute_crc(buf, position, header)
    if actual != header.crc:
        raise CorruptRecordError(
            "crc", f"stored {header.crc:#010x} but computed {actual:#010x}", position
        )
    return header


def iter_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for every batch in ``buf``, which must hold whole batches."""
    position = 0
    while position < len(buf):
        header = validate_batch(buf, position) if verify_crc else parse_header(buf, position)
        yield position, header
        position += header.size_in_bytes


def patch_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Stamp the base offset; it lies outside the CRC so the batch stays valid."""
    _INT64.pack_into(buf, position + BASE_OFFSET_POS, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Stamp the partition leader epoch; it lies outside the CRC."""
    _INT32.pack_into(buf, position + PARTITION_LEADER_EPOCH_POS, epoch)


def encode_header(header: BatchHeader) -> bytes:
    return _HEADER.pack(*attrs.astuple(header))
