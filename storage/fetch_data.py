"""What a log read returns: whole batches as slices, plus where the read started.

Pure data, so that the partition state and other cores can hold reads without reaching the
disk: the slices themselves (``storage.file_slice.FileSlice``, a byte range of a segment file)
are only named for the type checker here, and reading them is their own business.

A read from the in-memory segment store (``storage.memory_store``) returns ``MemorySlice``s
instead: a ``bytes`` copy of whole batches. Being ``bytes``, it is what
``protocol.segments.Segments`` already treats as a buffer, so the network writes it with
``writelines`` while file slices keep the zero-copy ``sendfile`` path untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import attrs

if TYPE_CHECKING:
    from pykraft.storage.aborted_txn import AbortedTxn
    from pykraft.storage.file_slice import FileSlice


class MemorySlice(bytes):
    """Whole batches held in memory; the same ``length`` and ``read_bytes`` as a FileSlice."""

    @property
    def length(self) -> int:
        return len(self)

    def read_bytes(self) -> bytes:
        return bytes(self)


RecordSlice: TypeAlias = "FileSlice | MemorySlice"


@attrs.frozen
class LogOffsetMetadata:
    """Where an offset lives: its segment and the position of its batch (Kafka's name)."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@attrs.frozen
class FetchDataInfo:
    """What ``PartitionLog.read`` returns: whole batches as slices, in offset order."""

    fetch_offset_metadata: LogOffsetMetadata
    slices: tuple[RecordSlice, ...]
    # The offset after the last batch returned; the fetch offset when nothing was returned.
    next_offset: int
    # READ_COMMITTED reads only (Kafka's ``abortedTransactions``): the aborted transactions
    # overlapping what was read; None for other reads.
    aborted_transactions: tuple[AbortedTxn, ...] | None = None

    @property
    def size_in_bytes(self) -> int:
        return sum(piece.length for piece in self.slices)

    @property
    def is_empty(self) -> bool:
        return not self.slices

    def read_bytes(self) -> bytes:
        return b"".join(piece.read_bytes() for piece in self.slices)


@attrs.frozen
class OffsetAndTimestamp:
    """A ListOffsets answer: an offset, its record's timestamp (-1 if none), its epoch."""

    offset: int
    timestamp: int
    leader_epoch: int | None
