"""``pykraft consumer-perf-test``: kafka-consumer-perf-test.sh (Kafka's ``ConsumerPerformance``)
over confluent-kafka.

    pykraft consumer-perf-test --bootstrap-server HOST:PORT (--topic T | --include REGEX) \\
        --messages N [--group G] [--timeout MS] [--from-latest] [--fetch-size B] \\
        [--show-detailed-stats [--reporting-interval MS]] [--date-format F] [--hide-header] \\
        [--consumer.config FILE | --command-config FILE] [--no-progress]

Prints Kafka's header and final line on stdout (``perf_stats``); with ``--show-detailed-stats``
a progress line per reporting interval instead of the final line, as Kafka does. It stops after
``--messages`` records or when none arrived for ``--timeout`` ms (default 10 s, with Kafka's
WARNING line). ``rebalance.time.ms`` is the time until the group assigned partitions (the
``on_assign`` callback, Kafka's ``ConsumerPerfRebListener``). A rich progress bar of records
read goes to stderr on a terminal (``--no-progress`` turns it off). ``--print-metrics`` prints
``records-consumed-total`` and ``bytes-consumed-total`` (the tool's counts) and librdkafka's
request and byte totals under Kafka's names, in ``ToolsUtils.printMetrics``' layout.
Source: ``tools/src/main/java/org/apache/kafka/tools/ConsumerPerformance.java``.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition

from pykraft.client_properties import load_client_properties
from pykraft.command_config import CommandConfigError
from pykraft.console_plans import ConsoleOptionsError, client_config
from pykraft.perf_stats import (
    DEFAULT_DATE_FORMAT,
    ConsumerTotals,
    ConsumerWindow,
    DateFormatError,
    client_metrics,
    consumer_header,
    consumer_progress_line,
    consumer_timeout_warning,
    consumer_total_line,
    format_date,
    metrics_lines,
)
from pykraft.producer_perf_cmd import statistics_config
from pykraft.storage.clock import Clock
from pykraft.storage.system_clock import SystemClock
from pykraft.tool_progress import Advance, progress_bar

Out = Callable[[str], None]
POLL_TIMEOUT_S = 0.1  # Kafka's poll(Duration.ofMillis(100))
MAX_POLL_RECORDS = 500  # Kafka's max.poll.records default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "This tool is used to verify the consumer performance."
    parser.add_argument("--bootstrap-server", metavar="server to connect to")
    parser.add_argument("--topic", metavar="topic")
    parser.add_argument("--include", metavar="Java regex (String)")
    parser.add_argument("--group", metavar="gid")
    parser.add_argument("--fetch-size", type=int, default=1024 * 1024, metavar="size")
    parser.add_argument("--from-latest", action="store_true")
    parser.add_argument("--socket-buffer-size", type=int, default=2 * 1024 * 1024, metavar="size")
    parser.add_argument("--consumer.config", "--command-config", dest="consumer_config", type=Path)
    parser.add_argument("--show-detailed-stats", action="store_true")
    parser.add_argument("--timeout", type=int, default=10_000, metavar="milliseconds")
    parser.add_argument("--messages", type=int, metavar="count")
    parser.add_argument("--reporting-interval", type=int, default=5_000, metavar="interval_ms")
    parser.add_argument("--date-format", default=DEFAULT_DATE_FORMAT, metavar="date format")
    parser.add_argument("--hide-header", action="store_true")
    parser.add_argument("--print-metrics", action="store_true")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def check_args(args: argparse.Namespace) -> None:
    """``ConsumerPerfOptions``' checks, in its order."""
    if not args.bootstrap_server:
        raise ConsoleOptionsError('Missing required argument "[bootstrap-server]"')
    if args.messages is None:
        raise ConsoleOptionsError('Missing required argument "[messages]"')
    if (args.topic is None) == (args.include is None):
        raise ConsoleOptionsError(
            "Exactly one of the following arguments is required: [topic], [include]"
        )
    if args.reporting_interval <= 0:
        raise ConsoleOptionsError("Reporting interval must be greater than 0.")
    format_date(args.date_format, 0)  # DateFormatError for a pattern pykraft cannot print


def consumer_config(args: argparse.Namespace, group_suffix: int) -> dict[str, object]:
    """``ConsumerPerfOptions.props``: the file, then the options Kafka always sets."""
    properties = load_client_properties(args.consumer_config)
    properties.update(
        {
            "group.id": args.group or f"perf-consumer-{group_suffix}",
            "receive.buffer.bytes": str(args.socket_buffer_size),
            "max.partition.fetch.bytes": str(args.fetch_size),
            "auto.offset.reset": "latest" if args.from_latest else "earliest",
        }
    )
    properties.setdefault("client.id", "perf-consumer-client")
    return client_config(
        args.bootstrap_server, properties, str(args.consumer_config or "--consumer.config")
    )


@attrs.define
class _Rebalances:
    """``ConsumerPerfRebListener``: time from (re)joining to holding partitions again."""

    clock: Clock
    join_start_ms: int
    join_time_ms: int = 0
    join_time_in_round_ms: int = 0
    assigned: set[tuple[str, int]] = attrs.Factory(set)

    def on_assign(self, _: Consumer, partitions: list[ConfluentPartition]) -> None:
        if not self.assigned:
            elapsed = self.clock.wall_clock_ms() - self.join_start_ms
            self.join_time_ms += elapsed
            self.join_time_in_round_ms += elapsed
        self.assigned.update((p.topic, p.partition) for p in partitions)

    def on_revoke(self, _: Consumer, partitions: list[ConfluentPartition]) -> None:
        self.assigned.difference_update((p.topic, p.partition) for p in partitions)
        if not self.assigned:
            self.join_start_ms = self.clock.wall_clock_ms()


@attrs.define
class _Progress:
    bytes_read: int = 0
    messages_read: int = 0
    last_bytes_read: int = 0
    last_messages_read: int = 0


def consume(
    consumer: Consumer,
    args: argparse.Namespace,
    rebalances: _Rebalances,
    out: Out,
    advance: Advance,
) -> _Progress:
    """Kafka's ``consume`` loop: poll until ``--messages`` or ``--timeout`` between records."""
    subscription = [args.topic] if args.topic is not None else [f"^({args.include})$"]
    consumer.subscribe(subscription, on_assign=rebalances.on_assign, on_revoke=rebalances.on_revoke)
    read = _Progress()
    clock = rebalances.clock
    now = last_report = last_consumed = clock.wall_clock_ms()
    while read.messages_read < args.messages and now - last_consumed <= args.timeout:
        messages = consumer.consume(MAX_POLL_RECORDS, POLL_TIMEOUT_S)
        now = clock.wall_clock_ms()
        records = [m for m in messages if m.error() is None]
        if records:
            last_consumed = now
        for message in records:
            read.messages_read += 1
            read.bytes_read += len(message.key() or b"") + len(message.value() or b"")
            if now - last_report >= args.reporting_interval:
                if args.show_detailed_stats:
                    window = ConsumerWindow(
                        read.bytes_read, read.last_bytes_read, read.messages_read,
                        read.last_messages_read, last_report, now, rebalances.join_time_in_round_ms,
                    )  # fmt: skip
                    out(consumer_progress_line(window, args.date_format))
                rebalances.join_time_in_round_ms = 0
                last_report = now
                read.last_messages_read, read.last_bytes_read = read.messages_read, read.bytes_read
        advance(len(records))
    if read.messages_read < args.messages:
        out(consumer_timeout_warning(args.timeout))
    return read


def run(args: argparse.Namespace, out: Out = print) -> int:
    statistics: dict[str, Any] = {}
    try:
        check_args(args)
        config = consumer_config(args, random.randrange(100_000))
        config["check.crcs"] = False
        if args.print_metrics:
            config.update(statistics_config(statistics))
        consumer = Consumer(config)
    except (ConsoleOptionsError, CommandConfigError, DateFormatError) as error:
        print(error, file=sys.stderr)
        return 1
    except KafkaException as error:
        print(f"ERROR {error}", file=sys.stderr)
        return 1
    if not args.hide_header:
        out(consumer_header(args.show_detailed_stats))
    clock = SystemClock()
    try:
        with progress_bar("Consuming", args.messages, args.no_progress) as advance:
            # The clock starts once the bar is up (rich's import is not the consumer's time).
            start_ms = clock.wall_clock_ms()
            rebalances = _Rebalances(clock, join_start_ms=start_ms)
            read = consume(consumer, args, rebalances, out, advance)
        end_ms = clock.wall_clock_ms()
    finally:
        consumer.close()
    if not args.show_detailed_stats:
        totals = ConsumerTotals(
            start_ms, end_ms, read.bytes_read, read.messages_read, rebalances.join_time_ms
        )
        out(consumer_total_line(totals, args.date_format))
    if args.print_metrics:
        client_id = str(config["client.id"])
        counts = {
            "records-consumed-total": read.messages_read,
            "bytes-consumed-total": read.bytes_read,
        }
        metrics = client_metrics("consumer-fetch-manager-metrics", client_id, {}, counts)
        metrics.update(client_metrics("consumer-metrics", client_id, statistics, {}))
        for line in metrics_lines(dict(metrics)):
            out(line)
    return 0
