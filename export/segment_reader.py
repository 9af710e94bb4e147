"""Reading one segment file (``<base offset>.log``) into columns of records.

This is the body of one ``pykraft-log`` input split and of the plain-Python baseline in
bench/spark_export.py. It reads the file once, walks its RecordBatch v2 batches, and for each
batch that overlaps the split's offset range checks the CRC32C and decodes its records
(``storage.records.decode_records``: all four Kafka codecs). The read starts where the segment's
offset index (``.index``) says the batch holding the range's start is, or below (as a broker's
Fetch finds it, ``OffsetIndex.lookup``), so an incremental run reads what is new, not the whole
segment; an index entry is trusted only if the batch it points at is there with the offset it
names (else, or with no index, the read starts at byte 0). Batches below the range are
skipped by header alone; the walk stops at the first batch at or past the range's end, so bytes
above the high watermark (possibly a torn tail the broker has not recovered yet) are never read.

Control batches (transaction markers) are skipped, as a Kafka consumer skips them: they are not
records of the topic. A ``read_committed`` split also carries the aborted transactions
overlapping it (planned by ``export.log_scan``); their batches are skipped by header alone, as
``export.isolation.AbortedBatches`` says. Any malformed batch that must be read raises
``SegmentReadError`` naming the file and the byte position.

Columns come out in ``LOG_COLUMNS`` order, in chunks of at most ``MAX_CHUNK_RECORDS`` so one
split never holds a whole 1 GiB segment's records in memory.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import attrs

from pykraft.export.isolation import AbortedBatches
from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.batch_scan import read_batch_header
from pykraft.storage.index import OFFSET_INDEX_SUFFIX
from pykraft.storage.record_batch import (
    BATCH_HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    CorruptRecordError,
    parse_header,
    validate_batch,
)
from pykraft.storage.records import decode_records

# Records per chunk handed to Spark (bounds a split's memory; Arrow batches of this size).
MAX_CHUNK_RECORDS = 8192

# Spark DDL of the pykraft-log rows, in column order (shared with the Spark schema).
LOG_SCHEMA_DDL = (
    "topic STRING NOT NULL, partition INT NOT NULL, offset BIGINT NOT NULL, "
    "timestamp TIMESTAMP NOT NULL, timestamp_type INT NOT NULL, key BINARY, value BINARY, "
    "headers ARRAY<STRUCT<key: STRING, value: BINARY>> NOT NULL, leader_epoch INT NOT NULL, "
    "producer_id BIGINT NOT NULL, producer_epoch INT NOT NULL, is_transactional BOOLEAN NOT NULL"
)
LOG_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "headers",
    "leader_epoch",
    "producer_id",
    "producer_epoch",
    "is_transactional",
)


class SegmentReadError(ValueError):
    """A segment file is unreadable or holds a corrupt batch; names the file and the byte."""

    def __init__(self, path: str, position: int, message: str) -> None:
        super().__init__(f"segment {path} at byte {position}: {message}")
        self.path = path
        self.position = position
        self.message = message


@attrs.frozen(order=True)
class SegmentSplit:
    """One input split: the records of one segment with offsets in [start_offset, end_offset).

    ``end_offset`` None means "to the end of the segment"; ``aborted_txns`` are the aborted
    transactions whose batches to skip (empty under read_uncommitted). Plain values only:
    Spark pickles it.
    """

    path: str
    topic: str
    partition: int
    base_offset: int
    start_offset: int
    end_offset: int | None
    aborted_txns: tuple[AbortedTxn, ...] = attrs.field(default=(), order=False)


@attrs.frozen
class LogRow:
    """One record as a row (the tests' and the baseline's view of ``LOG_COLUMNS``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # milliseconds since the epoch, as Kafka stores it
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    is_transactional: bool


@attrs.define
class SegmentChunk:
    """Columns of up to MAX_CHUNK_RECORDS records of one split (topic/partition are constant)."""

    topic: str
    partition: int
    offset: list[int] = attrs.Factory(list)
    timestamp: list[int] = attrs.Factory(list)
    timestamp_type: list[int] = attrs.Factory(list)
    key: list[bytes | None] = attrs.Factory(list)
    value: list[bytes | None] = attrs.Factory(list)
    headers: list[list[tuple[str, bytes | None]]] = attrs.Factory(list)
    leader_epoch: list[int] = attrs.Factory(list)
    producer_id: list[int] = attrs.Factory(list)
    producer_epoch: list[int] = attrs.Factory(list)
    is_transactional: list[bool] = attrs.Factory(list)

    def __len__(self) -> int:
        return len(self.offset)

    def rows(self) -> Iterator[LogRow]:
        for i in range(len(self.offset)):
            yield LogRow(
                self.topic,
                self.partition,
                self.offset[i],
                self.timestamp[i],
                self.timestamp_type[i],
                self.key[i],
                self.value[i],
                tuple(self.headers[i]),
                self.leader_epoch[i],
                self.producer_id[i],
                self.producer_epoch[i],
                self.is_transactional[i],
            )


_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position (Kafka's OffsetIndex entry)

# Index slots tried at most: the one the search finds, then half its slot number, and so on
# down to slot 0 (enough for any index: a slot number has at most 31 bits).
MAX_INDEX_TRIES = 32


def start_position(fd: int, index_path: Path, base_offset: int, start_offset: int) -> int:
    """A byte position in the segment open as ``fd`` at or below the batch holding
    ``start_offset``: the largest offset index entry at or below it, if the batch there is
    the one the entry names (a broker keys entries by a batch's last offset); else 0.

    The active segment's index is preallocated with zeros past its entries, and a broker may
    be appending to it: an entry after the first with relative offset 0 ends the entries, and
    a torn or stale entry fails the check against the batch (its header and CRC) and is not
    used. After a truncation the entries past the truncation point stay in the file (only the
    broker's count of entries moves back), so the search may land on one of those: then the
    slot half as far in is tried, and so on, down to the valid entries at the front, rather
    than reading the whole segment from byte 0."""
    try:
        index_fd = os.open(index_path, os.O_RDONLY)
    except OSError:
        return 0  # no index (a copied segment, one being deleted): read from the start
    try:
        return _indexed_position(fd, index_fd, base_offset, start_offset)
    finally:
        os.close(index_fd)


def _indexed_position(fd: int, index_fd: int, base_offset: int, start_offset: int) -> int:
    target = start_offset - base_offset
    count = os.fstat(index_fd).st_size // _INDEX_ENTRY.size

    def entry(slot: int) -> tuple[int, int] | None:  # None: past the last entry
        data = os.pread(index_fd, _INDEX_ENTRY.size, slot * _INDEX_ENTRY.size)
        if len(data) < _INDEX_ENTRY.size:
            return None
        offset, position = _INDEX_ENTRY.unpack(data)
        return None if slot and offset <= 0 else (int(offset), int(position))

    low, high, slot = 0, count - 1, -1  # the last entry with relative offset <= target
    while low <= high:
        middle = (low + high) // 2
        probe = entry(middle)
        if probe is not None and probe[0] <= target:
            slot, low = middle, middle + 1
        else:
            high = middle - 1
    file_size = os.fstat(fd).st_size
    for _ in range(MAX_INDEX_TRIES):
        if slot < 0:
            break
        probe = entry(slot)
        usable = probe is not None and probe[0] <= target
        if probe is not None and usable and _batch_is_at(fd, file_size, base_offset, *probe):
            return probe[1]
        slot = slot // 2 if slot else -1
    return 0


def _batch_is_at(fd: int, file_size: int, base_offset: int, relative: int, position: int) -> bool:
    """Whether a whole, CRC-valid batch ending at offset ``base_offset + relative`` starts at
    ``position``."""
    try:
        header = read_batch_header(fd, position, file_size)
        if header.last_offset != base_offset + relative:
            return False
        validate_batch(os.pread(fd, header.size_in_bytes, position))
    except (CorruptRecordError, OSError, ValueError):
        return False
    return True


def _read_from_index(split: SegmentSplit) -> tuple[int, bytes]:
    """The segment's bytes from the start position on, and that position."""
    path = Path(split.path)
    try:
        with path.open("rb") as file:
            first = start_position(
                file.fileno(),
                path.with_suffix(OFFSET_INDEX_SUFFIX),
                split.base_offset,
                split.start_offset,
            )
            file.seek(first)
            return first, file.read()
    except OSError as error:
        raise SegmentReadError(split.path, 0, f"cannot read: {error.strerror}") from None


def read_segment_chunks(split: SegmentSplit) -> Iterator[SegmentChunk]:
    """The split's records as column chunks; raises SegmentReadError on a corrupt batch."""
    first, data = _read_from_index(split)
    chunk = SegmentChunk(split.topic, split.partition)
    aborted = AbortedBatches.of(split.aborted_txns)
    position = 0
    while position < len(data):
        try:
            header = parse_header(data, position)
        except CorruptRecordError as error:
            raise SegmentReadError(split.path, first + error.position, str(error)) from None
        if split.end_offset is not None and header.base_offset >= split.end_offset:
            break
        wanted = header.last_offset >= split.start_offset and not header.is_control
        if wanted and not aborted.holds(header):
            _append_batch(chunk, data, position, split, first)
            if len(chunk) >= MAX_CHUNK_RECORDS:
                yield chunk
                chunk = SegmentChunk(split.topic, split.partition)
        position += header.size_in_bytes
    if len(chunk):
        yield chunk


def _append_batch(
    chunk: SegmentChunk, data: bytes, position: int, split: SegmentSplit, first: int
) -> None:
    """Validate (CRC included) and decode the batch at ``position`` into ``chunk`` (``data``
    starts at byte ``first`` of the segment)."""
    try:
        header = validate_batch(data, position)
        payload = memoryview(data)[position + BATCH_HEADER_SIZE : position + header.size_in_bytes]
        records = decode_records(header, payload, position)
    except CorruptRecordError as error:
        raise SegmentReadError(split.path, first + error.position, str(error)) from None
    timestamp_type = 1 if header.attributes & TIMESTAMP_TYPE_MASK else 0
    epoch, producer_id = header.partition_leader_epoch, header.producer_id
    producer_epoch, transactional = header.producer_epoch, header.is_transactional
    start, end = split.start_offset, split.end_offset
    for record in records:
        if record.offset < start or (end is not None and record.offset >= end):
            continue
        chunk.offset.append(record.offset)
        chunk.timestamp.append(record.timestamp)
        chunk.timestamp_type.append(timestamp_type)
        chunk.key.append(record.key)
        chunk.value.append(record.value)
        chunk.headers.append([(h.key, h.value) for h in record.headers])
        chunk.leader_epoch.append(epoch)
        chunk.producer_id.append(producer_id)
        chunk.producer_epoch.append(producer_epoch)
        chunk.is_transactional.append(transactional)


def read_segment_rows(split: SegmentSplit) -> Iterator[LogRow]:
    """The split's records one row at a time (tests, the plain-Python baseline)."""
    for chunk in read_segment_chunks(split):
        yield from chunk.rows()
