"""Which segments retention deletes: pure decisions over segment summaries (no file I/O).

Kafka's ``UnifiedLog.deleteOldSegments`` runs three passes in order, each over the segments the
previous one kept, each deleting a prefix of the log:

1. log start offset breached: a segment whose successor starts at or below the log start
   offset holds nothing readable (``DeleteRecords`` moved the start past it);
2. ``retention.bytes``: while the log minus the segment is still at least the limit;
3. ``retention.ms``: while ``now - segment.largest_timestamp > retention.ms``.

Passes 2 and 3 run only when ``cleanup.policy`` contains ``delete`` (Kafka's ``config.delete``);
otherwise (``compact`` alone, or an empty policy) only pass 1 runs, whatever ``retention.ms`` and
``retention.bytes`` say. pykraft has no log cleaner, so a compact topic keeps all its data.

A segment is only deletable when every offset in it is below the high watermark (consumers may
still need the rest) and never when it is the active (last) segment — unlike Kafka, which rolls
a fresh active segment to delete the old one, we keep it; it goes on the next roll.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Sequence

import attrs

from pykraft.storage.log_config import CleanupPolicy


class RetentionReason(enum.Enum):
    LOG_START_OFFSET_BREACH = "log start offset breach"
    RETENTION_BYTES = "retention.bytes"
    RETENTION_MS = "retention.ms"


@attrs.frozen
class SegmentInfo:
    base_offset: int
    size_bytes: int
    largest_timestamp_ms: int


@attrs.frozen
class RetentionDecision:
    # Base offsets of the segments to delete, oldest first, with why each goes.
    deletions: tuple[tuple[int, RetentionReason], ...]
    log_start_offset: int

    @property
    def base_offsets(self) -> tuple[int, ...]:
        return tuple(base for base, _ in self.deletions)


# predicate(segment, next_segment_base_offset) -> delete it?
Predicate = Callable[[SegmentInfo, int], bool]


def deletable_prefix(
    segments: Sequence[SegmentInfo], high_watermark: int, predicate: Predicate
) -> int:
    """How many leading segments ``predicate`` accepts, stopping at the first refusal, at
    a segment reaching the high watermark, or at the active (last) segment."""
    count = 0
    for segment, successor in itertools.pairwise(segments):
        # Every offset of the segment is below its successor's base offset.
        if successor.base_offset > high_watermark or not predicate(segment, successor.base_offset):
            break
        count += 1
    return count


def _log_start_breached(log_start_offset: int) -> Predicate:
    return lambda segment, next_base: next_base <= log_start_offset


def _retention_bytes_breached(segments: Sequence[SegmentInfo], retention_bytes: int) -> Predicate:
    excess = sum(segment.size_bytes for segment in segments) - retention_bytes

    def predicate(segment: SegmentInfo, next_base: int) -> bool:
        nonlocal excess
        if excess - segment.size_bytes < 0:
            return False
        excess -= segment.size_bytes
        return True

    return predicate


def _retention_ms_breached(now_ms: int, retention_ms: int) -> Predicate:
    return lambda segment, next_base: now_ms - segment.largest_timestamp_ms > retention_ms


def retention_limits(
    cleanup_policy: frozenset[CleanupPolicy], retention_ms: int, retention_bytes: int
) -> tuple[int, int]:
    """The ``(retention_ms, retention_bytes)`` that apply under ``cleanup_policy``: as given
    when it contains ``delete``, else -1/-1 (unlimited). Kafka ``UnifiedLog.deleteOldSegments``
    runs the time and size passes only ``if (config.delete)``."""
    if CleanupPolicy.DELETE in cleanup_policy:
        return retention_ms, retention_bytes
    return -1, -1


def decide_retention(
    segments: Sequence[SegmentInfo],
    *,
    log_start_offset: int,
    high_watermark: int,
    now_ms: int,
    cleanup_policy: frozenset[CleanupPolicy],
    retention_ms: int,
    retention_bytes: int,
) -> RetentionDecision:
    """The segments to delete (a prefix of ``segments``, ordered by base offset) and the log
    start offset afterwards. ``retention_ms``/``retention_bytes`` < 0 mean unlimited; both are
    ignored unless ``cleanup_policy`` contains ``delete``."""
    retention_ms, retention_bytes = retention_limits(cleanup_policy, retention_ms, retention_bytes)
    remaining = list(segments)
    deletions: list[tuple[int, RetentionReason]] = []
    passes: list[tuple[RetentionReason, Callable[[], Predicate] | None]] = [
        (RetentionReason.LOG_START_OFFSET_BREACH, lambda: _log_start_breached(log_start_offset)),
        (
            RetentionReason.RETENTION_BYTES,
            (lambda: _retention_bytes_breached(remaining, retention_bytes))
            if retention_bytes >= 0
            else None,
        ),
        (
            RetentionReason.RETENTION_MS,
            (lambda: _retention_ms_breached(now_ms, retention_ms)) if retention_ms >= 0 else None,
        ),
    ]
    for reason, make_predicate in passes:
        if make_predicate is None:
            continue
        count = deletable_prefix(remaining, high_watermark, make_predicate())
        deletions.extend((segment.base_offset, reason) for segment in remaining[:count])
        del remaining[:count]
    new_start = log_start_offset
    if deletions and remaining:
        new_start = max(log_start_offset, remaining[0].base_offset)
    return RetentionDecision(tuple(deletions), new_start)
