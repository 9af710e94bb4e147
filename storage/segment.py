"""One log segment: ``<base offset>.log`` of batches plus its ``.index``, ``.timeindex`` and
``.txnindex`` (aborted transactions, ``storage.transaction_index``; created by its first entry).

Theory of operation (Kafka's ``LogSegment``): batches are appended byte-for-byte at the end of
the ``.log`` file. After more than ``index.interval.bytes`` of log since the last index entry,
the next batch gets an offset-index entry ``(its last offset, its position)`` and the time index
records the largest timestamp so far. Finding an offset takes the index's floor entry and scans
batch headers forward from its position (only headers are read; bodies stay on disk). Reads
return a ``FileSlice`` of whole batches. ``recover`` re-validates every batch (CRC included),
rebuilds both indexes, empties the transaction index (the log writes it again from the batches)
and cuts the file at the first invalid batch.

The segment does no policy: ``should_roll`` (a pure function) decides when the log rolls, and
``PartitionLog`` decides what to append, read, truncate and delete.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs

from pykraft.storage.aborted_txn import TXN_INDEX_SUFFIX, AbortedTxn
from pykraft.storage.batch_scan import iter_valid_batches, read_batch_header
from pykraft.storage.file_slice import FileSlice, file_id_of
from pykraft.storage.index import (
    NO_TIMESTAMP,
    OFFSET_INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    OffsetIndex,
    TimeIndex,
    TimestampOffset,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.record_batch import BatchHeader, CorruptRecordError
from pykraft.storage.records import iter_records
from pykraft.storage.segment_store import MAX_RELATIVE_OFFSET, AppendedBatch
from pykraft.storage.transaction_index import TransactionIndex

LOG_SUFFIX = ".log"
CLOSED_FD = -1  # os calls on it fail with EBADF
# Where the last few reads ended: each read's next offset and the batch boundary it starts at.
MAX_READ_HINTS = 8


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_base_offset(name: str, suffix: str) -> int | None:
    """The base offset of a ``<20 digits><suffix>`` file name, else None."""
    stem = name.removesuffix(suffix)
    if stem == name or len(stem) != 20 or not stem.isascii() or not stem.isdigit():
        return None
    return int(stem)


@attrs.frozen
class BatchLocation:
    position: int
    header: BatchHeader


@attrs.frozen
class SegmentRead:
    """Whole batches ``[first batch containing the offset, next_offset)`` of one segment."""

    slice: FileSlice
    start_position: int
    next_offset: int


@attrs.frozen
class RecoverResult:
    truncated_bytes: int
    next_offset: int
    error: str | None  # why the scan stopped early, if it did


class LogSegment:
    # Invariant: batches in the file are in increasing offset order, each starting at or
    # after the previous one's next offset and at or after base_offset: a cleaned segment
    # has gaps where records went, and a follower's segment may start past a gap in the
    # leader's offsets. size == bytes of whole batches.

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> None:
        self.base_offset = base_offset
        self.config = config
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.offset_index_path = directory / segment_file_name(base_offset, OFFSET_INDEX_SUFFIX)
        self.time_index_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        self.txn_index_path = directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        # Which file this segment is, for the slices it cuts (storage.file_slice): the path may
        # later name another file (a cleaner swap, a re-created segment); truncation keeps it.
        self.file_id = file_id_of(self._fd)
        self.created_ms = now_ms
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._txn_index: TransactionIndex | None = None
        self._max_timestamp: TimestampOffset | None = None  # loaded lazily from the time index
        self._rolling_timestamp: int | None = None  # first batch's max timestamp
        self._bytes_since_last_index_entry = 0
        # {next offset of a recent read: the position it starts at} (at most MAX_READ_HINTS).
        # Followers read on from where their last read ended, mostly into the batch appended
        # since: ``translate_offset`` starts there rather than scanning from the offset index's
        # floor entry (5 headers read for a follower's newest 1 KiB batch, issue 18). Every
        # batch before that position holds smaller offsets, and only truncation rewrites bytes
        # already written: it drops the hints.
        self._read_hints: dict[int, int] = {}

    # ------------------------------------------------------------------ indexes

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(
                self.offset_index_path, self.base_offset, self.config.segment_index_bytes
            )
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = TimeIndex(
                self.time_index_path, self.base_offset, self.config.segment_index_bytes
            )
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        if self._txn_index is None:
            self._txn_index = TransactionIndex(self.txn_index_path, self.base_offset)
        return self._txn_index

    @property
    def aborted_txns(self) -> Sequence[AbortedTxn]:
        return self.txn_index.entries

    def update_txn_index(self, entry: AbortedTxn) -> None:
        """Kafka ``LogSegment.updateTxnIndex``: index an aborted transaction."""
        self.txn_index.append(entry)

    def _close_fd(self) -> None:
        """Close the ``.log`` fd once; later use fails with EBADF instead of reaching
        whatever file reuses the descriptor number (a log dir that went offline)."""
        if self._fd != CLOSED_FD:
            fd, self._fd = self._fd, CLOSED_FD
            os.close(fd)

    def open_indexes(self) -> None:
        """Create (and reserve room for) both index files now, so that ENOSPC fails here —
        an open or a roll — rather than after a batch was written."""
        _ = self.offset_index, self.time_index

    def discard(self) -> None:
        """Remove a segment that never held data (a roll that failed): best effort."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close_handler()
        self._close_fd()
        for path in (
            self.log_path,
            self.offset_index_path,
            self.time_index_path,
            self.txn_index_path,
        ):
            with contextlib.suppress(OSError):
                path.unlink()

    def sanity_check(self) -> None:
        """Raise CorruptIndexError (or FileNotFoundError) when the indexes need rebuilding."""
        for path in (self.offset_index_path, self.time_index_path):
            if not path.exists():
                raise FileNotFoundError(f"index file {path} is missing")
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check(self.size)
        self.txn_index.sanity_check()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        if self._max_timestamp is None:
            self._max_timestamp = self.time_index.last_entry
        return self._max_timestamp

    def largest_timestamp_ms(self) -> int:
        """What time retention compares (Kafka ``largestTimestamp``): mtime without records."""
        timestamp = self.max_timestamp_so_far.timestamp
        return timestamp if timestamp >= 0 else int(os.stat(self.log_path).st_mtime * 1000)

    def time_waited_for_roll_ms(self, now_ms: int, max_timestamp_in_messages: int) -> int:
        """Kafka ``timeWaitedForRoll``: by record time once the segment has a batch."""
        if self._rolling_timestamp is None and self.size > 0:
            self._rolling_timestamp = self._read_header(0).max_timestamp
        if self._rolling_timestamp is not None and self._rolling_timestamp >= 0:
            return max_timestamp_in_messages - self._rolling_timestamp
        return now_ms - self.created_ms

    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    # ------------------------------------------------------------------ append

    def append(
        self, buffer: bytes | bytearray | memoryview, batches: Sequence[AppendedBatch]
    ) -> None:
        """Write ``buffer`` (whole batches, offsets already assigned) at the end of the file.

        A failed write (``OSError``) is cut back off the file and changes nothing else.
        """
        physical_position = self.size
        # Before the write: a failure must leave no batch behind. A batch adds at most one
        # entry to each index; their pages are reserved now (index.py, ``_reserve``).
        self.offset_index.ensure_room(len(batches))
        self.time_index.ensure_room(len(batches))
        try:
            _write_fully(self._fd, memoryview(buffer), physical_position)
        except OSError:
            # ENOSPC or EIO part-way: cut what was written so no torn batch stays behind.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, physical_position)
            raise
        if physical_position == 0 and batches:
            self._rolling_timestamp = batches[0].max_timestamp
        self.size += len(buffer)
        self._index_batches(batches, physical_position)

    def _index_batches(self, batches: Sequence[AppendedBatch], physical_position: int) -> None:
        """``_after_batch`` for every batch of one append, the index entries written in bulk
        (a fetch of many small batches adds one entry per ``index.interval.bytes``)."""
        best = self.max_timestamp_so_far
        best_timestamp, best_offset = best.timestamp, best.offset
        interval = self.config.index_interval_bytes
        since = self._bytes_since_last_index_entry
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        for batch in batches:
            if batch.max_timestamp > best_timestamp:
                best_timestamp, best_offset = batch.max_timestamp, batch.last_offset
            if since > interval:
                offset_entries.append((batch.last_offset, physical_position + batch.position))
                time_entries.append((best_timestamp, best_offset))
                since = 0
            since += batch.size
        self._bytes_since_last_index_entry = since
        if best_timestamp > best.timestamp:
            self._max_timestamp = TimestampOffset(best_timestamp, best_offset)
        if offset_entries:
            self.offset_index.append_many(offset_entries)
            self.time_index.maybe_append_many(time_entries)

    def _after_batch(self, last_offset: int, max_timestamp: int, position: int, size: int) -> None:
        """Track the max timestamp and add index entries every index.interval.bytes."""
        if max_timestamp > self.max_timestamp_so_far.timestamp:
            self._max_timestamp = TimestampOffset(max_timestamp, last_offset)
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            if not self.offset_index.is_full:
                self.offset_index.append(last_offset, position)
            if not self.time_index.is_full:
                latest = self.max_timestamp_so_far
                self.time_index.maybe_append(latest.timestamp, latest.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    # ------------------------------------------------------------------ read

    def _read_header(self, position: int) -> BatchHeader:
        return read_batch_header(self._fd, position, self.size)

    def iter_headers(
        self, start_position: int = 0, end_position: int | None = None
    ) -> Iterator[BatchLocation]:
        """Headers of the batches from ``start_position`` (a batch boundary) on."""
        end = self.size if end_position is None else end_position
        position = start_position
        while position < end:
            header = self._read_header(position)
            yield BatchLocation(position, header)
            position += header.size_in_bytes

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchLocation | None:
        """The first batch whose last offset >= ``offset`` (Kafka ``translateOffset``)."""
        start = self._read_hints.get(offset)
        if start is None:
            start = self.offset_index.lookup(offset).position
        for location in self.iter_headers(max(start, starting_position)):
            if location.header.last_offset >= offset:
                return location
        return None

    def read(
        self, start_offset: int, max_bytes: int, max_position: int, min_one_batch: bool
    ) -> SegmentRead | None:
        """Whole batches from the one holding ``start_offset``, ending at or before
        ``max_position`` and within ``max_bytes`` (the first batch regardless of
        ``max_bytes`` when ``min_one_batch``). None when no batch holds an offset >= start."""
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        start = first.position
        limit = min(max_position, start + max_bytes)
        if min_one_batch:
            limit = max(limit, min(max_position, start + first.header.size_in_bytes))
        end, next_offset = self._whole_batches_end(first, limit)
        if len(self._read_hints) >= MAX_READ_HINTS:
            self._read_hints.clear()
        self._read_hints[next_offset] = end
        piece = FileSlice(self.log_path, start, end - start, self.file_id)
        return SegmentRead(piece, start, next_offset)

    def _whole_batches_end(self, first: BatchLocation, limit: int) -> tuple[int, int]:
        """Extend from ``first`` over whole batches ending at or before ``limit``."""
        end, next_offset = first.position, first.header.base_offset
        # Jump over most batches with the index: an entry's position starts a whole batch. Less
        # than an index interval from ``first``, the index has at most one entry to offer.
        jump = None
        if limit - end > self.config.index_interval_bytes:
            jump = self.offset_index.lookup_by_position(limit)
        if jump is not None and jump.position > end:
            end = jump.position
            next_offset = self._read_header(end).base_offset
        elif end + first.header.size_in_bytes > limit:
            return end, next_offset
        else:  # ``first``'s header is read already
            end, next_offset = end + first.header.size_in_bytes, first.header.next_offset
        for location in self.iter_headers(end, self.size):
            batch_end = location.position + location.header.size_in_bytes
            if batch_end > limit:
                break
            end, next_offset = batch_end, location.header.next_offset
        return end, next_offset

    def read_next_offset(self) -> int:
        """The offset after the last batch, or the base offset when empty."""
        next_offset = self.base_offset
        floor = self.offset_index.lookup(self.offset_index.last_offset)
        for location in self.iter_headers(floor.position):
            next_offset = location.header.next_offset
        return next_offset

    def read_batch(self, location: BatchLocation) -> bytes:
        return os.pread(self._fd, location.header.size_in_bytes, location.position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``timestamp`` whose offset
        >= ``starting_offset`` (Kafka ``findOffsetByTimestamp``; decodes one batch)."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for location in self.iter_headers(position):
            header = location.header
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            for record in iter_records(self.read_batch(location)):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        return None

    # ------------------------------------------------------------------ recovery and truncation

    def recover(self, on_batch: Callable[[BatchHeader], None]) -> RecoverResult:
        """Re-validate every batch, rebuild both indexes, cut the file at the first bad batch.

        ``on_batch`` sees each valid batch in order (epoch cache and producer state replay).
        """
        self.resize_indexes(self.config.segment_index_bytes)
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._max_timestamp = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        self._bytes_since_last_index_entry = 0
        valid_bytes, next_offset, error = 0, self.base_offset, None
        try:
            for position, header in iter_valid_batches(self._fd, self.size):
                if header.base_offset < next_offset:
                    # Offsets only increase; compaction leaves gaps (Kafka checks no more).
                    raise CorruptRecordError(
                        "baseOffset", f"{header.base_offset}, expected {next_offset}", position
                    )
                if header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    raise CorruptRecordError("lastOffsetDelta", "overflows the segment", position)
                self._after_batch(
                    header.last_offset, header.max_timestamp, position, header.size_in_bytes
                )
                on_batch(header)
                valid_bytes, next_offset = position + header.size_in_bytes, header.next_offset
        except CorruptRecordError as corrupt:
            error = str(corrupt)
        truncated = self.size - valid_bytes
        if truncated:
            self._truncate_file(valid_bytes)
        self._rolling_timestamp = None
        # Like a clean roll, end with the segment's largest timestamp, then trim (Kafka).
        self.on_become_inactive()
        return RecoverResult(truncated, next_offset, error)

    def truncate_to(self, offset: int) -> int:
        """Drop every batch holding an offset >= ``offset``; returns the bytes removed.

        A batch that straddles ``offset`` goes whole, so the segment may end below it.
        """
        location = self.translate_offset(offset)
        # The (possibly trimmed) indexes of a segment that becomes active get room again.
        self.resize_indexes(self.config.segment_index_bytes)
        self.txn_index.truncate_to(offset)
        if location is None:
            return 0
        self.offset_index.truncate_to(location.header.base_offset)
        self.time_index.truncate_to(location.header.base_offset)
        truncated = self.size - location.position
        self._truncate_file(location.position)
        self._bytes_since_last_index_entry = 0
        self._rolling_timestamp = None
        self._max_timestamp = self._largest_timestamp_after_index()
        return truncated

    def _largest_timestamp_after_index(self) -> TimestampOffset:
        """Kafka ``loadLargestTimestamp``: the time index's last entry, then scan past it."""
        best = self.time_index.last_entry
        position = self.offset_index.lookup(best.offset).position
        for location in self.iter_headers(position):
            if location.header.max_timestamp > best.timestamp:
                best = TimestampOffset(location.header.max_timestamp, location.header.last_offset)
        return best

    def _truncate_file(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self.size = size
        self._read_hints.clear()

    # ------------------------------------------------------------------ lifecycle

    def on_become_inactive(self) -> None:
        """On roll: record the final max timestamp and trim the indexes to their entries."""
        latest = self.max_timestamp_so_far
        self.time_index.maybe_append(latest.timestamp, latest.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def file_paths(self) -> tuple[Path, ...]:
        """Its four files: what ``flush`` syncs, for a flush off the loop by name."""
        return (self.log_path, self.offset_index_path, self.time_index_path, self.txn_index_path)

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        if self._txn_index is not None:
            self._txn_index.flush()

    def close(self) -> None:
        """Clean close: final time-index entry, trimmed indexes, fd released."""
        latest = self.max_timestamp_so_far
        if latest.timestamp >= 0:
            self.time_index.maybe_append(latest.timestamp, latest.offset, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self._close_fd()

    def close_handler(self) -> None:
        """Release fds and maps without writing anything (crash simulation, dir offline)."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close_handler()
        self._close_fd()

    def delete(self) -> None:
        """Close and remove all four files."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self._close_fd()
        with contextlib.suppress(FileNotFoundError):
            self.log_path.unlink()


def _write_fully(fd: int, data: memoryview, position: int) -> None:
    while data:
        written = os.pwrite(fd, data, position)
        data = data[written:]
        position += written
