"""Which log the cleaner cleans next, and how far (Kafka's ``LogCleanerManager`` decisions and
``Cleaner.groupSegmentsBySize``). Pure: a ``LogSummary`` of each log and ``now_ms`` in, a
``LogToClean`` out.

* The first dirty offset is the cleaner checkpoint (``cleaner-offset-checkpoint``), or the log
  start when there is none, when it is below the log start, or past the log end (then the
  checkpoint is rewritten: ``force_update_checkpoint``) — Kafka's ``cleanableOffsets``.
* The first uncleanable offset is the smallest of the last stable offset (never clean what is
  not yet stable or replicated), the active segment's base offset (the active segment is never
  cleaned), and, with ``min.compaction.lag.ms`` > 0, the base offset of the first dirty segment
  whose largest timestamp is within that lag of ``now``.
* The dirty ratio is the bytes of the segments in ``[first dirty, first uncleanable segment)``
  over those plus the clean segments' bytes (``LogToClean.cleanableRatio``). A log is cleanable
  when its ratio passes ``min.cleanable.dirty.ratio``, or when ``max.compaction.lag.ms`` has
  passed since the first batch of its oldest dirty segment (``maxCompactionDelay``) and it has
  cleanable bytes; the filthiest (highest ratio) cleanable log goes first.
* Cleaning rewrites every segment below the end of the offset map in groups: consecutive
  segments whose log bytes fit ``segment.bytes``, whose index bytes fit ``segment.index.bytes``,
  and whose offsets stay within a segment's 32-bit relative range.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence

import attrs

from pykraft.storage.log_config import LogConfig
from pykraft.storage.segment_store import MAX_RELATIVE_OFFSET
from pykraft.storage.topic_partition import TopicPartition


@attrs.frozen
class SegmentSummary:
    """What the cleaner's choice reads of one segment."""

    base_offset: int
    size: int
    largest_timestamp_ms: int
    first_batch_timestamp_ms: int  # Kafka getFirstBatchTimestamp; -1 when unknown or empty
    offset_index_bytes: int = 0
    time_index_bytes: int = 0


@attrs.frozen
class LogSummary:
    topic_partition: TopicPartition
    config: LogConfig
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    segments: tuple[SegmentSummary, ...]  # ordered; the last one is active


@attrs.frozen
class CleanableOffsets:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool


@attrs.frozen
class LogToClean:
    topic_partition: TopicPartition
    first_dirty_offset: int
    first_uncleanable_offset: int  # base offset of the first segment not cleaned
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def _floor_index(segments: Sequence[SegmentSummary], offset: int) -> int:
    bases = [segment.base_offset for segment in segments]
    return max(bisect.bisect_right(bases, offset) - 1, 0)


def _non_active_from(segments: Sequence[SegmentSummary], offset: int) -> Sequence[SegmentSummary]:
    """Kafka ``nonActiveLogSegmentsFrom``: from the segment holding ``offset``, active excluded."""
    return segments[_floor_index(segments, offset) : -1]


def _overlapping(
    segments: Sequence[SegmentSummary], from_offset: int, to_offset: int
) -> Sequence[SegmentSummary]:
    """Kafka ``logSegments(from, to)``: the segments holding offsets in ``[from, to)``."""
    if from_offset >= to_offset:
        return ()
    return [
        segment
        for segment in segments[_floor_index(segments, from_offset) :]
        if segment.base_offset < to_offset
    ]


def cleanable_offsets(log: LogSummary, checkpoint: int | None, now_ms: int) -> CleanableOffsets:
    """Kafka ``LogCleanerManager.cleanableOffsets``."""
    dirty = log.log_start_offset if checkpoint is None else checkpoint
    force = False
    if dirty < log.log_start_offset or dirty > log.log_end_offset:
        dirty, force = log.log_start_offset, True
    candidates = [log.last_stable_offset, log.segments[-1].base_offset]
    lag_ms = max(log.config.min_compaction_lag_ms, 0)
    if lag_ms > 0:
        for segment in _non_active_from(log.segments, dirty):
            if segment.largest_timestamp_ms > now_ms - lag_ms:
                candidates.append(segment.base_offset)
                break
    return CleanableOffsets(dirty, min(candidates), force)


def max_compaction_delay_ms(log: LogSummary, first_dirty_offset: int, now_ms: int) -> int:
    """Kafka ``maxCompactionDelay``: how long past ``max.compaction.lag.ms`` the oldest dirty
    segment's first batch is (0 when it is not)."""
    stamps = [
        segment.first_batch_timestamp_ms
        for segment in _non_active_from(log.segments, first_dirty_offset)
        if segment.first_batch_timestamp_ms > 0
    ]
    if not stamps:
        return 0
    clean_until_ms = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return max(0, clean_until_ms - min(stamps))


def log_to_clean(log: LogSummary, offsets: CleanableOffsets, now_ms: int) -> LogToClean:
    """Kafka ``LogToClean`` with ``calculateCleanableBytes``."""
    segments = log.segments
    uncleanable = offsets.first_uncleanable_dirty_offset
    first_uncleanable = (_non_active_from(segments, uncleanable) or segments[-1:])[0].base_offset
    dirty = offsets.first_dirty_offset
    clean_bytes = sum(s.size for s in _overlapping(segments, -1, dirty))
    cleanable = _overlapping(segments, min(dirty, first_uncleanable), first_uncleanable)
    return LogToClean(
        topic_partition=log.topic_partition,
        first_dirty_offset=dirty,
        first_uncleanable_offset=first_uncleanable,
        clean_bytes=clean_bytes,
        cleanable_bytes=sum(s.size for s in cleanable),
        needs_compaction_now=max_compaction_delay_ms(log, dirty, now_ms) > 0,
    )


@attrs.frozen
class FilthiestChoice:
    chosen: LogToClean | None
    checkpoints_to_reset: tuple[tuple[TopicPartition, int], ...]
    # Kafka's dirtiestLogCleanableRatio (the max-dirty-percent gauge): the highest dirty ratio
    # of the compacted logs holding any bytes, cleanable now or not; 0 when there are none.
    max_dirty_ratio: float = 0.0


def grab_filthiest_compacted_log(
    logs: Iterable[LogSummary],
    checkpoints: Mapping[TopicPartition, int],
    now_ms: int,
    *,
    skip: frozenset[TopicPartition] = frozenset(),
) -> FilthiestChoice:
    """Kafka ``grabFilthiestCompactedLog``: the compacted log with the highest dirty ratio
    among those cleanable now (``skip``: in progress, paused, or uncleanable)."""
    candidates: list[tuple[LogToClean, LogConfig]] = []
    resets: list[tuple[TopicPartition, int]] = []
    for log in logs:
        if not log.config.compact or log.topic_partition in skip:
            continue
        offsets = cleanable_offsets(log, checkpoints.get(log.topic_partition), now_ms)
        if offsets.force_update_checkpoint:
            resets.append((log.topic_partition, offsets.first_dirty_offset))
        candidate = log_to_clean(log, offsets, now_ms)
        if candidate.total_bytes > 0:
            candidates.append((candidate, log.config))
    cleanable = [
        candidate
        for candidate, config in candidates
        if (candidate.needs_compaction_now and candidate.cleanable_bytes > 0)
        or candidate.cleanable_ratio > config.min_cleanable_dirty_ratio
    ]
    chosen = max(
        cleanable,
        key=lambda c: (c.cleanable_ratio, c.topic_partition.topic, -c.topic_partition.partition),
        default=None,
    )
    dirtiest = max((candidate.cleanable_ratio for candidate, _ in candidates), default=0.0)
    return FilthiestChoice(chosen, tuple(resets), dirtiest)


def group_segments_by_size(
    segments: Sequence[SegmentSummary], max_size: int, max_index_size: int, end_offset: int
) -> list[list[SegmentSummary]]:
    """Kafka ``groupSegmentsBySize``; ``end_offset`` ends the last segment's offsets."""
    groups: list[list[SegmentSummary]] = []
    index = 0
    while index < len(segments):
        group = [segments[index]]
        log_size, offset_index, time_index = (
            group[0].size,
            group[0].offset_index_bytes,
            group[0].time_index_bytes,
        )
        index += 1
        while index < len(segments):
            nxt = segments[index]
            last_offset = (
                segments[index + 1].base_offset - 1 if index + 1 < len(segments) else end_offset - 1
            )
            if (
                log_size + nxt.size > max_size
                or offset_index + nxt.offset_index_bytes > max_index_size
                or time_index + nxt.time_index_bytes > max_index_size
                or (nxt.size and last_offset - group[0].base_offset > MAX_RELATIVE_OFFSET)
            ):
                break
            group.append(nxt)
            log_size += nxt.size
            offset_index += nxt.offset_index_bytes
            time_index += nxt.time_index_bytes
            index += 1
        groups.append(group)
    return groups
