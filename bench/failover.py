"""Failover, per partition: from kill -9 or SIGSTOP of a partition leader to the next ack.

    .venv/bin/python -m bench.failover             # 3 rounds of each fault
    .venv/bin/python -m bench.failover --rounds 1  # a smoke run

One ``pykraft dev`` cluster (1 controller, 3 brokers, Kafka's default
``broker.session.timeout.ms`` 9000), a topic of 6 partitions, RF=3, ``min.insync.replicas=2``,
two led by each broker. One confluent-kafka producer (acks=all, idempotent, linger 0) sends one
record to every partition every 5 ms; each record carries its send time. At the fault, for every
partition: seconds from the fault to the first acknowledgement of a record sent after it. The
victim leads two partitions; the other four should not notice (their leaders are alive).

* ``kill9``: the process is gone; its connections reset. Target (issue 18): <= 2 s for its
  partitions, ~0 for the others. ``leader_moved``: from the fault until the controller names
  another leader for the victim's partitions (its admin API polled every 20 ms) — the cluster's
  share; the rest of the victim's figure is the client finding the new leader.
* ``sigstop``: the process is silent (a pause, a partition): its partitions wait for the session
  timeout (the limit, ``session_timeout_s`` + 1 s), the others ~0. The broker is resumed
  (SIGCONT) after its partitions moved.

The victim (each round the current leader of another partition) is restarted or resumed, and
every ISR is full again before the next round.
Prints a table, then one JSON line: per fault the worst and median over rounds of the victim's
partitions and of the others, next to the session timeout measured against. Never run by the
tests.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka

from bench.common import print_figures
from bench.replication import SESSION_TIMEOUT_S, Cluster, wait_for

TOPIC = "failover"
PARTITIONS = 6
SEND_INTERVAL_S = 0.005
FAULT_TIMEOUT_S = 60.0
logger = logging.getLogger("bench.failover")
ASSIGNMENTS = [[10, 11, 12], [11, 12, 10], [12, 10, 11], [10, 12, 11], [11, 10, 12], [12, 11, 10]]


class Probe:
    """A producer writing every partition every 5 ms; remembers the first ack after the fault."""

    def __init__(self, bootstrap_servers: str, debug: logging.Logger | None = None) -> None:
        trace: dict[str, Any] = {}
        if debug is not None:  # librdkafka's own account of a failover, to a file
            trace = {"debug": "metadata,broker,topic,msg", "logger": debug, "log_level": 7}
        self._producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                # A stopped leader never answers and its connection stays up: without these a
                # request to it waits librdkafka's default 60 s socket timeout (a Java producer's
                # 30 s request timeout) before the producer turns to the new leader, and the bench
                # would measure the client's timeout, not the cluster's failover. Everything
                # else is librdkafka's default (issue 18: how soon the client asks for metadata
                # again, retry.backoff.ms and topic.metadata.refresh.fast.interval.ms 100, is
                # what a Kafka user would have).
                "request.timeout.ms": 1000,
                "socket.timeout.ms": 1000,
                "log_level": 2,  # librdkafka logs every refused connection of a failover
                **trace,
            }
        )
        self._lock = threading.Lock()
        self._fault_at: float | None = None
        self.first_ack_s: dict[int, float] = {}
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        now = time.monotonic()
        if error is not None:
            self.failed.append(str(error))
            return
        sent_at = float(message.value())
        with self._lock:
            if self._fault_at is not None and sent_at > self._fault_at:
                self.first_ack_s.setdefault(message.partition(), now - self._fault_at)

    def _run(self) -> None:
        while not self._stop.is_set():
            for partition in range(PARTITIONS):
                value = repr(time.monotonic()).encode()
                # A stalled partition's queue may be full: drop this one, go on.
                with contextlib.suppress(BufferError):
                    self._producer.produce(
                        TOPIC, value, partition=partition, on_delivery=self._delivered
                    )
            self._producer.poll(SEND_INTERVAL_S)

    def start(self) -> None:
        self._thread.start()

    def fault(self) -> None:
        with self._lock:
            self._fault_at = time.monotonic()
            self.first_ack_s = {}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(30)


def leaders(cluster: Cluster) -> dict[int, int]:
    return {p["partition"]: p["leader"] for p in cluster.partitions(TOPIC)}


def healed(cluster: Cluster) -> bool:
    return all(len(p["isr"]) == 3 and p["leader"] >= 0 for p in cluster.partitions(TOPIC))


def watch_leaders(
    cluster: Cluster, victim: int, led: list[int], since: float, stop: threading.Event
) -> dict[int, float]:
    """Seconds from ``since`` until the controller names a leader other than ``victim`` for
    each of ``led`` (polled every 20 ms): the cluster's share of the failover, apart from the
    client's."""
    moved: dict[int, float] = {}

    def run() -> None:
        while not stop.is_set() and len(moved) < len(led):
            with contextlib.suppress(OSError):
                now = leaders(cluster)
                for partition in led:
                    if now.get(partition, victim) not in (victim, -1):
                        moved.setdefault(partition, time.monotonic() - since)
            stop.wait(0.02)

    threading.Thread(target=run, daemon=True).start()
    return moved


def one_round(cluster: Cluster, probe: Probe, victim: int, fault: str) -> dict[str, list[float]]:
    led = [partition for partition, leader in leaders(cluster).items() if leader == victim]
    probe.fault()
    stop_watch = threading.Event()
    logger.info("%s of broker %d, the leader of partitions %s", fault, victim, led)
    cluster.signal(victim, signal.SIGKILL if fault == "kill9" else signal.SIGSTOP)
    moved = watch_leaders(cluster, victim, led, time.monotonic(), stop_watch)
    try:
        try:
            wait_for(lambda: len(probe.first_ack_s) == PARTITIONS, "acks", FAULT_TIMEOUT_S)
            wait_for(lambda: len(moved) == len(led), "the controller's new leaders", 5.0)
        except RuntimeError:
            raise RuntimeError(
                f"not every partition acked within {FAULT_TIMEOUT_S}s of the {fault} of broker "
                f"{victim}: acked {probe.first_ack_s}, partitions now {cluster.partitions(TOPIC)}, "
                f"failed deliveries {len(probe.failed)} (e.g. {probe.failed[-3:]})"
            ) from None
    finally:
        stop_watch.set()
        if fault == "kill9":
            cluster.restart(victim)
        else:
            cluster.signal(victim, signal.SIGCONT)
    wait_for(lambda: healed(cluster), "every ISR full again", FAULT_TIMEOUT_S)
    times = dict(probe.first_ack_s)
    logger.info("first acks %s, leaders moved %s", times, moved)
    return {
        "victim": [times[p] for p in led],
        "others": [times[p] for p in range(PARTITIONS) if p not in led],
        "leader_moved": [moved[p] for p in led],
    }


def trace_to(path: Path) -> logging.Logger:
    """The faults (this module's log) and librdkafka's debug lines, to one file, timestamped
    the way the cluster's own logs are."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    client = logging.getLogger("bench.failover.librdkafka")
    for each in (logger, client):
        each.addHandler(handler)
        each.setLevel(logging.DEBUG)
    client.propagate = False
    return client


def summary(samples: list[float]) -> dict[str, float]:
    return {"max_s": round(max(samples), 3), "median_s": round(statistics.median(samples), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each fault")
    parser.add_argument(
        "--faults", default="kill9,sigstop", help="comma-separated, in order: kill9, sigstop"
    )
    parser.add_argument(
        "--debug",
        type=Path,
        metavar="DIR",
        help="write librdkafka's debug log (metadata,broker,topic,msg) and the faults to "
        "DIR/client.log, and keep the cluster's logs in DIR/logs",
    )
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="pykraft-bench-failover-"))
    client_log = None
    if args.debug is not None:
        args.debug.mkdir(parents=True, exist_ok=True)
        client_log = trace_to(args.debug / "client.log")
    figures: dict[str, Any] = {"partitions": PARTITIONS, "session_timeout_s": SESSION_TIMEOUT_S}
    try:
        with Cluster(root) as cluster:
            cluster.create_topic(TOPIC, ASSIGNMENTS, **{"min.insync.replicas": "2"})
            probe = Probe(cluster.bootstrap_servers, client_log)
            probe.start()
            try:
                time.sleep(1.0)  # a second of normal traffic first
                for fault in args.faults.split(","):
                    victims: list[float] = []
                    others: list[float] = []
                    moved: list[float] = []
                    for index in range(args.rounds):
                        victim = leaders(cluster)[
                            index % PARTITIONS
                        ]  # leads one partition at least
                        result = one_round(cluster, probe, victim, fault)
                        victims += result["victim"]
                        others += result["others"]
                        moved += result["leader_moved"]
                        print(f"{fault} round {index + 1}: {result}", file=sys.stderr)
                    figures[f"{fault}_led_by_victim"] = summary(victims)
                    figures[f"{fault}_other_partitions"] = summary(others)
                    figures[f"{fault}_leader_moved"] = summary(moved)
            finally:
                probe.stop()
            if probe.failed:
                figures["failed_deliveries"] = len(probe.failed)
    finally:
        if args.debug is not None:
            shutil.copytree(root / "cluster" / "logs", args.debug / "logs", dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
    figures["kill9_target_s"] = 2.0
    figures["sigstop_limit_s"] = SESSION_TIMEOUT_S + 1
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
