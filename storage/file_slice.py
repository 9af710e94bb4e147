"""A byte range of a segment file: what a fetch returns instead of the bytes themselves.

The network layer writes a ``FileSlice`` straight from the page cache to the socket
(``loop.sendfile`` / ``os.sendfile``), Kafka's zero-copy fetch path (``FileRecords.slice``).
A slice always covers whole batches; a ``FetchDataInfo`` is a read's slices plus where it started.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs


@attrs.frozen
class FileSlice:
    path: Path
    position: int
    length: int

    def read_bytes(self) -> bytes:
        """Copy the slice into memory (tests, tools and non-sendfile transports)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
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


@attrs.frozen
class LogOffsetMetadata:
    """Where an offset lives: its segment and the position of its batch (Kafka's name)."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@attrs.frozen
class FetchDataInfo:
    """What ``PartitionLog.read`` returns: whole batches as file slices, in offset order."""

    fetch_offset_metadata: LogOffsetMetadata
    slices: tuple[FileSlice, ...]
    # The offset after the last batch returned; the fetch offset when nothing was returned.
    next_offset: int

    @property
    def size_in_bytes(self) -> int:
        return sum(piece.length for piece in self.slices)

    @property
    def is_empty(self) -> bool:
        return not self.slices

    def read_bytes(self) -> bytes:
        return b"".join(piece.read_bytes() for piece in self.slices)
