"""What a log read returns: whole batches as slices, plus where the read started.

Pure data, so that the partition state and other cores can hold reads without reaching the
disk: the slices themselves (``storage.file_slice.FileSlice``, a byte range of a segment file)
are only named for the type checker here, and reading them is their own business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from storage.file_slice import FileSlice


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
