"""``export.kafka_plan``: Spark's Kafka connector's planning rules, case by case.

``split_ranges`` mirrors Spark's ``KafkaOffsetRangeCalculatorSuite``; ``rate_limit`` the
``maxOffsetsPerTrigger`` case of ``KafkaMicroBatchSourceSuite``; ``resolve_offsets`` the
assertions of ``KafkaOffsetReaderAdmin.fetchPartitionOffsets``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pykraft.export.kafka_options import (
    Assign,
    Bound,
    GlobalTimestamp,
    NoMatch,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
)
from pykraft.export.kafka_plan import (
    DataLossError,
    KafkaRange,
    PlanError,
    delay_batch,
    offset_ranges,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    resolve_offsets,
    select_partitions,
    split_ranges,
    stream_starts,
)
from pykraft.storage.topic_partition import TopicPartition

T1, T2, T3 = TopicPartition("t", 1), TopicPartition("t", 2), TopicPartition("t", 3)


def r(tp: TopicPartition, start: int, end: int) -> KafkaRange:
    return KafkaRange(tp.topic, tp.partition, start, end)


def check_split(
    given: list[KafkaRange],
    expected: list[KafkaRange],
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> None:
    assert split_ranges(given, min_partitions, max_records) == expected


def test_without_min_partitions_one_task_per_partition() -> None:
    check_split([r(T1, 1, 2)], [r(T1, 1, 2)])
    check_split([r(T1, 1, 2), r(T2, 1, 2), r(T3, 1, 2)], [r(T1, 1, 2), r(T2, 1, 2), r(T3, 1, 2)])


def test_enough_partitions_already_for_min_partitions() -> None:
    # KafkaOffsetRangeCalculatorSuite "N TopicPartitions to N offset ranges" (minPartitions 3)
    check_split([r(T1, 1, 2), r(T2, 1, 2), r(T3, 1, 2)], [r(T1, 1, 2), r(T2, 1, 2), r(T3, 1, 2)], 3)


def test_one_partition_to_min_partitions_ranges() -> None:
    # "1 TopicPartition to N offset ranges" (minPartitions 4)
    check_split([r(T1, 1, 5)], [r(T1, 1, 2), r(T1, 2, 3), r(T1, 3, 4), r(T1, 4, 5)], 4)


def test_inexact_multiple_puts_the_remainder_last() -> None:
    # "range inexact multiple of minPartitions" (minPartitions 3)
    check_split([r(T1, 1, 11)], [r(T1, 1, 4), r(T1, 4, 7), r(T1, 7, 11)], 3)


def test_skewed_partitions_split_only_the_big_one() -> None:
    # "N skewed TopicPartitions to M offset ranges" (minPartitions 3): 4/24*3 rounds to 1.
    check_split([r(T1, 1, 5), r(T2, 1, 21)], [r(T1, 1, 5), r(T2, 1, 11), r(T2, 11, 21)], 3)


def test_empty_and_backwards_ranges_are_dropped() -> None:
    # "empty ranges ignored"
    check_split([r(T1, 1, 5), r(T2, 1, 1), r(T3, 5, 4)], [r(T1, 1, 3), r(T1, 3, 5)], 2)
    check_split([r(T2, 1, 1)], [])


def test_max_records_per_partition_cuts_every_big_range() -> None:
    # ceil(10 / 3) = 4 near-equal pieces, none over 3 records.
    check_split(
        [r(T1, 0, 10), r(T2, 0, 3)],
        [r(T1, 0, 2), r(T1, 2, 4), r(T1, 4, 7), r(T1, 7, 10), r(T2, 0, 3)],
        None,
        3,
    )
    check_split([r(T1, 0, 4)], [r(T1, 0, 4)], None, 4)


def test_max_records_then_min_partitions() -> None:
    # Spark 4's docs: cut by maxRecordsPerPartition, then again if fewer than minPartitions.
    check_split([r(T1, 0, 8)], [r(T1, 0, 2), r(T1, 2, 4), r(T1, 4, 6), r(T1, 6, 8)], 4, 4)
    check_split([r(T1, 0, 8)], [r(T1, 0, 4), r(T1, 4, 8)], 2, 4)


def test_rate_limit_shares_in_proportion_and_never_starves() -> None:
    # KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger": 100, 10 and 1 offsets, limit 10 -> the
    # first batch reads 9 + 1 + 1.
    starts = {T1: 100, T2: 10, T3: 1}
    latest = {T1: 200, T2: 20, T3: 2}
    assert rate_limit(10, starts, latest) == {T1: 109, T2: 11, T3: 2}


def test_rate_limit_never_passes_latest_and_leaves_idle_partitions() -> None:
    assert rate_limit(1000, {T1: 0, T2: 5}, {T1: 10, T2: 5}) == {T1: 10, T2: 5}
    assert rate_limit(5, {T1: 7}, {T1: 7}) == {T1: 7}


def test_specific_offsets_must_name_every_partition() -> None:
    with pytest.raises(PlanError, match="you must specify all TopicPartitions"):
        resolve_offsets(
            SpecificOffsets({T1: 0}), [T1, T2], {T1: 0, T2: 0}, {T1: 5, T2: 5},
            name="startingOffsets", fail_on_data_loss=True,
        )  # fmt: skip


def test_specific_offsets_resolve_symbols_and_data_loss() -> None:
    earliest, latest = {T1: 3, T2: 3, T3: 3}, {T1: 9, T2: 9, T3: 9}
    limit = SpecificOffsets({T1: -2, T2: -1, T3: 5})
    assert resolve_offsets(
        limit, [T1, T2, T3], earliest, latest, name="s", fail_on_data_loss=True
    ) == {T1: 3, T2: 9, T3: 5}
    below = SpecificOffsets({T1: 1})
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        resolve_offsets(below, [T1], earliest, latest, name="s", fail_on_data_loss=True)
    assert resolve_offsets(below, [T1], earliest, latest, name="s", fail_on_data_loss=False) == {
        T1: 3
    }
    assert resolve_offsets(
        Bound.LATEST, [T1], earliest, latest, name="s", fail_on_data_loss=True
    ) == {T1: 9}


def test_offset_ranges_report_a_partition_that_went_backwards() -> None:
    assert offset_ranges({T1: 2, T2: 0}, {T1: 5, T2: 0}, fail_on_data_loss=True) == [
        r(T1, 2, 5),
        r(T2, 0, 0),
    ]
    with pytest.raises(DataLossError, match="was changed from 5 to 2"):
        offset_ranges({T1: 5}, {T1: 2}, fail_on_data_loss=True)
    assert offset_ranges({T1: 5}, {T1: 2}, fail_on_data_loss=False) == []


def test_select_partitions_by_strategy() -> None:
    counts = {"orders": 2, "orders-dlq": 1, "__consumer_offsets": 50, "users": 1}
    assert select_partitions(Subscribe(("orders", "missing")), counts) == [
        TopicPartition("orders", 0),
        TopicPartition("orders", 1),
    ]
    # Java's Pattern.matches: the whole name; internal topics are never matched.
    assert select_partitions(SubscribePattern("orders.*|__.*"), counts) == [
        TopicPartition("orders", 0),
        TopicPartition("orders", 1),
        TopicPartition("orders-dlq", 0),
    ]
    assert select_partitions(SubscribePattern("rders"), counts) == []
    assert select_partitions(Assign((TopicPartition("users", 0),)), counts) == [
        TopicPartition("users", 0)
    ]
    with pytest.raises(PlanError, match="do not exist"):
        select_partitions(Assign((TopicPartition("users", 1),)), counts)


def test_stream_starts_new_partitions_from_earliest_and_loses_gone_ones() -> None:
    assert stream_starts({T1: 7}, {T1: 0, T2: 4}, fail_on_data_loss=True) == {T1: 7, T2: 4}
    with pytest.raises(DataLossError, match="are gone"):
        stream_starts({T1: 7, T3: 1}, {T1: 0}, fail_on_data_loss=True)
    assert stream_starts({T1: 7, T3: 1}, {T1: 0}, fail_on_data_loss=False) == {T1: 7}


def test_offsets_json_is_sparks_shape_and_round_trips() -> None:
    offsets = {TopicPartition("b", 0): 1, TopicPartition("a", 10): 5, TopicPartition("a", 2): -2}
    document = offsets_to_json(offsets)
    assert document == {"a": {"2": -2, "10": 5}, "b": {"0": 1}}
    assert list(document) == ["a", "b"]
    assert offsets_from_json(document) == offsets
    with pytest.raises(PlanError):
        offsets_from_json({"a": {"x": 1}})


class ListOffsetsByTimestamp:
    """A client double: each partition's records' timestamps, answered as a broker answers
    ListOffsets by timestamp (the first offset at or after it, None past the last)."""

    def __init__(self, timestamps: dict[TopicPartition, list[int]]) -> None:
        self.timestamps = timestamps
        self.asked: list[dict[TopicPartition, int]] = []

    def __call__(self, wanted: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        self.asked.append(dict(wanted))
        return {
            tp: next((o for o, t in enumerate(self.timestamps[tp]) if t >= ts), None)
            for tp, ts in wanted.items()
        }


LOG = {T1: [100, 200, 300, 400], T2: [150, 250]}
EARLIEST, LATEST = {T1: 0, T2: 0}, {T1: 4, T2: 2}


def by_time(limit: object, name: str = "startingOffsets") -> dict[TopicPartition, int]:
    lookup = ListOffsetsByTimestamp(LOG)
    resolved = resolve_offsets(
        limit,  # type: ignore[arg-type]
        [T1, T2], EARLIEST, LATEST, name=name, fail_on_data_loss=True, by_timestamp=lookup,
    )  # fmt: skip
    assert lookup.asked, "timestamps are resolved by ListOffsets"
    return resolved


def test_timestamps_resolve_to_the_first_offset_at_or_after_them() -> None:
    """Issue 15: KafkaOffsetReaderAdmin.fetchGlobalTimestampBasedOffsets and
    fetchSpecificTimestampBasedOffsets."""
    assert by_time(GlobalTimestamp(200)) == {T1: 1, T2: 1}
    assert by_time(GlobalTimestamp(0)) == {T1: 0, T2: 0}
    assert by_time(SpecificTimestamps({T1: 301, T2: 150})) == {T1: 3, T2: 0}
    # An end no offset matches is the latest offset (readTimestampOffsets).
    assert by_time(GlobalTimestamp(260), "endingOffsets") == {T1: 2, T2: 2}


def test_a_start_no_offset_matches_fails_or_takes_latest() -> None:
    with pytest.raises(PlanError, match="No offset matched from request of topic-partition t-2"):
        by_time(GlobalTimestamp(260))
    assert by_time(GlobalTimestamp(260, NoMatch.LATEST)) == {T1: 2, T2: 2}
    assert by_time(GlobalTimestamp(999, NoMatch.LATEST)) == LATEST


def test_specific_timestamps_must_name_every_partition() -> None:
    with pytest.raises(PlanError, match="startingOffsetsByTimestamp contains specific offsets"):
        by_time(SpecificTimestamps({T1: 100}))


def test_min_offsets_per_trigger_delays_until_enough_or_too_long() -> None:
    """KafkaMicroBatchStream.delayBatch."""
    starts, latest = {T1: 10, T2: 0}, {T1: 15, T2: 3}  # 8 new offsets
    assert delay_batch(9, starts, latest, waited_ms=1_000, max_delay_ms=60_000)
    assert not delay_batch(8, starts, latest, waited_ms=1_000, max_delay_ms=60_000)
    assert not delay_batch(9, starts, latest, waited_ms=60_000, max_delay_ms=60_000)
    # A partition found since the last batch counts from offset 0.
    assert not delay_batch(9, {T1: 10}, {T1: 15, T3: 4}, waited_ms=0, max_delay_ms=60_000)
