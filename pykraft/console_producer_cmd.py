"""``pykraft console-producer``: kafka-console-producer.sh (Kafka's ``ConsoleProducer``) over
confluent-kafka.

    pykraft console-producer --bootstrap-server HOST:PORT --topic T [--sync] \\
        [--property parse.key=true --property key.separator=: ...] [--reader-config FILE] \\
        [--request-required-acks 1] [--producer-property k=v ...] \\
        [--producer.config FILE | --command-config FILE] [--compression-codec [gzip]] ...

Each line of standard input is one record, read by Kafka's ``LineMessageReader``
(``console_records``: ``parse.key``, ``key.separator``, ``parse.headers``, ``headers.delimiter``,
``headers.separator``, ``headers.key.separator``, ``ignore.error``, ``null.marker``); the
producer's properties are Kafka's (``console_plans.producer_properties``: ``acks=-1``,
``linger.ms=1000`` from ``--timeout``... unless set). A line the reader refuses stops the tool
with Kafka's message and exit status 1, after the records before it are delivered. A record the
cluster refuses is reported as Kafka's ``ErrorLoggingCallback`` does; unlike Kafka's tool (which
exits 0 after logging it) the exit status is then 1, so a script sees the loss. Source:
``tools/src/main/java/org/apache/kafka/tools/ConsoleProducer.java``.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from pykraft.client_properties import load_client_properties
from pykraft.command_config import CommandConfigError
from pykraft.console_plans import (
    ConsoleOptionsError,
    client_config,
    parse_key_value_args,
    producer_properties,
)
from pykraft.console_records import ConsoleRecordError, LineReader, LineRecord
from pykraft.properties import ConfigError, Properties

Err = Callable[[str], None]
FLUSH_TIMEOUT_S = 120.0  # delivery.timeout.ms (Kafka's default 120 s) bounds every record anyway
QUEUE_FULL_WAIT_S = 0.1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "This tool helps to read data from standard input and publish it to Kafka."
    parser.add_argument("--bootstrap-server", "--broker-list", metavar="server to connect to")
    parser.add_argument("--topic", metavar="topic")
    parser.add_argument("--sync", action="store_true")
    parser.add_argument("--compression-codec", nargs="?", const="", metavar="compression-codec")
    parser.add_argument("--batch-size", type=int, metavar="size")
    parser.add_argument("--message-send-max-retries", type=int)
    parser.add_argument("--retry-backoff-ms", type=int)
    parser.add_argument("--timeout", type=int, metavar="timeout_ms")
    parser.add_argument("--request-required-acks", metavar="request required acks")
    parser.add_argument("--request-timeout-ms", type=int, metavar="request timeout ms")
    parser.add_argument("--metadata-expiry-ms", type=int)
    parser.add_argument("--max-block-ms", type=int, help="accepted; librdkafka never blocks a send")
    parser.add_argument("--max-memory-bytes", type=int)
    parser.add_argument("--max-partition-memory-bytes", type=int)
    parser.add_argument("--socket-buffer-size", type=int, metavar="size")
    # --reader-property: Kafka 4.2's name (KIP-1147) for --property.
    parser.add_argument("--property", "--reader-property", action="append", metavar="prop")
    parser.add_argument("--reader-config", type=Path, metavar="config file")
    parser.add_argument(
        "--producer-property", "--command-property", action="append", metavar="producer_prop"
    )
    parser.add_argument("--producer.config", "--command-config", dest="producer_config", type=Path)


def reader_of(args: argparse.Namespace) -> LineReader:
    """``readerProps``: ``--reader-config``, then ``--property``."""
    properties: dict[str, str] = {}
    if args.reader_config is not None:
        try:
            properties.update(Properties.load(args.reader_config).values)
        except ConfigError as error:
            raise ConsoleOptionsError(str(error)) from None
    properties.update(parse_key_value_args(args.property or ()))
    return LineReader.of(properties)


def _size(data: bytes | None) -> str:
    return "null" if data is None else f"{len(data)} bytes"


class _Delivery:
    """Counts failed deliveries and reports each as ``ErrorLoggingCallback`` does."""

    def __init__(self, err: Err) -> None:
        self.err = err
        self.failed = 0

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.report(message.topic() or "", message.key(), message.value(), error)

    def report(self, topic: str, key: bytes | None, value: bytes | None, error: KafkaError) -> None:
        self.failed += 1
        self.err(
            f"ERROR Error when sending message to topic {topic} with key: "
            f"{_size(key)}, value: {_size(value)} with error: {error.str()}"
        )


def send(
    producer: Producer, topic: str, record: LineRecord, delivery: _Delivery, sync: bool
) -> None:
    while True:
        try:
            producer.produce(
                topic,
                value=record.value,
                key=record.key,
                headers=list(record.headers),
                on_delivery=delivery,
            )
            break
        except BufferError:  # librdkafka's queue is full: serve deliveries, then try again
            producer.poll(QUEUE_FULL_WAIT_S)
        except KafkaException as error:
            # Refused before sending (MSG_SIZE_TOO_LARGE...): Kafka's send() hands this to the
            # callback too, so it is reported and the next line goes on.
            delivery.report(topic, record.key, record.value, error.args[0])
            return
    if sync:
        producer.flush(FLUSH_TIMEOUT_S)
    else:
        producer.poll(0)


def produce_lines(
    producer: Producer, topic: str, reader: LineReader, lines: Iterable[str], sync: bool, err: Err
) -> int:
    """``loopReader``: one record per line; the exit status."""
    delivery = _Delivery(err)
    status = 0
    try:
        for line_number, line in enumerate(lines, start=1):
            send(producer, topic, reader.read(line.rstrip("\r\n"), line_number), delivery, sync)
    except ConsoleRecordError as error:
        err(f"org.apache.kafka.common.KafkaException: {error}")
        status = 1
    except KeyboardInterrupt:
        pass
    finally:
        left = producer.flush(FLUSH_TIMEOUT_S)
    if left:
        err(f"ERROR {left} records were not delivered within {FLUSH_TIMEOUT_S:.0f} s")
    return 1 if status or delivery.failed or left else 0


def decoded_lines(stream: BinaryIO) -> Iterable[str]:
    """Standard input's lines as Kafka reads them (``InputStreamReader``, UTF-8): a byte that is
    not UTF-8 becomes U+FFFD, never an error."""
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace")


def _prompted(lines: Iterable[str]) -> Iterable[str]:
    """Kafka prints ">" before each line when a person types them (``System.console()``)."""
    for line in lines:
        yield line
        print(">", end="", flush=True)


def run(
    args: argparse.Namespace, lines: Iterable[str] | None = None, err: Err | None = None
) -> int:
    err = err or (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        reader = reader_of(args)
        properties = producer_properties(args, load_client_properties(args.producer_config))
        config = client_config(
            args.bootstrap_server, properties, str(args.producer_config or "--producer-property")
        )
        producer = Producer(config)
    except (ConsoleOptionsError, ConsoleRecordError, CommandConfigError) as error:
        err(str(error))
        return 1
    except KafkaException as error:
        err(f"ERROR {error}")
        return 1
    if lines is None:
        lines = decoded_lines(sys.stdin.buffer)
        if sys.stdin.isatty() and sys.stdout.isatty():
            print(">", end="", flush=True)
            lines = _prompted(lines)
    return produce_lines(producer, args.topic, reader, lines, args.sync, err)
