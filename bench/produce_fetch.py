"""Produce and consume throughput through real brokers, next to a plain loopback TCP copy.

    .venv/bin/python bench/produce_fetch.py              # 256 MB per measurement
    .venv/bin/python bench/produce_fetch.py --quick      # 32 MB: a smoke run

Measures, in one run on this machine:

* tcp: the same number of bytes copied over a 127.0.0.1 TCP connection from a Python client to a
  Python server process (``sendall`` of 64 KiB chunks, ``recv_into`` a reused buffer) — the
  ceiling for any Python server on this loopback, measured the same way;
* for a cluster of 1 and of 3 brokers (``pykraft dev`` with one controller, started and stopped
  here): confluent-kafka producing 1 KiB records into an RF=1 topic with 4 partitions per
  broker (``batch.size`` 64 KiB, ``linger.ms`` 5, ``acks=all``, no compression) until every
  delivery report is in, then a consumer reading every record back by ``assign`` from offset 0
  — twice, in turns: with ``fetch.queue.backoff.ms`` 10 (the figure) and with librdkafka's
  default 1000 (``..._backoff_1000ms``; ``CONSUMER_QUEUE_BACKOFF_MS`` says why);
* the CPU-seconds per 100 MB of the servers (controller and brokers) while producing and while
  consuming, and of this client process while consuming: where the consume time goes.

Each figure is the best of ``--repeats`` runs (3; each produce goes to a fresh topic): the
machine is shared, and a slow run measures the neighbours, not pykraft. The first consumer of
a cluster also waits for the ``__consumer_offsets`` topic its FindCoordinator creates.
MB means 10^6 bytes of record values. Prints a table (with the load average), then one JSON
line; ``ratio = produce_mb_s_1_broker / tcp_mb_s``. Targets: produce_mb_s_1_broker >= 100;
consume_mb_s >= produce_mb_s with 1 and with 3 brokers (``consume_target_met``).
Never run by the tests.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common import RunningCluster, cpu_seconds, print_figures
from pykraft.dev import plan_layout
from pykraft.free_ports import pick_free_ports

KIB = 1024
RECORD_BYTES = 1 * KIB
BATCH_BYTES = 64 * KIB
LINGER_MS = 5
PARTITIONS_PER_BROKER = 4
TIMEOUT_S = 300.0  # any single measurement
MB = 1_000_000
# librdkafka's consumer stops fetching a partition once its local queue holds
# queued.max.messages.kbytes (64 MiB) or queued.min.messages, and fetches it again only
# fetch.queue.backoff.ms later (1000 by default: librdkafka 2.2.0 made the second it always
# waited configurable, CHANGELOG #2879), however soon the application drains the queue.
# Kafka's Java consumer fetches a partition again as soon as its buffered records are handed
# out. A broker faster than the Python loop below fills that queue every ~65,000 records, and
# the timer was most of the consume time: 256 MB, 3 brokers, 66-76 MB/s with 1000 ms,
# 140-383 MB/s with 10 ms, the brokers busy for 0.3 s of CPU either way (the "3-broker
# consume cliff" of issue 18: three fetcher threads fill the queue three times as fast).
# Both are measured.
CONSUMER_QUEUE_BACKOFF_MS = 10
LIBRDKAFKA_QUEUE_BACKOFF_MS = 1000
CONSUME_BATCH = 10_000
CONSUME_POLL_S = 0.5


# ------------------------------------------------------------------ loopback TCP baseline


def _sink(listener: socket.socket, total_bytes: int) -> None:
    connection, _ = listener.accept()
    buffer = bytearray(BATCH_BYTES)
    received = 0
    with connection:
        while received < total_bytes:
            count = connection.recv_into(buffer)
            if count == 0:
                break
            received += count
        connection.sendall(b"k")  # the copy is complete only when the sink has every byte


def tcp_copy_mb_s(total_bytes: int) -> float:
    """Copy ``total_bytes`` from this process to a sink process over 127.0.0.1."""
    listener = socket.create_server(("127.0.0.1", 0))
    sink = multiprocessing.get_context("fork").Process(target=_sink, args=(listener, total_bytes))
    sink.start()
    chunk = os.urandom(BATCH_BYTES)
    try:
        with socket.create_connection(listener.getsockname()) as connection:
            started = time.perf_counter()
            sent = 0
            while sent < total_bytes:
                connection.sendall(chunk)
                sent += len(chunk)
            assert connection.recv(1) == b"k"
            elapsed = time.perf_counter() - started
    finally:
        sink.join(TIMEOUT_S)
        listener.close()
    return sent / elapsed / MB


# ------------------------------------------------------------------ the cluster


class Cluster(RunningCluster):
    """1 controller and ``brokers`` brokers on free ports."""

    def __init__(self, brokers: int, root: Path) -> None:
        layout = plan_layout(1, brokers, 0, pick_free_ports(2 * (1 + brokers)))
        super().__init__(layout, root / f"cluster-{brokers}")

    def create_topic(self, partitions: int) -> str:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)
        futures[topic].result(timeout=30)
        deadline = time.monotonic() + 30
        while True:  # every partition has a leader in the brokers' metadata
            described = admin.list_topics(topic, timeout=10).topics[topic]
            if (
                described.error is None
                and len(described.partitions) == partitions
                and all(p.leader >= 0 for p in described.partitions.values())
            ):
                return topic
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} has no leaders after 30 s: {described}")
            time.sleep(0.1)


# ------------------------------------------------------------------ produce and consume


def produce(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    records: int,
    security: Mapping[str, str] | None = None,
) -> float:
    """Seconds until every one of ``records`` 1 KiB records is acknowledged; ``security``: the
    listener's client settings (bench/secure_produce.py)."""
    producer = Producer({
        **(security or {}), "bootstrap.servers": bootstrap_servers, "batch.size": BATCH_BYTES,
        "linger.ms": LINGER_MS, "acks": "all", "compression.type": "none",
        "queue.buffering.max.kbytes": 256 * KIB,
        # A Python callback per record would measure the interpreter; failures still report.
        "delivery.report.only.error": True,
    })  # fmt: skip
    value = os.urandom(RECORD_BYTES)
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _report: object) -> None:
        if error is not None:
            failures.append(error)

    started = time.perf_counter()
    for index in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=index % partitions, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        if index % 1000 == 0:
            producer.poll(0)
    if producer.flush(TIMEOUT_S) != 0:
        raise RuntimeError(f"records still unacknowledged after {TIMEOUT_S} s")
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, e.g. {failures[0]}")
    return elapsed


def consume(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    records: int,
    queue_backoff_ms: int = CONSUMER_QUEUE_BACKOFF_MS,
) -> float:
    """Seconds to read ``records`` records back from offset 0 of every partition."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "fetch.max.bytes": 50 * KIB * KIB,
        "max.partition.fetch.bytes": 1024 * KIB, "fetch.queue.backoff.ms": queue_backoff_ms,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        read = 0
        started = time.perf_counter()
        deadline = time.monotonic() + TIMEOUT_S
        while read < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read {read} of {records} records in {TIMEOUT_S} s")
            # consume() waits its whole timeout for a batch it cannot fill: never ask for
            # more than are left, or the last call of every run is a CONSUME_POLL_S wait.
            wanted = min(CONSUME_BATCH, records - read)
            for message in consumer.consume(num_messages=wanted, timeout=CONSUME_POLL_S):
                if message.error() is not None:
                    raise RuntimeError(f"consumer error: {message.error()}")
                read += 1
        return time.perf_counter() - started
    finally:
        consumer.close()


class _Best:
    """The best (lowest) of each figure over the repeats."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def add(self, name: str, value: float) -> None:
        self.values[name] = min(self.values.get(name, float("inf")), value)


def measure_cluster(brokers: int, records: int, root: Path, repeats: int) -> dict[str, float]:
    partitions = PARTITIONS_PER_BROKER * brokers
    best = _Best()
    payload_mb = records * RECORD_BYTES / MB
    with Cluster(brokers, root) as cluster:
        servers = [process.pid for process in cluster.dev.processes.values()]
        bootstrap = cluster.bootstrap_servers
        for repeat in range(repeats):
            topic = cluster.create_topic(partitions)
            cpu_before = cpu_seconds(servers)
            best.add("produce_s", produce(bootstrap, topic, partitions, records))
            best.add("produce_server_cpu_s", cpu_seconds(servers) - cpu_before)
            backoffs = [CONSUMER_QUEUE_BACKOFF_MS, LIBRDKAFKA_QUEUE_BACKOFF_MS]
            for backoff_ms in backoffs if repeat % 2 == 0 else backoffs[::-1]:
                cpu_before, client_before = cpu_seconds(servers), time.process_time()
                seconds = consume(bootstrap, topic, partitions, records, backoff_ms)
                if backoff_ms == LIBRDKAFKA_QUEUE_BACKOFF_MS:
                    best.add("consume_default_s", seconds)
                    continue
                best.add("consume_s", seconds)
                best.add("consume_server_cpu_s", cpu_seconds(servers) - cpu_before)
                best.add("consume_client_cpu_s", time.process_time() - client_before)
    found = best.values
    per_100mb = 100 / payload_mb
    suffix = f"{brokers}_broker" + ("s" if brokers > 1 else "")
    return {
        f"produce_mb_s_{suffix}": round(payload_mb / found["produce_s"], 1),
        f"produce_records_s_{suffix}": round(records / found["produce_s"]),
        f"produce_server_cpu_s_per_100mb_{suffix}": round(
            found["produce_server_cpu_s"] * per_100mb, 2
        ),
        f"consume_mb_s_{suffix}": round(payload_mb / found["consume_s"], 1),
        f"consume_records_s_{suffix}": round(records / found["consume_s"]),
        f"consume_server_cpu_s_per_100mb_{suffix}": round(
            found["consume_server_cpu_s"] * per_100mb, 2
        ),
        f"consume_client_cpu_s_per_100mb_{suffix}": round(
            found["consume_client_cpu_s"] * per_100mb, 2
        ),
        f"consume_mb_s_{suffix}_backoff_{LIBRDKAFKA_QUEUE_BACKOFF_MS}ms": round(
            payload_mb / found["consume_default_s"], 1
        ),
    }


# ------------------------------------------------------------------ report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=256, help="record bytes per run (MB)")
    parser.add_argument("--quick", action="store_true", help="32 MB per run: a smoke run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; best kept")
    args = parser.parse_args(argv)
    total_bytes = (32 if args.quick else args.megabytes) * MB
    records = total_bytes // RECORD_BYTES
    root = Path(tempfile.mkdtemp(prefix="pykraft-bench-produce-"))
    try:
        figures: dict[str, float | int] = {
            "records": records,
            "record_bytes": RECORD_BYTES,
            "repeats": args.repeats,
        }
        figures["load_average_1m_start"] = round(os.getloadavg()[0], 2)
        figures["tcp_mb_s"] = round(max(tcp_copy_mb_s(total_bytes) for _ in range(args.repeats)), 1)
        for brokers in (1, 3):
            figures.update(measure_cluster(brokers, records, root, args.repeats))
        figures["load_average_1m_end"] = round(os.getloadavg()[0], 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures["ratio"] = round(figures["produce_mb_s_1_broker"] / figures["tcp_mb_s"], 3)
    figures["target_met"] = int(figures["produce_mb_s_1_broker"] >= 100)
    figures["consume_target_met"] = int(
        all(
            figures[f"consume_mb_s_{suffix}"] >= figures[f"produce_mb_s_{suffix}"]
            for suffix in ("1_broker", "3_brokers")
        )
    )
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
