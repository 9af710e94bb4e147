"""Walking the records of a batch without building them, and the bound on inflated bytes.

Why: a batch's header can lie about what follows it (issue 9). Kafka's ``LogValidator`` reads
every record of a client append (``DefaultRecord.readFrom`` through the batch's record
iterator) and rejects a batch whose records disagree with its header: too few records
("Incorrect declared batch size, premature EOF reached"), bytes left after the declared count
("records still remaining"), a record length that runs past the data, varints that are too long
or overflow, fields that do not add up to the record's length — all ``InvalidRecordException``.
This module is that walk, built for the append hot path: it checks lengths, varints and offset
deltas (increasing, within lastOffsetDelta) and allocates nothing per record. When it finds a
problem it only says where; the careful decoder of ``storage.records`` then names the field
(the caller passes it in).

Compressed batches are walked as they inflate (``iter_record_runs``): memory is one inflate
chunk (``storage.compression.DECOMPRESS_CHUNK_BYTES``) plus the largest record, and the inflated
size is capped by ``max_inflated_bytes``:

    limit = MAX_INFLATION_RATIO * max(size of the compressed batch, INFLATION_FLOOR_BYTES)

The limit comes from max.message.bytes through the batch itself: a batch is at most
max.message.bytes (checked first), so a topic's limit is at most 64 x its max.message.bytes
(64 MiB at Kafka's default 1048588). Using the batch's own size rather than the topic's config
means every reader of a stored batch (ListOffsets by timestamp, dump-log, the Spark readers)
computes the same limit without knowing the topic, and lowering max.message.bytes later never
makes accepted data unreadable. 64 is generous for real producers: text and JSON compress 5-20x
with gzip, lz4 or zstd; a 1 MiB run of one repeated log line compresses further, but the 1 MiB
floor gives every batch up to 64 MiB, far past any producer's batch.size (Java's default is
16 KiB, librdkafka's 1 MB). A batch that is all zeros inflates about 1000x with gzip and far more
with zstd: those are the bombs this stops, after at most ``limit`` bytes of inflating.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import NoReturn

from pykraft.storage.compression import InflatedSizeLimitError, iter_inflated
from pykraft.storage.record_batch import BatchHeader, CompressionType, CorruptRecordError
from pykraft.storage.varint import MAX_VARINT_BYTES, MAX_VARLONG_BYTES

try:
    # Named apart from the old 5-argument walk_records so that an extension built before offset
    # gaps were allowed is not called with the new arguments: it falls back to Python instead.
    from pykraft.storage._record_walk import walk_batch_records as _c_walk
except ImportError:  # not built (a plain checkout): the Python walk below does the same
    _c_walk = None  # type: ignore[assignment]

MAX_INFLATION_RATIO = 64
INFLATION_FLOOR_BYTES = 1048588  # Kafka's default max.message.bytes (LogConfig)
# length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headersCount: one
# byte each at least, so a declared record count can be checked before anything is inflated.
MIN_RECORD_BYTES = 7

# ``explain(data, position, index)`` raises the ``CorruptRecordError`` naming what is wrong with
# record ``index`` at ``position`` of ``data`` (the walk only knows that something is).
Explain = Callable[[bytes | bytearray, int, int], NoReturn]


class WalkStatus(enum.Enum):
    DONE = "done"  # the wanted number of records was walked
    NEED_MORE = "need more"  # the record at the position is not wholly in the data yet
    CORRUPT = "corrupt"  # the record at the position is malformed
    TOO_LARGE = "too large"  # the record at the position is longer than allowed


def max_inflated_bytes(batch_size_in_bytes: int) -> int:
    """The most bytes a batch of this (compressed) size may inflate to; see the module doc."""
    return MAX_INFLATION_RATIO * max(batch_size_in_bytes, INFLATION_FLOOR_BYTES)


def varint_rest(
    data: bytes | bytearray | memoryview,
    pos: int,
    unsigned: int,
    bits: int = 32,
    max_shift: int = 7 * MAX_VARINT_BYTES,
) -> tuple[int, int]:
    """Finish a varint (``bits`` 32) or varlong (64) whose first byte had the continue bit.

    Enforces the same limits as ``storage.varint`` (at most 5 or 10 bytes, value fits) so the
    fast walks and the checked decoder accept exactly the same input; IndexError otherwise.
    """
    shift = 7
    while True:
        b = data[pos]
        pos += 1
        unsigned |= (b & 0x7F) << shift
        if b < 0x80:
            if unsigned >> bits:
                raise IndexError("varint overflows")
            return (unsigned >> 1) ^ -(unsigned & 1), pos
        shift += 7
        if shift >= max_shift:
            raise IndexError("varint too long")


_INT_SHIFT = 7 * MAX_VARINT_BYTES
_LONG_SHIFT = 7 * MAX_VARLONG_BYTES
_KEY_AND_VALUE = (0, 1)


def py_walk_records(
    data: bytes | bytearray | memoryview,
    pos: int,
    index: int,
    stop: int,
    max_record_bytes: int,
    last_delta: int,
    max_delta: int,
) -> tuple[WalkStatus, int, int, int]:
    """Walk records ``index`` .. ``stop - 1`` from ``pos``; return ``(status, index, pos,
    last_delta)`` of where the walk ended (the first unwalked record, and the offsetDelta of the
    last walked one). ``pos`` and ``index`` are >= 0; ``last_delta`` is -1 before the first
    record and ``max_delta`` the batch's lastOffsetDelta.

    Every walked record is whole, its fields end exactly at its length, its varints are
    canonical-length and fit their type, and its offsetDelta is above the previous record's and
    at most ``max_delta``. A record's offset is the batch's base offset plus its offsetDelta
    (Kafka's ``DefaultRecord.readFrom``), so deltas may leave gaps: the cleaner's rebuilt batches
    keep their records' offsets (``MemoryRecords.filterTo`` keeps ``lastOffsetDelta`` too). A
    client append has no gaps because ``storage.log_validator`` also requires
    ``lastOffsetDelta + 1 == recordsCount`` (Kafka's "Inconsistent batch offset range"), which
    with increasing deltas leaves exactly ``0 .. count - 1``.

    This is the reference walk: ``storage/_record_walk.c`` is its translation, which
    ``walk_records`` uses when built, and the two must agree on every input. Still one long
    function with single-byte varints inline, as it is the hot loop of every produce without
    the extension.
    """
    end = len(data)
    while index < stop:
        start = pos
        # Varints are read raw: a zig-zag value is negative exactly when its low bit is set,
        # so lengths and sizes are checked and skipped without decoding the sign.
        try:
            b = data[pos]
            if b < 0x80:
                u, pos = b, pos + 1
            elif (c := data[pos + 1]) < 0x80:
                u, pos = (b & 0x7F) | (c << 7), pos + 2
            else:
                length, pos = varint_rest(data, pos + 1, b & 0x7F)
                u = length << 1 if length >= 0 else 1
        except IndexError:
            if end - start < MAX_VARINT_BYTES:
                return WalkStatus.NEED_MORE, index, start, last_delta
            return WalkStatus.CORRUPT, index, start, last_delta
        if u & 1 or u == 0:  # a length below 1
            return WalkStatus.CORRUPT, index, start, last_delta
        length = u >> 1
        if length > max_record_bytes:
            return WalkStatus.TOO_LARGE, index, start, last_delta
        record_end = pos + length
        if record_end > end:
            return WalkStatus.NEED_MORE, index, start, last_delta
        try:
            # attributes (unused in v2), then timestampDelta: only its shape matters here.
            b = data[pos + 1]
            if b < 0x80:
                pos += 2
            elif data[pos + 2] < 0x80:
                pos += 3
            else:
                _, pos = varint_rest(data, pos + 2, b & 0x7F, 64, _LONG_SHIFT)
            b = data[pos]  # offsetDelta, in (last_delta, max_delta]
            if b < 0x80:
                u, pos = b, pos + 1
            elif (c := data[pos + 1]) < 0x80:
                u, pos = (b & 0x7F) | (c << 7), pos + 2
            else:
                offset_delta, pos = varint_rest(data, pos + 1, b & 0x7F)
                u = offset_delta << 1 if offset_delta >= 0 else 1
            # Negative (odd zig-zag) deltas are never above last_delta, which is at least -1.
            if u & 1 or not last_delta < u >> 1 <= max_delta:
                return WalkStatus.CORRUPT, index, start, last_delta
            offset_delta = u >> 1
            for _ in _KEY_AND_VALUE:  # keyLength + key, valueLength + value; -1 is null
                b = data[pos]
                if b < 0x80:
                    if b & 1 and b != 1:
                        return WalkStatus.CORRUPT, index, start, last_delta
                    pos += 1 + (b >> 1 if not b & 1 else 0)
                elif (c := data[pos + 1]) < 0x80:
                    u = (b & 0x7F) | (c << 7)
                    if u & 1 and u != 1:  # u == 1: -1 (null) written in two bytes
                        return WalkStatus.CORRUPT, index, start, last_delta
                    pos += 2 + (u >> 1 if not u & 1 else 0)
                else:
                    size, pos = varint_rest(data, pos + 1, b & 0x7F)
                    if size < -1:
                        return WalkStatus.CORRUPT, index, start, last_delta
                    if size > 0:
                        pos += size
            if data[pos] == 0:  # headersCount 0: the common case
                pos += 1
            else:
                pos = _walk_headers(data, pos, record_end)
        except (IndexError, UnicodeDecodeError):
            return WalkStatus.CORRUPT, index, start, last_delta
        if pos != record_end:
            return WalkStatus.CORRUPT, index, start, last_delta
        index += 1
        last_delta = offset_delta
    return WalkStatus.DONE, index, pos, last_delta


_STATUSES = (WalkStatus.DONE, WalkStatus.NEED_MORE, WalkStatus.CORRUPT, WalkStatus.TOO_LARGE)


def c_walk_records(
    data: bytes | bytearray | memoryview,
    pos: int,
    index: int,
    stop: int,
    max_record_bytes: int,
    last_delta: int,
    max_delta: int,
) -> tuple[WalkStatus, int, int, int]:
    """``py_walk_records`` in C (``storage/_record_walk.c``); only defined to be called when
    ``ACCELERATED``."""
    assert _c_walk is not None, "storage._record_walk is not built"
    code, index, pos, last_delta = _c_walk(
        data, pos, index, stop, max_record_bytes, last_delta, max_delta
    )
    return _STATUSES[code], index, pos, last_delta


# Per 64-record 64 KiB batch the C walk takes about 0.8 us, the Python one about 48 us (a
# quarter of one broker's produce throughput); a checkout never built walks in Python.
ACCELERATED = _c_walk is not None
walk_records = c_walk_records if ACCELERATED else py_walk_records


def _walk_headers(data: bytes | bytearray | memoryview, pos: int, record_end: int) -> int:
    """Past the headers at ``pos``; IndexError/UnicodeDecodeError at any surprise. Header keys
    must be UTF-8 because every reader decodes them (``storage.records.Header``)."""
    b = data[pos]
    if b < 0x80:
        count, pos = (b >> 1) ^ -(b & 1), pos + 1
    else:
        count, pos = varint_rest(data, pos + 1, b & 0x7F, 32, _INT_SHIFT)
    if count < 0 or count * 2 > record_end - pos:
        raise IndexError("headersCount")
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            size, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            size, pos = varint_rest(data, pos + 1, b & 0x7F, 32, _INT_SHIFT)
        if size < 0 or pos + size > record_end:
            raise IndexError("headerKeyLength")
        bytes(data[pos : pos + size]).decode("utf-8")
        pos += size
        b = data[pos]
        if b < 0x80:
            size, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            size, pos = varint_rest(data, pos + 1, b & 0x7F, 32, _INT_SHIFT)
        if size < -1 or pos + size > record_end:
            raise IndexError("headerValueLength")
        if size > 0:
            pos += size
    return pos


def check_uncompressed_records(
    header: BatchHeader, data: bytes | bytearray | memoryview, explain: Explain
) -> None:
    """Raise ``CorruptRecordError`` unless ``data`` holds exactly the header's records. ``data``
    may be a view of the request: the walk copies nothing, only an explanation does."""
    count = header.records_count
    if count * MIN_RECORD_BYTES > len(data):
        raise CorruptRecordError(
            "recordsCount",
            f"{count} records cannot fit {len(data)} bytes (at least {MIN_RECORD_BYTES} each)",
        )
    status, index, pos, _ = walk_records(data, 0, 0, count, len(data), -1, header.last_offset_delta)
    if status is not WalkStatus.DONE:
        explain(bytes(data), pos, index)
    if pos != len(data):
        raise CorruptRecordError(
            "records", f"{len(data) - pos} bytes remain after the declared {count} records", pos
        )


def iter_record_runs(
    header: BatchHeader,
    payload: bytes | memoryview,
    explain: Explain,
    *,
    max_bytes: int,
    keep_runs: bool = True,
) -> Iterator[tuple[bytes, int]]:
    """Inflate a compressed records section and yield ``(data, count)``: runs of whole,
    checked records, in order, ``count`` records each (no runs when ``keep_runs`` is False:
    validation only).

    Raises ``CorruptRecordError`` (positions count inflated bytes), ``CompressionError`` or
    ``InflatedSizeLimitError``; at most ``max_bytes`` are ever inflated, and the buffer holds
    one chunk plus the record being completed.
    """
    assert header.compression is not CompressionType.NONE, "uncompressed: walk the payload"
    count = header.records_count
    if count * MIN_RECORD_BYTES > max_bytes:
        raise InflatedSizeLimitError(
            "recordsCount",
            f"{count} records need at least {count * MIN_RECORD_BYTES} inflated bytes, "
            f"past the limit of {max_bytes}",
        )
    chunks = iter_inflated(header.compression, payload, max_bytes=max_bytes)
    buffer = bytearray()
    dropped = 0  # inflated bytes already walked and let go
    index = pos = 0
    last_delta, max_delta = -1, header.last_offset_delta
    while True:  # each pass takes a new chunk or ends, and the chunks end by max_bytes
        run_start, first = pos, index
        status, index, pos, last_delta = walk_records(
            buffer, pos, index, count, max_bytes, last_delta, max_delta
        )
        if keep_runs and index > first:
            yield bytes(buffer[run_start:pos]), index - first
        if status is WalkStatus.DONE:
            break
        if status is WalkStatus.TOO_LARGE:
            raise InflatedSizeLimitError(
                "length", f"record {index} is longer than the limit of {max_bytes}", dropped + pos
            )
        chunk = next(chunks, None) if status is WalkStatus.NEED_MORE else None
        if chunk is None:
            _explain_at(explain, buffer, pos, index, dropped)
        del buffer[:pos]
        dropped += pos
        pos = 0
        buffer += chunk
    # One more chunk tells whether anything follows; a bomb behind honest records is not
    # inflated further to count it.
    remaining = len(buffer) - pos or len(next(chunks, b""))
    if remaining:
        raise CorruptRecordError(
            "records",
            f"{remaining} or more bytes remain after the declared {count} records",
            dropped + pos,
        )


def _explain_at(
    explain: Explain, buffer: bytearray, pos: int, index: int, dropped: int
) -> NoReturn:
    try:
        explain(buffer, pos, index)
    except CorruptRecordError as error:
        raise CorruptRecordError(error.field, error.message, dropped + error.position) from None
