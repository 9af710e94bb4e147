"""Retention decisions (Kafka UnifiedLog.deleteOldSegments: log-start breach, retention.bytes,
retention.ms — the last two only when cleanup.policy contains delete; never the active segment,
never data at or above the high watermark)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pykraft.storage.log_config import CleanupPolicy, LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.retention import (
    RetentionReason,
    SegmentInfo,
    decide_retention,
    retention_limits,
)

START = RetentionReason.LOG_START_OFFSET_BREACH
BYTES = RetentionReason.RETENTION_BYTES
TIME = RetentionReason.RETENTION_MS
DELETE = frozenset({CleanupPolicy.DELETE})
COMPACT = frozenset({CleanupPolicy.COMPACT})
COMPACT_DELETE = frozenset({CleanupPolicy.COMPACT, CleanupPolicy.DELETE})
NO_POLICY: frozenset[CleanupPolicy] = frozenset()

# Four segments of 100 offsets and 1000 bytes; the last one is active.
SEGMENTS = [
    SegmentInfo(base_offset=0, size_bytes=1000, largest_timestamp_ms=1_000),
    SegmentInfo(base_offset=100, size_bytes=1000, largest_timestamp_ms=2_000),
    SegmentInfo(base_offset=200, size_bytes=1000, largest_timestamp_ms=3_000),
    SegmentInfo(base_offset=300, size_bytes=500, largest_timestamp_ms=4_000),
]


def check(
    expected: list[tuple[int, RetentionReason]],
    new_start: int,
    *,
    log_start: int = 0,
    high_watermark: int = 350,
    now_ms: int = 10_000,
    retention_ms: int = -1,
    retention_bytes: int = -1,
    segments: list[SegmentInfo] = SEGMENTS,
    cleanup_policy: frozenset[CleanupPolicy] = DELETE,
) -> None:
    decision = decide_retention(
        segments,
        log_start_offset=log_start,
        high_watermark=high_watermark,
        now_ms=now_ms,
        cleanup_policy=cleanup_policy,
        retention_ms=retention_ms,
        retention_bytes=retention_bytes,
    )
    assert list(decision.deletions) == expected
    assert decision.log_start_offset == new_start


def test_unlimited_retention_deletes_nothing() -> None:
    check([], 0)


def test_log_start_offset_breach() -> None:
    check([(0, START)], 150, log_start=150)
    check([(0, START), (100, START)], 200, log_start=200)
    check([(0, START)], 199, log_start=199)


def test_retention_bytes() -> None:
    check([], 0, retention_bytes=3500)  # exactly at the limit
    check([(0, BYTES)], 100, retention_bytes=2500)  # 3500 - 1000 >= 2500
    check([(0, BYTES)], 100, retention_bytes=1501)  # a second deletion would go below
    check([(0, BYTES), (100, BYTES)], 200, retention_bytes=1500)
    check([(0, BYTES), (100, BYTES), (200, BYTES)], 300, retention_bytes=0)  # never the active


def test_retention_ms_by_largest_timestamp() -> None:
    check([], 0, retention_ms=9_000)  # 10000 - 1000 is not > 9000
    check([(0, TIME)], 100, retention_ms=8_999)
    check([(0, TIME), (100, TIME), (200, TIME)], 300, retention_ms=0)  # never the active


def test_time_stops_at_the_first_young_segment() -> None:
    # A prefix only: an old segment after a young one stays (Kafka's deletableSegments).
    segments = [SEGMENTS[0], SEGMENTS[2], SEGMENTS[1], SEGMENTS[3]]
    segments = [
        SegmentInfo(100 * n, info.size_bytes, info.largest_timestamp_ms)
        for n, info in enumerate(segments)
    ]
    check([(0, TIME)], 100, retention_ms=7_500, segments=segments)


def test_nothing_at_or_above_the_high_watermark_is_deleted() -> None:
    check([(0, TIME)], 100, retention_ms=0, high_watermark=199)
    check([(0, TIME), (100, TIME)], 200, retention_ms=0, high_watermark=200)
    check([], 0, retention_ms=0, high_watermark=50)


def test_passes_run_in_order_over_what_is_left() -> None:
    check([(0, START), (100, BYTES)], 200, log_start=120, retention_bytes=1500)
    check([(0, BYTES), (100, TIME)], 200, retention_bytes=2500, retention_ms=7_500)


def test_a_single_segment_log_keeps_its_active_segment() -> None:
    check([], 0, retention_ms=0, retention_bytes=0, segments=[SEGMENTS[0]], high_watermark=100)


# ------------------------------------------------------------------ cleanup.policy
# Kafka UnifiedLog.deleteOldSegments: `if (config.delete)` all three passes, else only
# deleteLogStartOffsetBreachedSegments. retention.ms and retention.bytes are ignored without
# delete, however small.


@pytest.mark.parametrize(
    ("cleanup_policy", "limits"),
    [
        (DELETE, (7_500, 1500)),
        (COMPACT_DELETE, (7_500, 1500)),
        (COMPACT, (-1, -1)),
        (NO_POLICY, (-1, -1)),
    ],
)
def test_retention_limits_follow_the_delete_policy(
    cleanup_policy: frozenset[CleanupPolicy], limits: tuple[int, int]
) -> None:
    assert retention_limits(cleanup_policy, 7_500, 1500) == limits


def test_delete_policy_applies_time_and_size() -> None:
    check([(0, BYTES), (100, TIME)], 200, retention_bytes=2500, retention_ms=7_500)
    check(
        [(0, BYTES), (100, TIME)],
        200,
        retention_bytes=2500,
        retention_ms=7_500,
        cleanup_policy=COMPACT_DELETE,
    )


@pytest.mark.parametrize("cleanup_policy", [COMPACT, NO_POLICY])
def test_without_delete_time_and_size_never_delete(
    cleanup_policy: frozenset[CleanupPolicy],
) -> None:
    check([], 0, retention_ms=0, retention_bytes=0, cleanup_policy=cleanup_policy)
    check([], 0, retention_ms=0, cleanup_policy=cleanup_policy)
    check([], 0, retention_bytes=0, cleanup_policy=cleanup_policy)


@pytest.mark.parametrize("cleanup_policy", [COMPACT, NO_POLICY])
def test_without_delete_the_log_start_breach_still_deletes(
    cleanup_policy: frozenset[CleanupPolicy],
) -> None:
    # DeleteRecords moved the log start: those segments are unreadable whatever the policy.
    check([(0, START)], 150, log_start=150, retention_ms=0, cleanup_policy=cleanup_policy)
    check(
        [(0, START), (100, START)],
        200,
        log_start=200,
        retention_bytes=0,
        cleanup_policy=cleanup_policy,
    )


# ------------------------------------------------------------------ applied to a log


def make_log(
    tmp_path: Path,
    *,
    retention_ms: int = -1,
    retention_bytes: int = -1,
    cleanup_policy: frozenset[CleanupPolicy] = DELETE,
) -> PartitionLog:
    config = LogConfig(
        segment_bytes=1024,
        retention_ms=retention_ms,
        retention_bytes=retention_bytes,
        cleanup_policy=cleanup_policy,
    )
    log = PartitionLog.open(tmp_path / "t-0", config)
    for n in range(30):
        # Keyed: a compacted log refuses keyless records (LogValidator.validateKey).
        data = build_batch([SimpleRecord(b"x" * 100, b"k%d" % n, timestamp=1000 * n)])
        log.append_as_leader(bytearray(data), leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_retention_ms_deletes_old_segments_and_moves_the_log_start(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_ms=10_000)
    before = [segment.base_offset for segment in log.segments]
    decision = log.delete_old_segments(now_ms=30_000)
    after = [segment.base_offset for segment in log.segments]
    assert decision.base_offsets == tuple(before[: len(decision.base_offsets)])
    assert after == before[len(decision.base_offsets) :]
    assert log.log_start_offset == after[0]
    # Every remaining segment except the active one has a record newer than now - retention.
    assert all(s.largest_timestamp_ms() >= 20_000 for s in log.segments[:-1])
    assert not any(
        (tmp_path / "t-0" / f"{base:020d}.log").exists() for base in decision.base_offsets
    )


def test_retention_bytes_keeps_the_log_under_the_limit(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_bytes=2048)
    log.delete_old_segments(now_ms=0)
    kept_without_active = sum(segment.size for segment in log.segments[:-1])
    assert kept_without_active <= 2048
    assert log.size_in_bytes - log.segments[0].size < 2048
    assert log.fetch_offset_for_timestamp(-2) is not None


def test_retention_waits_for_the_high_watermark(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_ms=0)
    log.update_high_watermark(0)
    assert log.delete_old_segments(now_ms=10**9).deletions == ()


@pytest.mark.parametrize("retention_ms", [-1, 10**12])
def test_long_retention_keeps_everything(tmp_path: Path, retention_ms: int) -> None:
    log = make_log(tmp_path, retention_ms=retention_ms)
    assert log.delete_old_segments(now_ms=30_000).deletions == ()


def test_compact_topic_keeps_every_segment_past_retention(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_ms=0, retention_bytes=0, cleanup_policy=COMPACT)
    before = [segment.base_offset for segment in log.segments]
    assert len(before) > 2
    assert log.delete_old_segments(now_ms=10**12).deletions == ()
    assert [segment.base_offset for segment in log.segments] == before
    assert log.log_start_offset == 0


def test_compact_topic_still_loses_segments_below_deleted_records(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_ms=0, cleanup_policy=COMPACT)
    third = log.segments[2].base_offset
    assert log.delete_records(third) == third
    # The retention thread deletes the segments below the log start, and only those: time
    # retention is off for compact.
    decision = log.delete_old_segments(now_ms=10**12)
    assert {reason for _, reason in decision.deletions} == {START}
    assert log.segments[0].base_offset == third
    assert log.delete_old_segments(now_ms=10**12).deletions == ()


def test_compact_delete_topic_applies_retention(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_ms=10_000, cleanup_policy=COMPACT_DELETE)
    decision = log.delete_old_segments(now_ms=30_000)
    assert decision.deletions
    assert {reason for _, reason in decision.deletions} == {TIME}


def test_update_config_switches_the_policy(tmp_path: Path) -> None:
    """Kafka UnifiedLog.updateConfig: the next retention run uses the new topic config."""
    log = make_log(tmp_path, retention_ms=10_000, cleanup_policy=COMPACT)
    assert log.delete_old_segments(now_ms=30_000).deletions == ()
    old = log.update_config(attrs.evolve(log.config, cleanup_policy=DELETE))
    assert old.cleanup_policy == COMPACT
    assert log.config.delete
    assert log.delete_old_segments(now_ms=30_000).deletions
