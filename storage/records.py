"""Records inside a RecordBatch v2: build batches, iterate their records, (de)compress.

The broker never re-encodes batches (DESIGN.md §3.3); this module is for the places that must
look inside one: tools (``pykraft dump-log``), the Spark export, tests, and control batches.

Record layout (KIP-98, ``org.apache.kafka.common.record.DefaultRecord``): ``length`` varint,
``attributes`` int8, ``timestampDelta`` varlong, ``offsetDelta`` varint, ``keyLength`` varint
(-1 = null), key, ``valueLength`` varint (-1 = null), value, ``headersCount`` varint, then per
header ``keyLength`` varint, UTF-8 key, ``valueLength`` varint (-1 = null), value.

Decoding has two paths that must agree: a fast one that trusts nothing but checks cheaply (any
surprise makes it give up) and a careful one that checks every field and raises
``CorruptRecordError`` naming the field and the byte position. The careful one only runs when the
fast one gave up, so valid batches pay for the cheap checks alone.

``validate_records`` checks a batch without building records (the leader's append path;
``storage.record_walk``), and every compressed batch, read or checked, inflates in bounded
chunks to at most ``max_inflated_bytes`` of its size: no reader of this module can be made to
hold a decompression bomb.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from typing import NoReturn

import attrs
import crc32c

from pykraft.storage.compression import CompressionError, compress, decompress
from pykraft.storage.record_batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    CRC_POS,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CompressionType,
    CorruptRecordError,
    TimestampType,
    encode_header,
    validate_batch,
)
from pykraft.storage.record_walk import (
    check_uncompressed_records,
    iter_record_runs,
    max_inflated_bytes,
    varint_rest,
)
from pykraft.storage.varint import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    MAX_VARLONG_BYTES,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

__all__ = [
    "ControlRecordType",
    "Header",
    "Record",
    "SimpleRecord",
    "build_batch",
    "build_control_batch",
    "decode_records",
    "decompress",
    "iter_records",
]

_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


@attrs.frozen
class Header:
    key: str
    value: bytes | None


@attrs.frozen
class SimpleRecord:
    """A record to write: Kafka's ``SimpleRecord`` (no offset yet)."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int = 0
    headers: tuple[Header, ...] = ()


@attrs.frozen
class Record:
    """A record read from a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


class ControlRecordType(enum.IntEnum):
    """Type field of a control record's key (``ControlRecordType.java``)."""

    ABORT = 0
    COMMIT = 1


# ---------------------------------------------------------------------------------------- build


def _encode_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += b"\x01"  # zig-zag of -1
        return
    if len(data) > INT32_MAX:
        raise ValueError(f"{len(data)} bytes do not fit a record field")
    out += encode_varint(len(data))
    out += data


def _encode_record(record: SimpleRecord, offset_delta: int, base_timestamp: int) -> bytes:
    body = bytearray(b"\x00")  # attributes: unused in v2
    timestamp_delta = record.timestamp - base_timestamp
    if not INT64_MIN <= timestamp_delta <= INT64_MAX:
        raise ValueError(f"timestamp {record.timestamp} is too far from {base_timestamp}")
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    _encode_bytes(body, record.key)
    _encode_bytes(body, record.value)
    body += encode_varint(len(record.headers))
    for header in record.headers:
        _encode_bytes(body, header.key.encode("utf-8"))
        _encode_bytes(body, header.value)
    return encode_varint(len(body)) + body


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    """Encode ``records`` as one v2 batch, offsets ``base_offset`` .. ``+ len(records) - 1``.

    Like Kafka's ``MemoryRecordsBuilder``, ``baseTimestamp`` is the first record's timestamp and
    ``maxTimestamp`` the largest one.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_timestamp = records[0].timestamp
    body = b"".join(
        _encode_record(record, delta, base_timestamp) for delta, record in enumerate(records)
    )
    attributes = int(compression) | (TRANSACTIONAL_MASK if is_transactional else 0)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    return _assemble(
        compress(compression, body) if compression is not CompressionType.NONE else body,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max(record.timestamp for record in records),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )


def _assemble(payload: bytes, **fields: int) -> bytes:
    """Prefix ``payload`` with a header and fill in the CRC32C over attributes..end."""
    header = BatchHeader(
        batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        magic=CURRENT_MAGIC,
        crc=0,
        **fields,
    )
    batch = bytearray(encode_header(header))
    batch += payload
    _UINT32.pack_into(batch, CRC_POS, crc32c.crc32c(memoryview(batch)[ATTRIBUTES_POS:]))
    return bytes(batch)


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    coordinator_epoch: int = 0,
) -> bytes:
    """An end-transaction marker batch (``MemoryRecords.withEndTransactionMarker``).

    Control batches are always transactional; the single record's key is
    ``(version=0, type)`` and its value ``EndTransactionMarker(version=0, coordinatorEpoch)``.
    """
    record = SimpleRecord(
        key=_CONTROL_KEY.pack(CONTROL_RECORD_KEY_VERSION, int(control_type)),
        value=_END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
        timestamp=timestamp,
    )
    return _assemble(
        _encode_record(record, 0, timestamp),
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=CONTROL_MASK | TRANSACTIONAL_MASK,
        last_offset_delta=0,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        records_count=1,
    )


# --------------------------------------------------------------------------------------- decode


def iter_records(
    buf: bytes | bytearray | memoryview, position: int = 0, *, max_bytes: int | None = None
) -> Iterator[Record]:
    """Validate the batch at ``position`` (CRC and every record) and yield its records.

    The whole batch is checked before the first record is returned, so a corrupt batch raises
    ``CorruptRecordError`` here, not half way through the iteration. A compressed batch is
    inflated twice (to check, then to decode) in bounded chunks, never whole; ``max_bytes``
    defaults to ``max_inflated_bytes`` of the batch's size.
    """
    header = validate_batch(buf, position)
    start = position + BATCH_HEADER_SIZE
    payload = memoryview(buf)[start : position + header.size_in_bytes]
    if header.compression is CompressionType.NONE:
        return iter(decode_records(header, payload, position))
    limit = max_inflated_bytes(header.size_in_bytes) if max_bytes is None else max_bytes
    validate_records(header, payload, position, max_bytes=limit)
    return _iter_compressed(header, payload, position, limit)


def _iter_compressed(
    header: BatchHeader, payload: memoryview, position: int, limit: int
) -> Iterator[Record]:
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    try:
        for data, count in iter_record_runs(header, payload, explain_record, max_bytes=limit):
            yield from _decode_data(
                data, count, header.base_offset, header.base_timestamp, log_append_time
            )
    except CorruptRecordError as error:
        raise _at_batch(error, header, position) from error


def validate_records(
    header: BatchHeader, payload: bytes | memoryview, position: int = 0, *, max_bytes: int
) -> None:
    """Check that the records section holds exactly the header's records, without building
    them (Kafka's ``LogValidator`` record walk); a compressed one may inflate to at most
    ``max_bytes``. Raises ``CorruptRecordError`` (``CompressionError``,
    ``InflatedSizeLimitError``) naming the field."""
    try:
        if header.compression is CompressionType.NONE:
            check_uncompressed_records(header, payload, explain_record)
            return
        for _ in iter_record_runs(
            header, payload, explain_record, max_bytes=max_bytes, keep_runs=False
        ):
            pass
    except CorruptRecordError as error:
        raise _at_batch(error, header, position) from error


def decode_records(
    header: BatchHeader,
    payload: bytes | memoryview,
    position: int = 0,
    *,
    max_bytes: int | None = None,
) -> list[Record]:
    """Decode the records section of a batch whose header is ``header``.

    ``position`` is where the batch starts in its file, for error messages. A compressed
    section inflates to at most ``max_bytes`` (default: ``max_inflated_bytes`` of the batch).
    """
    if header.compression is not CompressionType.NONE:
        limit = max_inflated_bytes(header.size_in_bytes) if max_bytes is None else max_bytes
        return list(_iter_compressed(header, memoryview(payload), position, limit))
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    try:
        return _decode_data(
            bytes(payload),
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            log_append_time,
        )
    except CorruptRecordError as error:
        raise _at_batch(error, header, position) from error


def _decode_data(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> list[Record]:
    """Exactly ``count`` records filling ``data``: the fast decoder, or the checked one to
    explain why not (positions relative to ``data``)."""
    args = (data, count, base_offset, base_timestamp, log_append_time)
    fast = _decode_fast(*args)
    if fast is not None:
        return fast
    return _decode_checked(*args)


def _at_batch(error: CorruptRecordError, header: BatchHeader, position: int) -> CorruptRecordError:
    """``error`` (positions relative to the records section) placed in the batch's file."""
    kind = type(error)
    if header.compression is CompressionType.NONE:
        return kind(error.field, error.message, position + BATCH_HEADER_SIZE + error.position)
    if isinstance(error, CompressionError):
        return kind(error.field, error.message, position)
    return kind(
        error.field,
        f"{error.message}, byte {error.position} of the decompressed records",
        position,
    )


def _decode_fast(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> list[Record] | None:
    """Decode ``count`` records, or return None at the first surprise (never raises).

    This is the hot loop of every tool and export, hence one long function: single-byte
    varints (nearly all lengths, deltas and counts) are decoded inline and longer ones by
    ``_varint_rest``; surprises are only detected, the checked decoder explains them.
    """
    records: list[Record] = []
    append = records.append
    make = Record
    end = len(data)
    pos = 0
    try:
        for _ in range(count):
            b = data[pos]
            length, pos = (
                ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint_rest(data, pos + 1, b & 0x7F)
            )
            record_end = pos + length
            if length <= 0 or record_end > end:
                return None
            b = data[pos + 1]  # skip attributes
            timestamp_delta, pos = (
                ((b >> 1) ^ -(b & 1), pos + 2)
                if b < 0x80
                else varint_rest(data, pos + 2, b & 0x7F, 64, 7 * MAX_VARLONG_BYTES)
            )
            b = data[pos]
            offset_delta, pos = (
                ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint_rest(data, pos + 1, b & 0x7F)
            )
            b = data[pos]
            size, pos = (
                ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint_rest(data, pos + 1, b & 0x7F)
            )
            key = data[pos : pos + size] if size >= 0 else None
            pos += size if size > 0 else 0
            if size < -1:
                return None
            b = data[pos]
            size, pos = (
                ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint_rest(data, pos + 1, b & 0x7F)
            )
            value = data[pos : pos + size] if size >= 0 else None
            pos += size if size > 0 else 0
            if size < -1:
                return None
            if data[pos] == 0:  # headersCount 0: the common case
                headers: tuple[Header, ...] = ()
                pos += 1
            else:
                headers, pos = _decode_headers_fast(data, pos, record_end)
            if pos != record_end:
                return None
            timestamp = base_timestamp + timestamp_delta
            append(
                make(
                    base_offset + offset_delta,
                    timestamp if log_append_time is None else log_append_time,
                    key,
                    value,
                    headers,
                )
            )
    except (IndexError, UnicodeDecodeError):
        return None
    if pos != end:
        return None
    return records


def _decode_headers_fast(data: bytes, pos: int, record_end: int) -> tuple[tuple[Header, ...], int]:
    """Headers for ``_decode_fast``: raises IndexError/UnicodeDecodeError at any surprise."""
    b = data[pos]
    count, pos = (
        ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint_rest(data, pos + 1, b & 0x7F)
    )
    if count < 0 or count * 2 > record_end - pos:
        raise IndexError("headersCount")
    headers = []
    for _ in range(count):
        b = data[pos]
        size, pos = (
            ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint_rest(data, pos + 1, b & 0x7F)
        )
        if size < 0 or pos + size > record_end:
            raise IndexError("headerKeyLength")
        key = data[pos : pos + size].decode("utf-8")
        pos += size
        b = data[pos]
        size, pos = (
            ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else varint_rest(data, pos + 1, b & 0x7F)
        )
        if size < -1 or pos + size > record_end:
            raise IndexError("headerValueLength")
        headers.append(Header(key, data[pos : pos + size] if size >= 0 else None))
        pos += size if size > 0 else 0
    return tuple(headers), pos


def _decode_checked(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> list[Record]:
    """Decode with every field checked; positions in errors are relative to ``data``."""
    records: list[Record] = []
    end = len(data)
    pos = 0
    for index in range(count):
        timestamp_delta, offset_delta, key, value, headers, pos = _read_record_checked(
            data, pos, index
        )
        timestamp = base_timestamp + timestamp_delta
        if log_append_time is not None:
            timestamp = log_append_time
        records.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    if pos != end:
        raise CorruptRecordError(
            "records", f"{end - pos} bytes remain after the declared {count} records", pos
        )
    return records


def _read_record_checked(
    data: bytes | bytearray, pos: int, index: int
) -> tuple[int, int, bytes | None, bytes | None, tuple[Header, ...], int]:
    """Record ``index`` at ``pos``, every field checked: ``(timestampDelta, offsetDelta, key,
    value, headers, next position)``."""
    end = len(data)
    if pos >= end:
        raise CorruptRecordError(
            "recordsCount", f"the header declares more records than the {index} present", pos
        )
    start = pos
    length, pos = decode_varint(data, pos, "length")
    if length < 1:
        raise CorruptRecordError("length", f"record length {length} is below 1", start)
    record_end = pos + length
    if record_end > end:
        raise CorruptRecordError(
            "length", f"record of {length} bytes runs {record_end - end} past the end", start
        )
    pos += 1  # attributes
    timestamp_delta, pos = decode_varlong(data, pos, "timestampDelta", record_end)
    offset_delta, pos = decode_varint(data, pos, "offsetDelta", record_end)
    key, pos = _read_bytes(data, pos, "key", record_end)
    value, pos = _read_bytes(data, pos, "value", record_end)
    headers, pos = _decode_headers(data, pos, record_end)
    if pos != record_end:
        raise CorruptRecordError(
            "length", f"record declares {length} bytes but its fields use fewer", start
        )
    return timestamp_delta, offset_delta, key, value, headers, pos


def explain_record(data: bytes | bytearray, pos: int, index: int) -> NoReturn:
    """Raise the ``CorruptRecordError`` for record ``index`` at ``pos``, which a fast walk
    found malformed (``storage.record_walk.Explain``)."""
    _, offset_delta, _, _, _, _ = _read_record_checked(data, pos, index)
    # The record reads back, so the walk refused its offsetDelta: not above the previous
    # record's, or past the batch's lastOffsetDelta (storage.record_walk.py_walk_records).
    raise CorruptRecordError(
        "offsetDelta",
        f"record {index} has offsetDelta {offset_delta}, not above the previous record's "
        "or past the batch's lastOffsetDelta",
        pos,
    )


def _read_bytes(
    data: bytes | bytearray, pos: int, field: str, end: int
) -> tuple[bytes | None, int]:
    """A length-prefixed byte string that must end by ``end`` (-1 = null)."""
    start = pos
    size, pos = decode_varint(data, pos, f"{field}Length", end)
    if size == -1:
        return None, pos
    if size < -1:
        raise CorruptRecordError(f"{field}Length", f"{size} is not a valid length", start)
    if pos + size > end:
        raise CorruptRecordError(
            f"{field}Length", f"{size} bytes run {pos + size - end} past the record", start
        )
    return bytes(data[pos : pos + size]), pos + size


def _decode_headers(
    data: bytes | bytearray, pos: int, record_end: int
) -> tuple[tuple[Header, ...], int]:
    start = pos
    count, pos = decode_varint(data, pos, "headersCount", record_end)
    # Every header takes at least two bytes, which bounds the count before we loop.
    if count < 0 or count * 2 > record_end - pos:
        raise CorruptRecordError("headersCount", f"{count} headers cannot fit the record", start)
    headers: list[Header] = []
    for _ in range(count):
        key_start = pos
        raw_key, pos = _read_bytes(data, pos, "headerKey", record_end)
        if raw_key is None:
            raise CorruptRecordError("headerKeyLength", "header key is null", key_start)
        try:
            key = raw_key.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorruptRecordError("headerKey", f"not UTF-8: {error}", key_start) from error
        value, pos = _read_bytes(data, pos, "headerValue", record_end)
        headers.append(Header(key, value))
    return tuple(headers), pos
