"""Loading a partition directory, and recovering it after an unclean shutdown.

Theory of operation (Kafka's ``LogLoader``):

* A clean shutdown leaves ``.kafka_cleanshutdown`` in the log dir (``LogManager`` writes it
  after closing every log and removes it once the logs are loaded again). Without it, every
  segment that may hold unflushed data — the one holding the recovery point and all later ones —
  is re-validated batch by batch (CRC included, offsets contiguous). The first torn or corrupt
  batch and everything after it is cut off; if that happens in a segment that is not the last,
  the later segments are deleted too (their data no longer continues the log). Nothing before
  the damage is lost.
* Independently of the marker, any inconsistency is treated as an unclean shutdown of this
  partition (issue 9: one torn file must not stop the broker): a segment whose
  ``.index``/``.timeindex`` is missing or fails its sanity check (size not a multiple of the
  entry size, entries out of order, a position past the log), whose ``.txnindex`` fails its
  (a torn entry, an entry ending before the segment, Kafka's ``TransactionIndex.sanityCheck``),
  whose last batch is torn, or that ends past the next segment's base offset is recovered
  the same way — which rebuilds the indexes and cuts the log at the last valid batch. A
  ``.txnindex`` may be missing: Kafka creates it with its first aborted transaction.
* Recovering a segment empties its ``.txnindex``; the log writes the aborted transactions whose
  markers it holds again once its producer state is known (``storage.producer_replay``, Kafka's
  ``LogLoader.recoverSegment``), so the report's ``recovered_segments`` names them. A corrupt
  ``leader-epoch-checkpoint`` is deleted and rebuilt by re-reading every segment. Kafka only
  sanity-checks the indexes here; it would read a torn tail as the log end.
* A swap of cleaned segments a crash interrupted is completed, or rolled back when its file
  does not read back (``storage.cleaner_swap.complete_interrupted_swaps``); then temporary files
  (``.cleaned``, ``.swap``, ``.deleted``, ``.tmp``) and index files without a ``.log`` are
  removed.

``first_unflushed_segment`` is the pure decision; the rest does the file work and reports what
it did in a ``RecoveryReport``.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from pykraft.storage.aborted_txn import TXN_INDEX_SUFFIX
from pykraft.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, CheckpointError
from pykraft.storage.cleaner_swap import complete_interrupted_swaps
from pykraft.storage.index import OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, CorruptIndexError
from pykraft.storage.leader_epoch_file import LeaderEpochFileCache
from pykraft.storage.log_config import LogConfig
from pykraft.storage.record_batch import BatchHeader, CorruptRecordError
from pykraft.storage.segment import LOG_SUFFIX, LogSegment, parse_base_offset
from pykraft.storage.segment_store import RecoveryReport

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"  # Kafka's LogLoader.CleanShutdownFile
TEMP_SUFFIXES = (".cleaned", ".swap", ".deleted", ".tmp")

logger = logging.getLogger(__name__)


def first_unflushed_segment(
    base_offsets: Sequence[int], recovery_point: int, had_clean_shutdown: bool
) -> int:
    """Index of the first segment that may hold unflushed data (``len`` when none).

    That is the segment holding the recovery point (the floor segment), Kafka's
    ``segments.values(recoveryPoint, Long.MAX)``; after a clean shutdown, none.
    """
    if had_clean_shutdown:
        return len(base_offsets)
    floor = bisect.bisect_right(base_offsets, recovery_point) - 1
    return max(floor, 0)


def remove_stray_files(directory: Path) -> list[str]:
    """Delete temporary files and index files whose ``.log`` is gone."""
    removed: list[str] = []
    logs = {path.name.removesuffix(LOG_SUFFIX) for path in directory.glob(f"*{LOG_SUFFIX}")}
    for path in sorted(directory.iterdir()):
        name = path.name
        orphan = any(
            name.endswith(suffix) and name.removesuffix(suffix) not in logs
            for suffix in (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
        )
        if path.is_file() and (orphan or name.endswith(TEMP_SUFFIXES)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            removed.append(name)
    return removed


def open_segments(directory: Path, config: LogConfig, now_ms: int) -> list[LogSegment]:
    """Every ``<20 digits>.log`` in ``directory``, ordered by base offset."""
    base_offsets = sorted(
        offset
        for path in directory.glob(f"*{LOG_SUFFIX}")
        if (offset := parse_base_offset(path.name, LOG_SUFFIX)) is not None
    )
    return [LogSegment(directory, base, config, now_ms) for base in base_offsets]


def _index_problem(segment: LogSegment) -> str | None:
    try:
        segment.sanity_check()
    except (CorruptIndexError, FileNotFoundError) as error:
        return str(error)
    return None


def _tail_problem(segments: Sequence[LogSegment], number: int) -> str | None:
    """Why segment ``number`` does not end where the log continues (None when it does).

    Cheap — the offset index's last entry, then the few headers after it — so every segment
    is checked at every start, clean or not: a file cut short after a clean shutdown (issue 9)
    is torn at its tail, or ends past where the next segment begins. A file cut at a batch
    boundary reads as a gap, which compaction makes too: it is not damage that can be told.
    """
    segment = segments[number]
    try:
        end = segment.read_next_offset()
    except CorruptRecordError as error:
        return f"{segment.log_path.name}: {error}"
    if number + 1 < len(segments) and not _continues(end, segments[number + 1]):
        later = segments[number + 1].base_offset
        return f"{segment.log_path.name} ends at offset {end}, the next segment starts at {later}"
    return None


def _continues(end: int, following: LogSegment) -> bool:
    """Whether ``following`` continues the log after a segment that ends at ``end``: it
    starts at ``end`` or past it. A gap is the log's own shape, not damage: a follower of a
    compacted leader rolls at the first offset of the batch it appends (Kafka ``UnifiedLog``
    ``roll(Some(firstOffset))``), past the offsets the leader's cleaner removed, and Kafka's
    ``LogLoader`` never compares a segment's end with the next one's base. Only a segment that
    starts inside the one before it (overlapping offsets) does not continue the log."""
    return following.base_offset >= end


def _inconsistency(segments: Sequence[LogSegment], number: int) -> str | None:
    return _index_problem(segments[number]) or _tail_problem(segments, number)


def recover_segments(
    segments: list[LogSegment],
    *,
    recovery_point: int,
    had_clean_shutdown: bool,
    on_batch: Callable[[BatchHeader], None],
    removed_files: Sequence[str] = (),
) -> tuple[list[LogSegment], RecoveryReport]:
    """Recover what needs it (see the module docstring); returns the surviving segments.

    A segment below the unflushed ones that fails ``_inconsistency`` is recovered as if the
    shutdown had been unclean: any inconsistency is a crash of this partition.
    """
    unflushed = first_unflushed_segment(
        [segment.base_offset for segment in segments], recovery_point, had_clean_shutdown
    )
    recovered: list[int] = []
    rebuilt: list[tuple[int, str]] = []
    problems: list[str] = []
    truncated_total = 0
    report_deleted: tuple[int, ...] = ()
    for number, segment in enumerate(segments):
        reason = None if number >= unflushed else _inconsistency(segments, number)
        if number < unflushed and reason is None:
            continue
        if reason is not None:
            rebuilt.append((segment.base_offset, reason))
        result = segment.recover(on_batch)
        recovered.append(segment.base_offset)
        if result.error is not None and result.truncated_bytes:
            problems.append(f"{segment.log_path.name}: {result.error}")
        truncated_total += result.truncated_bytes
        later = segments[number + 1 :]
        if later and (result.truncated_bytes or not _continues(result.next_offset, later[0])):
            # The later segments no longer continue the log (Kafka deletes them too).
            for doomed in later:
                doomed.delete()
            segments = segments[: number + 1]
            report_deleted = tuple(doomed.base_offset for doomed in later)
            break
    report = RecoveryReport(
        had_clean_shutdown=had_clean_shutdown,
        recovery_point=recovery_point,
        recovered_segments=tuple(recovered),
        rebuilt_indexes=tuple(rebuilt),
        truncated_bytes=truncated_total,
        deleted_segments=report_deleted,
        removed_files=tuple(removed_files),
        problems=tuple(problems),
    )
    return segments, report


def _recovered_epoch_assigner(cache: LeaderEpochFileCache) -> Callable[[BatchHeader], None]:
    """Kafka ``LogSegment.recover``: record epochs above the cache's latest as they appear."""

    def on_batch(header: BatchHeader) -> None:
        latest = cache.latest_epoch
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            cache.assign(epoch, header.base_offset)

    return on_batch


@attrs.define
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    leader_epoch_cache: LeaderEpochFileCache
    report: RecoveryReport


def load_log(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int,
    now_ms: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
) -> LoadedLog:
    """Open, clean up and recover a partition directory (creating it when absent)."""
    directory.mkdir(parents=True, exist_ok=True)
    removed = complete_interrupted_swaps(directory)
    removed += remove_stray_files(directory)
    try:
        cache = LeaderEpochFileCache(directory)
    except CheckpointError as error:
        # A corrupt epoch history is rebuilt from the batches: every segment is re-read.
        logger.warning("%s; rebuilding it from the log", error)
        (directory / LEADER_EPOCH_CHECKPOINT).unlink()
        removed.append(f"{LEADER_EPOCH_CHECKPOINT} ({error})")
        cache = LeaderEpochFileCache(directory)
        recovery_point, had_clean_shutdown = 0, False
    history_before_recovery = cache.entries
    segments, report = recover_segments(
        open_segments(directory, config, now_ms),
        recovery_point=recovery_point,
        had_clean_shutdown=had_clean_shutdown,
        on_batch=_recovered_epoch_assigner(cache),
        removed_files=removed,
    )
    start = max(log_start_offset, segments[0].base_offset if segments else 0)
    if segments and start > segments[-1].read_next_offset():
        # Kafka deleteSegmentsIfLogStartGreaterThanLogEnd: nothing left is readable.
        for segment in segments:
            segment.delete()
        segments = []
    if not segments:
        segments = [LogSegment(directory, start, config, now_ms)]
    segments[-1].resize_indexes(config.segment_index_bytes)
    log_end = segments[-1].read_next_offset()
    # Kafka: only a clean shutdown moves the recovery point to the log end; otherwise it only
    # advances when the log is flushed.
    point = log_end if had_clean_shutdown else min(recovery_point, log_end)
    recovered = set(cache.entries) - set(history_before_recovery)
    if any(entry.start_offset < point for entry in recovered):
        # A clean start that still recovered a segment (it failed its sanity check) assigned
        # epochs below the log end, where the point now stands: sync them before it passes
        # them (storage/leader_epoch_file.py, step 2 of the argument).
        cache.flush()
    cache.truncate_loaded_from_end(log_end)  # the file when the log next changes
    cache.truncate_from_start(start)
    return LoadedLog(segments, start, max(point, start), cache, report)
