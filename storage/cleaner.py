"""Cleaning one log (Kafka's ``Cleaner.doClean`` / ``cleanSegments``): the shell that reads the
segment files, asks the pure cleaner (``storage.cleaner_filter``) what to keep, writes it and
swaps it in (``storage.cleaner_swap``).

One cleaning: map the dirty section's keys to their latest offsets (stopping where the map is
full), then rewrite every segment below the map's end, in groups of at most ``segment.bytes``
(``storage.cleaner_policy.group_segments_by_size``), each group into one ``.cleaned`` file that
replaces the group. The next dirty offset (what the cleaner checkpoint records) is the end of
the map.

Threads: the reading and writing may run on a worker thread. Everything that looks at or
changes the log's state — the snapshot of its segments, aborted transactions and producers,
and the swap — goes through ``run_on_log`` (the broker runs it on its event loop; by default it
is a plain call). A swap whose segments were truncated or deleted meanwhile is dropped.
``check_done`` is called between batches with the bytes just moved: it throttles the I/O and
raises ``CleaningAbortedError`` to stop (Kafka's ``checkDone`` and ``Throttler``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import attrs

from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.cleaner_filter import CleanerFilter, LastRecord, OffsetMapBuilder
from pykraft.storage.cleaner_offset_map import OffsetMap
from pykraft.storage.cleaner_policy import LogToClean, SegmentSummary, group_segments_by_size
from pykraft.storage.cleaner_segment import CleanedSegmentWriter
from pykraft.storage.cleaner_swap import (
    CrashPoint,
    SwapStep,
    no_crash,
    open_swapped_segment,
    swap_in,
)
from pykraft.storage.cleaner_txn import CleanedTransactionMetadata
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.segment import LogSegment

T = TypeVar("T")


class CleaningAbortedError(Exception):
    """Kafka ``LogCleaningAbortedException``: the cleaning stopped on request."""


class LogChangedError(Exception):
    """The log was truncated, deleted or replaced under the cleaning: it is dropped."""


def call_here(function: Callable[[], T]) -> T:
    """The default ``run_on_log``: a plain call, on the cleaning's own thread."""
    return function()


def _no_check(moved_bytes: int) -> None:
    return None


def _always() -> bool:
    return True


@attrs.frozen
class CleanerStats:
    """Kafka ``CleanerStats``, for one cleaning."""

    end_offset: int  # the next first dirty offset
    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    groups_swapped: int
    groups_dropped: int  # their segments changed under the cleaning


@attrs.frozen
class _LogSnapshot:
    segments: tuple[LogSegment, ...]  # inactive ones only
    last_records: dict[int, LastRecord]


def segment_summary(segment: LogSegment) -> SegmentSummary:
    first = next(segment.iter_headers(), None)
    return SegmentSummary(
        base_offset=segment.base_offset,
        size=segment.size,
        largest_timestamp_ms=segment.largest_timestamp_ms(),
        first_batch_timestamp_ms=-1 if first is None else first.header.max_timestamp,
        offset_index_bytes=segment.offset_index.size_in_bytes,
        time_index_bytes=segment.time_index.size_in_bytes,
    )


class Cleaner:
    """Cleans one log at a time (see the module docstring)."""

    def __init__(
        self,
        offset_map_capacity: int,  # bytes (cleaner_offset_map.entry_bytes)
        *,
        check_done: Callable[[int], None] = _no_check,
        run_on_log: Callable[[Callable[[], Any]], Any] = call_here,
        crash_point: CrashPoint = no_crash,
    ) -> None:
        self.offset_map_capacity = offset_map_capacity
        self._check_done = check_done
        self._run_on_log = run_on_log
        self._crash_point = crash_point
        self._bytes_read = self._bytes_written = self._records_read = self._records_kept = 0
        self._swapped: set[int] = set()  # ids of the segments this cleaning replaced
        self._still_current: Callable[[], bool] = _always
        self._swap_started = False  # the group's swap began: its files are the swap's

    def clean(
        self,
        log: PartitionLog,
        to_clean: LogToClean,
        now_ms: int,
        *,
        still_current: Callable[[], bool] = _always,
    ) -> CleanerStats:
        """One cleaning of ``log`` at wall time ``now_ms`` (delete horizons, KIP-534).

        Raises ``LogChangedError`` when a segment it read was truncated, deleted or replaced
        under it (its files closed), or when ``still_current`` (asked between batches and,
        on the event loop, before each swap) says its cleaning was aborted: Kafka aborts a
        cleaning on truncation and deletion (``LogCleanerManager.abortAndPauseCleaning``).
        """
        self._bytes_read = self._bytes_written = self._records_read = self._records_kept = 0
        self._swapped = set()
        self._still_current = still_current
        snapshot: _LogSnapshot = self._run_on_log(lambda: _snapshot(log))
        try:
            return self._clean(log, snapshot, to_clean, now_ms)
        except CleaningAbortedError:
            raise
        except Exception as error:  # closed files fail as OSError, ValueError, AssertionError
            changed = self._run_on_log(
                lambda: any(
                    log.local_log.index_of_run([s]) is None
                    for s in snapshot.segments
                    if id(s) not in self._swapped
                )
            )
            if changed:
                raise LogChangedError(f"{log.directory} changed under the cleaning") from error
            raise

    def _clean(
        self, log: PartitionLog, snapshot: _LogSnapshot, to_clean: LogToClean, now_ms: int
    ) -> CleanerStats:
        offset_map = OffsetMap(self.offset_map_capacity)
        start, upper = to_clean.first_dirty_offset, to_clean.first_uncleanable_offset
        aborted: list[AbortedTxn] = self._run_on_log(
            lambda: log.collect_aborted_transactions(start, upper)
        )
        builder = OffsetMapBuilder(offset_map, start, CleanedTransactionMetadata(aborted))
        dirty = [s for s in snapshot.segments if s.base_offset < upper]
        for data, _ in self._batches(dirty, start):
            if not builder.add_batch(data):
                break
        end_offset = max(offset_map.latest_offset + 1, start)
        swapped = dropped = 0
        if end_offset > start:
            below = [s for s in snapshot.segments if s.base_offset < end_offset]
            summaries = [segment_summary(segment) for segment in below]
            groups = group_segments_by_size(
                summaries, log.config.segment_bytes, log.config.segment_index_bytes, end_offset
            )
            by_base = {segment.base_offset: segment for segment in below}
            # one transaction state for the whole cleaning (Kafka Cleaner.doClean)
            txn = CleanedTransactionMetadata()
            for group in groups:
                segments = [by_base[summary.base_offset] for summary in group]
                if self._clean_group(log, segments, offset_map, txn, snapshot, now_ms):
                    swapped += 1
                else:
                    dropped += 1
        return CleanerStats(
            end_offset=end_offset,
            bytes_read=self._bytes_read,
            bytes_written=self._bytes_written,
            records_read=self._records_read,
            records_kept=self._records_kept,
            groups_swapped=swapped,
            groups_dropped=dropped,
        )

    def _batches(
        self, segments: Sequence[LogSegment], start_offset: int = 0
    ) -> Iterator[tuple[bytes, bool]]:
        """Each batch's bytes from the one holding ``start_offset``, and whether it is the
        last batch of ``segments``."""
        pending: bytes | None = None
        for segment in segments:
            location = segment.translate_offset(start_offset)
            if location is None:
                continue
            for item in segment.iter_headers(location.position):
                data = segment.read_batch(item)
                self._bytes_read += len(data)
                self._check_done(len(data))
                if not self._still_current():
                    raise LogChangedError("the cleaning was aborted (truncation or deletion)")
                if pending is not None:
                    yield pending, False
                pending = data
        if pending is not None:
            yield pending, True

    def _clean_group(
        self,
        log: PartitionLog,
        group: Sequence[LogSegment],
        offset_map: OffsetMap,
        txn: CleanedTransactionMetadata,
        snapshot: _LogSnapshot,
        now_ms: int,
    ) -> bool:
        """Write the group's kept batches to ``.cleaned`` and swap it in; False when the
        group's segments changed meanwhile (the file is removed). Unlike Kafka 3.9 (which
        keeps only the round's last batch), each group's last batch stays at least as an
        empty header: an interrupted swap is completed from the end offset of the ``.swap``
        file's last batch (``cleaner_swap.complete_interrupted_swaps``), so it is never empty."""
        following = snapshot.segments.index(group[-1]) + 1
        group_end = (
            snapshot.segments[following].base_offset
            if following < len(snapshot.segments)
            else log.active_segment.base_offset
        )
        base = group[0].base_offset
        aborted: list[AbortedTxn] = self._run_on_log(
            lambda: log.collect_aborted_transactions(base, group_end)
        )
        txn.add_aborted_txns(aborted)
        cleaner_filter = CleanerFilter(
            offset_map,
            txn,
            snapshot.last_records,
            now_ms=now_ms,
            delete_retention_ms=log.config.delete_retention_ms,
        )
        writer = CleanedSegmentWriter(log.directory, base, log.config)
        try:
            for data, is_last in self._batches(group):
                result = cleaner_filter.filter(data, keep_header=is_last)
                self._records_read += result.records_read
                self._records_kept += result.records_kept
                if result.data is not None:
                    writer.write(result.data)
                    self._check_done(len(result.data))
            writer.finish(cleaner_filter.take_retained_aborted_txns())
        except BaseException:
            writer.discard()
            raise
        self._bytes_written += writer.size
        self._crash_point(SwapStep.CLEANED)  # a crash here leaves the .cleaned files behind
        self._swap_started = False
        try:
            swapped: bool = self._run_on_log(lambda: self._swap(log, group, now_ms))
            return swapped
        finally:
            # Whatever stopped the group before its swap began (an abort, a stop, a dropped
            # swap), its .cleaned files go; once the swap began, its files are the swap's
            # (completed or rolled back at the next load).
            if not self._swap_started:
                writer.discard()

    def _swap(
        self,
        log: PartitionLog,
        group: Sequence[LogSegment],
        now_ms: int,
    ) -> bool:
        local = log.local_log
        if not self._still_current():
            raise LogChangedError("the cleaning was aborted before its swap")
        if local.index_of_run(group) is None:
            return False
        self._swap_started = True
        swap_in(
            log.directory,
            group[0].base_offset,
            [segment.base_offset for segment in group],
            self._crash_point,
        )
        local.replace_segments(group, open_swapped_segment(group[0], now_ms))
        self._swapped.update(id(segment) for segment in group)
        return True


def _snapshot(log: PartitionLog) -> _LogSnapshot:
    last_records = {
        producer_id: LastRecord(
            entry.last_data_offset if entry.last_data_offset >= 0 else None,
            entry.producer_epoch,
        )
        for producer_id, entry in log.producer_state.producers.items()
    }
    return _LogSnapshot(tuple(log.local_log.segments[:-1]), last_records)
