"""``pykraft-kafka``: a PySpark data source reading topics through the Kafka protocol.

Batch (``spark.read.format("pykraft-kafka")``) and streaming (``spark.readStream``), with the
options and row schema of Spark's own Kafka source (see ``kafka_options`` for the options and
``spark_schemas.KAFKA_SCHEMA`` for the row). Unlike ``pykraft-log`` it needs no access to the
brokers' disks: the driver plans offset ranges from Metadata and ListOffsets
(``kafka_client.KafkaOffsetReader``, ``kafka_plan``) and each task fetches its range from the
partition leader (``kafka_client.read_range``). Every executor's Python needs ``confluent-kafka``.

Streaming follows ``KafkaMicroBatchStream``: offsets are Spark's ``KafkaSourceOffset`` JSON
(``{"topic": {"0": 23}}``) in the query's checkpoint; a micro-batch reads ``[previous end,
latest)`` capped by ``maxOffsetsPerTrigger`` (Spark's ``ReadMaxRows`` read limit, shared out by
``kafka_plan.rate_limit``); partitions found later start from earliest. A restarted query
resumes at the checkpoint's last committed end, so with an exactly-once sink (Spark's file sink)
nothing is lost or written twice.

``register(spark)`` in ``spark_sources`` registers this source with the others::

    df = (spark.read.format("pykraft-kafka")
          .option("kafka.bootstrap.servers", "broker1:9092,broker2:9092")
          .option("subscribe", "orders")              # or subscribePattern / assign
          .option("startingOffsets", '{"orders": {"0": 100, "1": -2}}')
          .option("kafka.security.protocol", "SASL_SSL")  # any librdkafka property
          .load())

Dependencies: the driver and every executor need ``confluent-kafka`` (``pip install
'pykraft[spark]'`` brings it); ``kafka.*`` properties are librdkafka's names (the security ones,
``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``,
``ssl.ca.location``, ..., are the same as the Java client's except JAAS and keystores).
Timestamps (``startingTimestamp``, ``startingOffsetsByTimestamp``, their ``ending`` pair)
resolve through ListOffsets by timestamp (``KafkaOffsetReader.offsets_for_times``). A stream
with ``minOffsetsPerTrigger`` skips triggers with fewer new offsets until ``maxTriggerDelay``
has passed since its last batch (``kafka_plan.delay_batch``; the first trigger always runs).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pykraft.export.kafka_client import (
    KafkaOffsetReader,
    RecordChunk,
    consumer_config,
    read_range,
)
from pykraft.export.kafka_options import (
    GlobalTimestamp,
    KafkaSourceOptions,
    SpecificTimestamps,
    parse_batch_options,
    parse_stream_options,
)
from pykraft.export.kafka_plan import (
    KafkaRange,
    batch_ranges,
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
from pykraft.storage.system_clock import SystemClock
from pykraft.storage.topic_partition import TopicPartition

KAFKA_FORMAT = "pykraft-kafka"


def _options(options: Any) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in dict(options).items()}


class PykraftKafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return KAFKA_FORMAT

    def schema(self) -> StructType:
        # Driver side only: executors unpickling a reader need not import the metadata schemas.
        from pykraft.export.spark_schemas import KAFKA_SCHEMA, KAFKA_SCHEMA_WITH_HEADERS

        include_headers = _options(self.options).get("includeheaders", "false").lower() == "true"
        return KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(parse_batch_options(_options(self.options)), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(parse_stream_options(_options(self.options)), schema)


class _RangeReader:
    """What the batch and the stream reader share: the executor config and ``read``."""

    def __init__(self, options: KafkaSourceOptions, schema: StructType, group_id: str) -> None:
        self.options = options
        self.schema = schema
        self.executor_config = consumer_config(
            options.consumer_config,
            f"{group_id}-executor",
            options.isolation_level,
            fail_on_data_loss=options.fail_on_data_loss,
        )
        self._offset_reader: KafkaOffsetReader | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_offset_reader"] = None  # a client does not travel to executors
        return state

    @property
    def offset_reader(self) -> KafkaOffsetReader:
        if self._offset_reader is None:
            self._offset_reader = KafkaOffsetReader(
                self.options.consumer_config, self.options.isolation_level
            )
        return self._offset_reader

    def _offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int | None]:
        return self.offset_reader.offsets_for_times(timestamps)

    def topic_partitions(self) -> list[TopicPartition]:
        return select_partitions(self.options.strategy, self.offset_reader.partition_counts())

    def input_partitions(self, ranges: list[KafkaRange]) -> list[InputPartition]:
        splits = split_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )
        return [InputPartition(split) for split in splits]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        offset_range: KafkaRange | None = partition.value
        if offset_range is None:
            return
        import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        include_headers = self.options.include_headers
        for chunk in read_range(
            self.executor_config, offset_range, include_headers=include_headers
        ):
            yield _arrow_batch(pa, arrow_schema, offset_range, chunk, include_headers)


class KafkaBatchReader(_RangeReader, DataSourceReader):
    def __init__(self, options: KafkaSourceOptions, schema: StructType) -> None:
        # Spark's KafkaRelation: a fresh group per query, never joined, never committed.
        prefix = options.group_id_prefix or "spark-kafka-relation"
        super().__init__(options, schema, f"{prefix}-{uuid.uuid4()}")

    def partitions(self) -> Sequence[InputPartition]:
        tps = self.topic_partitions()
        earliest = self.offset_reader.earliest(tps)
        latest = self.offset_reader.latest(tps)
        loss = self.options.fail_on_data_loss
        lookup = self._offsets_for_times
        starts = resolve_offsets(
            self.options.starting, tps, earliest, latest,
            name="startingOffsets", fail_on_data_loss=loss, by_timestamp=lookup,
        )  # fmt: skip
        if isinstance(self.options.starting, SpecificTimestamps | GlobalTimestamp):
            # The starts were looked up live, after ``latest``: records appended in between
            # may put a start past it. The ends are resolved after the starts, as Spark's
            # getOffsetRangesFromUnresolvedOffsets does.
            latest = self.offset_reader.latest(tps)
        ends = resolve_offsets(
            self.options.ending, tps, earliest, latest,
            name="endingOffsets", fail_on_data_loss=loss, by_timestamp=lookup,
        )  # fmt: skip
        return self.input_partitions(batch_ranges(starts, ends)) or [InputPartition(None)]


def time_ms() -> int:
    """The stream's trigger clock (monotonic milliseconds): Spark builds the reader, so this
    module is its composition root and the real clock is made here."""
    return SystemClock().monotonic_ms()


class KafkaStreamReader(_RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(
        self,
        options: KafkaSourceOptions,
        schema: StructType,
        monotonic_ms: Callable[[], int] = time_ms,
    ) -> None:
        prefix = options.group_id_prefix or "spark-kafka-source"
        super().__init__(options, schema, f"{prefix}-{uuid.uuid4()}")
        # Trigger.AvailableNow: the latest offsets when the query started; batches end there.
        self._available_now: dict[TopicPartition, int] | None = None
        self._monotonic_ms = monotonic_ms
        self._last_trigger_ms: int | None = None  # None: no batch yet, the first never waits

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_monotonic_ms"] = time_ms  # executors read ranges: no trigger clock travels
        return state

    def prepareForTriggerAvailableNow(self) -> None:
        """Spark's ``KafkaMicroBatchStream.prepareForTriggerAvailableNow``: read up to the
        offsets latest now, in batches still capped by ``maxOffsetsPerTrigger``; partitions
        found later wait for the next query."""
        self._available_now = self.offset_reader.latest(self.topic_partitions())

    def initialOffset(self) -> dict[str, Any]:
        tps = self.topic_partitions()
        starts = resolve_offsets(
            self.options.starting,
            tps,
            self.offset_reader.earliest(tps),
            self.offset_reader.latest(tps),
            name="startingOffsets",
            fail_on_data_loss=self.options.fail_on_data_loss,
            by_timestamp=self._offsets_for_times,
        )
        return offsets_to_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        """Spark's: ``maxOffsetsPerTrigger`` as ``ReadMaxRows``, else ``minOffsetsPerTrigger``
        as ``ReadMinRows``, else everything (PySpark has no composite limit: with both, the
        minimum is applied by ``latestOffset`` under the ``ReadMaxRows``)."""
        high, low = self.options.max_offsets_per_trigger, self.options.min_offsets_per_trigger
        if high is not None:
            return ReadMaxRows(high)
        return ReadAllAvailable() if low is None else ReadMinRows(low)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        tps = self.topic_partitions()
        starts = stream_starts(
            offsets_from_json(start),
            self.offset_reader.earliest(tps),
            fail_on_data_loss=self.options.fail_on_data_loss,
        )
        if self._available_now is None:
            latest = self.offset_reader.latest(tps)
        else:
            latest = {tp: end for tp, end in self._available_now.items() if tp in starts}
        if not isinstance(limit, ReadAllAvailable) and self._delayed(starts, latest):
            # The start as given (Spark's KafkaMicroBatchStream returns its start offsets):
            # with partitions found since filled in, it would differ, and Spark would run an
            # empty batch instead of waiting.
            return start
        if isinstance(limit, ReadMaxRows):
            return offsets_to_json(rate_limit(limit.max_rows, starts, latest))
        return offsets_to_json(latest)

    def _delayed(
        self, starts: dict[TopicPartition, int], latest: dict[TopicPartition, int]
    ) -> bool:
        """Whether ``minOffsetsPerTrigger`` holds this trigger back (not under AvailableNow,
        which reads what is there)."""
        low = self.options.min_offsets_per_trigger
        now = self._monotonic_ms()
        if low is not None and self._available_now is None and self._last_trigger_ms is not None:
            waited = now - self._last_trigger_ms
            if delay_batch(low, starts, latest, waited, self.options.max_trigger_delay_ms):
                return True
        self._last_trigger_ms = now
        return False

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        starts = offsets_from_json(start)
        ends = offsets_from_json(end)
        found_since = [tp for tp in ends if tp not in starts]
        starts.update(self.offset_reader.earliest(found_since))
        ranges = offset_ranges(starts, ends, fail_on_data_loss=self.options.fail_on_data_loss)
        return self.input_partitions(ranges)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, never in Kafka (as Spark's)."""


def _arrow_batch(
    pa: Any, schema: Any, offset_range: KafkaRange, chunk: RecordChunk, include_headers: bool
) -> Any:
    count = len(chunk)
    columns = [
        pa.array(chunk.key, pa.binary()),
        pa.array(chunk.value, pa.binary()),
        pa.array([offset_range.topic] * count, pa.string()),
        pa.array([offset_range.partition] * count, pa.int32()),
        pa.array(chunk.offset, pa.int64()),
        pa.array([ms * 1000 for ms in chunk.timestamp_ms], schema.field("timestamp").type),
        pa.array(chunk.timestamp_type, pa.int32()),
    ]
    if include_headers:
        headers = [[{"key": k, "value": v} for k, v in row] for row in chunk.headers]
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


__all__ = ["KAFKA_FORMAT", "PykraftKafkaDataSource"]
