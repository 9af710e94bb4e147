"""Transactional produce next to the idempotent producer (1 controller, 3 brokers).

    .venv/bin/python bench/transactions.py            # 15 s per transaction size, 50,000 records
    .venv/bin/python bench/transactions.py --quick    # 3 s per size, 5,000 records: a smoke run

Measures, in one run of one ``pykraft dev`` cluster (Kafka's defaults: ``__transaction_state``
with 50 partitions, RF=3, ``min.isr`` 2), with confluent-kafka producing 1 KiB records into a
topic of 3 partitions (one led by each broker), RF=3, ``min.insync.replicas=2``, with
``batch.size`` 64 KiB and ``linger.ms`` 5 for both producers:

* the peer: the idempotent producer (``enable.idempotence``, so ``acks=all``) sending
  ``--records`` records round robin over the partitions until every delivery report is in;
* transactional producers committing transactions of 1, 10, 100 and 1,000 records (round
  robin over the partitions, so a transaction of 3 records or more touches all three) one
  after the other for ``--seconds`` each: records/s, transactions/s, and the p50/p99 latency
  of ``commit_transaction`` (it flushes the transaction's records, registers its partitions
  with the coordinator — AddPartitionsToTxn, which waits out the previous transaction's
  markers with CONCURRENT_TRANSACTIONS answers — and returns once EndTxn is answered, KIP-98).

Each figure is the best of ``--repeats`` rounds (the configurations take turns; latencies pool
every round): the machine is shared, and a slow round measures the neighbours.
Prints a table, then one JSON line; ``ratio`` = records/s of 1,000-record transactions ÷
records/s of the idempotent producer (``ratio_<n>`` for each size). Never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common import RunningCluster, print_figures
from pykraft.dev import plan_layout
from pykraft.free_ports import pick_free_ports

KIB = 1024
RECORD_BYTES = 1 * KIB
BATCH_BYTES = 64 * KIB
LINGER_MS = 5
PARTITIONS = 3
TRANSACTION_SIZES = (1, 10, 100, 1000)
TRANSACTIONS_MIN = 5  # per size and round, however long they take
TIMEOUT_S = 300.0  # any single wait: a flush, a commit, init_transactions, a topic's leaders
MB = 1_000_000


def producer_config(bootstrap_servers: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "batch.size": BATCH_BYTES,
        "linger.ms": LINGER_MS,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 256 * KIB,
        # A Python callback per record would measure the interpreter; failures still report.
        "delivery.report.only.error": True,
        **extra,
    }


class Failures:
    """Delivery reports that carry an error (only those are sent, see above)."""

    def __init__(self) -> None:
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError | None, _report: object) -> None:
        if error is not None:
            self.errors.append(error)

    def check(self) -> None:
        if self.errors:
            raise RuntimeError(f"{len(self.errors)} deliveries failed, e.g. {self.errors[0]}")


def send(producer: Producer, topic: str, value: bytes, index: int, failures: Failures) -> None:
    while True:
        try:
            producer.produce(topic, value, partition=index % PARTITIONS, on_delivery=failures)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.05)


# ------------------------------------------------------------------ the two producers


def idempotent_records_s(bootstrap_servers: str, topic: str, records: int) -> float:
    producer = Producer(producer_config(bootstrap_servers, **{"enable.idempotence": True}))
    value, failures = os.urandom(RECORD_BYTES), Failures()
    # As init_transactions for the transactional runs: the producer id and the metadata are
    # fetched before the clock starts.
    send(producer, topic, value, 0, failures)
    producer.flush(TIMEOUT_S)
    started = time.perf_counter()
    for index in range(records):
        send(producer, topic, value, index, failures)
        if index % 1000 == 0:
            producer.poll(0)
    if producer.flush(TIMEOUT_S) != 0:
        raise RuntimeError(f"records still unacknowledged after {TIMEOUT_S} s")
    elapsed = time.perf_counter() - started
    failures.check()
    return records / elapsed


def transactional_run(
    bootstrap_servers: str, topic: str, size: int, seconds: float, round_index: int
) -> tuple[float, float, list[float]]:
    """Transactions of ``size`` records for ``seconds``: (records/s, transactions/s, the
    commit latencies in ms)."""
    producer = Producer(
        producer_config(
            bootstrap_servers, **{"transactional.id": f"bench-txn-{size}-{round_index}"}
        )
    )
    producer.init_transactions(TIMEOUT_S)
    value, failures = os.urandom(RECORD_BYTES), Failures()
    commits_ms: list[float] = []
    records = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds or len(commits_ms) < TRANSACTIONS_MIN:
        producer.begin_transaction()
        for index in range(size):
            send(producer, topic, value, records + index, failures)
        records += size
        committing = time.perf_counter()
        producer.commit_transaction(TIMEOUT_S)
        commits_ms.append((time.perf_counter() - committing) * 1000)
    elapsed = time.perf_counter() - started
    failures.check()
    return records / elapsed, len(commits_ms) / elapsed, commits_ms


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# ------------------------------------------------------------------ the cluster


class Cluster(RunningCluster):
    """One controller, three brokers (node ids 10-12), Kafka's default settings."""

    def __init__(self, root: Path) -> None:
        layout = plan_layout(1, 3, 0, pick_free_ports(8))
        super().__init__(layout, root / "cluster")

    def create_topic(self, name: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        futures = admin.create_topics(
            [NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
            operation_timeout=30,
        )
        futures[name].result(timeout=30)
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # every partition has a leader in the brokers' metadata
            described = admin.list_topics(name, timeout=10).topics[name]
            if (
                described.error is None
                and len(described.partitions) == PARTITIONS
                and all(p.leader >= 0 for p in described.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} has no leaders: {described}")
            time.sleep(0.1)

    def warm_up(self, topic: str) -> None:
        """One committed transaction: creates ``__transaction_state`` (50 partitions, RF=3)
        and loads the coordinators, which is not what the rounds measure."""
        transactional_run(self.bootstrap_servers, topic, 1, 0.0, -1)


def measure(seconds: float, records: int, repeats: int, root: Path) -> dict[str, Any]:
    best: dict[str, float] = {}
    commits_ms: dict[int, list[float]] = {size: [] for size in TRANSACTION_SIZES}
    transactions_s: dict[int, float] = {}

    def keep(name: str, value: float) -> None:
        best[name] = max(best.get(name, 0.0), value)

    with Cluster(root) as cluster:
        cluster.create_topic("bench-transactions")
        cluster.warm_up("bench-transactions")
        for round_index in range(repeats):
            rate = idempotent_records_s(cluster.bootstrap_servers, "bench-transactions", records)
            keep("idempotent", rate)
            for size in TRANSACTION_SIZES:
                rate, per_s, latencies = transactional_run(
                    cluster.bootstrap_servers, "bench-transactions", size, seconds, round_index
                )
                keep(f"txn_{size}", rate)
                transactions_s[size] = max(transactions_s.get(size, 0.0), per_s)
                commits_ms[size] += latencies
    idempotent = best["idempotent"]
    figures: dict[str, Any] = {
        "record_bytes": RECORD_BYTES,
        "seconds_per_size": seconds,
        "idempotent_records": records,
        "repeats": repeats,
        "idempotent_records_s": round(idempotent),
        "idempotent_mb_s": round(idempotent * RECORD_BYTES / MB, 1),
    }
    for size in TRANSACTION_SIZES:
        rate = best[f"txn_{size}"]
        figures[f"txn_{size}_records_s"] = round(rate)
        figures[f"txn_{size}_transactions_s"] = round(transactions_s[size], 1)
        figures[f"txn_{size}_commit_p50_ms"] = round(statistics.median(commits_ms[size]), 1)
        figures[f"txn_{size}_commit_p99_ms"] = round(percentile(commits_ms[size], 0.99), 1)
        figures[f"txn_{size}_commits"] = len(commits_ms[size])
        figures[f"ratio_{size}"] = round(rate / idempotent, 4)
    figures["ratio"] = figures[f"ratio_{TRANSACTION_SIZES[-1]}"]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="per transaction size")
    parser.add_argument("--records", type=int, default=50_000, help="idempotent producer's")
    parser.add_argument("--quick", action="store_true", help="3 s per size, 5,000 records")
    parser.add_argument("--repeats", type=int, default=2, help="rounds; best kept")
    args = parser.parse_args(argv)
    seconds, records = (3.0, 5_000) if args.quick else (args.seconds, args.records)
    root = Path(tempfile.mkdtemp(prefix="pykraft-bench-transactions-"))
    try:
        figures = measure(seconds, records, args.repeats, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
