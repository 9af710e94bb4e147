"""The ``pykraft-kafka`` source's Kafka I/O, on confluent-kafka (librdkafka).

Two sides, both plain Kafka clients, so they run wherever the brokers can be reached:

* the driver's ``KafkaOffsetReader`` (named after Spark's ``KafkaOffsetReaderAdmin``): topics and
  partition counts from Metadata, earliest and latest offsets from ListOffsets at the source's
  isolation level (``latest`` is the last stable offset under ``read_committed``, KIP-98);
* the executors' ``read_range``: one consumer per range, ``assign`` at the range's start (no group
  membership, nothing committed), fetching from each partition's leader with librdkafka's Fetch
  (every codec: gzip, snappy, lz4, zstd), ``isolation.level`` applied by the client (no aborted
  transaction's records, no control records). It stops at the range's end: a record at or past
  it, or the partition's end-of-log event at or past it — under ``read_committed`` the last
  offsets of a range may be markers or aborted records that are never delivered.

Executors need only this module, ``kafka_plan``/``kafka_options`` (pure) and the
``confluent-kafka`` package — a dependency every executor's Python must have. Memory is bounded by
``MAX_CHUNK_RECORDS`` per chunk handed to Spark and librdkafka's prefetch queue
(``queued.max.messages.kbytes``, defaulted to ``PREFETCH_KBYTES`` unless given as ``kafka.*``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    TopicCollection,
)
from confluent_kafka import IsolationLevel as ClientIsolationLevel
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from pykraft.export.isolation import IsolationLevel
from pykraft.export.kafka_plan import DataLossError, DescribedTopic, KafkaRange
from pykraft.storage.topic_partition import TopicPartition

MAX_CHUNK_RECORDS = 10_000  # records per Arrow batch handed to Spark
PREFETCH_KBYTES = 16_384  # librdkafka's per-partition prefetch bound (its default is 64 MiB)
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs default (network timeout)
REQUEST_TIMEOUT_S = 30.0
FETCH_WAIT_MAX_MS = 100  # librdkafka's default is 500
POLL_INTERVAL_MS = 500  # the longest wait for a record in one poll
# Kafka's TimestampType ids, as Spark's timestampType column holds them.
NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}


class KafkaReadError(RuntimeError):
    """A range could not be read (timeout, or an error the client does not retry)."""


@attrs.define
class RecordChunk:
    """Up to ``MAX_CHUNK_RECORDS`` consecutive records of one partition, column by column."""

    key: list[bytes | None] = attrs.Factory(list)
    value: list[bytes | None] = attrs.Factory(list)
    offset: list[int] = attrs.Factory(list)
    timestamp_ms: list[int] = attrs.Factory(list)
    timestamp_type: list[int] = attrs.Factory(list)
    headers: list[list[tuple[str, bytes | None]]] = attrs.Factory(list)

    def __len__(self) -> int:
        return len(self.offset)


class KafkaOffsetReader:
    """Metadata and ListOffsets for the driver, through one ``AdminClient``."""

    def __init__(self, consumer_config: Mapping[str, str], isolation_level: IsolationLevel) -> None:
        self._admin = AdminClient(dict(_admin_config(consumer_config)))
        self._isolation = (
            ClientIsolationLevel.READ_COMMITTED
            if isolation_level is IsolationLevel.READ_COMMITTED
            else ClientIsolationLevel.READ_UNCOMMITTED
        )

    def partition_counts(self) -> dict[str, int]:
        metadata = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        counts = {}
        for name, topic in metadata.topics.items():
            if topic.error is not None:
                raise KafkaReadError(f"Metadata for topic {name}: {topic.error}")
            counts[name] = len(topic.partitions)
        return counts

    def describe_topic(self, topic: str) -> DescribedTopic | None:
        """Metadata of ``topic`` alone (not every topic of the cluster): its id and partition
        count; None if the brokers do not have it."""
        futures = self._admin.describe_topics(
            TopicCollection([topic]), request_timeout=REQUEST_TIMEOUT_S
        )
        try:
            description = futures[topic].result(REQUEST_TIMEOUT_S)
        except KafkaException as error:
            if error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise KafkaReadError(f"Metadata for topic {topic}: {error.args[0]}") from None
        return DescribedTopic(
            kafka_uuid_text(str(description.topic_id)), len(description.partitions)
        )

    def earliest(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]

    def latest(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """ListOffsets by timestamp: the first offset at or after each timestamp, None where
        there is none (the broker answers -1)."""
        if not timestamps:
            return {}
        futures = self._admin.list_offsets(
            {
                ClientTopicPartition(tp.topic, tp.partition): OffsetSpec.for_timestamp(ts)
                for tp, ts in timestamps.items()
            },
            isolation_level=self._isolation,
            request_timeout=REQUEST_TIMEOUT_S,
        )
        found: dict[TopicPartition, int | None] = {}
        for tp, future in futures.items():
            offset = future.result(REQUEST_TIMEOUT_S).offset
            found[TopicPartition(tp.topic, tp.partition)] = offset if offset >= 0 else None
        return found

    def _list_offsets(
        self, partitions: Sequence[TopicPartition], spec: Any
    ) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        futures = self._admin.list_offsets(
            {ClientTopicPartition(tp.topic, tp.partition): spec for tp in partitions},
            isolation_level=self._isolation,
            request_timeout=REQUEST_TIMEOUT_S,
        )
        return {
            TopicPartition(tp.topic, tp.partition): future.result(REQUEST_TIMEOUT_S).offset
            for tp, future in futures.items()
        }


def kafka_uuid_text(text: str) -> str:
    """A topic id as Kafka writes it (``Uuid.toString``: URL-safe base64, as kafka-topics.sh
    prints it) from librdkafka's text (standard base64)."""
    return text.replace("+", "-").replace("/", "_")


def consumer_config(
    consumer_config: Mapping[str, str],
    group_id: str,
    isolation_level: IsolationLevel,
    *,
    fail_on_data_loss: bool,
) -> dict[str, str]:
    """An executor's consumer: assigned partitions, no commits, end-of-log events on."""
    return {
        "queued.max.messages.kbytes": str(PREFETCH_KBYTES),
        # A range whose last offsets are never delivered (markers, aborted records) ends on the
        # end-of-log event, which comes after the broker's empty fetch wait: keep it short.
        "fetch.wait.max.ms": str(FETCH_WAIT_MAX_MS),
        **consumer_config,
        "group.id": consumer_config.get("group.id", group_id),
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
        "enable.partition.eof": "true",
        "isolation.level": isolation_level.value,
        # A start the log no longer holds: fail (Spark's failOnDataLoss) or read on from earliest.
        "auto.offset.reset": "error" if fail_on_data_loss else "earliest",
    }


def read_range(
    config: Mapping[str, str],
    offset_range: KafkaRange,
    *,
    include_headers: bool,
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS,
) -> Iterator[RecordChunk]:
    """The records of ``offset_range`` in offset order, in chunks; see the module doc."""
    if offset_range.size <= 0:
        return
    consumer = Consumer(dict(config))
    try:
        consumer.assign(
            [
                ClientTopicPartition(
                    offset_range.topic, offset_range.partition, offset_range.from_offset
                )
            ]
        )
        yield from _consume(consumer, offset_range, include_headers, poll_timeout_ms)
    finally:
        consumer.close()


def _consume(
    consumer: Any, offset_range: KafkaRange, include_headers: bool, poll_timeout_ms: int
) -> Iterator[RecordChunk]:
    """Polls of ``POLL_INTERVAL_MS`` each; ``poll_timeout_ms`` of polls in a row that bring no
    record and do not finish the range fail it (counted, so no clock is read)."""
    until = offset_range.until_offset
    idle_polls_max = max(1, poll_timeout_ms // POLL_INTERVAL_MS)
    idle_polls = 0
    while True:
        chunk = RecordChunk()
        done = False
        for message in _next_messages(consumer):
            error = message.error()
            if error is not None:
                done = _handle_error(error, message, offset_range)
                if done:
                    break
                continue
            if message.offset() >= until:
                done = True
                break
            _append(chunk, message, include_headers)
            if message.offset() == until - 1:  # the last offset: no need to wait for more
                done = True
                break
        if len(chunk):
            idle_polls = 0
            yield chunk
        if done:
            return
        idle_polls += 1 if not len(chunk) else 0
        if idle_polls >= idle_polls_max:
            raise KafkaReadError(
                f"Cannot fetch records of {offset_range.topic_partition} in "
                f"[{offset_range.from_offset}, {until}) within {poll_timeout_ms} ms"
            )


def _next_messages(consumer: Any) -> list[Any]:
    """What the client has queued, up to a chunk, waiting at most ``POLL_INTERVAL_MS`` for the
    first. (``consume(n, timeout)`` alone would wait the whole timeout for ``n`` records.)"""
    first = consumer.poll(POLL_INTERVAL_MS / 1000)
    if first is None:
        return []
    return [first, *consumer.consume(MAX_CHUNK_RECORDS - 1, 0)]


def _handle_error(error: Any, message: Any, offset_range: KafkaRange) -> bool:
    """True when the range is complete (end of log at or past its end)."""
    code = error.code()
    if code == KafkaError._PARTITION_EOF:
        return bool(message.offset() >= offset_range.until_offset)
    if code == KafkaError._AUTO_OFFSET_RESET:
        raise DataLossError(
            f"Cannot fetch offset {offset_range.from_offset} of {offset_range.topic_partition}: "
            f"{error.str()}. Some data may have been lost because they are not available in "
            "Kafka any more. If you want your query to go on, set the source option "
            "failOnDataLoss to false."
        )
    if error.fatal() or not error.retriable():
        raise KafkaException(error)
    return False


def _append(chunk: RecordChunk, message: Any, include_headers: bool) -> None:
    kind, timestamp = message.timestamp()
    chunk.key.append(message.key())
    chunk.value.append(message.value())
    chunk.offset.append(message.offset())
    chunk.timestamp_ms.append(timestamp if kind in _TIMESTAMP_TYPES else -1)
    chunk.timestamp_type.append(_TIMESTAMP_TYPES.get(kind, NO_TIMESTAMP_TYPE))
    if include_headers:
        chunk.headers.append(list(message.headers() or ()))


def _admin_config(consumer_config: Mapping[str, str]) -> dict[str, str | int | float | bool]:
    """The consumer's connection and security properties, for an ``AdminClient``: librdkafka
    refuses consumer-only properties in a client that does not consume."""
    consumer_only = ("group.", "fetch.", "queued.", "auto.", "enable.", "session.", "max.poll")
    return {
        key: value
        for key, value in consumer_config.items()
        if not key.startswith(consumer_only) and key != "isolation.level"
    }
