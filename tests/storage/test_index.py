"""Offset and time indexes (Kafka's OffsetIndexTest / TimeIndexTest behaviour)."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from pathlib import Path

import pytest

from pykraft.storage.index import (
    NO_TIMESTAMP,
    RESERVE_BYTES,
    CorruptIndexError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch

MIB = 1 << 20

MAX_SIZE = 80  # ten offset entries


def offset_index(tmp_path: Path, base: int = 1034, size: int = MAX_SIZE) -> OffsetIndex:
    return OffsetIndex(tmp_path / f"{base:020d}.index", base, size)


def time_index(tmp_path: Path, base: int = 0, size: int = 12 * 5) -> TimeIndex:
    return TimeIndex(tmp_path / f"{base:020d}.timeindex", base, size)


# ------------------------------------------------------------------ offset index


def test_new_index_is_preallocated_and_empty(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    assert index.entries == 0
    assert index.file_size() == MAX_SIZE
    assert index.max_entries == 10


def test_lookup_returns_the_floor_entry(tmp_path: Path) -> None:
    # Kafka's documentation example: offset 1041 of segment 1034 is found via the entry for
    # 1039 at position 1000, then a scan of the log from there.
    index = offset_index(tmp_path)
    index.append(1036, 500)
    index.append(1039, 1000)
    index.append(1045, 2000)
    assert index.lookup(1041) == OffsetPosition(1039, 1000)
    assert index.lookup(1039) == OffsetPosition(1039, 1000)
    assert index.lookup(1045) == OffsetPosition(1045, 2000)
    assert index.lookup(9999) == OffsetPosition(1045, 2000)


def test_lookup_below_the_first_entry_is_the_segment_start(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    assert index.lookup(1040) == OffsetPosition(1034, 0)
    index.append(1039, 1000)
    assert index.lookup(1035) == OffsetPosition(1034, 0)


def test_lookup_by_position_finds_a_batch_boundary(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(1036, 500)
    index.append(1039, 1000)
    assert index.lookup_by_position(999) == OffsetPosition(1036, 500)
    assert index.lookup_by_position(1000) == OffsetPosition(1039, 1000)
    assert index.lookup_by_position(499) is None


def test_append_must_increase_the_offset(tmp_path: Path) -> None:
    # Kafka OffsetIndex.append throws InvalidOffsetException for offset <= last offset.
    index = offset_index(tmp_path)
    index.append(1040, 100)
    with pytest.raises(ValueError, match="at or below"):
        index.append(1040, 200)


def test_append_to_a_full_index_fails(tmp_path: Path) -> None:
    index = offset_index(tmp_path, size=16)
    index.append(1035, 10)
    index.append(1036, 20)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.append(1037, 30)


def test_truncate_to_removes_entries_at_and_above(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for offset, position in [(1036, 100), (1040, 200), (1044, 300)]:
        index.append(offset, position)
    index.truncate_to(1040)
    assert index.entries == 1
    assert index.last_offset == 1036
    index.truncate_to(1041)  # nothing at or above 1041 is left
    assert index.entries == 1
    index.truncate_to(1000)
    assert index.entries == 0
    assert index.last_offset == 1034


def test_close_trims_and_reopen_keeps_entries(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(1036, 100)
    index.append(1040, 200)
    index.close()
    assert (tmp_path / f"{1034:020d}.index").stat().st_size == 16
    again = offset_index(tmp_path)
    assert again.entries == 2
    assert again.lookup(1041) == OffsetPosition(1040, 200)
    again.resize(MAX_SIZE)  # made active again: room for more
    again.append(1050, 300)
    assert again.entries == 3


def test_sanity_check_accepts_a_good_index(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(1036, 100)
    index.append(1040, 200)
    index.sanity_check(log_size=300)


def test_sanity_check_rejects_a_size_that_is_not_a_multiple(tmp_path: Path) -> None:
    path = tmp_path / f"{1034:020d}.index"
    path.write_bytes(b"\x00\x00\x00\x02\x00\x00\x00\x10\x00\x00")
    with pytest.raises(CorruptIndexError, match="not a multiple"):
        OffsetIndex(path, 1034, MAX_SIZE).sanity_check(log_size=1000)


def test_sanity_check_rejects_entries_out_of_order(tmp_path: Path) -> None:
    path = tmp_path / f"{1034:020d}.index"
    path.write_bytes((5).to_bytes(4, "big") + (100).to_bytes(4, "big") + bytes(8))
    with pytest.raises(CorruptIndexError, match="strictly increasing"):
        OffsetIndex(path, 1034, MAX_SIZE).sanity_check(log_size=1000)


def test_sanity_check_rejects_a_position_past_the_log(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(1036, 100)
    index.append(1040, 900)
    with pytest.raises(CorruptIndexError, match="past the log"):
        index.sanity_check(log_size=900)


def test_untrimmed_index_after_a_crash_fails_the_sanity_check(tmp_path: Path) -> None:
    # Kafka counts file size / entry size as entries: a preallocated file left by a crash has
    # a zero tail, which breaks the ordering.
    index = offset_index(tmp_path)
    index.append(1036, 100)
    index.close_handler()
    reopened = offset_index(tmp_path)
    assert reopened.entries == 10
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check(log_size=1000)


# ------------------------------------------------------------------ time index


def test_time_index_only_appends_larger_timestamps(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(100, 3)
    index.maybe_append(100, 5)  # same timestamp: skipped
    index.maybe_append(90, 6)  # smaller: skipped
    index.maybe_append(120, 8)
    assert index.entries == 2
    assert index.last_entry == TimestampOffset(120, 8)


def test_time_index_lookup(tmp_path: Path) -> None:
    index = time_index(tmp_path, base=10)
    index.maybe_append(100, 13)
    index.maybe_append(200, 20)
    assert index.lookup(50) == TimestampOffset(NO_TIMESTAMP, 10)
    assert index.lookup(100) == TimestampOffset(100, 13)
    assert index.lookup(199) == TimestampOffset(100, 13)
    assert index.lookup(500) == TimestampOffset(200, 20)


def test_time_index_reserves_its_last_slot_for_the_roll(tmp_path: Path) -> None:
    # Kafka TimeIndex.isFull: entries >= maxEntries - 1.
    index = time_index(tmp_path, size=36)  # three slots
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(3, 3)
    index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3


def test_time_index_truncate_to(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(100, 3)
    index.maybe_append(200, 7)
    index.truncate_to(7)
    assert index.last_entry == TimestampOffset(100, 3)


def test_time_index_sanity_check_rejects_decreasing_timestamps(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}.timeindex"
    entry = (200).to_bytes(8, "big") + (1).to_bytes(4, "big")
    older = (100).to_bytes(8, "big") + (2).to_bytes(4, "big")
    path.write_bytes(entry + older)
    with pytest.raises(CorruptIndexError, match="timestamps"):
        TimeIndex(path, 0, 120).sanity_check(log_size=1000)


def test_time_index_sanity_check_rejects_a_wrong_size(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}.timeindex"
    path.write_bytes(bytes(13))
    with pytest.raises(CorruptIndexError, match="not a multiple"):
        TimeIndex(path, 0, 120).sanity_check(log_size=1000)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_an_index_holds_a_descriptor_only_once_it_has_entries(tmp_path: Path) -> None:
    # CPython's mmap keeps a dup of the descriptor while mapped: with the map made at open, a
    # broker of 10,000 partitions needed three descriptors each and hit `ulimit -n`.
    before = open_descriptors()
    indexes = [offset_index(tmp_path, base) for base in range(0, 2000, 100)]
    times = [time_index(tmp_path, base) for base in range(0, 2000, 100)]
    assert open_descriptors() == before
    for index in indexes:
        index.append(index.base_offset + 5, 100)
    # The first entry goes by pwrite (a page fault through a fresh map holds the GIL); the
    # second maps the file.
    assert open_descriptors() == before
    for index in indexes:
        index.append(index.base_offset + 8, 200)
    assert open_descriptors() == before + len(indexes)
    assert [index.lookup(index.base_offset + 7) for index in indexes[:2]] == [
        OffsetPosition(5, 100),
        OffsetPosition(105, 100),
    ]
    for opened in (*indexes, *times):
        opened.close()
    assert open_descriptors() == before
    assert [offset_index(tmp_path, base).entries for base in (0, 100)] == [2, 2]  # trimmed


# ------------------------------------------------------------------ sparse files


def allocated_bytes(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_a_new_partitions_index_files_are_sparse(tmp_path: Path) -> None:
    # Kafka sizes a new index with RandomAccessFile.setLength: the file is segment.index.bytes
    # long with no blocks behind it. Reserving both whole cost 20 MiB of disk per partition.
    config = LogConfig()  # segment.index.bytes 10 MiB
    log = PartitionLog.open(tmp_path / "orders-0", config)
    log.append_as_leader(
        bytearray(build_batch([SimpleRecord(b"v", timestamp=1)])), leader_epoch=0, now_ms=0
    )
    for suffix, entry_size in ((".index", 8), (".timeindex", 12)):
        (path,) = log.directory.glob(f"*{suffix}")
        assert path.stat().st_size == config.segment_index_bytes // entry_size * entry_size
        assert allocated_bytes(path) <= 8192  # the first page only (a file system block or two)
    log.local_log.close()  # trimmed to the entries: the time index keeps the max timestamp
    assert [p.stat().st_size for p in sorted(log.directory.glob("*index"))] == [0, 12]


def cached_pages(path: Path) -> int:
    """Pages of ``path`` in the page cache (``mincore`` over a map of it, which faults none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    vector = (ctypes.c_ubyte * pages)()
    with path.open("r+b") as file, mmap.mmap(file.fileno(), size) as mapped:
        start = ctypes.c_char.from_buffer(mapped)
        try:
            if libc.mincore(ctypes.c_void_p(ctypes.addressof(start)), size, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            del start  # the map cannot close while ctypes holds its buffer
    return sum(byte & 1 for byte in vector)


def test_index_pages_are_faulted_in_one_at_a_time(tmp_path: Path) -> None:
    # A fault on an index page read around it up to the device's read_ahead_kb (8 MiB on the
    # CI machine) of the sparse file: ~2 ms of system time and 8 MiB of cache per index, and
    # with 1,000 partitions every append faulted again as those zero pages were evicted.
    index = offset_index(tmp_path, base=0, size=10 * MIB)
    per_page = RESERVE_BYTES // 8
    index.append_many([(n, n * 10) for n in range(per_page + 1)])  # two pages
    assert index.lookup(per_page) == OffsetPosition(per_page, per_page * 10)
    assert cached_pages(index.path) <= 4
    index.close()


def test_an_entry_past_the_reserved_pages_needs_its_blocks_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write through the map into a hole the disk has no room for is SIGBUS, so the page an
    # entry goes to is reserved before: a full disk is an OSError and the index is unchanged.
    index = offset_index(tmp_path, base=0, size=MIB)
    per_page = RESERVE_BYTES // 8
    index.append_many([(n, n * 10) for n in range(per_page)])  # fills the first page
    assert allocated_bytes(index.path) <= 8192

    def no_room(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(os, "posix_fallocate", no_room)
        with pytest.raises(OSError, match="No space"):
            index.append(per_page, per_page * 10)
        with pytest.raises(OSError, match="No space"):
            index.ensure_room(1)
    assert index.entries == per_page
    index.append(per_page, per_page * 10)
    assert index.lookup(per_page) == OffsetPosition(per_page, per_page * 10)
    assert RESERVE_BYTES < allocated_bytes(index.path) < MIB
    index.close()


def test_a_reopened_index_answers_its_last_entry_and_checks_without_a_descriptor(
    tmp_path: Path,
) -> None:
    # A broker restarting with 10,000 partitions reads every time index's last entry and,
    # after a crash, sanity-checks every index: a map for that held a descriptor each.
    index, times = offset_index(tmp_path, base=0), time_index(tmp_path, base=0)
    index.append(5, 100)
    times.maybe_append(1000, 5)
    index.close()
    times.close()
    before = open_descriptors()
    index, times = offset_index(tmp_path, base=0), time_index(tmp_path, base=0)
    assert (index.last_offset, times.last_entry) == (5, TimestampOffset(1000, 5))
    index.sanity_check(log_size=200)
    times.sanity_check(log_size=200)
    assert open_descriptors() == before
    assert index.lookup(7) == OffsetPosition(5, 100)  # a lookup maps the file
    assert open_descriptors() == before + 1
    index.close()


def test_a_first_entry_written_unmapped_is_read_back_and_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first entry is written with pwrite, not through a map: a flush must fsync the file
    # (no msync covers that write), and the map made for the second entry must see the first.
    index = time_index(tmp_path, 0)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    index.maybe_append(1000, 3)
    index.flush()
    assert synced == [str(index.path)]
    index.flush()
    assert synced == [str(index.path)]  # once per unmapped write
    index.maybe_append(2000, 9)
    assert index.lookup(1500) == TimestampOffset(1000, 3)
    assert index.lookup(2500) == TimestampOffset(2000, 9)
    index.close()
    assert time_index(tmp_path, 0).last_entry == TimestampOffset(2000, 9)
