"""Encoded responses as a list of segments: codec bytes interleaved with record data.

A Fetch response is mostly record bytes that already sit in segment files. The codec never
reads them: it emits its own bytes (sizes, offsets, error codes) as ``bytes`` segments and passes
each partition's record chunks through unchanged, either in-memory buffers or file slices
(``storage.file_slice.FileSlice``: path, position, length). The network layer writes buffers
with ``transport.writelines`` and file slices with ``loop.sendfile`` — Kafka's zero-copy path
(``FileRecords.writeTo`` → ``FileChannel.transferTo``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol, TypeAlias

import attrs


class FileSliceLike(Protocol):
    """A byte range of a file; ``storage.file_slice.FileSlice`` has exactly this shape."""

    @property
    def path(self) -> Path: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...


Buffer: TypeAlias = bytes | bytearray | memoryview
Segment: TypeAlias = Buffer | FileSliceLike


def segment_length(segment: Segment) -> int:
    if isinstance(segment, bytes | bytearray | memoryview):
        return memoryview(segment).nbytes
    return segment.length


@attrs.frozen
class Segments:
    """Bytes to send, in order. ``length`` is the sum of all segment lengths.

    Invariant: ``length == sum(segment_length(part) for part in parts)``.
    """

    parts: tuple[Segment, ...]
    length: int

    @classmethod
    def of(cls, parts: Iterable[Segment]) -> Segments:
        parts = tuple(parts)
        return cls(parts, sum(segment_length(part) for part in parts))

    def to_bytes(self, read_slice: Callable[[FileSliceLike], bytes]) -> bytes:
        """Flatten into one buffer; ``read_slice`` supplies file bytes (tests, non-sendfile I/O)."""
        out = bytearray()
        for part in self.parts:
            if isinstance(part, bytes | bytearray | memoryview):
                out += part
            else:
                data = read_slice(part)
                assert len(data) == part.length, "read_slice returned the wrong number of bytes"
                out += data
        assert len(out) == self.length
        return bytes(out)
