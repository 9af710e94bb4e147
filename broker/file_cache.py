"""Open segment files shared by every connection of the Kafka listener (``broker.network``).

The listener sends the file slices of its responses from these files, with ``loop.sendfile`` or
by reading them. Files are cached by path, at most ``MAX_CACHED_FILES`` of them (the least
recently used beyond that are closed), re-opened when the path names a new file, and closed on
shutdown.
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# Segment files kept open for sendfile across all connections.
MAX_CACHED_FILES = 256


class _OpenFile:
    def __init__(self, file: BinaryIO, identity: tuple[int, int]) -> None:
        self.file = file
        # (st_dev, st_ino): a path re-created after truncation or deletion is a new file.
        self.identity = identity
        self.users = 0
        self.evicted = False


class OpenFileCache:
    """Open segment files by path, shared by all connections, at most ``max_files`` of them.

    An evicted or replaced file stays open until its last user releases it, so eviction never
    breaks a sendfile in progress. A path that no longer exists (a deleted segment) is still
    served from the cached file: the slice was cut from that file.
    """

    def __init__(self, max_files: int = MAX_CACHED_FILES) -> None:
        assert max_files >= 1
        self._max_files = max_files
        self._files: OrderedDict[Path, _OpenFile] = OrderedDict()

    def __len__(self) -> int:
        return len(self._files)

    @contextlib.contextmanager
    def open(self, path: Path) -> Iterator[BinaryIO]:
        entry = self._acquire(path)
        try:
            yield entry.file
        finally:
            entry.users -= 1
            if entry.evicted and entry.users == 0:
                entry.file.close()

    def _acquire(self, path: Path) -> _OpenFile:
        entry = self._files.get(path)
        identity = _identity(path)
        if entry is not None and identity is not None and identity != entry.identity:
            self._evict(path)
            entry = None
        if entry is None:
            file = open(path, "rb")  # noqa: SIM115 - closed by the cache
            entry = _OpenFile(file, _identity_of(file))
            self._files[path] = entry
            while len(self._files) > self._max_files:
                self._evict(next(iter(self._files)))
        self._files.move_to_end(path)
        entry.users += 1
        return entry

    def _evict(self, path: Path) -> None:
        entry = self._files.pop(path)
        entry.evicted = True
        if entry.users == 0:
            entry.file.close()

    def close(self) -> None:
        for path in list(self._files):
            self._evict(path)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def _identity_of(file: BinaryIO) -> tuple[int, int]:
    stat = os.fstat(file.fileno())
    return stat.st_dev, stat.st_ino
