"""The simulation's disk for one partition: segments in memory, faults, and a crash rule.

``MemoryDisk`` outlives the stores opened on it (``storage.memory_store.MemorySegmentStore``),
as a directory outlives a process: it holds the segments, the leader-epoch history and the
producer snapshots. Its crash rule is the simulation's (``tests/sim``): bytes reach the disk on
append but are only durable once flushed; ``crash`` drops every unflushed byte, and with them
every later segment (a segment cut short is the log's end) — except behind a segment the log
start moved past unflushed (see ``MemoryDisk.crash``); a segment's aborted transactions go with
the batches they index (recovery writes them again anyway). The epoch history and producer
snapshots are written atomically with fsync in production, so they survive a crash whole;
truncation is durable at once, as is a roll.

Faults (``MemoryFaults``): ``fail(operation, errno)`` makes the next write, flush, roll or
truncate raise ``OSError`` with that errno *before* changing anything — what the file store
guarantees after taking a failed write back.
"""

from __future__ import annotations

import errno
from pathlib import Path

import attrs

from pykraft.storage.aborted_txn import AbortedTxn, entries_below
from pykraft.storage.leader_epoch_cache import Entries
from pykraft.storage.producer_entry import ProducerStateEntry
from pykraft.storage.producer_snapshot import decode_snapshot
from pykraft.storage.record_batch import BatchHeader

# Faults waiting to fire, per disk; a test arms a handful.
MAX_PENDING_FAULTS = 64
OPERATIONS = frozenset({"write", "flush", "roll", "truncate"})


class MemoryFaults:
    """Armed ``OSError``s, fired in order by the operation they name."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, int]] = []
        self.fired = 0

    def fail(self, operation: str, code: int, times: int = 1) -> None:
        assert operation in OPERATIONS, f"unknown operation {operation!r}"
        assert len(self._pending) + times <= MAX_PENDING_FAULTS, "too many armed faults"
        self._pending.extend([(operation, code)] * times)

    def clear(self) -> None:
        """Disarm every fault not fired yet."""
        self._pending.clear()

    def check(self, operation: str) -> None:
        for index, (armed, code) in enumerate(self._pending):
            if armed == operation:
                del self._pending[index]
                self.fired += 1
                raise OSError(code, f"injected {errno.errorcode.get(code, code)} on {operation}")


@attrs.define
class MemorySegment:
    """One segment's bytes, batch headers (its index) and aborted transactions (its
    transaction index)."""

    # Invariant: headers[i] is the batch at position headers[i][0]; batches are contiguous,
    # the first at base_offset; flushed_size <= len(data) and ends on a batch boundary;
    # every aborted transaction's marker (last_offset) is a batch of this segment.
    base_offset: int
    created_ms: int
    data: bytearray = attrs.field(factory=bytearray)
    headers: list[tuple[int, BatchHeader]] = attrs.field(factory=list)
    flushed_size: int = 0
    aborted_txns: list[AbortedTxn] = attrs.field(factory=list)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def next_offset(self) -> int:
        return self.headers[-1][1].next_offset if self.headers else self.base_offset

    def largest_timestamp_ms(self) -> int:
        """The largest record timestamp; the creation time without records (files: mtime)."""
        largest = max((header.max_timestamp for _, header in self.headers), default=-1)
        return largest if largest >= 0 else self.created_ms

    def truncate_at_batch(self, index: int) -> None:
        position = self.headers[index][0] if index < len(self.headers) else self.size
        del self.data[position:]
        del self.headers[index:]
        self.flushed_size = min(self.flushed_size, position)
        self.aborted_txns[:] = entries_below(self.aborted_txns, self.next_offset)


class MemorySnapshots:
    """Producer snapshots by offset (``storage.producer_state.SnapshotStore``)."""

    def __init__(self) -> None:
        self.data: dict[int, bytes] = {}

    def offsets(self) -> list[int]:
        return sorted(self.data)

    def read(self, offset: int) -> list[ProducerStateEntry]:
        return decode_snapshot(self.data[offset])

    def write(self, offset: int, data: bytes, *, durable: bool = True) -> None:
        self.data[offset] = bytes(data)

    def sync(self, offset: int) -> None:
        """Nothing to do: a crash of the memory disk keeps every snapshot written."""

    def delete(self, offset: int) -> None:
        self.data.pop(offset, None)


class MemoryEpochCheckpoint:
    """The leader-epoch checkpoint on a memory disk (``leader_epoch_file.EpochCheckpoint``)."""

    def __init__(self, disk: MemoryDisk) -> None:
        self.disk = disk

    def read(self) -> Entries:
        return self.disk.epoch_entries

    def write(self, entries: Entries, *, durable: bool = True) -> None:
        self.disk.epoch_entries = entries
        if durable:
            self.disk.synced_epoch_entries = entries

    def sync(self) -> None:
        self.disk.synced_epoch_entries = self.disk.epoch_entries


class MemoryDisk:
    """One partition directory in memory; see the module docstring for the crash rule."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory  # a name only: nothing is ever written there
        self.segments: list[MemorySegment] = []
        self.epoch_entries: Entries = ()
        self.synced_epoch_entries: Entries = ()  # what a crash keeps
        self.snapshots = MemorySnapshots()
        self.faults = MemoryFaults()
        self.crashes = 0

    def crash(self) -> None:
        """Power loss: only flushed bytes remain, and nothing after the first cut at or past the
        last segment holding flushed bytes. Flushes run in offset order from the recovery point,
        so an earlier segment is short only when the log start moved past it unflushed
        (DeleteRecords or retention advance the recovery point with the log start, as Kafka
        does): its bytes are below the log start, and the flushed segments after it stay."""
        self.crashes += 1
        self.epoch_entries = self.synced_epoch_entries  # an unsynced assign is lost
        durable = [index for index, segment in enumerate(self.segments) if segment.flushed_size]
        last_durable = durable[-1] if durable else 0
        for index, segment in enumerate(self.segments):
            if segment.flushed_size < segment.size:
                kept = sum(1 for position, _ in segment.headers if position < segment.flushed_size)
                segment.truncate_at_batch(kept)
                if index >= last_durable:
                    del self.segments[index + 1 :]
                    return
