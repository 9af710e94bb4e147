"""``pykraft console-consumer``: kafka-console-consumer.sh (Kafka's ``ConsoleConsumer``) over
confluent-kafka.

    pykraft console-consumer --bootstrap-server HOST:PORT (--topic T | --include REGEX) \\
        [--group G] [--from-beginning] [--partition P [--offset earliest|latest|N]] \\
        [--max-messages N] [--timeout-ms MS] [--isolation-level read_committed] \\
        [--property print.key=true ...] [--formatter-config FILE] \\
        [--consumer-property k=v ...] [--consumer.config FILE | --command-config FILE]

Records are printed by Kafka's ``DefaultMessageFormatter`` (``console_records``); the options are
checked and merged as ``ConsoleConsumerOptions`` does (``console_plans``). As Kafka's tool: it
stops after ``--max-messages``, or when nothing arrived for ``--timeout-ms`` (logging "Error
processing message, terminating consumer process:" with the ``TimeoutException``), and always
ends with "Processed a total of N messages" on stderr. With ``--group`` the offsets of the
printed records are committed (librdkafka's auto commit stores an offset only once ``poll``
returned its record, and ``close`` commits them: Kafka's ``resetUnconsumedOffsets`` and
close). Sources: ``tools/.../consumer/ConsoleConsumer.java``, ``ConsoleConsumerOptions.java``.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as ConfluentPartition

from pykraft.client_properties import load_client_properties
from pykraft.command_config import CommandConfigError
from pykraft.console_plans import (
    ConsoleOptionsError,
    ConsumerPlan,
    consumer_plan,
    parse_key_value_args,
)
from pykraft.console_records import NO_TIMESTAMP_TYPE, ConsumedRecord, MessageFormatter
from pykraft.properties import ConfigError, Properties
from pykraft.storage.clock import Clock
from pykraft.storage.system_clock import SystemClock

Err = Callable[[str], None]
DEFAULT_FORMATTERS = (
    "kafka.tools.DefaultMessageFormatter",
    "org.apache.kafka.tools.consumer.DefaultMessageFormatter",
)
POLL_STEP_S = 0.5  # one poll's longest wait, so Ctrl-C is seen
# librdkafka's timestamp types -> Kafka's TimestampType names.
_TIMESTAMP_TYPES = {0: NO_TIMESTAMP_TYPE, 1: "CreateTime", 2: "LogAppendTime"}
# Kafka's error codes whose exceptions are RetriableException (clients/.../protocol/Errors.java):
# the Java consumer retries these itself. librdkafka's KafkaError.retriable() is False for every
# consumer error, so the codes are listed here.
KAFKA_RETRIABLE_CODES = frozenset(
    {2, 3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83, 88, 89}
)


class ConsumerTerminated(Exception):
    """``process`` stopped on an error receive() raised (already logged)."""


def stops_consumer(error: KafkaError) -> bool:
    """Kafka's ``process`` ends on any exception ``receive`` throws; the Java consumer throws
    broker errors it cannot retry (TOPIC_AUTHORIZATION_FAILED...) and authentication failures,
    and retries the rest itself (librdkafka's local errors, codes below 0, are its retries)."""
    code = error.code()
    if error.fatal() or code == KafkaError._AUTHENTICATION:
        return True
    return code > 0 and code not in KAFKA_RETRIABLE_CODES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "This tool helps to read data from Kafka topics and outputs it to standard output."
    )
    parser.add_argument("--bootstrap-server", metavar="server to connect to")
    parser.add_argument("--topic", metavar="topic")
    parser.add_argument("--include", "--whitelist", metavar="Java regex (String)")
    parser.add_argument("--partition", type=int, metavar="partition")
    parser.add_argument("--offset", metavar="consume offset")
    parser.add_argument("--group", metavar="consumer group id")
    parser.add_argument("--from-beginning", action="store_true")
    parser.add_argument("--max-messages", type=int, metavar="num_messages")
    parser.add_argument("--timeout-ms", type=int, metavar="timeout_ms")
    parser.add_argument("--isolation-level", metavar="read_committed|read_uncommitted")
    parser.add_argument("--skip-message-on-error", action="store_true")
    parser.add_argument("--formatter", default=DEFAULT_FORMATTERS[0], metavar="class")
    # --formatter-property, --command-property, --command-config: Kafka 4.2's names (KIP-1147).
    parser.add_argument("--property", "--formatter-property", action="append", metavar="prop")
    parser.add_argument("--formatter-config", type=Path, metavar="config file")
    parser.add_argument(
        "--consumer-property", "--command-property", action="append", metavar="consumer_prop"
    )
    parser.add_argument("--consumer.config", "--command-config", dest="consumer_config", type=Path)


def formatter_of(args: argparse.Namespace) -> MessageFormatter:
    if args.formatter not in DEFAULT_FORMATTERS:
        raise ConsoleOptionsError(
            "pykraft console-consumer prints with Kafka's DefaultMessageFormatter only, "
            f"not {args.formatter}"
        )
    properties: dict[str, str] = {}
    if args.formatter_config is not None:
        try:
            properties.update(Properties.load(args.formatter_config).values)
        except ConfigError as error:
            raise ConsoleOptionsError(str(error)) from None
    properties.update(parse_key_value_args(args.property or ()))
    return MessageFormatter.of(properties)


def _bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _header_pairs(message: Message) -> list[tuple[str, str | bytes | None]]:
    headers = message.headers() or []
    return list(headers.items()) if isinstance(headers, dict) else list(headers)


def consumed(message: Message) -> ConsumedRecord:
    timestamp_type, timestamp = message.timestamp()
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None, "a record always has both"
    return ConsumedRecord(
        partition=partition,
        offset=offset,
        timestamp_type=_TIMESTAMP_TYPES.get(timestamp_type, NO_TIMESTAMP_TYPE),
        timestamp=timestamp,
        key=_bytes(message.key()),
        value=_bytes(message.value()),
        headers=[(key, _bytes(value)) for key, value in _header_pairs(message)],
    )


def start(consumer: Consumer, plan: ConsumerPlan) -> None:
    """``ConsumerWrapper``'s constructor: assign one partition at its offset, or subscribe."""
    if plan.partition is not None:
        assert plan.topic is not None
        # librdkafka's OFFSET_BEGINNING / OFFSET_END are Kafka's -2 / -1, as plan.start_offset.
        consumer.assign([ConfluentPartition(plan.topic, plan.partition, plan.start_offset)])
    elif plan.topic is not None:
        consumer.subscribe([plan.topic])
    else:
        # librdkafka takes a regex subscription as "^..."; Kafka's include matches whole names.
        consumer.subscribe([f"^({plan.include})$"])


def receive(consumer: Consumer, timeout_ms: int | None, err: Err, clock: Clock) -> Message | None:
    """The next record, or None when nothing came for ``timeout_ms`` (Kafka's TimeoutException)."""
    deadline_ms = None if timeout_ms is None else clock.monotonic_ms() + timeout_ms
    while True:
        remaining_s = POLL_STEP_S
        if deadline_ms is not None:
            remaining_s = min(POLL_STEP_S, (deadline_ms - clock.monotonic_ms()) / 1000.0)
        if remaining_s <= 0:
            return None
        message = consumer.poll(remaining_s)
        if message is None:
            continue
        error = message.error()
        if error is None:
            return message
        if stops_consumer(error):
            raise KafkaException(error)
        err(f"WARN {error.str()}")


def consume(
    plan: ConsumerPlan, formatter: MessageFormatter, out: BinaryIO, err: Err, clock: Clock
) -> int:
    """Kafka's ``process``: print records until ``max_messages`` or the timeout; the count."""
    consumer = Consumer(plan.config)
    count = 0
    failure: KafkaException | None = None
    try:
        start(consumer, plan)
        while plan.max_messages == -1 or count < plan.max_messages:
            message = receive(consumer, plan.timeout_ms, err, clock)
            if message is None:
                err(
                    "ERROR Error processing message, terminating consumer process: "
                    "org.apache.kafka.common.errors.TimeoutException"
                )
                break
            count += 1
            out.write(formatter.format(consumed(message)))
            out.flush()
    except BrokenPipeError:  # Kafka's checkErr: nobody reads the output any more
        err("Unable to write to standard out, closing consumer.")
    except KafkaException as error:
        err(f"ERROR Error processing message, terminating consumer process: {error}")
        failure = error
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
        err(f"Processed a total of {count} messages")
    if failure is not None:  # unlike Kafka's tool (exit 0), the status says the tool failed
        raise ConsumerTerminated from failure
    return count


def run(args: argparse.Namespace, out: BinaryIO | None = None, err: Err | None = None) -> int:
    err = err or (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        formatter = formatter_of(args)
        source = str(args.consumer_config or "--consumer-property")
        plan = consumer_plan(
            args, load_client_properties(args.consumer_config), source, random.randrange(100_000)
        )
    except (ConsoleOptionsError, CommandConfigError) as error:
        err(str(error))
        return 1
    try:
        consume(plan, formatter, out or sys.stdout.buffer, err, SystemClock())
    except ConsumerTerminated:
        return 1
    except KafkaException as error:
        err(f"ERROR Unknown error when running consumer: {error}")
        return 1
    return 0
