"""``pykraft producer-perf-test``: kafka-producer-perf-test.sh (Kafka's ``ProducerPerformance``)
over confluent-kafka.

    pykraft producer-perf-test --topic T --num-records N (--record-size B | --payload-file F) \\
        --throughput R [--producer-props bootstrap.servers=HOST:PORT acks=all ...] \\
        [--producer.config FILE | --command-config FILE] [--bootstrap-server HOST:PORT] \\
        [--no-progress]

Prints Kafka's lines on stdout (``perf_stats``): a window line every 5 s and the total line with
the latency percentiles. ``--throughput`` -1 sends as fast as the producer takes records.
Latency is librdkafka's per-record time from ``produce`` to acknowledgement (Kafka's: send
call to callback). ``--bootstrap-server`` (Kafka 4.2's, KIP-1147) is the same as
``--producer-props bootstrap.servers=...``. A rich progress bar of acknowledged records goes to
stderr on a terminal (``--no-progress`` turns it off). ``--print-metrics`` prints, in Kafka's
``ToolsUtils.printMetrics`` layout, the few producer metrics pykraft can give under Kafka's
names: ``record-send-total`` and ``record-error-total`` (the tool's counts) and
``request-total``, ``response-total``, ``outgoing-byte-total``, ``incoming-byte-total``
(librdkafka's statistics), not Kafka's full list. Kafka's transactional options are not
offered. Source:
``tools/src/main/java/org/apache/kafka/tools/ProducerPerformance.java``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from pykraft.client_properties import load_client_properties
from pykraft.command_config import CommandConfigError
from pykraft.console_plans import ConsoleOptionsError, client_config, with_idempotence_default
from pykraft.perf_stats import ProducerStats, ThroughputThrottler, client_metrics, metrics_lines
from pykraft.storage.clock import Clock
from pykraft.storage.system_clock import SystemClock
from pykraft.tool_progress import Advance, progress_bar

Out = Callable[[str], None]
FLUSH_TIMEOUT_S = 300.0
QUEUE_FULL_WAIT_S = 0.01
CLIENT_ID = "perf-producer-client"  # ProducerPerformance's client.id unless one is given
STATISTICS_INTERVAL_MS = 100  # --print-metrics: librdkafka's statistics this often
STATISTICS_WAIT_S = 0.3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "This tool is used to verify the producer performance."
    parser.add_argument("--topic", required=True, metavar="TOPIC")
    parser.add_argument("--num-records", type=int, required=True, metavar="NUM-RECORDS")
    payload = parser.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="RECORD-SIZE")
    payload.add_argument("--payload-file", type=Path, metavar="PAYLOAD-FILE")
    parser.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER")
    parser.add_argument("--throughput", type=float, required=True, metavar="THROUGHPUT")
    parser.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE")
    parser.add_argument("--producer.config", "--command-config", dest="producer_config", type=Path)
    parser.add_argument("--bootstrap-server", metavar="BOOTSTRAP-SERVERS")
    parser.add_argument("--print-metrics", action="store_true")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def producer_props(args: argparse.Namespace) -> dict[str, str]:
    """``--producer.config``, then ``--producer-props`` (Kafka: exactly one ``=`` each), then
    ``--bootstrap-server``."""
    if args.producer_props is None and args.producer_config is None and not args.bootstrap_server:
        raise ConsoleOptionsError("Either --producer-props or --producer.config must be specified.")
    properties = load_client_properties(args.producer_config)
    for prop in args.producer_props or ():
        pieces = prop.split("=")
        if len(pieces) != 2:
            raise ConsoleOptionsError(f"Invalid property: {prop}")
        properties[pieces[0]] = pieces[1]
    if args.bootstrap_server:
        properties["bootstrap.servers"] = args.bootstrap_server
    if not properties.get("bootstrap.servers"):
        raise ConsoleOptionsError(
            "No bootstrap.servers: give --bootstrap-server or --producer-props"
        )
    return with_idempotence_default(properties)


def payloads(args: argparse.Namespace, out: Out) -> list[bytes]:
    """Kafka's payloads: one ``--record-size`` record of random capital letters (seed 0), or
    the ``--payload-file`` split at ``--payload-delimiter``."""
    if args.record_size is not None:
        letters = random.Random(0)
        return [bytes(letters.randrange(26) + 65 for _ in range(args.record_size))]
    delimiter = "\n" if args.payload_delimiter == "\\n" else args.payload_delimiter
    out(f"Reading payloads from: {args.payload_file.resolve()}")
    if not args.payload_file.exists() or args.payload_file.stat().st_size == 0:
        raise ConsoleOptionsError("File does not exist or empty file provided.")
    texts = args.payload_file.read_text(encoding="utf-8").split(delimiter)
    out(f"Number of messages read: {len(texts)}")
    return [text.encode() for text in texts]


def send_all(
    producer: Producer,
    args: argparse.Namespace,
    records: list[bytes],
    out: Out,
    advance: Advance,
    clock: Clock,
) -> tuple[ProducerStats, int]:
    """Kafka's send loop: every record, throttled, then a flush; the statistics and the number
    of records the cluster refused."""
    choice = random.Random(0)
    stats = ProducerStats(clock.wall_clock_ms(), args.num_records)
    throttler = ThroughputThrottler(args.throughput, stats.start_ms)
    errors: list[str] = []

    def completion(iteration: int, size: int) -> Callable[[KafkaError | None, Message], None]:
        def done(error: KafkaError | None, message: Message) -> None:
            # PerfCallback.onCompletion: only a record the cluster took is counted as sent.
            if error is None:
                latency = message.latency()
                line = stats.record(
                    iteration, int((latency or 0.0) * 1000), size, clock.wall_clock_ms()
                )
                if line is not None:
                    out(line)
            else:
                errors.append(error.str())
            advance(1)

        return done

    for iteration in range(args.num_records):
        payload = records[0] if len(records) == 1 else records[choice.randrange(len(records))]
        while True:
            try:
                producer.produce(
                    args.topic, payload, on_delivery=completion(iteration, len(payload))
                )
                break
            except BufferError:
                producer.poll(QUEUE_FULL_WAIT_S)
            except KafkaException as refused:  # refused before sending (MSG_SIZE_TOO_LARGE...)
                errors.append(refused.args[0].str())
                advance(1)
                break
        producer.poll(0)
        if throttler.should_throttle(iteration, clock.wall_clock_ms()):
            if args.throughput == 0:
                while True:  # Kafka's tool waits for ever at 0 records/sec
                    time.sleep(3600)
            sleep_ns = throttler.sleep_ns()
            if sleep_ns:
                time.sleep(sleep_ns / 1e9)
    left = producer.flush(FLUSH_TIMEOUT_S)
    for error in errors[:10]:
        print(f"org.apache.kafka.common.KafkaException: {error}", file=sys.stderr)
    if left:
        print(
            f"{left} records were not acknowledged within {FLUSH_TIMEOUT_S:.0f} s", file=sys.stderr
        )
    return stats, len(errors)


def run(args: argparse.Namespace, out: Out = print) -> int:
    statistics: dict[str, Any] = {}
    try:
        properties = producer_props(args)
        properties.setdefault("client.id", CLIENT_ID)
        records = payloads(args, out)
        config = client_config(properties["bootstrap.servers"], properties, "--producer-props")
        if args.print_metrics:
            config.update(statistics_config(statistics))
        producer = Producer(config)
    except (ConsoleOptionsError, CommandConfigError) as error:
        print(error, file=sys.stderr)
        return 1
    except KafkaException as error:
        print(f"ERROR {error}", file=sys.stderr)
        return 1
    clock = SystemClock()
    with progress_bar(f"Producing to {args.topic}", args.num_records, args.no_progress) as advance:
        stats, failed = send_all(producer, args, records, out, advance, clock)
    out(stats.total_line(clock.wall_clock_ms()))
    if args.print_metrics:
        producer.poll(STATISTICS_WAIT_S)  # librdkafka's statistics after the last acknowledgement
        totals = {"record-send-total": stats.count, "record-error-total": failed}
        metrics = client_metrics("producer-metrics", properties["client.id"], statistics, totals)
        for line in metrics_lines(dict(metrics)):
            out(line)
    return 0


def statistics_config(into: dict[str, Any]) -> dict[str, Any]:
    """librdkafka's statistics every ``STATISTICS_INTERVAL_MS``, the last one kept in ``into``."""

    def keep(text: str) -> None:
        into.clear()
        into.update(json.loads(text))

    return {"statistics.interval.ms": STATISTICS_INTERVAL_MS, "stats_cb": keep}
