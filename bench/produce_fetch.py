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
  delivery report is in, then a consumer reading every record back by ``assign`` from offset 0.

Each figure is the best of ``--repeats`` runs (3; each produce goes to a fresh topic): the
machine is shared, and a slow run measures the neighbours, not pykraft.
MB means 10^6 bytes of record values. Prints a table, then one JSON line;
``ratio = produce_mb_s_1_broker / tcp_mb_s``. Target: produce_mb_s_1_broker >= 100.
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

from bench.common import RunningCluster, print_figures
from pykraft.dev import plan_layout
from pykraft.free_ports import pick_free_ports

KIB = 1024
RECORD_BYTES = 1 * KIB
BATCH_BYTES = 64 * KIB
LINGER_MS = 5
PARTITIONS_PER_BROKER = 4
TIMEOUT_S = 300.0  # any single measurement
MB = 1_000_000


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


def consume(bootstrap_servers: str, topic: str, partitions: int, records: int) -> float:
    """Seconds to read ``records`` records back from offset 0 of every partition."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "fetch.max.bytes": 50 * KIB * KIB,
        "max.partition.fetch.bytes": 1024 * KIB,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        read = 0
        started = time.perf_counter()
        deadline = time.monotonic() + TIMEOUT_S
        while read < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read {read} of {records} records in {TIMEOUT_S} s")
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is not None:
                    raise RuntimeError(f"consumer error: {message.error()}")
                read += 1
        return time.perf_counter() - started
    finally:
        consumer.close()


def measure_cluster(brokers: int, records: int, root: Path, repeats: int) -> dict[str, float]:
    partitions = PARTITIONS_PER_BROKER * brokers
    produce_s = consume_s = float("inf")
    with Cluster(brokers, root) as cluster:
        for _ in range(repeats):
            topic = cluster.create_topic(partitions)
            produce_s = min(
                produce_s, produce(cluster.bootstrap_servers, topic, partitions, records)
            )
            consume_s = min(
                consume_s, consume(cluster.bootstrap_servers, topic, partitions, records)
            )
    payload_mb = records * RECORD_BYTES / MB
    suffix = f"{brokers}_broker" + ("s" if brokers > 1 else "")
    return {
        f"produce_mb_s_{suffix}": round(payload_mb / produce_s, 1),
        f"produce_records_s_{suffix}": round(records / produce_s),
        f"consume_mb_s_{suffix}": round(payload_mb / consume_s, 1),
        f"consume_records_s_{suffix}": round(records / consume_s),
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
        figures["tcp_mb_s"] = round(max(tcp_copy_mb_s(total_bytes) for _ in range(args.repeats)), 1)
        for brokers in (1, 3):
            figures.update(measure_cluster(brokers, records, root, args.repeats))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures["ratio"] = round(figures["produce_mb_s_1_broker"] / figures["tcp_mb_s"], 3)
    figures["target_met"] = int(figures["produce_mb_s_1_broker"] >= 100)
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
