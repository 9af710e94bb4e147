"""What the console tools and producer-perf-test do when the client refuses a record or a
broker refuses the consumer: Kafka's tools report and go on (the producer) or stop (the
consumer), never a traceback. The producer double stands in for librdkafka (the I/O boundary)
and answers as it does: a synchronous ``KafkaException`` for a record it refuses before sending,
delivery reports from ``poll``/``flush``."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from pykraft import console_consumer_cmd, producer_perf_cmd
from pykraft.console_consumer_cmd import receive, stops_consumer
from pykraft.console_plans import with_idempotence_default
from pykraft.console_producer_cmd import decoded_lines, produce_lines
from pykraft.console_records import LineReader
from tests.fake_clock import FakeClock

MAX_BYTES = 1000
Callback = Callable[[KafkaError | None, Any], None]


class Delivered:
    def __init__(self, topic: str, value: bytes, key: bytes | None) -> None:
        self._topic, self._value, self._key = topic, value, key

    def topic(self) -> str:
        return self._topic

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def latency(self) -> float:
        return 0.002


class RefusingProducer:
    """librdkafka with ``message.max.bytes=1000``: a bigger record is refused by produce();
    a record whose value is b"nack" is refused by the cluster (its delivery report)."""

    def __init__(self) -> None:
        self.queued: list[tuple[Delivered, Callback]] = []
        self.sent: list[bytes] = []

    def produce(
        self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None,
        on_delivery: Callback | None = None,
    ) -> None:  # fmt: skip
        if len(value) > MAX_BYTES:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        assert on_delivery is not None
        self.queued.append((Delivered(topic, value, key), on_delivery))

    def poll(self, timeout: float = 0) -> int:
        for message, callback in self.queued:
            nack = message.value() == b"nack"
            callback(KafkaError(KafkaError.REQUEST_TIMED_OUT) if nack else None, message)
            if not nack:
                self.sent.append(message.value())
        served, self.queued = len(self.queued), []
        return served

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0


def test_a_record_the_client_refuses_is_reported_and_the_next_lines_go_on() -> None:
    producer, errors = RefusingProducer(), list[str]()
    lines = ["x" * 5000 + "\n", "second\n", "third\n"]
    status = produce_lines(producer, "t", LineReader(), lines, False, errors.append)  # type: ignore[arg-type]
    assert producer.sent == [b"second", b"third"]
    assert errors == [
        "ERROR Error when sending message to topic t with key: null, value: 5000 bytes with "
        "error: " + KafkaError(KafkaError.MSG_SIZE_TOO_LARGE).str()
    ]
    assert status == 1


def test_a_line_that_is_not_utf8_is_read_with_a_replacement_character() -> None:
    stdin = io.BytesIO(b"caf\xe9\nok\n")
    producer = RefusingProducer()
    lines = decoded_lines(stdin)
    assert produce_lines(producer, "t", LineReader(), lines, False, print) == 0  # type: ignore[arg-type]
    assert producer.sent == ["caf\ufffd".encode(), b"ok"]


@pytest.mark.parametrize(
    ("properties", "idempotent"),
    [
        ({"acks": "-1", "retries": "3"}, True),  # the console producer's defaults
        ({}, True),  # librdkafka's acks default is all, as Java's
        ({"acks": "all"}, True),
        ({"acks": "1"}, False),
        ({"acks": "0"}, False),
        ({"acks": "all", "retries": "0"}, False),
        ({"max.in.flight.requests.per.connection": "6"}, False),
        ({"enable.idempotence": "false"}, False),  # the user's choice stays
    ],
)
def test_idempotence_on_where_kafkas_producer_has_it(
    properties: dict[str, str], idempotent: bool
) -> None:
    result = with_idempotence_default(properties)
    assert (result.get("enable.idempotence") == "true") == idempotent
    assert {k: v for k, v in result.items() if k != "enable.idempotence"} == {
        k: v for k, v in properties.items() if k != "enable.idempotence"
    }


def test_producer_perf_props_are_idempotent_by_default() -> None:
    args = argparse.Namespace(
        producer_props=["acks=all"], producer_config=None, bootstrap_server="h:1"
    )
    assert producer_perf_cmd.producer_props(args)["enable.idempotence"] == "true"


def test_producer_perf_counts_only_records_the_cluster_took() -> None:
    out = list[str]()
    args = argparse.Namespace(topic="t", num_records=5, throughput=-1)
    sent = iter([b"ok", b"nack", b"x" * 5000, b"ok", b"nack"])

    class InOrder(RefusingProducer):
        def produce(self, topic: str, value: bytes, **kwargs: Any) -> None:  # type: ignore[override]
            super().produce(topic, next(sent), **kwargs)

    producer = InOrder()
    stats, failed = producer_perf_cmd.send_all(
        producer,  # type: ignore[arg-type]
        args, [b"ok"], out.append, lambda n: None, FakeClock(),
    )  # fmt: skip
    assert producer.sent == [b"ok", b"ok"]
    assert stats.count == 2
    assert failed == 3


@pytest.mark.parametrize(
    ("code", "stops"),
    [
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, True),
        (KafkaError.GROUP_AUTHORIZATION_FAILED, True),
        (KafkaError._AUTHENTICATION, True),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, False),  # Java waits for the topic
        (KafkaError.NOT_LEADER_FOR_PARTITION, False),
        (KafkaError._TRANSPORT, False),  # librdkafka reconnects
        (KafkaError._ALL_BROKERS_DOWN, False),
    ],
)
def test_the_consumer_stops_on_errors_kafkas_consumer_throws(code: int, stops: bool) -> None:
    assert stops_consumer(KafkaError(code)) == stops


class ErrorMessage:
    def __init__(self, code: int) -> None:
        self._error = KafkaError(code)

    def error(self) -> KafkaError:
        return self._error


class FailingConsumer:
    def __init__(self, codes: list[int]) -> None:
        self.codes = codes

    def poll(self, timeout: float) -> ErrorMessage:
        return ErrorMessage(self.codes.pop(0))


def test_receive_warns_on_a_transport_error_and_raises_an_authorization_failure() -> None:
    warnings = list[str]()
    consumer = FailingConsumer([KafkaError._TRANSPORT, KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException) as raised:
        receive(consumer, None, warnings.append, FakeClock())  # type: ignore[arg-type]
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert len(warnings) == 1 and warnings[0].startswith("WARN ")


def test_the_console_consumer_ends_with_status_1_on_an_authorization_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed = list[bool]()

    class Refused(FailingConsumer):
        def __init__(self, config: dict[str, Any]) -> None:
            super().__init__([KafkaError.TOPIC_AUTHORIZATION_FAILED])

        def subscribe(self, topics: list[str]) -> None:
            pass

        def close(self) -> None:
            closed.append(True)

    monkeypatch.setattr(console_consumer_cmd, "Consumer", Refused)
    parser = argparse.ArgumentParser()
    console_consumer_cmd.add_arguments(parser)
    args = parser.parse_args(["--bootstrap-server", "h:1", "--topic", "t"])
    errors = list[str]()
    assert console_consumer_cmd.run(args, io.BytesIO(), errors.append) == 1
    assert closed == [True]
    assert errors[0].startswith("ERROR Error processing message, terminating consumer process: ")
    assert "TOPIC_AUTHORIZATION_FAILED" in errors[0]
    assert errors[1] == "Processed a total of 0 messages"
