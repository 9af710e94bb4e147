"""The retained window: the most recent committed metadata batches, kept in memory.

Brokers are not Raft members (DESIGN.md §3.1); they read the committed metadata log over HTTP
from an offset. A controller keeps the last ``max_records`` committed records here, grouped in
the atomic batches they were committed in. A read below the window's start cannot be answered
from memory: the broker must load a snapshot and continue from its end offset
(``ReadStatus.SNAPSHOT_REQUIRED``), the same contract as Kafka's ``OFFSET_OUT_OF_RANGE`` +
``SnapshotId`` answer to a fetch below the log start (KIP-630).

Whole batches are evicted, and the newest batch is always kept, so a batch larger than
``max_records`` is still served. A read that starts inside a batch gets that batch's tail.
Nothing at or after the eviction floor (``retain_from``: the end offset of the latest snapshot
this controller can serve) is ever evicted, so a broker that loads that snapshot can always go on
from its end offset — the same invariant as Kafka's "log start offset <= latest snapshot end".
Until the first snapshot everything is kept.

Batches hold their records as the Raft entry carried them (``metadata.compact_codec`` rows: one
bytes object per batch, nothing for the garbage collector to walk); their JSON lines
(``metadata.codec``, what the records endpoint serves) are transcoded on the first read and kept
with the batch, so a batch no broker reads is never transcoded and one many brokers read is
transcoded once.

Pure data structure: no threads, no clock. The controller's asyncio thread owns one.
"""

from __future__ import annotations

import bisect
import enum

import attrs

from pykraft.metadata.compact_codec import json_lines


@attrs.frozen(kw_only=True)
class CommittedBatch:
    """One atomic batch as committed: offsets ``base_offset .. base_offset + record_count - 1``
    (the tail of the committed batch from ``base_offset`` when ``skip`` > 0)."""

    base_offset: int
    epoch: int
    append_time_ms: int
    record_count: int
    # All the committed batch's records (``metadata.compact_codec.encode_records``), including
    # the ``skip`` records before ``base_offset``.
    payload: bytes
    skip: int = 0
    # The payload's JSON lines once transcoded (at most one element), shared with tails.
    # Read and filled on one thread (the window's owner).
    json_cache: list[tuple[bytes, ...]] = attrs.field(factory=list, eq=False, repr=False)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count

    @property
    def records(self) -> tuple[bytes, ...]:
        """This batch's records as JSON lines (``metadata.codec``): what the records endpoint
        splices into its answer. Transcoded from the payload on first access, then kept."""
        if not self.json_cache:
            self.json_cache.append(json_lines(self.payload))
        lines = self.json_cache[0]
        if self.skip == 0 and self.record_count == len(lines):
            return lines
        return lines[self.skip : self.skip + self.record_count]

    def tail_from(self, offset: int) -> CommittedBatch:
        """The records at ``offset`` and after (``offset`` lies within this batch)."""
        assert self.base_offset <= offset <= self.last_offset, (offset, self.base_offset)
        if offset == self.base_offset:
            return self
        skipped = offset - self.base_offset
        return attrs.evolve(
            self,
            base_offset=offset,
            record_count=self.record_count - skipped,
            skip=self.skip + skipped,
        )


class ReadStatus(enum.Enum):
    OK = "OK"  # zero or more batches from the requested offset
    SNAPSHOT_REQUIRED = "SNAPSHOT_REQUIRED"  # below the window: load a snapshot first
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"  # beyond the log end


@attrs.frozen(kw_only=True)
class WindowRead:
    status: ReadStatus
    batches: tuple[CommittedBatch, ...] = ()
    # The offset the reader asks for next (the end of what was returned).
    next_offset: int = 0


class LogWindowError(ValueError):
    """A batch does not continue the window (a bug in the caller: offsets must be contiguous)."""


class LogWindow:
    def __init__(self, max_records: int, start_offset: int = 0) -> None:
        if max_records < 1:
            raise ValueError(f"max_records must be positive, got {max_records}")
        self._max_records = max_records
        # Invariant: _batches[_first:] are contiguous; _bases[i] == _batches[i].base_offset.
        self._batches: list[CommittedBatch] = []
        self._bases: list[int] = []
        self._first = 0
        self._record_count = 0
        self._start_offset = start_offset
        self._next_offset = start_offset
        # Invariant: batches ending after _floor are never evicted.
        self._floor = start_offset

    @property
    def start_offset(self) -> int:
        """The lowest offset answerable from memory."""
        return self._start_offset

    @property
    def next_offset(self) -> int:
        """One past the last committed offset held (the log end offset)."""
        return self._next_offset

    @property
    def record_count(self) -> int:
        return self._record_count

    def reset(self, start_offset: int) -> None:
        """Drop everything; the log continues at ``start_offset`` (after loading a snapshot)."""
        self._batches, self._bases, self._first = [], [], 0
        self._record_count = 0
        self._start_offset = self._next_offset = self._floor = start_offset

    def retain_from(self, offset: int) -> None:
        """A snapshot ending at ``offset`` can be served: records before it may be evicted."""
        self._floor = max(self._floor, offset)
        self._evict()

    def append(self, batch: CommittedBatch) -> None:
        if batch.base_offset != self._next_offset:
            raise LogWindowError(
                f"batch at offset {batch.base_offset} does not continue the window, "
                f"which ends before offset {self._next_offset}"
            )
        if batch.record_count < 1:
            raise LogWindowError(f"batch at offset {batch.base_offset} has no records")
        self._batches.append(batch)
        self._bases.append(batch.base_offset)
        self._record_count += batch.record_count
        self._next_offset = batch.next_offset
        self._evict()

    def _evict(self) -> None:
        while self._record_count > self._max_records and len(self._batches) - self._first > 1:
            evicted = self._batches[self._first]
            if evicted.next_offset > self._floor:
                break
            self._first += 1
            self._record_count -= evicted.record_count
            self._start_offset = evicted.next_offset
        if self._first > 1024 and self._first * 2 > len(self._batches):
            del self._batches[: self._first]
            del self._bases[: self._first]
            self._first = 0

    def read(self, from_offset: int, max_records: int) -> WindowRead:
        """Whole batches from ``from_offset`` up to about ``max_records`` records (at least one
        batch when any is available)."""
        if from_offset < self._start_offset:
            return WindowRead(status=ReadStatus.SNAPSHOT_REQUIRED, next_offset=from_offset)
        if from_offset > self._next_offset:
            return WindowRead(status=ReadStatus.OFFSET_OUT_OF_RANGE, next_offset=from_offset)
        if from_offset == self._next_offset:
            return WindowRead(status=ReadStatus.OK, next_offset=from_offset)
        index = bisect.bisect_right(self._bases, from_offset, lo=self._first) - 1
        batches = [self._batches[index].tail_from(from_offset)]
        count = batches[0].record_count
        index += 1
        while index < len(self._batches):
            batch = self._batches[index]
            if count + batch.record_count > max_records:
                break
            batches.append(batch)
            count += batch.record_count
            index += 1
        return WindowRead(
            status=ReadStatus.OK, batches=tuple(batches), next_offset=batches[-1].next_offset
        )
