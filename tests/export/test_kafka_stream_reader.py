"""``KafkaStreamReader``'s offsets between Spark and the brokers, with the brokers' answers
(Metadata, ListOffsets) scripted: Spark's checkpoint JSON, ``maxOffsetsPerTrigger`` as Spark's
``ReadMaxRows``, ``ReadAllAvailable`` ignoring it (a trigger's own limit wins), partitions found
between batches read from earliest, and what travels to executors."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from pykraft.export.kafka_options import parse_batch_options, parse_stream_options
from pykraft.export.kafka_plan import DataLossError, KafkaRange, PlanError
from pykraft.export.kafka_source import KafkaBatchReader, KafkaStreamReader
from pykraft.export.spark_schemas import KAFKA_SCHEMA
from pykraft.storage.topic_partition import TopicPartition


class Brokers:
    """The ``KafkaOffsetReader`` double: partition counts and offsets as the test sets them."""

    def __init__(self) -> None:
        self.counts = {"t": 2, "other": 1}
        self.log_start = {TopicPartition("t", 0): 0, TopicPartition("t", 1): 5}
        self.log_end = {TopicPartition("t", 0): 100, TopicPartition("t", 1): 15}

    def partition_counts(self) -> dict[str, int]:
        return self.counts

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.log_start[tp] for tp in tps}

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.log_end[tp] for tp in tps}


def reader(brokers: Brokers, clock: list[int] | None = None, **options: str) -> KafkaStreamReader:
    given = {"kafka.bootstrap.servers": "b:9092", "subscribe": "t", **options}
    now = clock if clock is not None else [0]
    stream = KafkaStreamReader(
        parse_stream_options({k.lower(): v for k, v in given.items()}),
        KAFKA_SCHEMA,
        monotonic_ms=lambda: now[0],
    )
    stream._offset_reader = brokers  # type: ignore[assignment]
    return stream


def ranges(stream: KafkaStreamReader, start: dict, end: dict) -> list[KafkaRange]:  # type: ignore[type-arg]
    return [p.value for p in stream.partitions(start, end)]


def test_initial_offset_is_latest_by_default_else_the_option() -> None:
    brokers = Brokers()
    assert reader(brokers).initialOffset() == {"t": {"0": 100, "1": 15}}
    assert reader(brokers, startingOffsets="earliest").initialOffset() == {"t": {"0": 0, "1": 5}}
    given = reader(brokers, startingOffsets='{"t": {"0": 42, "1": -2}}')
    assert given.initialOffset() == {"t": {"0": 42, "1": 5}}


def test_max_offsets_per_trigger_is_the_default_read_limit_and_is_shared_out() -> None:
    brokers = Brokers()
    stream = reader(brokers, startingOffsets="earliest", maxOffsetsPerTrigger="22")
    assert stream.getDefaultReadLimit() == ReadMaxRows(22)
    start = stream.initialOffset()
    end = stream.latestOffset(start, ReadMaxRows(22))
    assert end == {"t": {"0": 20, "1": 7}}  # 100 and 10 waiting: 20 + 2 of 22
    assert ranges(stream, start, end) == [KafkaRange("t", 0, 0, 20), KafkaRange("t", 1, 5, 7)]
    # A trigger reading everything (ReadAllAvailable) is not held to the option.
    assert stream.latestOffset(end, ReadAllAvailable()) == {"t": {"0": 100, "1": 15}}
    assert reader(brokers).getDefaultReadLimit() == ReadAllAvailable()


def test_nothing_new_keeps_the_offset_and_plans_no_task() -> None:
    stream = reader(Brokers())
    start = stream.initialOffset()
    assert stream.latestOffset(start, ReadAllAvailable()) == start
    assert ranges(stream, start, start) == []


def test_a_partition_found_between_batches_is_read_from_earliest() -> None:
    brokers = Brokers()
    stream = reader(brokers)
    start = stream.initialOffset()
    brokers.counts["t"] = 3
    brokers.log_start[TopicPartition("t", 2)] = 3
    brokers.log_end[TopicPartition("t", 2)] = 9
    end = stream.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 100, "1": 15, "2": 9}}
    assert ranges(stream, start, end) == [KafkaRange("t", 2, 3, 9)]


def test_offsets_that_went_backwards_are_data_loss_unless_allowed() -> None:
    brokers = Brokers()
    start = {"t": {"0": 100, "1": 15}}
    brokers.log_end[TopicPartition("t", 0)] = 50  # the topic was recreated
    end = reader(brokers).latestOffset(start, ReadAllAvailable())
    with pytest.raises(DataLossError):
        ranges(reader(brokers), start, end)
    assert ranges(reader(brokers, failOnDataLoss="false"), start, end) == []


def test_the_reader_travels_to_executors_without_its_client() -> None:
    stream = reader(Brokers(), minPartitions="4")
    copy = pickle.loads(pickle.dumps(stream))
    assert copy._offset_reader is None and stream._offset_reader is not None
    assert copy.executor_config["isolation.level"] == "read_committed"
    assert copy.executor_config["enable.auto.commit"] == "false"
    assert copy.executor_config["group.id"].startswith("spark-kafka-source-")


def test_available_now_reads_to_the_offsets_latest_when_the_query_started() -> None:
    # Spark's KafkaMicroBatchStream.prepareForTriggerAvailableNow.
    brokers = Brokers()
    stream = reader(brokers, startingOffsets="earliest", maxOffsetsPerTrigger="60")
    start = stream.initialOffset()
    stream.prepareForTriggerAvailableNow()
    brokers.log_end[TopicPartition("t", 0)] = 500  # produced after the query started
    brokers.counts["t"] = 3  # and a partition added: the next query's
    brokers.log_start[TopicPartition("t", 2)] = 0
    brokers.log_end[TopicPartition("t", 2)] = 9
    first = stream.latestOffset(start, ReadMaxRows(60))
    assert first == {"t": {"0": 54, "1": 10}}  # 60 shared over 100 and 10, still capped
    second = stream.latestOffset(first, ReadMaxRows(60))
    assert second == {"t": {"0": 100, "1": 15}}  # the end: 500 and partition 2 wait
    assert stream.latestOffset(second, ReadMaxRows(60)) == second


def test_min_offsets_per_trigger_waits_for_enough_or_for_max_trigger_delay() -> None:
    """Issue 15: minOffsetsPerTrigger / maxTriggerDelay (KafkaMicroBatchStream.delayBatch);
    the first trigger never waits."""
    brokers, clock = Brokers(), [1_000]
    stream = reader(brokers, clock, minOffsetsPerTrigger="10", maxTriggerDelay="5s")
    assert stream.getDefaultReadLimit() == ReadMinRows(10)
    start = stream.initialOffset()  # latest: 100 and 15
    brokers.log_end = {TopicPartition("t", 0): 103, TopicPartition("t", 1): 17}  # 5 new
    first = stream.latestOffset(start, ReadMinRows(10))
    assert first == {"t": {"0": 103, "1": 17}}
    brokers.log_end = {TopicPartition("t", 0): 106, TopicPartition("t", 1): 19}  # 5 new
    clock[0] += 4_999
    assert stream.latestOffset(first, ReadMinRows(10)) == first  # too few, too soon
    clock[0] += 1
    assert stream.latestOffset(first, ReadMinRows(10)) == {"t": {"0": 106, "1": 19}}
    second = {"t": {"0": 106, "1": 19}}
    brokers.log_end = {TopicPartition("t", 0): 116, TopicPartition("t", 1): 19}  # 10 new
    clock[0] += 1
    assert stream.latestOffset(second, ReadMinRows(10)) == {"t": {"0": 116, "1": 19}}
    # With maxOffsetsPerTrigger too: the minimum waits, the maximum caps.
    both = reader(brokers, clock, minOffsetsPerTrigger="3", maxOffsetsPerTrigger="4")
    assert both.getDefaultReadLimit() == ReadMaxRows(4)
    begin = {"t": {"0": 100, "1": 19}}
    assert both.latestOffset(begin, ReadMaxRows(4)) == {"t": {"0": 104, "1": 19}}
    assert both.latestOffset({"t": {"0": 115, "1": 19}}, ReadMaxRows(4)) == {
        "t": {"0": 115, "1": 19}
    }


def test_a_held_back_trigger_returns_its_start_as_given() -> None:
    """Review of issue 15, finding 8: a partition found while a trigger is held back is not
    filled into the offset returned (it would differ from the start, and Spark would run an
    empty batch); it is read from earliest by the batch that runs."""
    brokers, clock = Brokers(), [0]
    stream = reader(brokers, clock, minOffsetsPerTrigger="1000")
    start = {"t": {"0": 100, "1": 15}}
    assert stream.latestOffset(start, ReadMinRows(1000)) == start  # the first never waits
    brokers.counts["t"] = 3
    brokers.log_start[TopicPartition("t", 2)] = 0
    brokers.log_end[TopicPartition("t", 2)] = 3
    clock[0] = 1_000
    assert stream.latestOffset(start, ReadMinRows(1000)) == start
    clock[0] = 1_000 + 15 * 60_000  # maxTriggerDelay's default, 15m, has passed
    end = stream.latestOffset(start, ReadMinRows(1000))
    assert end == {"t": {"0": 100, "1": 15, "2": 3}}
    assert ranges(stream, start, end) == [KafkaRange("t", 2, 0, 3)]


class AppendingBrokers(Brokers):
    """Two records reach t-0 while ListOffsets by timestamp is asked: only the second is at
    or after the timestamp (the first carries an older one)."""

    def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict:  # type: ignore[type-arg]
        tp = TopicPartition("t", 0)
        if self.log_end[tp] == 100:
            self.log_end[tp] = 102
        return {p: (101 if p == tp else self.log_end[p]) for p in timestamps}


def batch_ranges_of(brokers: Brokers, **options: str) -> list[KafkaRange | None]:
    given = {"kafka.bootstrap.servers": "b:9092", "subscribe": "t", **options}
    batch = KafkaBatchReader(
        parse_batch_options({k.lower(): v for k, v in given.items()}), KAFKA_SCHEMA
    )
    batch._offset_reader = brokers  # type: ignore[assignment]
    return [p.value for p in batch.partitions()]


def test_a_batch_resolves_its_timestamp_starts_before_the_latest_ends() -> None:
    """Review of issue 15, finding 7: records appended between the latest offsets and the
    timestamp lookup put a start past a latest fetched before it; that is no data loss."""
    got = batch_ranges_of(AppendingBrokers(), startingTimestamp="1700000000000")
    assert got == [KafkaRange("t", 0, 101, 102)]  # t-1: 15 to 15, nothing to read


class TimedBrokers(Brokers):
    """t-0's first offset at or after 2000 is 60, after 1000 it is 40; t-1 has none."""

    def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict:  # type: ignore[type-arg]
        return {
            tp: (60 if ts >= 2000 else 40) if tp.partition == 0 else None
            for tp, ts in timestamps.items()
        }


def test_a_batch_start_after_its_end_says_so_whatever_fail_on_data_loss() -> None:
    """startingTimestamp after endingTimestamp: Spark's KafkaSourceRDD assertion, not a
    data-loss report (the options are wrong, nothing was lost)."""
    options = {"startingTimestamp": "2000", "endingTimestamp": "1000"}
    options["startingOffsetsByTimestampStrategy"] = "latest"
    message = (
        "Beginning offset 60 is after the ending offset 40 for topic t partition 0. You "
        "either provided an invalid fromOffset, or the Kafka topic has been damaged"
    )
    for loss in ("true", "false"):
        with pytest.raises(PlanError, match=message):
            batch_ranges_of(TimedBrokers(), failOnDataLoss=loss, **options)
