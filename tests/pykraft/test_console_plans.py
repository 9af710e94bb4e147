"""``console_plans``: the option checks and client properties of Kafka's
``ConsoleConsumerOptions`` and ``ConsoleProducerConfig`` (messages as in Kafka's
``ConsoleConsumerOptionsTest`` / ``ConsoleProducerTest``), and Kafka's client property names
turned into librdkafka's."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from pykraft import console_consumer_cmd, console_producer_cmd
from pykraft.console_plans import (
    EARLIEST,
    LATEST,
    ConsoleOptionsError,
    ConsumerPlan,
    client_config,
    consumer_plan,
    parse_key_value_args,
    producer_properties,
)


def consumer_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    console_consumer_cmd.add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", "h:1", *argv])


def plan(*argv: str, from_file: dict[str, str] | None = None) -> ConsumerPlan:
    return consumer_plan(consumer_args(*argv), from_file or {}, "file", 42)


def test_a_consumer_without_group_gets_kafkas_random_group_without_auto_commit() -> None:
    consumer = plan("--topic", "t")
    assert consumer.config == {
        "bootstrap.servers": "h:1",
        "client.id": "console-consumer",
        "security.protocol": "PLAINTEXT",
        "group.id": "console-consumer-42",
        "enable.auto.commit": "false",
        "auto.offset.reset": "latest",
        "isolation.level": "read_uncommitted",
    }
    assert (consumer.topic, consumer.partition, consumer.start_offset) == ("t", None, LATEST)
    assert (consumer.max_messages, consumer.timeout_ms) == (-1, None)


def test_a_group_commits_and_from_beginning_starts_at_earliest() -> None:
    consumer = plan(
        "--topic", "t", "--group", "g", "--from-beginning", "--isolation-level", "read_committed",
        "--max-messages", "5", "--timeout-ms", "100",
    )  # fmt: skip
    assert consumer.config["group.id"] == "g"
    assert "enable.auto.commit" not in consumer.config  # librdkafka's default: true
    assert consumer.config["auto.offset.reset"] == "earliest"
    assert consumer.config["isolation.level"] == "read_committed"
    assert (consumer.start_offset, consumer.max_messages, consumer.timeout_ms) == (EARLIEST, 5, 100)


def test_isolation_level_and_group_from_properties() -> None:
    consumer = plan(
        "--topic", "t", "--consumer-property", "isolation.level=read_committed",
        from_file={"group.id": "g", "client.id": "me"},
    )  # fmt: skip
    assert consumer.config["isolation.level"] == "read_committed"  # no option: the property
    assert (consumer.config["group.id"], consumer.config["client.id"]) == ("g", "me")


@pytest.mark.parametrize(
    ("offset", "expected"), [("earliest", EARLIEST), ("LATEST", LATEST), ("17", 17)]
)
def test_partition_and_offset(offset: str, expected: int) -> None:
    consumer = plan("--topic", "t", "--partition", "3", "--offset", offset)
    assert (consumer.partition, consumer.start_offset) == (3, expected)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "Exactly one of the following arguments is required: [topic], [include]"),
        (
            ("--topic", "t", "--include", "x"),
            "Exactly one of the following arguments is required: [topic], [include]",
        ),
        (
            ("--include", "x", "--partition", "0"),
            "The topic is required when partition is specified.",
        ),
        (
            ("--topic", "t", "--partition", "0", "--offset", "1", "--from-beginning"),
            "Options from-beginning and offset cannot be specified together.",
        ),
        (("--topic", "t", "--offset", "1"), "The partition is required when offset is specified."),
        (
            ("--topic", "t", "--partition", "0", "--group", "g"),
            "Options group and partition cannot be specified together.",
        ),
        (
            ("--topic", "t", "--partition", "0", "--offset", "-3"),
            "The provided offset value '-3' is incorrect. Valid values are 'earliest', "
            "'latest', or a non-negative long.",
        ),
        (
            ("--topic", "t", "--group", "a", "--consumer-property", "group.id=b"),
            "The group ids provided in different places (directly using '--group', via "
            "'--consumer-property', or via '--consumer.config') do not match. "
            "Detected group ids: 'a', 'b'",
        ),
        (
            ("--topic", "t", "--from-beginning", "--consumer-property", "auto.offset.reset=latest"),
            "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', "
            "please remove one option",
        ),
        (("--topic", "t", "--consumer-property", "acks"), "Missing value for key acks"),
        (
            ("--topic", "t", "--isolation-level", "committed"),
            "Invalid value committed for configuration isolation.level: String must be one of: "
            "read_uncommitted, read_committed",
        ),
    ],
)
def test_consumer_options_refused_with_kafkas_messages(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConsoleOptionsError) as error:
        plan(*argv)
    assert str(error.value) == message


def producer_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    console_producer_cmd.add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", "h:1", "--topic", "t", *argv])


def test_producer_properties_are_kafkas_defaults() -> None:
    assert producer_properties(producer_args(), {}) == {
        "compression.type": "none",
        "client.id": "console-producer",
        "linger.ms": "1000",
        "acks": "-1",
        "request.timeout.ms": "1500",
        "retries": "3",
        "retry.backoff.ms": "100",
        "send.buffer.bytes": "102400",
        "buffer.memory": "33554432",
        "batch.size": "16384",
        "metadata.max.age.ms": "300000",
        "enable.idempotence": "true",  # the Java producer's default with these settings
    }


@pytest.mark.parametrize(
    ("argv", "from_file", "acks"),
    [
        (("--request-required-acks", "1"), {}, "1"),
        (("--producer-property", "acks=0"), {}, "0"),  # a property beats the option's default
        (("--request-required-acks", "1", "--producer-property", "acks=0"), {}, "1"),  # option wins
        ((), {"acks": "all"}, "all"),
    ],
)
def test_acks_merged_as_kafka_merges_options(
    argv: tuple[str, ...], from_file: dict[str, str], acks: str
) -> None:
    assert producer_properties(producer_args(*argv), from_file)["acks"] == acks


def test_compression_codec_without_value_is_gzip() -> None:
    assert (
        producer_properties(producer_args("--compression-codec"), {})["compression.type"] == "gzip"
    )
    with pytest.raises(
        ConsoleOptionsError, match=r"Invalid value brotli for configuration compression\.type"
    ):
        producer_properties(producer_args("--compression-codec", "brotli"), {})


def test_key_value_args_split_at_the_first_equals() -> None:
    assert parse_key_value_args(["a=b=c", "x=1"]) == {"a": "b=c", "x": "1"}


def test_client_config_renames_drops_and_keeps() -> None:
    properties: dict[str, Any] = {
        "fetch.max.wait.ms": "50",
        "send.buffer.bytes": "1000",
        "buffer.memory": "1048576",
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "max.block.ms": "1",
        "acks": "all",
        "ssl.truststore.type": "PEM",
    }
    assert client_config("h:1", properties, "file") == {
        "bootstrap.servers": "h:1",
        "security.protocol": "PLAINTEXT",
        "fetch.wait.max.ms": "50",
        "socket.send.buffer.bytes": "1000",
        "queue.buffering.max.kbytes": 1024,
        "acks": "all",
    }
