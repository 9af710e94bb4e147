"""A byte range of a segment file: what a fetch returns instead of the bytes themselves.

The network layer writes a ``FileSlice`` straight from the page cache to the socket
(``loop.sendfile`` / ``os.sendfile``), Kafka's zero-copy fetch path (``FileRecords.slice``).
A slice always covers whole batches; a read returns them in ``storage.fetch_data.FetchDataInfo``.

A slice names its file by path *and* identity (``file_id``: ``(st_dev, st_ino)`` of the segment's
open file, taken once when the segment opened). Between cutting a slice and sending it the path
may come to name another file — a cleaner swap (``storage.cleaner_swap``), a retention delete and
re-create, a full truncation — and the old positions in the new file hold other bytes. Kafka's
``FileRecords.slice`` keeps the old ``FileChannel``; here the sender serves a slice only from the
file with its identity (``broker.file_cache.OpenFileCache``) and refuses otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

# (st_dev, st_ino): which file a path named when a slice was cut.
FileId = tuple[int, int]


def file_id_of(fd: int) -> FileId:
    stat = os.fstat(fd)
    return stat.st_dev, stat.st_ino


@attrs.frozen
class FileSlice:
    path: Path
    position: int
    length: int
    # None only for slices of files nobody replaces (tests, tools); every segment read sets it.
    file_id: FileId | None = None

    def read_bytes(self) -> bytes:
        """Copy the slice into memory (tests, tools and non-sendfile transports).

        Raises ``StaleFileSliceError`` when the path no longer names the slice's file.
        """
        fd = os.open(self.path, os.O_RDONLY)
        try:
            if self.file_id is not None and file_id_of(fd) != self.file_id:
                raise StaleFileSliceError(self)
            chunks: list[bytes] = []
            position, remaining = self.position, self.length
            while remaining > 0:
                chunk = os.pread(fd, remaining, position)
                if not chunk:
                    raise EOFError(
                        f"{self.path} ends before byte {position} of slice "
                        f"[{self.position}, {self.position + self.length})"
                    )
                chunks.append(chunk)
                position += len(chunk)
                remaining -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)


class StaleFileSliceError(Exception):
    """The slice's file is gone: its path names another file now (or nothing). Sending the
    path's bytes would hand a client the wrong records; the sender refuses instead."""

    def __init__(self, piece: FileSlice) -> None:
        super().__init__(
            f"{piece.path} no longer names the file {piece.file_id} slice "
            f"[{piece.position}, {piece.position + piece.length}) was cut from"
        )
