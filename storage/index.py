"""A segment's sparse offset index and time index (Kafka's ``OffsetIndex`` / ``TimeIndex``).

Both are files of fixed-size big-endian entries, memory-mapped (as Kafka does; a measurement on
this machine gave 0.2 us per mmap append against 0.7 us for ``os.pwrite``, and lookups about
twice as fast). The active segment's index files are made ``segment.index.bytes`` long, sparse
(zeros past the last entry, no blocks behind them: Kafka's ``AbstractIndex`` sizes a new index
with ``RandomAccessFile.setLength``), and trimmed to their entries when the segment rolls or
closes. Blocks are reserved a page at a time just ahead of the entries (see ``_reserve``).

* ``.index``: ``relativeOffset int32, position int32`` — an entry every
  ``index.interval.bytes`` of log, keyed by the last offset of the batch at ``position``.
  ``lookup(offset)`` returns the largest entry <= offset (or ``(base_offset, 0)``); the reader
  then scans batches from that position.
* ``.timeindex``: ``timestamp int64, relativeOffset int32`` — the largest timestamp seen so
  far and the offset of its batch; an entry is only added when the timestamp grows. The last
  slot is reserved for the entry written when the segment rolls (``is_full`` says so early).

The map is made on first use, not at open: CPython's ``mmap`` keeps a dup of the file
descriptor for as long as the map lives (unlike Java's, which Kafka relies on), so mapping both
indexes of every partition at open cost three descriptors per partition and a broker of
10,000 partitions ran out of them (``ulimit -n`` 20,000 here). A partition whose active segment
has no index entry yet (less than ``index.interval.bytes`` written) holds only its ``.log``.
The first entry of an unmapped file is written with ``os.pwrite`` (and fsynced by ``flush``),
the next ones through the map: the first write to a page of a fresh map faults with the GIL
held while the file system fills the page, which serialized closing logs on several threads.

On an existing file the entry count is ``file size // entry size`` (Kafka's rule), so an
untrimmed index left by a crash has a zero tail; ``sanity_check`` catches that (entries must
strictly increase) along with a size that is not a multiple of the entry size and positions
past the end of the log. Recovery then rebuilds the index from the log.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import operator
import os
import struct
from collections.abc import Callable
from pathlib import Path

import attrs

from pykraft.storage.segment_store import MAX_RELATIVE_OFFSET

OFFSET_INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(Exception):
    """An index file fails its sanity check; the segment's indexes must be rebuilt."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"corrupt index {path}: {message}")
        self.path = path
        self.message = message


@attrs.frozen
class OffsetPosition:
    offset: int
    position: int


@attrs.frozen
class TimestampOffset:
    timestamp: int
    offset: int


def _strictly_increasing(values: list[int]) -> bool:
    return all(map(operator.lt, values, values[1:]))


def _non_decreasing(values: list[int]) -> bool:
    return all(map(operator.le, values, values[1:]))


RESERVE_BYTES = 4096  # blocks reserved ahead of the entries: one page (512 offset entries)


def _reserve(fd: int, offset: int, length: int) -> None:
    """Allocate the blocks of ``[offset, offset + length)`` (``posix_fallocate``).

    Entries are written through the memory map, and a write to a page of a sparse file that
    the file system has no room for kills the process with SIGBUS — no ``OSError`` to answer
    KAFKA_STORAGE_ERROR with (measured on a full 1 MiB tmpfs: exit -7). So the file stays
    sparse (as Kafka's) but the page an entry goes to is reserved before the entry is written:
    the first page when the file is made (ENOSPC fails the open or the roll), the next ones
    before an append writes its batch (``ensure_room``). Whole 10 MiB reservations cost 20 MiB
    of disk per partition (200 GB for 10,000; issue 18).
    """
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        # The file system cannot reserve: the file stays sparse.


def _map(fd: int, length: int) -> mmap.mmap:
    """A shared map of ``length`` bytes of ``fd``, without read-ahead: a fault on a page the
    cache lacks would read around it up to the device's ``read_ahead_kb`` (8 MiB on this VM)
    of the sparse file, zero-filled: ~2 ms of system time and 8 MiB of page cache per index.
    Entries go to the end and lookups binary-search, so one page is what a fault needs (issue
    18: produce round-robin over 1,000 partitions spent 4 ms per index append on that)."""
    mapped = mmap.mmap(fd, length)
    mapped.madvise(mmap.MADV_RANDOM)
    return mapped


class _IndexFile:
    """A memory-mapped file of fixed-size entries; subclasses give the entries meaning."""

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entry_size = self.ENTRY.size
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
            if length == 0:
                # A new (or empty) file: its full length, sparse. Kafka: AbstractIndex's
                # constructor, ``raf.setLength(roundDownToExactMultiple(maxIndexSize, ...))``.
                length = self._round_down(max_index_size)
                try:
                    os.ftruncate(fd, length)
                    _reserve(fd, 0, min(length, RESERVE_BYTES))
                except OSError:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, 0)
                    raise
                self.entries = 0
                reserved = min(length, RESERVE_BYTES)
            else:
                self.entries = length // self._entry_size
                reserved = 0  # not known: the first append reserves (a no-op where allocated)
            self._length = length
            self._reserved = reserved  # bytes from the start known to have blocks (_reserve)
            self._mmap: mmap.mmap | None = None  # made by _mapped on first use
            self._written_unmapped = False  # an entry written by _pwrite since the last flush
            self._last: tuple[int, int] | None = None  # the last entry, cached (hot path)
        finally:
            os.close(fd)

    def _mapped(self) -> mmap.mmap:
        """The map of the whole file, made now if it is not yet (see the module docstring)."""
        if self._mmap is None:
            fd = os.open(self.path, os.O_RDWR)
            try:
                self._mmap = _map(fd, self._length)
            finally:
                os.close(fd)
        return self._mmap

    def ensure_room(self, more_entries: int) -> None:
        """Reserve the blocks of the next ``more_entries`` entries (at most to the end of the
        file), a page at a time: an ``OSError`` here, not SIGBUS at the write."""
        end = min(self._length, (self.entries + more_entries) * self._entry_size)
        if end <= self._reserved:
            return
        end = min(self._length, -(-end // RESERVE_BYTES) * RESERVE_BYTES)
        fd = os.open(self.path, os.O_RDWR)
        try:
            _reserve(fd, self._reserved, end - self._reserved)
        finally:
            os.close(fd)
        self._reserved = end

    def _round_down(self, size: int) -> int:
        return size - size % self._entry_size

    @property
    def max_entries(self) -> int:
        return self._length // self._entry_size

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        """Bytes of real entries (the file may be longer while preallocated)."""
        return self.entries * self._entry_size

    def file_size(self) -> int:
        return os.stat(self.path).st_size

    def _unpack(self, slot: int) -> tuple[int, int]:
        assert 0 <= slot < self.entries
        first, second = self.ENTRY.unpack_from(self._mapped(), slot * self._entry_size)
        return int(first), int(second)

    def _pack(self, first: int, second: int) -> None:
        assert self.entries < self.max_entries
        self.ensure_room(1)
        start = self.entries * self._entry_size
        if self._mmap is None and not self._written_unmapped:
            # The file's first entry (or the final time-index entry of a segment closing):
            # written with pwrite, which releases the GIL while the file system fills the
            # page. Through a fresh map that page fault held the GIL, ~2.4 ms a partition,
            # so closing 10,000 logs on several threads was no faster than on one (issue 18).
            # The next entry maps the file (the same page cache: the map sees this one).
            self._pwrite(start, self.ENTRY.pack(first, second))
        else:
            self.ENTRY.pack_into(self._mapped(), start, first, second)
        self.entries += 1
        self._last = (first, second)

    def _pwrite(self, start: int, data: bytes) -> None:
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.pwrite(fd, data, start)
        finally:
            os.close(fd)
        self._written_unmapped = True  # flush fsyncs the file: no msync covers this write

    def _pack_many(self, entries: list[tuple[int, int]]) -> None:
        """``_pack`` each of ``entries``, with one copy into the map."""
        assert self.entries + len(entries) <= self.max_entries
        if not entries:
            return
        self.ensure_room(len(entries))
        pack = self.ENTRY.pack
        start = self.entries * self._entry_size
        data = b"".join([pack(first, second) for first, second in entries])
        self._mapped()[start : start + len(data)] = data
        self.entries += len(entries)
        self._last = entries[-1]

    def _read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the file: from the map if there is one, else read with a
        descriptor closed at once. A broker loading 10,000 partitions reads every time index's
        last entry (its segment's max timestamp) and, after a crash, checks every index:
        mapping them held a descriptor each, past ``ulimit -n`` (issue 18)."""
        if self._mmap is not None:
            return self._mmap[start:end]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.pread(fd, end - start, start)
        finally:
            os.close(fd)

    def _last_raw(self) -> tuple[int, int] | None:
        if self._last is None and self.entries:
            start = (self.entries - 1) * self._entry_size
            first, second = self.ENTRY.unpack(self._read(start, start + self._entry_size))
            self._last = (int(first), int(second))
        return self._last

    def _floor_slot(self, target: int, key: Callable[[int], int]) -> int:
        """The largest slot whose key <= target, or -1 (keys ascend along the slots)."""
        if self.entries == 0 or key(0) > target:
            return -1
        low, high = 0, self.entries - 1
        if key(high) <= target:
            # A follower or a caught-up consumer reads at the log end: past the last entry,
            # answered without the search (~16 us over 2,500 entries; Kafka's AbstractIndex
            # searches its warm tail first for the same reason).
            return high
        while low < high:
            middle = (low + high + 1) // 2
            if key(middle) <= target:
                low = middle
            else:
                high = middle - 1
        return low

    def _first_slot_at_or_above(self, target: int, key: Callable[[int], int]) -> int:
        slot = self._floor_slot(target, key)
        if slot >= 0 and key(slot) == target:
            # Keys may repeat (time index offsets): walk back to the first equal one.
            while slot > 0 and key(slot - 1) == target:
                slot -= 1
            return slot
        return slot + 1

    def _decoded_columns(self) -> tuple[list[int], list[int]]:
        """All entries as two lists (sanity checks: C-speed comparisons over whole columns)."""
        if self.entries == 0:
            return [], []
        raw = self._read(0, self.size_in_bytes)
        firsts, seconds = [], []
        for first, second in self.ENTRY.iter_unpack(raw):
            firsts.append(first)
            seconds.append(second)
        return firsts, seconds

    def _check_length(self) -> None:
        if self._length % self._entry_size:
            raise CorruptIndexError(
                self.path,
                f"size {self._length} is not a multiple of the entry size {self._entry_size}",
            )

    def resize(self, new_size: int) -> None:
        """Grow (sparse) or shrink the file, keeping the entries (Kafka ``resize``)."""
        rounded = max(self._round_down(new_size), self.size_in_bytes)
        if rounded == self._length:
            return
        was_mapped = self._mmap is not None
        self._release_map()
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, rounded)
            self._reserved = min(self._reserved, rounded)
            if was_mapped and rounded:  # stay mapped: flush's msync covers what was written
                self._mmap = _map(fd, rounded)
        finally:
            os.close(fd)
        grew = rounded > self._length
        self._length = rounded
        if grew:
            self.ensure_room(1)  # ENOSPC here, when the segment becomes active again

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes)

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds from scratch), keeping the file's length."""
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        self.entries = min(self.entries, entries)
        self._last = None

    def flush(self) -> None:
        if self._mmap is not None:
            self._mmap.flush()
        if self._written_unmapped:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._written_unmapped = False

    def _release_map(self) -> None:
        # No msync here: unmapping keeps dirty pages in the page cache. Durability is flush().
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def close(self) -> None:
        """Unmap and trim to the real entries (a clean close; unmapped first, so the trim does
        not map the file again)."""
        self._release_map()
        self.trim_to_valid_size()

    def close_handler(self) -> None:
        """Unmap without trimming (log dir offline / simulated crash)."""
        self._release_map()

    def delete(self) -> None:
        self._release_map()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class OffsetIndex(_IndexFile):
    ENTRY = _OFFSET_ENTRY

    def _relative_offset(self, slot: int) -> int:
        return self._unpack(slot)[0]

    def _position(self, slot: int) -> int:
        return self._unpack(slot)[1]

    def _entry(self, slot: int) -> OffsetPosition:
        relative, position = self._unpack(slot)
        return OffsetPosition(self.base_offset + relative, position)

    @property
    def last_offset(self) -> int:
        last = self._last_raw()
        return self.base_offset + last[0] if last else self.base_offset

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET

    def append(self, offset: int, position: int) -> None:
        if self.is_full:
            raise ValueError(f"attempt to append to a full index {self.path}")
        if self.entries and offset <= self.last_offset:
            raise ValueError(
                f"attempt to append offset {offset} to {self.path} at or below the last "
                f"indexed offset {self.last_offset}"
            )
        self._pack(offset - self.base_offset, position)

    def append_many(self, entries: list[tuple[int, int]]) -> None:
        """``append`` each ``(offset, position)`` (ascending) while the index has room: the
        entries of one append, written at once. A full index takes no more (the log rolls)."""
        room = self.max_entries - self.entries
        relative: list[tuple[int, int]] = []
        last = self.last_offset if self.entries else None
        for offset, position in entries[:room]:
            if last is not None and offset <= last:
                raise ValueError(
                    f"attempt to append offset {offset} to {self.path} at or below the last "
                    f"indexed offset {last}"
                )
            relative.append((offset - self.base_offset, position))
            last = offset
        self._pack_many(relative)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= target, else ``(base_offset, 0)``."""
        slot = self._floor_slot(target_offset - self.base_offset, self._relative_offset)
        return self._entry(slot) if slot >= 0 else OffsetPosition(self.base_offset, 0)

    def lookup_by_position(self, target_position: int) -> OffsetPosition | None:
        """The entry with the largest position <= target (a batch boundary), if any."""
        slot = self._floor_slot(target_position, self._position)
        return self._entry(slot) if slot >= 0 else None

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset`` (Kafka ``OffsetIndex.truncateTo``)."""
        slot = self._first_slot_at_or_above(offset - self.base_offset, self._relative_offset)
        self._truncate_to_entries(slot)

    def sanity_check(self, log_size: int) -> None:
        self._check_length()
        offsets, positions = self._decoded_columns()
        if not offsets:
            return
        if offsets[0] < 0:
            raise CorruptIndexError(self.path, f"negative relative offset {offsets[0]}")
        if not _strictly_increasing(offsets):
            raise CorruptIndexError(self.path, "offsets are not strictly increasing")
        if not _strictly_increasing(positions) or positions[0] < 0:
            raise CorruptIndexError(self.path, "positions are not strictly increasing")
        if positions[-1] >= log_size:
            raise CorruptIndexError(
                self.path, f"position {positions[-1]} points past the log's {log_size} bytes"
            )


class TimeIndex(_IndexFile):
    ENTRY = _TIME_ENTRY

    @property
    def is_full(self) -> bool:
        # Kafka reserves the last slot for the entry appended when the segment rolls.
        return self.entries >= self.max_entries - 1

    def _timestamp(self, slot: int) -> int:
        return self._unpack(slot)[0]

    def _relative_offset(self, slot: int) -> int:
        return self._unpack(slot)[1]

    def _entry(self, slot: int) -> TimestampOffset:
        timestamp, relative = self._unpack(slot)
        return TimestampOffset(timestamp, self.base_offset + relative)

    @property
    def last_entry(self) -> TimestampOffset:
        last = self._last_raw()
        if last is None:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(last[0], self.base_offset + last[1])

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append when ``timestamp`` exceeds the last entry's (Kafka ``maybeAppend``)."""
        last = self.last_entry
        if timestamp <= last.timestamp:
            return
        if self.entries and offset < last.offset:
            raise ValueError(
                f"attempt to append offset {offset} to {self.path} below the last "
                f"indexed offset {last.offset}"
            )
        if self.entries >= self.max_entries or (self.is_full and not skip_full_check):
            raise ValueError(f"attempt to append to a full time index {self.path}")
        self._pack(timestamp, offset - self.base_offset)

    def maybe_append_many(self, entries: list[tuple[int, int]]) -> None:
        """``maybe_append`` each ``(timestamp, offset)`` while the index is not full: the
        entries of one append, written at once."""
        last = self.last_entry
        last_timestamp, last_offset = last.timestamp, last.offset
        room = max(0, self.max_entries - 1 - self.entries)  # ``is_full`` keeps the last slot
        kept: list[tuple[int, int]] = []
        for timestamp, offset in entries:
            if timestamp <= last_timestamp:
                continue
            if (self.entries or kept) and offset < last_offset:
                raise ValueError(
                    f"attempt to append offset {offset} to {self.path} below the last "
                    f"indexed offset {last_offset}"
                )
            if len(kept) == room:
                break
            kept.append((timestamp, offset - self.base_offset))
            last_timestamp, last_offset = timestamp, offset
        self._pack_many(kept)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, else ``(NO_TIMESTAMP, base)``."""
        slot = self._floor_slot(target_timestamp, self._timestamp)
        return self._entry(slot) if slot >= 0 else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        slot = self._first_slot_at_or_above(offset - self.base_offset, self._relative_offset)
        self._truncate_to_entries(slot)

    def sanity_check(self, log_size: int) -> None:
        del log_size  # time index entries hold no positions
        self._check_length()
        timestamps, offsets = self._decoded_columns()
        if not offsets:
            return
        if offsets[0] < 0:
            raise CorruptIndexError(self.path, f"negative relative offset {offsets[0]}")
        if not _strictly_increasing(timestamps):
            raise CorruptIndexError(self.path, "timestamps are not strictly increasing")
        if not _non_decreasing(offsets):
            raise CorruptIndexError(self.path, "offsets decrease")
