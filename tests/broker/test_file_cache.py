"""broker/file_cache.py: the listener's bounded cache of open segment files (moved out of
test_network.py, which tests the listener itself)."""

from __future__ import annotations

from pathlib import Path

from pykraft.broker.file_cache import OpenFileCache


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
