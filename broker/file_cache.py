"""Open segment files shared by every connection of the Kafka listener (``broker.network``).

The listener sends the file slices of its responses from these files, with ``loop.sendfile`` or
by reading them. Files are cached by path *and identity* (``(st_dev, st_ino)``), at most
``MAX_CACHED_FILES`` of them (the least recently used beyond that are closed), and closed on
shutdown.

A slice carries the identity of the file it was cut from (``storage.file_slice.FileSlice.file_id``)
and is served only from that file. A cleaner swap, a retention delete and re-create or a full
truncation may make the path name another file between the cut and the send; then:

* the old file, if cached, still serves the slice (an open file stays readable after its path is
  unlinked or renamed over, as Kafka's ``FileRecords`` keeps its ``FileChannel``); it is closed
  once superseded for ``file.delete.delay.ms`` (Kafka's delay before removing a ``.deleted``
  segment, 60000) so a replaced file's disk space is not held for ever;
* otherwise ``open`` raises ``StaleFileSliceError`` and the listener closes the connection
  without sending other bytes; the client reconnects and fetches again from the new file.
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pykraft.storage.file_slice import FileId, FileSlice, StaleFileSliceError, file_id_of

# Segment files kept open for sendfile across all connections.
MAX_CACHED_FILES = 256
# Kafka's file.delete.delay.ms default: how long a superseded file keeps serving old slices.
DEFAULT_FILE_DELETE_DELAY_MS = 60_000

_Key = tuple[Path, FileId]


class _OpenFile:
    def __init__(self, file: BinaryIO, file_id: FileId) -> None:
        self.file = file
        self.file_id = file_id
        self.users = 0
        self.evicted = False


class OpenFileCache:
    """Open segment files by (path, identity), shared by all connections, at most
    ``max_files`` of them.

    An evicted or superseded file stays open until its last user releases it, so eviction never
    breaks a sendfile in progress.
    """

    def __init__(
        self,
        max_files: int = MAX_CACHED_FILES,
        file_delete_delay_ms: int = DEFAULT_FILE_DELETE_DELAY_MS,
    ) -> None:
        assert max_files >= 1 and file_delete_delay_ms >= 0
        self._max_files = max_files
        self._file_delete_delay_ms = file_delete_delay_ms
        self._files: OrderedDict[_Key, _OpenFile] = OrderedDict()
        self._current: dict[Path, FileId] = {}  # the newest identity opened per path
        # Files whose path names a newer file, with when that was seen (monotonic ms).
        self._superseded: dict[_Key, int] = {}

    def __len__(self) -> int:
        return len(self._files)

    @contextlib.contextmanager
    def open(
        self, path: Path, file_id: FileId | None = None, now_ms: int = 0
    ) -> Iterator[BinaryIO]:
        """The file ``file_id`` at ``path`` (None: whatever the path names now, or the last file
        it named if it is gone). Raises ``StaleFileSliceError`` when that file cannot be had."""
        self._close_superseded(now_ms)
        entry = self._acquire(path, file_id, now_ms)
        try:
            yield entry.file
        finally:
            entry.users -= 1
            if entry.evicted and entry.users == 0:
                entry.file.close()

    def _acquire(self, path: Path, file_id: FileId | None, now_ms: int) -> _OpenFile:
        if file_id is None:
            file_id = _identity(path) or self._current.get(path)
        entry = None if file_id is None else self._files.get((path, file_id))
        if entry is None:
            entry = self._open(path, file_id, now_ms)
        self._files.move_to_end((path, entry.file_id))
        entry.users += 1
        return entry

    def _open(self, path: Path, file_id: FileId | None, now_ms: int) -> _OpenFile:
        try:
            file = open(path, "rb")  # noqa: SIM115 - closed by the cache
        except FileNotFoundError:
            raise StaleFileSliceError(FileSlice(path, 0, 0, file_id)) from None
        opened = file_id_of(file.fileno())
        if file_id is not None and opened != file_id:
            file.close()
            raise StaleFileSliceError(FileSlice(path, 0, 0, file_id))
        previous = self._current.get(path)
        if previous is not None and previous != opened and (path, previous) in self._files:
            self._superseded[(path, previous)] = now_ms
        self._current[path] = opened
        entry = _OpenFile(file, opened)
        self._files[(path, opened)] = entry
        while len(self._files) > self._max_files:
            self._evict(next(iter(self._files)))
        return entry

    def _close_superseded(self, now_ms: int) -> None:
        expired = [
            key
            for key, since_ms in self._superseded.items()
            if now_ms - since_ms >= self._file_delete_delay_ms
        ]
        for key in expired:
            self._evict(key)

    def _evict(self, key: _Key) -> None:
        entry = self._files.pop(key)
        self._superseded.pop(key, None)
        path, file_id = key
        if self._current.get(path) == file_id:
            del self._current[path]
        entry.evicted = True
        if entry.users == 0:
            entry.file.close()

    def close(self) -> None:
        for key in list(self._files):
            self._evict(key)


def _identity(path: Path) -> FileId | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino
