"""The segments of one partition directory and the offsets they define (Kafka's ``LocalLog``).

``LocalLog`` is production's ``storage.segment_store.SegmentStore``. It knows files, not
rules: it appends already-validated batches to the active segment, rolls, reads, truncates,
deletes segments and flushes, keeping ``log_end_offset`` and ``recovery_point`` (everything
below it is fsync'd) in step. ``PartitionLog`` on top decides
what may be appended and owns the log start offset, the high watermark, the leader-epoch cache
and producer state.

Flushing follows Kafka: a rolled segment is not fsync'd on the append path but marked pending;
``LogManager`` flushes it on its periodic tick, off the loop when the broker gave it a thread
(``prepare_rolled_flush``, ``RolledFlush.run``, ``complete_rolled_flush``: Kafka's "flush-log"
task, ``flushUptoOffsetExclusive`` on its scheduler). ``flush.messages`` forces a flush inline.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pykraft.storage.aborted_txn import TXN_INDEX_SUFFIX, AbortedTxn
from pykraft.storage.atomic_file import fsync_directory, sync_if_exists
from pykraft.storage.corruption import CorruptBatch
from pykraft.storage.fetch_data import FetchDataInfo
from pykraft.storage.index import OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_reader import fetch_offset_for_timestamp, read_segments
from pykraft.storage.read_verification import verified
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.segment import LogSegment, segment_file_name
from pykraft.storage.segment_store import (
    AppendedBatch,
    RolledFlush,
    no_flush_hook,
    should_roll,
)
from pykraft.storage.txn_markers import EndTransactionMarker, decode_end_txn_marker


def _base_offset(segment: LogSegment) -> int:
    return segment.base_offset


class LocalLog:
    # Invariant: segments are ordered by base offset and contiguous, never empty; the last
    # one is active. recovery_point <= pending_flush_offset-or-less <= log_end_offset.

    def __init__(
        self, directory: Path, config: LogConfig, segments: list[LogSegment], recovery_point: int
    ) -> None:
        assert segments, "a log always has an active segment"
        self.directory = directory
        self.config = config
        self._segments = segments
        self.log_end_offset = segments[-1].read_next_offset()
        self.recovery_point = recovery_point
        # Segment files created, and how many of those creations the directory has synced.
        self._directory_changes = self._directory_synced = 0
        self._truncations = 0  # a rolled flush prepared before one may not move the point
        self._pending_flush_offset = recovery_point  # rolled segments await a flush up to here
        # Called before the recovery point moves up (the log syncs its epoch history there).
        self.before_flush: Callable[[], None] = no_flush_hook

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def floor_segment(self, offset: int) -> int:
        """Index of the segment that holds ``offset`` (the first one for offsets below it)."""
        return max(bisect.bisect_right(self._segments, offset, key=_base_offset) - 1, 0)

    # ------------------------------------------------------------------ append and roll

    def should_roll(
        self, messages_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        segment = self.active_segment
        return should_roll(
            segment_size=segment.size,
            messages_size=messages_size,
            config=self.config,
            time_waited_ms=segment.time_waited_for_roll_ms(now_ms, max_timestamp),
            indexes_full=segment.indexes_full(),
            relative_offset=last_offset - segment.base_offset,
        )

    def roll(self, now_ms: int, base_offset: int | None = None) -> bool:
        """Start a new active segment at the log end, or at ``base_offset`` when past it;
        False while the active one is empty."""
        active = self.active_segment
        if active.size == 0 and (base_offset is None or base_offset <= active.base_offset):
            return False  # an empty segment stays active, unless it cannot hold base_offset
        base = max(self.log_end_offset, base_offset or 0)
        active.on_become_inactive()
        for suffix in (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            # Leftovers of an earlier life of this offset would be read as entries.
            with contextlib.suppress(FileNotFoundError):
                (self.directory / segment_file_name(base, suffix)).unlink()
        segment = LogSegment(self.directory, base, self.config, now_ms)
        try:
            segment.open_indexes()
        except OSError:
            segment.discard()  # the old segment stays active; the next append tries again
            raise
        self._segments.append(segment)
        self._directory_changes += 1
        self._pending_flush_offset = base
        return True

    def append(
        self, buffer: bytes | bytearray | memoryview, batches: Sequence[AppendedBatch]
    ) -> None:
        """Write whole batches with assigned offsets continuing the log end.

        On an ``OSError`` (the write, or the ``flush.messages`` flush) the batches are taken
        back — file, indexes and log end as before — and the error propagates: nothing of a
        failed append is ever visible (issue 9; Kafka then takes the log dir offline).
        """
        segment = self.active_segment
        first_offset, size_before = self.log_end_offset, segment.size
        segment.append(buffer, batches)
        self.log_end_offset = batches[-1].last_offset + 1
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            try:
                self.flush()
            except OSError:
                self._take_back(segment, first_offset, size_before)
                raise

    def _take_back(self, segment: LogSegment, first_offset: int, size_before: int) -> None:
        """Undo an append whose flush failed (best effort: the disk is already failing)."""
        with contextlib.suppress(OSError):
            segment.truncate_to(first_offset)
        assert segment.size == size_before, "an append is taken back whole"
        self.log_end_offset = first_offset

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, upper: int, min_one_batch: bool) -> FetchDataInfo:
        """Whole batches from the one holding ``offset`` (which must be below ``upper``)."""
        segments = self._segments[self.floor_segment(offset) :]
        return read_segments(segments, offset, max_bytes, upper, min_one_batch, self.log_end_offset)

    def verify(
        self, info: FetchDataInfo, first_offset: int, stop_offset: int
    ) -> tuple[FetchDataInfo, CorruptBatch | None]:
        """CRC-check what a read returned below ``stop_offset`` (bits rot at rest on disk)."""
        ends = [segment.base_offset for segment in self._segments[1:]] + [self.log_end_offset]
        segment_ends = {s.log_path: end for s, end in zip(self._segments, ends, strict=True)}
        return verified(info, first_offset, stop_offset, segment_ends)

    def offset_for_timestamp(
        self, timestamp: int, log_start_offset: int, log_end_offset: int
    ) -> tuple[int, int] | None:
        return fetch_offset_for_timestamp(
            self._segments, timestamp, log_start_offset, log_end_offset
        )

    def replay_from(self, offset: int) -> Iterator[tuple[BatchHeader, EndTransactionMarker | None]]:
        """The batches holding offsets >= ``offset``, in order, with a control batch's marker
        (only control batches are read past their header)."""
        for segment in self._segments[self.floor_segment(offset) :]:
            location = segment.translate_offset(offset)
            if location is None:
                continue
            for item in segment.iter_headers(location.position):
                marker = None
                if item.header.is_control:
                    marker = decode_end_txn_marker(segment.read_batch(item))
                yield item.header, marker

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Index ``entry`` in the segment holding its marker."""
        self._segments[self.floor_segment(entry.last_offset)].update_txn_index(entry)

    # ------------------------------------------------------------------ truncation and deletion

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset`` (``offset`` >= the first base)."""
        keep = self.floor_segment(offset) + 1
        for segment in reversed(self._segments[keep:]):
            segment.delete()
        del self._segments[keep:]
        self.active_segment.truncate_to(offset)
        self.log_end_offset = self.active_segment.read_next_offset()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._pending_flush_offset = min(self._pending_flush_offset, self.log_end_offset)
        self._truncations += 1

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        for segment in reversed(self._segments):
            segment.delete()
        self._segments = [LogSegment(self.directory, offset, self.config, now_ms)]
        self._directory_changes += 1
        self._truncations += 1
        self.log_end_offset = self.recovery_point = self._pending_flush_offset = offset

    def delete_segments(self, base_offsets: Sequence[int]) -> None:
        """Delete inactive segments (retention, DeleteRecords)."""
        doomed = set(base_offsets)
        assert self.active_segment.base_offset not in doomed, "never delete the active segment"
        for segment in self._segments:
            if segment.base_offset in doomed:
                segment.delete()
        self._segments = [s for s in self._segments if s.base_offset not in doomed]

    def index_of_run(self, run: Sequence[LogSegment]) -> int | None:
        """Where the consecutive inactive segments ``run`` (these very objects) are in the
        log, or None when they no longer are (truncated, deleted, already replaced)."""
        ids = [id(segment) for segment in self._segments[:-1]]
        if not run or id(run[0]) not in ids:
            return None
        first = ids.index(id(run[0]))
        return first if ids[first : first + len(run)] == [id(s) for s in run] else None

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Kafka ``replaceSegments`` in memory: ``new`` (already on disk under the first old
        segment's name, ``storage.cleaner_swap``) stands for the inactive segments ``old``,
        whose files are gone; their handles are released."""
        first = self.index_of_run(old)
        assert first is not None, "replace only segments of this log"
        for segment in old:
            segment.close_handler()
        self._segments[first : first + len(old)] = [new]

    def advance_recovery_point(self, offset: int) -> None:
        """Data below a new log start no longer needs recovery."""
        if offset > self.recovery_point:
            self.before_flush()
        self.recovery_point = min(max(self.recovery_point, offset), self.log_end_offset)

    # ------------------------------------------------------------------ durability and lifecycle

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync the segments holding [recovery point, ``up_to_offset``) (default: the log
        end) and move the recovery point there."""
        end = self.log_end_offset
        target = end if up_to_offset is None else min(up_to_offset, end)
        if target > self.recovery_point:
            self.before_flush()
            for segment in self._segments[self.floor_segment(self.recovery_point) :]:
                if segment.base_offset >= target:
                    break
                segment.flush()
        if self._directory_synced != self._directory_changes:
            changes = self._directory_changes
            fsync_directory(self.directory)
            self._directory_synced = changes
        self.recovery_point = max(self.recovery_point, target)

    def prepare_rolled_flush(self) -> RolledFlush | None:
        """What ``flush(pending)`` would sync, by name, for ``RolledFlush.run`` on any thread
        (a file deleted meanwhile needs no sync; a truncation voids the flush)."""
        target = self._pending_flush_offset
        if target <= self.recovery_point:
            return None
        rolled = self._segments[self.floor_segment(self.recovery_point) : -1]
        paths = [path for s in rolled if s.base_offset < target for path in s.file_paths()]
        # A segment file deleted meanwhile (retention) needs no sync; the directory must be
        # there (a deleted log's flush is dropped by its caller).
        syncs: list[Callable[[], None]] = [functools.partial(sync_if_exists, p) for p in paths]
        if self._directory_synced != self._directory_changes:
            syncs.append(functools.partial(fsync_directory, self.directory))
        return RolledFlush(target, syncs, self._truncations, self._directory_changes)

    def complete_rolled_flush(self, flush: RolledFlush) -> None:
        if flush.truncations != self._truncations:
            return
        self._directory_synced = max(self._directory_synced, flush.directory_changes)
        self.recovery_point = max(self.recovery_point, min(flush.target, self.log_end_offset))

    def close(self) -> None:
        self.flush()
        for segment in self._segments:
            segment.close()

    def close_handlers(self) -> None:
        for segment in self._segments:
            segment.close_handler()
