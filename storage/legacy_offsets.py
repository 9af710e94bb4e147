"""ListOffsets v0's answer: up to ``max_num_offsets`` segment offsets at or before a time.

Kafka 3.9 still serves the pre-KIP-79 lookup for ListOffsets v0 (``UnifiedLog.
legacyFetchOffsetsBefore`` under ``Partition.legacyFetchOffsetsForTimestamp``; Burrow and old
Sarama use it). It knows no record timestamps: each segment offers its base offset (at least
the log start offset) with the time it was last written, and a non-empty active segment adds
the log end offset at ``now_ms`` (``legacy_offset_entries``). LATEST (-1) starts from the last
entry, EARLIEST (-2) from the first, any other time from the last entry written at or before
it; the answer walks backwards from there, newest first (``legacy_offsets_before``). A consumer
never sees past the high watermark: offsets above it are dropped and the high watermark put
first.

Pure: the caller reads each segment's time (``SegmentView.largest_timestamp_ms``, which may
stat the file) and passes ``(base_offset, time)`` pairs, once per partition and request.

Where pykraft differs: Kafka reads a segment's file modification time; a segment here offers
its largest record timestamp, the file's time only when it holds no records
(``storage.segment``). For producers stamping create time the two agree to within the
producer's linger; the LATEST/EARLIEST answers (what clients ask v0 for) do not use it. And an
answer holds at most ``MAX_LEGACY_OFFSETS`` offsets (Kafka has no bound; clients ask for one).
"""

from __future__ import annotations

from collections.abc import Sequence

from pykraft.storage.log_reader import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

# The most offsets one v0 answer carries, whatever ``max_num_offsets`` (a client's int32) asks.
MAX_LEGACY_OFFSETS = 1_000

# (offset, time last written): one per segment, then the log end at ``now_ms``.
LegacyOffsetEntry = tuple[int, int]


def legacy_offset_entries(
    segment_times: Sequence[tuple[int, int]],
    *,
    log_start_offset: int,
    log_end_offset: int,
    active_segment_empty: bool,
    now_ms: int,
) -> tuple[LegacyOffsetEntry, ...]:
    """``legacyFetchOffsetsBefore``'s ``offsetTimeArray``: ``segment_times`` is each segment's
    ``(base_offset, time last written)``, oldest first, the active segment last."""
    assert segment_times, "a log always has an active segment"
    entries = [(max(base, log_start_offset), time_ms) for base, time_ms in segment_times]
    if not active_segment_empty:
        entries.append((log_end_offset, now_ms))
    return tuple(entries)


def legacy_offsets_before(
    entries: Sequence[LegacyOffsetEntry],
    *,
    high_watermark: int,
    timestamp: int,
    max_num_offsets: int,
    is_from_consumer: bool,
) -> list[int]:
    """Kafka's ``legacyFetchOffsetsForTimestamp``; ``timestamp`` is -1, -2 or a time (the
    caller answers other negative values UNSUPPORTED_VERSION, as ``KafkaApis`` does, and a
    negative ``max_num_offsets`` with the error Kafka's failed array allocation gives)."""
    assert timestamp >= EARLIEST_TIMESTAMP, timestamp
    assert max_num_offsets >= 0, max_num_offsets
    if timestamp == LATEST_TIMESTAMP:
        start = len(entries) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        start = 0
    else:
        start = len(entries) - 1
        while start >= 0 and entries[start][1] > timestamp:
            start -= 1
    count = min(max_num_offsets, MAX_LEGACY_OFFSETS, start + 1)
    offsets = [entries[start - j][0] for j in range(count)]
    if is_from_consumer and any(offset > high_watermark for offset in offsets):
        return [high_watermark, *_drop_while_above(offsets, high_watermark)]
    return offsets


def _drop_while_above(offsets: list[int], high_watermark: int) -> list[int]:
    """Scala's ``dropWhile(_ > hw)``: the leading offsets above the high watermark go."""
    for index, offset in enumerate(offsets):
        if offset <= high_watermark:
            return offsets[index:]
    return []
