"""Swapping cleaned segments in, crash-safely (Kafka's ``LocalLog.replaceSegments`` and
``LogLoader``'s recovery of ``.cleaned`` / ``.swap`` / ``.deleted`` files).

One group of segments ``[B, E)`` becomes one segment at base offset ``B`` in these steps, each
followed by ``crash_point(step)`` (tests raise there to stop the swap like a crash):

1. ``CLEANED``: the kept batches are written to ``<B>.log.cleaned``, its indexes to
   ``<B>.index.cleaned`` etc. (``storage.cleaner_segment``), all fsync'd. A crash before the next
   step leaves the old segments whole; recovery deletes the ``.cleaned`` files.
2. ``SWAP``: ``<B>.log.cleaned`` is renamed ``<B>.log.swap`` and the directory fsync'd. From here
   the swap is decided: recovery completes it.
3. ``OLD_RENAMED`` (each), ``OLD_DELETED``: every old segment after ``B`` has its ``.log`` renamed
   ``.log.deleted`` and its indexes removed, then ``B``'s own indexes are replaced by the cleaned
   ones (they described the old file).
4. ``REPLACED``: ``<B>.log.swap`` is renamed over ``<B>.log`` (atomic) and the directory fsync'd;
   the ``.deleted`` files are removed. The new segment opens on the renamed files.

Recovery (``complete_interrupted_swaps``, before ``storage.recovery`` removes temporary files):
a ``<B>.log.swap`` whose batches read back whole ends at ``E`` (the cleaner keeps each group's
last batch, ``storage.cleaner_filter``), so the old segments are exactly the ``.log`` files with
a base offset in ``[B, E)``; they and ``B``'s indexes (old or new: a crash may leave either)
are removed and the swap file renamed to ``<B>.log``, whose indexes recovery then rebuilds. A
swap file that does not read back (it was fsync'd before its rename, so only a damaged disk
does this) is rolled back instead: the ``.deleted`` logs are renamed back and the swap file
removed.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from pykraft.storage.aborted_txn import TXN_INDEX_SUFFIX
from pykraft.storage.atomic_file import fsync_directory
from pykraft.storage.batch_scan import iter_valid_batches
from pykraft.storage.cleaner_segment import cleaned_path
from pykraft.storage.index import OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX
from pykraft.storage.record_batch import CorruptRecordError
from pykraft.storage.segment import LOG_SUFFIX, LogSegment, parse_base_offset, segment_file_name

SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_INDEX_SUFFIXES = (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

logger = logging.getLogger(__name__)


class SwapStep(enum.Enum):
    CLEANED = "cleaned"
    SWAP = "swap"
    OLD_RENAMED = "old renamed"  # after each old segment after the first went to .deleted
    OLD_DELETED = "old deleted"
    REPLACED = "replaced"


CrashPoint = Callable[[SwapStep], None]


def no_crash(step: SwapStep) -> None:
    return None


def _remove_indexes(directory: Path, base_offset: int) -> None:
    for suffix in _INDEX_SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            (directory / segment_file_name(base_offset, suffix)).unlink()


def swap_in(
    directory: Path,
    base_offset: int,
    old_base_offsets: Sequence[int],
    crash_point: CrashPoint = no_crash,
) -> None:
    """Steps 2 to 4 for a fsync'd ``<base>.log.cleaned`` replacing ``old_base_offsets`` (whose
    first is ``base_offset``). The caller reopens the segment afterwards."""
    assert old_base_offsets and old_base_offsets[0] == base_offset, "the group starts at base"
    log_name = segment_file_name(base_offset, LOG_SUFFIX)
    swap = directory / (log_name + SWAP_SUFFIX)
    os.rename(cleaned_path(directory, base_offset, LOG_SUFFIX), swap)
    fsync_directory(directory)
    crash_point(SwapStep.SWAP)
    deleted: list[Path] = []
    for old in old_base_offsets[1:]:
        old_log = directory / segment_file_name(old, LOG_SUFFIX)
        doomed = old_log.with_name(old_log.name + DELETED_SUFFIX)
        os.rename(old_log, doomed)
        deleted.append(doomed)
        _remove_indexes(directory, old)
        crash_point(SwapStep.OLD_RENAMED)
    _remove_indexes(directory, base_offset)
    for suffix in _INDEX_SUFFIXES:
        with contextlib.suppress(FileNotFoundError):  # no aborted txn: no .txnindex
            os.rename(
                cleaned_path(directory, base_offset, suffix),
                directory / segment_file_name(base_offset, suffix),
            )
    crash_point(SwapStep.OLD_DELETED)
    os.rename(swap, directory / log_name)
    fsync_directory(directory)
    for doomed in deleted:
        with contextlib.suppress(FileNotFoundError):
            doomed.unlink()
    crash_point(SwapStep.REPLACED)


def _swap_end_offset(path: Path) -> int | None:
    """The offset after the last batch of a swap file; None when it does not read back whole
    (a torn or CRC-invalid batch: the cleaned copy is not trusted)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = None
        for _, header in iter_valid_batches(fd, os.fstat(fd).st_size):
            end = header.next_offset
        return end
    except CorruptRecordError:
        return None
    finally:
        os.close(fd)


def complete_interrupted_swaps(directory: Path) -> list[str]:
    """Finish (or roll back) every swap a crash interrupted; returns what it did."""
    done: list[str] = []
    for swap in sorted(directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
        base = parse_base_offset(swap.name.removesuffix(SWAP_SUFFIX), LOG_SUFFIX)
        if base is None:
            continue
        end = _swap_end_offset(swap)
        if end is None:
            _roll_back(directory, swap)
            done.append(f"{swap.name}: unreadable, swap rolled back")
            continue
        for path in directory.glob(f"*{LOG_SUFFIX}"):
            old = parse_base_offset(path.name, LOG_SUFFIX)
            if old is not None and base < old < end:
                path.unlink()
                _remove_indexes(directory, old)
        _remove_indexes(directory, base)
        os.rename(swap, directory / segment_file_name(base, LOG_SUFFIX))
        fsync_directory(directory)
        done.append(f"{swap.name}: swap completed up to offset {end}")
        logger.info("%s: completed an interrupted swap of cleaned segments", swap)
    return done


def _roll_back(directory: Path, swap: Path) -> None:
    for doomed in directory.glob(f"*{LOG_SUFFIX}{DELETED_SUFFIX}"):
        original = doomed.with_name(doomed.name.removesuffix(DELETED_SUFFIX))
        if not original.exists():
            os.rename(doomed, original)
    swap.unlink()
    fsync_directory(directory)


def open_swapped_segment(old: LogSegment, now_ms: int) -> LogSegment:
    """The segment now at ``old``'s name, on the files the swap renamed into place."""
    segment = LogSegment(old.log_path.parent, old.base_offset, old.config, now_ms)
    segment.created_ms = old.created_ms
    return segment
