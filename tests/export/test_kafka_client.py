"""``export.kafka_client.read_range``'s stop rules against a scripted consumer (the network
boundary's double): where a range ends when its last offsets are never delivered (markers and
aborted records under read_committed), data loss, retriable errors and the idle timeout."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    KafkaException,
)

from pykraft.export import kafka_client
from pykraft.export.kafka_client import KafkaReadError, RecordChunk, kafka_uuid_text, read_range
from pykraft.export.kafka_plan import DataLossError, KafkaRange


class Record:
    def __init__(self, offset: int, timestamp_type: int = TIMESTAMP_CREATE_TIME) -> None:
        self._offset = offset
        self._timestamp_type = timestamp_type

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k%d" % self._offset

    def value(self) -> bytes:
        return b"v%d" % self._offset

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp_type, 1000 + self._offset

    def headers(self) -> list[tuple[str, bytes]]:
        return [("h", b"%d" % self._offset)]


class Event:
    """An error or end-of-partition event, as librdkafka hands them out between records."""

    def __init__(self, code: int, offset: int = -1, *, retriable: bool = True) -> None:
        self._error = KafkaError(code, "scripted", fatal=False, retriable=retriable)
        self._offset = offset

    def error(self) -> KafkaError:
        return self._error

    def offset(self) -> int:
        return self._offset


class ScriptedConsumer:
    """Hands out one scripted poll result per ``poll`` (then drains nothing more)."""

    def __init__(self, polls: list[list[Any]]) -> None:
        self.polls = polls
        self.assigned: list[Any] = []
        self.closed = False

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = partitions

    def poll(self, _timeout: float) -> Any:
        batch = self.polls.pop(0) if self.polls else []
        self._rest = batch[1:]
        return batch[0] if batch else None

    def consume(self, _count: int, _timeout: float) -> list[Any]:
        rest, self._rest = self._rest, []
        return rest

    def close(self) -> None:
        self.closed = True


def run(
    monkeypatch: pytest.MonkeyPatch, polls: list[list[Any]], end: int = 10, **kw: Any
) -> tuple[list[RecordChunk], ScriptedConsumer]:
    consumers: list[ScriptedConsumer] = []

    def factory(_config: dict[str, str]) -> ScriptedConsumer:
        consumers.append(ScriptedConsumer(list(polls)))
        return consumers[-1]

    monkeypatch.setattr(kafka_client, "Consumer", factory)
    chunks = list(read_range({}, KafkaRange("t", 0, 2, end), include_headers=True, **kw))
    [consumer] = consumers
    assert consumer.closed
    return chunks, consumer


def offsets(chunks: list[RecordChunk]) -> list[int]:
    return [offset for chunk in chunks for offset in chunk.offset]


def test_reads_from_the_start_and_stops_at_the_last_offset_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chunks, consumer = run(monkeypatch, [[Record(2), Record(3)], [Record(4)]], end=5)
    assert offsets(chunks) == [2, 3, 4]
    assert [(tp.topic, tp.partition, tp.offset) for tp in consumer.assigned] == [("t", 0, 2)]
    assert consumer.polls == []  # offset 4 = end - 1: no further poll


def test_fields_and_kafka_timestamp_type_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    chunks, _ = run(monkeypatch, [[Record(2), Record(3, TIMESTAMP_LOG_APPEND_TIME)]], end=4)
    [chunk] = chunks
    assert chunk.key == [b"k2", b"k3"] and chunk.value == [b"v2", b"v3"]
    assert chunk.timestamp_ms == [1002, 1003]
    assert chunk.timestamp_type == [0, 1]  # Kafka's CREATE_TIME, LOG_APPEND_TIME
    assert chunk.headers == [[("h", b"2")], [("h", b"3")]]


def test_a_record_past_the_end_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # read_committed: 5..7 were markers or aborted; the next record delivered is 8.
    chunks, _ = run(monkeypatch, [[Record(2), Record(3), Record(4), Record(8)]], end=8)
    assert offsets(chunks) == [2, 3, 4]


def test_end_of_partition_at_the_end_completes_a_range_ending_on_a_marker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    polls: list[list[Any]] = [[Record(2), Record(3)], [Event(KafkaError._PARTITION_EOF, 5)]]
    chunks, _ = run(monkeypatch, polls, end=5)
    assert offsets(chunks) == [2, 3]


def test_end_of_partition_before_the_end_keeps_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    # A new leader's high watermark may lag the planned end for a moment.
    polls: list[list[Any]] = [[Record(2), Event(KafkaError._PARTITION_EOF, 3)], [], [Record(3)]]
    chunks, consumer = run(monkeypatch, polls, end=4)
    assert offsets(chunks) == [2, 3] and consumer.polls == []


def test_retriable_errors_are_retried_by_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    polls: list[list[Any]] = [[Event(KafkaError._TRANSPORT)], [Record(2)]]
    chunks, _ = run(monkeypatch, polls, end=3)
    assert offsets(chunks) == [2]


def test_other_errors_fail_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    polls: list[list[Any]] = [[Event(KafkaError.TOPIC_AUTHORIZATION_FAILED, retriable=False)]]
    with pytest.raises(KafkaException):
        run(monkeypatch, polls, end=3)


def test_an_offset_the_log_no_longer_holds_is_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        run(monkeypatch, [[Event(KafkaError._AUTO_OFFSET_RESET)]], end=3)


def test_no_progress_for_the_poll_timeout_fails_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KafkaReadError, match="within 1000 ms"):
        run(monkeypatch, [[Record(2)]], end=5, poll_timeout_ms=1000)


def test_an_empty_range_opens_no_consumer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_client, "Consumer", None)
    assert list(read_range({}, KafkaRange("t", 0, 4, 4), include_headers=False)) == []


def test_a_topic_id_is_written_as_kafka_writes_it() -> None:
    # librdkafka's Uuid text is standard base64; Kafka's (and the export manifest's) URL-safe.
    assert kafka_uuid_text("5uH/YQS44JTZZViIk0C/2Q") == "5uH_YQS44JTZZViIk0C_2Q"
    assert kafka_uuid_text("a+b-c_d") == "a-b-c_d"
