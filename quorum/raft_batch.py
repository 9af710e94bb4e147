"""The bytes of one Raft entry: an atomic batch of metadata records and its precondition.

pysyncobj pickles the arguments of a replicated call; we only ever hand it ``bytes`` so that
nothing but a bytes object is unpickled from the journal or a peer (DESIGN.md §3.1). The bytes
are this module's own format (big-endian):

    magic                 4 bytes  b"PKMB"
    format_version        int8     2 (``CompactBatch``); 1 (``ProposedBatch``) is still read
    expected_last_offset  int64    the metadata offset the proposer's image ended at (-1: empty)
    epoch                 int32    the proposer's Raft term; stamped on the records it writes
    append_time_ms        int64    wall-clock time chosen by the proposer (apply reads no clock)
    record_count          int32
    records               format 2: the records as one payload (``metadata.compact_codec``,
                          running to the crc); format 1: record_count x (int32 length, that
                          many bytes: one JSON line of ``metadata.codec``)
    crc                   uint32   CRC32C of everything before it

Controllers write format 2 (a third of the bytes, a fifth of the decoding work: see
``metadata/compact_codec.py``); format 1 stays readable so a journal written before format 2
replays to the same state after an upgrade. Records are opaque here; this module never imports
the metadata package so it can be tested alone. Every malformed blob raises ``BatchCodecError``
with a sentence that says what is wrong.
"""

from __future__ import annotations

import struct

import attrs
import crc32c

MAGIC = b"PKMB"
JSON_LINES_FORMAT = 1
COMPACT_FORMAT = 2
# Bounds (STYLE.md §7): one entry carries at most this many records and bytes. A
# 100,000-partition topic is ~100,001 records of ~60 bytes (format 2): well inside both.
MAX_BATCH_RECORDS = 1_000_000
MAX_BATCH_BYTES = 256 * 1024 * 1024

_HEADER = struct.Struct(">4sbqiqi")
_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")


class BatchCodecError(ValueError):
    """A Raft entry's bytes are not a well-formed batch."""


@attrs.frozen(kw_only=True)
class CompactBatch:
    """What the active controller proposes (format 2): records computed against one image."""

    # Invariant: equals the last metadata offset of the image the records were computed from.
    expected_last_offset: int
    epoch: int
    append_time_ms: int
    record_count: int
    # ``metadata.compact_codec.encode_records`` of the records.
    payload: bytes


@attrs.frozen(kw_only=True)
class ProposedBatch:
    """A format-1 batch: one JSON line (``metadata.codec``) per record. Read from journals
    written before format 2; written only by tests and tools that need that format."""

    expected_last_offset: int
    epoch: int
    append_time_ms: int
    records: tuple[bytes, ...]


AnyBatch = CompactBatch | ProposedBatch


def encode_batch(batch: AnyBatch) -> bytes:
    if isinstance(batch, CompactBatch):
        count, version, parts = batch.record_count, COMPACT_FORMAT, [batch.payload]
        if not batch.payload:
            raise BatchCodecError("a batch's payload must not be empty")
    else:
        count, version = len(batch.records), JSON_LINES_FORMAT
        parts = [part for record in batch.records for part in (_LENGTH.pack(len(record)), record)]
    if count < 1:
        raise BatchCodecError("a batch must carry at least one record")
    if count > MAX_BATCH_RECORDS:
        raise BatchCodecError(f"a batch carries at most {MAX_BATCH_RECORDS} records, got {count}")
    header = _HEADER.pack(
        MAGIC, version, batch.expected_last_offset, batch.epoch, batch.append_time_ms, count
    )
    body = b"".join([header, *parts])
    if len(body) > MAX_BATCH_BYTES:
        raise BatchCodecError(f"a batch is at most {MAX_BATCH_BYTES} bytes, got {len(body)}")
    return body + _CRC.pack(crc32c.crc32c(body))


def decode_batch(blob: bytes) -> AnyBatch:
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise BatchCodecError(f"a batch is bytes, got {type(blob).__name__}")
    data = memoryview(blob)
    minimum = _HEADER.size + _CRC.size
    if len(data) < minimum:
        raise BatchCodecError(f"a batch is at least {minimum} bytes, got {len(data)}")
    (expected_crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
    body = data[: len(data) - _CRC.size]
    if crc32c.crc32c(body) != expected_crc:
        raise BatchCodecError("batch checksum mismatch: the entry is corrupt")
    magic, version, expected_last_offset, epoch, append_time_ms, count = _HEADER.unpack_from(body)
    if magic != MAGIC:
        raise BatchCodecError(f"not a metadata batch: magic {magic!r}, expected {MAGIC!r}")
    if version not in (JSON_LINES_FORMAT, COMPACT_FORMAT):
        raise BatchCodecError(f"unsupported batch format version {version}")
    if not 0 < count <= MAX_BATCH_RECORDS:
        raise BatchCodecError(f"record count {count} is outside 1..{MAX_BATCH_RECORDS}")
    if version == COMPACT_FORMAT:
        if len(body) == _HEADER.size:
            raise BatchCodecError(f"a batch of {count} records has no payload")
        return CompactBatch(
            expected_last_offset=expected_last_offset,
            epoch=epoch,
            append_time_ms=append_time_ms,
            record_count=count,
            payload=bytes(body[_HEADER.size :]),
        )
    return ProposedBatch(
        expected_last_offset=expected_last_offset,
        epoch=epoch,
        append_time_ms=append_time_ms,
        records=_decode_records(body, _HEADER.size, count),
    )


def _decode_records(body: memoryview, position: int, count: int) -> tuple[bytes, ...]:
    records: list[bytes] = []
    for index in range(count):
        if position + _LENGTH.size > len(body):
            raise BatchCodecError(f"record {index}: length field runs past the end of the batch")
        (length,) = _LENGTH.unpack_from(body, position)
        position += _LENGTH.size
        if length < 0 or position + length > len(body):
            raise BatchCodecError(f"record {index}: length {length} runs past the end of the batch")
        records.append(bytes(body[position : position + length]))
        position += length
    if position != len(body):
        raise BatchCodecError(f"{len(body) - position} trailing bytes after {count} records")
    return tuple(records)
