"""ListOffsets v0's lookup, ``legacy_offsets_before``, against Kafka's
``UnifiedLog.legacyFetchOffsetsBefore`` / ``Partition.legacyFetchOffsetsForTimestamp``."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest

from pykraft.storage.legacy_offsets import (
    MAX_LEGACY_OFFSETS,
    legacy_offset_entries,
    legacy_offsets_before,
)


@attrs.frozen
class Segment:
    base_offset: int
    written_ms: int
    size: int = 100


NOW = 10_000
# Three segments [0, 100), [100, 250), [250, 300) written at 1000, 2000, 3000; log end 300.
LOG = (Segment(0, 1000), Segment(100, 2000), Segment(250, 3000))


def check(
    timestamp: int,
    max_num_offsets: int,
    expected: list[int],
    *,
    segments: Sequence[Segment] = LOG,
    log_start_offset: int = 0,
    log_end_offset: int = 300,
    high_watermark: int = 300,
    is_from_consumer: bool = True,
) -> None:
    entries = legacy_offset_entries(
        [(segment.base_offset, segment.written_ms) for segment in segments],
        log_start_offset=log_start_offset,
        log_end_offset=log_end_offset,
        active_segment_empty=segments[-1].size == 0,
        now_ms=NOW,
    )
    assert (
        legacy_offsets_before(
            entries,
            high_watermark=high_watermark,
            timestamp=timestamp,
            max_num_offsets=max_num_offsets,
            is_from_consumer=is_from_consumer,
        )
        == expected
    )


def test_latest_walks_back_from_the_log_end() -> None:
    check(-1, 1, [300])
    check(-1, 2, [300, 250])
    check(-1, 10, [300, 250, 100, 0])
    check(-1, 0, [])


def test_earliest_is_the_first_segment_or_the_log_start() -> None:
    check(-2, 1, [0])
    check(-2, 5, [0])  # nothing before the first entry
    check(-2, 1, [120], log_start_offset=120, segments=LOG[1:])
    check(-2, 1, [120], log_start_offset=120)  # max(base offset, log start offset)


def test_a_time_picks_the_last_entry_written_at_or_before_it() -> None:
    check(999, 3, [])
    check(1000, 3, [0])
    check(2500, 3, [100, 0])
    check(3000, 1, [250])
    check(NOW, 2, [300, 250])  # the log end counts as written now
    check(NOW - 1, 1, [250])


def test_an_empty_active_segment_adds_no_log_end_entry() -> None:
    rolled = (*LOG, Segment(300, NOW, size=0))
    check(-1, 2, [300, 250], segments=rolled)
    check(-1, 1, [0], segments=(Segment(0, NOW, size=0),), log_end_offset=0, high_watermark=0)


def test_a_consumer_gets_the_high_watermark_first_and_nothing_above() -> None:
    # Partition.legacyFetchOffsetsForTimestamp: hw +: allOffsets.dropWhile(_ > hw)
    check(-1, 3, [260, 250, 100], high_watermark=260)
    check(-1, 3, [90], high_watermark=90)  # the count is taken before the high watermark
    check(-1, 4, [90, 0], high_watermark=90)
    check(-1, 3, [300, 250, 100], high_watermark=90, is_from_consumer=False)
    check(-1, 1, [90], high_watermark=90)


@pytest.mark.parametrize("timestamp", [-3, -5])
def test_other_special_timestamps_are_the_callers_to_refuse(timestamp: int) -> None:
    with pytest.raises(AssertionError):
        check(timestamp, 1, [])


def test_an_answer_holds_at_most_max_legacy_offsets() -> None:
    # max_num_offsets is a client's int32: pykraft bounds the answer (Kafka does not).
    many = tuple(Segment(10 * n, 1000 + n) for n in range(MAX_LEGACY_OFFSETS + 50))
    end = 10 * len(many) + 5
    offsets = [end, *(10 * n for n in reversed(range(len(many))))][:MAX_LEGACY_OFFSETS]
    check(-1, 2**31 - 1, offsets, segments=many, log_end_offset=end, high_watermark=end)
