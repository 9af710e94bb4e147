"""Loading a partition directory, and recovering it after an unclean shutdown.

Theory of operation (Kafka's ``LogLoader``):

* A clean shutdown leaves ``.kafka_cleanshutdown`` in the log dir (``LogManager`` writes it
  after closing every log and removes it once the logs are loaded again). Without it, every
  segment that may hold unflushed data — the one holding the recovery point and all later ones —
  is re-validated batch by batch (CRC included, offsets contiguous). The first torn or corrupt
  batch and everything after it is cut off; if that happens in a segment that is not the last,
  the later segments are deleted too (their data no longer continues the log). Nothing before
  the damage is lost.
* Independently of the marker, any segment whose ``.index``/``.timeindex`` is missing or fails
  its sanity check (size not a multiple of the entry size, entries out of order, a position
  past the log) is recovered the same way, which rebuilds both indexes from the log.
* Temporary files (``.cleaned``, ``.swap``, ``.deleted``, ``.tmp``) and index files without a
  ``.log`` are removed first.

``first_unflushed_segment`` is the pure decision; the rest does the file work and reports what
it did in a ``RecoveryReport``.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from storage.index import OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, CorruptIndexError
from storage.log_config import LogConfig
from storage.record_batch import BatchHeader
from storage.segment import LOG_SUFFIX, LogSegment, parse_base_offset

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"  # Kafka's LogLoader.CleanShutdownFile
TEMP_SUFFIXES = (".cleaned", ".swap", ".deleted", ".tmp")


@attrs.frozen
class RecoveryReport:
    had_clean_shutdown: bool
    recovery_point: int  # the checkpointed recovery point recovery started from
    recovered_segments: tuple[int, ...]  # base offsets re-validated
    rebuilt_indexes: tuple[tuple[int, str], ...]  # (base offset, why) outside normal recovery
    truncated_bytes: int
    deleted_segments: tuple[int, ...]  # segments after a damaged one
    removed_files: tuple[str, ...]  # temporary and orphaned files
    problems: tuple[str, ...]  # what stopped a scan, per damaged segment


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
            for suffix in (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX)
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


def recover_segments(
    segments: list[LogSegment],
    *,
    recovery_point: int,
    had_clean_shutdown: bool,
    on_batch: Callable[[BatchHeader], None],
    removed_files: Sequence[str] = (),
) -> tuple[list[LogSegment], RecoveryReport]:
    """Recover what needs it (see the module docstring); returns the surviving segments."""
    unflushed = first_unflushed_segment(
        [segment.base_offset for segment in segments], recovery_point, had_clean_shutdown
    )
    recovered: list[int] = []
    rebuilt: list[tuple[int, str]] = []
    problems: list[str] = []
    truncated_total = 0
    for number, segment in enumerate(segments):
        reason = None if number >= unflushed else _index_problem(segment)
        if number < unflushed and reason is None:
            continue
        if reason is not None:
            rebuilt.append((segment.base_offset, reason))
        result = segment.recover(on_batch)
        recovered.append(segment.base_offset)
        if result.error is not None and result.truncated_bytes:
            problems.append(f"{segment.log_path.name}: {result.error}")
        truncated_total += result.truncated_bytes
        if result.truncated_bytes and number + 1 < len(segments):
            deleted = segments[number + 1 :]
            for later in deleted:
                later.delete()
            segments = segments[: number + 1]
            report_deleted = tuple(later.base_offset for later in deleted)
            break
    else:
        report_deleted = ()
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
