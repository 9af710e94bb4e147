"""A partition replica's transactions, read from its files: the last stable offset and the
aborted transactions a ``read_committed`` scan must hide (``export.isolation`` has the rules).

Theory of operation. No broker is asked, so the scan rebuilds what the broker's producer state
knows, the way the broker does when it opens a log (``UnifiedLog.rebuildProducerState``):
the newest producer snapshot (``<offset>.snapshot``, written at every segment roll and at
shutdown; it keeps each producer's open transaction) at or below the bound, then a replay of
the batch headers from there to the bound, through storage's own ``ProducerStateManager``, so
"a transactional batch opens a transaction, its marker ends it" is the broker's code, not a
copy. Only markers are read past their header. The transactions still open at the bound give
the last stable offset; the bound is the checkpointed high watermark (or the log end, for a
scan that ignores the high watermark).

Aborted transactions come from the ``.txnindex`` files (each entry lives with the segment its
ABORT marker is in), searched from the segment holding the range's start as the broker
searches them for a Fetch (``LocalLog.collectAbortedTransactions``), and, for the replayed
tail, from the markers the replay saw. The two agree on a healthy log; the replay covers an
index entry lost to a crash the broker has not recovered from yet. A ``.txnindex`` that cannot
be read whole is an error, never a reason to show aborted records.

Nothing here writes: snapshots are loaded by a store that refuses writes and deletes (a broker
deletes a corrupt snapshot; a reader only skips it, as ``load_as_of`` does).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from pykraft.export.isolation import overlapping
from pykraft.export.log_dirs import LogScanError, list_segments
from pykraft.storage.aborted_txn import (
    ABORTED_TXN_SIZE,
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    TxnIndexProblem,
    collect_across_segments,
    decode_entries,
    sanity_problem,
)
from pykraft.storage.batch_scan import read_batch_header
from pykraft.storage.producer_entry import ProducerStateEntry
from pykraft.storage.producer_snapshot import CorruptSnapshotError, decode_snapshot, snapshot_file
from pykraft.storage.producer_state import ProducerStateManager
from pykraft.storage.producer_state_file import list_snapshot_offsets
from pykraft.storage.record_batch import BatchHeader, CorruptRecordError
from pykraft.storage.txn_markers import EndTransactionMarker, decode_end_txn_marker

# Snapshots hold one 46-byte entry per producer; a file far larger is not one to load.
SNAPSHOT_BYTES_MAX = 64 * 1024 * 1024


@attrs.frozen
class TxnState:
    """A replica's transactions as of ``end_offset`` (the bound, or the log end it found)."""

    end_offset: int
    last_stable_offset: int
    # Open transactions at end_offset: (first offset, producer id), oldest first.
    open_txns: tuple[tuple[int, int], ...]
    # Aborted transactions whose marker the replay saw (from the snapshot on).
    replayed_aborted: tuple[AbortedTxn, ...]


class _ReadOnlySnapshots:
    """The partition directory's snapshot files, for reading only."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def offsets(self) -> list[int]:
        return list_snapshot_offsets(self.directory)

    def read(self, offset: int) -> list[ProducerStateEntry]:
        path = snapshot_file(self.directory, offset)
        try:
            with path.open("rb") as file:
                data = file.read(SNAPSHOT_BYTES_MAX + 1)
        except OSError as error:  # deleted by the broker since it was listed, unreadable
            raise CorruptSnapshotError(f"cannot read: {error.strerror}") from None
        if len(data) > SNAPSHOT_BYTES_MAX:
            raise CorruptSnapshotError(f"over {SNAPSHOT_BYTES_MAX} bytes")
        return decode_snapshot(data)

    def write(self, offset: int, data: bytes, *, durable: bool = True) -> None:
        raise AssertionError(f"a scan never writes producer snapshots ({offset})")

    def sync(self, offset: int) -> None:
        raise AssertionError(f"a scan never syncs producer snapshots ({offset})")

    def delete(self, offset: int) -> None:
        raise AssertionError(f"a scan never deletes producer snapshots ({offset})")


def read_txn_state(directory: Path, log_start_offset: int, bound: int | None) -> TxnState:
    """Producer state as of ``bound`` (None: the end of the log), from the newest snapshot at
    or below it plus a replay of the batches after the snapshot."""
    segments = list_segments(directory)
    state = ProducerStateManager(directory, snapshots=_ReadOnlySnapshots(directory))
    newest = bound if bound is not None else max([log_start_offset, *state.snapshots.offsets()])
    replay_from = state.load_as_of(newest, log_start_offset)
    # With no bound: the log end, at least the last segment's base (an empty active segment).
    end_offset = max([replay_from, *(base for base, _ in segments[-1:])])
    aborted = []
    for header, marker in _replay(segments, replay_from, bound):
        completed = state.update(
            header, header.base_offset, header.last_offset, header.max_timestamp, marker=marker
        )
        end_offset = max(end_offset, header.next_offset)
        if completed is None:
            continue
        if completed.is_aborted:
            aborted.append(AbortedTxn.of(completed, state.last_stable_offset(completed)))
        state.complete_txn(completed)
    if bound is not None:
        end_offset = bound
    first_open = state.first_undecided_offset()
    last_stable_offset = end_offset
    if first_open is not None:
        last_stable_offset = min(max(first_open, log_start_offset), end_offset)
    return TxnState(
        end_offset,
        last_stable_offset,
        tuple(state.ongoing_txns.items()),
        tuple(aborted),
    )


def _replay(
    segments: Sequence[tuple[int, Path]], offset: int, bound: int | None
) -> Iterator[tuple[BatchHeader, EndTransactionMarker | None]]:
    """The batches holding offsets in ``[offset, bound)`` with a control batch's marker.

    Below ``bound`` the log must be whole; with no bound, a torn or corrupt header ends the
    log there (as recovery would truncate it, and as ``measure_log_end_offset`` reads it)."""
    for index, (base_offset, path) in enumerate(segments):
        next_base = segments[index + 1][0] if index + 1 < len(segments) else None
        if next_base is not None and next_base <= offset:
            continue
        if bound is not None and base_offset >= bound:
            return
        try:
            with path.open("rb") as file:
                yield from _segment_batches(file.fileno(), path, offset, bound)
        except OSError as error:
            raise LogScanError(f"segment {path}: cannot read: {error.strerror}") from None
        except _TornTail:
            return


class _TornTail(Exception):
    """The log ends inside this segment (only when reading to the log end)."""


def _segment_batches(
    fd: int, path: Path, offset: int, bound: int | None
) -> Iterator[tuple[BatchHeader, EndTransactionMarker | None]]:
    size = os.fstat(fd).st_size
    position, next_offset = 0, None
    while position < size:
        try:
            header = read_batch_header(fd, position, size)
        except CorruptRecordError as error:
            if bound is None:
                raise _TornTail from None
            if next_offset is not None and next_offset >= bound:
                return  # a torn tail above the bound: never read
            raise LogScanError(
                f"segment {path} at byte {position}: {error} (below the high watermark "
                f"{bound}, where the log must be whole)"
            ) from None
        if bound is not None and header.base_offset >= bound:
            return
        next_offset = header.next_offset
        if header.last_offset >= offset:
            yield header, _marker(fd, path, position, header)
        position += header.size_in_bytes


def _marker(fd: int, path: Path, position: int, header: BatchHeader) -> EndTransactionMarker | None:
    if not header.is_control:
        return None
    data = os.pread(fd, header.size_in_bytes, position)
    try:
        return decode_end_txn_marker(data)
    except CorruptRecordError as error:
        raise LogScanError(f"segment {path} at byte {position}: corrupt marker: {error}") from None


class _IndexedSegment:
    """A segment's base offset and, read when the search reaches it, its ``.txnindex``."""

    def __init__(self, base_offset: int, log_path: Path) -> None:
        self.base_offset = base_offset
        self.path = log_path.with_suffix(TXN_INDEX_SUFFIX)

    @functools.cached_property
    def aborted_txns(self) -> Sequence[AbortedTxn]:
        data = self._read()
        if len(data) % ABORTED_TXN_SIZE:
            # A running broker's append can be caught half-copied (an entry straddling a page);
            # it completes at once. A tail still torn is a crash the broker has not recovered.
            data = self._read()
        try:
            entries = decode_entries(data)
        except TxnIndexProblem as problem:
            raise self._untrusted(str(problem)) from None
        problem_text = sanity_problem(entries, self.base_offset)
        if problem_text is not None:
            raise self._untrusted(problem_text)
        return tuple(entries)

    def _read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""  # created by the first abort: most segments have none
        except OSError as error:
            raise LogScanError(f"{self.path}: cannot read: {error.strerror}") from None

    def _untrusted(self, problem: str) -> LogScanError:
        return LogScanError(
            f"transaction index {self.path}: {problem}; the broker rebuilds it when it "
            "recovers the log (read it with isolation level read_uncommitted meanwhile)"
        )


def aborted_txns(
    directory: Path, state: TxnState, start_offset: int, end_offset: int
) -> tuple[AbortedTxn, ...]:
    """The aborted transactions with records in ``[start_offset, end_offset)``, by marker."""
    if start_offset >= end_offset:
        return ()
    segments = [_IndexedSegment(base, path) for base, path in list_segments(directory)]
    indexed = collect_across_segments(segments, start_offset, end_offset)
    return overlapping([*indexed, *state.replayed_aborted], start_offset, end_offset)
