"""A byte range of a segment file: what a fetch returns instead of the bytes themselves.

The network layer writes a ``FileSlice`` straight from the page cache to the socket
(``loop.sendfile`` / ``os.sendfile``), Kafka's zero-copy fetch path (``FileRecords.slice``).
A slice always covers whole batches; a read returns them in ``storage.fetch_data.FetchDataInfo``.
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
