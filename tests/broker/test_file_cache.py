"""broker/file_cache.py: the listener's bounded cache of open segment files (moved out of
test_network.py, which tests the listener itself)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pykraft.broker.file_cache import OpenFileCache
from pykraft.storage.file_slice import FileSlice, StaleFileSliceError, file_id_of
from pykraft.storage.log_config import LogConfig
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.segment import LOG_SUFFIX, LogSegment, segment_file_name


class TestOpenFileCache:
    def test_reuses_an_open_file_per_path(self, tmp_path: Path) -> None:
        path = tmp_path / "a.log"
        path.write_bytes(b"abc")
        cache = OpenFileCache()
        with cache.open(path) as first, cache.open(path) as second:
            assert first is second
        cache.close()
        assert first.closed

    def test_a_recreated_path_is_reopened(self, tmp_path: Path) -> None:
        path = tmp_path / "a.log"
        path.write_bytes(b"old")
        cache = OpenFileCache()
        with cache.open(path) as old:
            path.unlink()
            path.write_bytes(b"new")  # e.g. truncate_fully_and_start_at recreated the segment
            with cache.open(path) as new:
                assert new.read() == b"new"
            assert not old.closed  # still in use by the first sender
        assert not old.closed  # superseded: kept for slices cut from it, file.delete.delay.ms
        with cache.open(path, now_ms=60_000):
            pass
        assert old.closed
        cache.close()

    def test_a_deleted_path_is_still_served_from_the_open_file(self, tmp_path: Path) -> None:
        path = tmp_path / "a.log"
        path.write_bytes(b"kept")
        cache = OpenFileCache()
        with cache.open(path):
            pass
        path.unlink()  # retention deleted the segment after the slice was cut
        with cache.open(path) as file:
            assert file.read() == b"kept"
        cache.close()

    def test_least_recently_used_files_are_closed_beyond_the_bound(self, tmp_path: Path) -> None:
        paths = [tmp_path / f"{i}.log" for i in range(3)]
        for path in paths:
            path.write_bytes(b"x")
        cache = OpenFileCache(max_files=2)
        with cache.open(paths[0]) as busy:
            with cache.open(paths[1]) as idle:
                pass
            with cache.open(paths[2]):
                pass
            # paths[0] was evicted while in use: it stays open until released.
            assert len(cache) == 2 and not busy.closed and not idle.closed
        assert busy.closed
        cache.close()
        assert idle.closed


# The swap race (issue 14): a slice cut from a segment before the cleaner renamed another file over
# its path must never be answered with the new file's bytes at the old positions. Kafka never has
# this: its FileRecords slice holds the old FileChannel (FileRecords.slice,
# LocalLog.replaceSegments).


def _cut(path: Path, position: int, length: int) -> FileSlice:
    fd = os.open(path, os.O_RDONLY)
    try:
        return FileSlice(path, position, length, file_id_of(fd))
    finally:
        os.close(fd)


def _swap_in(path: Path, data: bytes) -> None:
    """What storage.cleaner_swap does: write a new file, rename it over the segment."""
    swap = path.with_name(path.name + ".swap")
    swap.write_bytes(data)
    os.rename(swap, path)


class TestSlicesAreServedOnlyFromTheirFile:
    def test_a_slice_cut_before_a_swap_is_refused_when_its_file_is_gone(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "00000000000000000000.log"
        path.write_bytes(b"old-batches")
        piece = _cut(path, 4, 7)
        _swap_in(path, b"new-batches")
        cache = OpenFileCache()
        with pytest.raises(StaleFileSliceError), cache.open(path, piece.file_id):
            pass
        with pytest.raises(StaleFileSliceError):
            piece.read_bytes()
        assert len(cache) == 0
        cache.close()

    def test_a_deleted_segment_not_cached_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "00000000000000000000.log"
        path.write_bytes(b"gone")
        piece = _cut(path, 0, 4)
        path.unlink()  # retention deleted it
        with pytest.raises(StaleFileSliceError), OpenFileCache().open(path, piece.file_id):
            pass

    def test_a_cached_old_file_keeps_serving_its_slices_after_the_swap(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "00000000000000000000.log"
        path.write_bytes(b"old-batches")
        old_piece = _cut(path, 4, 7)
        cache = OpenFileCache()
        with cache.open(path, old_piece.file_id, now_ms=0):
            pass  # an earlier send opened it
        _swap_in(path, b"NEW-BATCHES")
        new_piece = _cut(path, 4, 7)
        with cache.open(path, new_piece.file_id, now_ms=1) as new:
            assert os.pread(new.fileno(), 7, 4) == b"BATCHES"
        with cache.open(path, old_piece.file_id, now_ms=2) as old:
            assert os.pread(old.fileno(), 7, 4) == b"batches"
        assert len(cache) == 2
        cache.close()

    def test_a_superseded_file_is_closed_after_file_delete_delay_ms(self, tmp_path: Path) -> None:
        path = tmp_path / "00000000000000000000.log"
        path.write_bytes(b"old")
        old_piece = _cut(path, 0, 3)
        cache = OpenFileCache(file_delete_delay_ms=60_000)
        with cache.open(path, old_piece.file_id, now_ms=0) as old:
            pass
        _swap_in(path, b"new")
        with cache.open(path, _cut(path, 0, 3).file_id, now_ms=1_000):
            pass  # the swap is noticed: the old file is superseded from 1000
        with cache.open(path, old_piece.file_id, now_ms=60_999):
            pass  # still within the delay
        assert not old.closed
        with cache.open(path, None, now_ms=61_000):
            pass
        assert old.closed and len(cache) == 1
        with pytest.raises(StaleFileSliceError), cache.open(path, old_piece.file_id, 61_001):
            pass
        cache.close()

    def test_a_segment_read_is_refused_after_its_segment_was_swapped(self, tmp_path: Path) -> None:
        log = tmp_path / segment_file_name(0, LOG_SUFFIX)
        log.write_bytes(build_batch([SimpleRecord(value=b"v0"), SimpleRecord(value=b"v1")]))
        segment = LogSegment(tmp_path, 0, LogConfig(), now_ms=0)
        read = segment.read(0, max_bytes=1 << 20, max_position=segment.size, min_one_batch=True)
        assert read is not None and read.slice.file_id == segment.file_id
        original = read.slice.read_bytes()
        _swap_in(
            log, build_batch([SimpleRecord(value=b"x0"), SimpleRecord(value=b"x1")])
        )  # same length, other bytes
        with pytest.raises(StaleFileSliceError), OpenFileCache().open(log, read.slice.file_id):
            pass
        assert LogSegment(tmp_path, 0, LogConfig(), now_ms=0).file_id != segment.file_id
        assert len(original) == read.slice.length
        segment.close_handler()
