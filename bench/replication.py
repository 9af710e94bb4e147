"""Replication costs and failover times through real brokers (1 controller, 3 brokers).

    .venv/bin/python bench/replication.py            # 128 MB per throughput run, 1 GiB catch-up
    .venv/bin/python bench/replication.py --quick    # 16 MB per run, 64 MiB catch-up: a smoke run

Measures, in one run of one ``pykraft dev`` cluster with Kafka's default timeouts
(``broker.session.timeout.ms`` 9000, ``replica.fetch.max.bytes`` 1 MiB):

* throughput (MB/s of 1 KiB record values, 64 KiB batches, linger 5 ms, 3 partitions, one led
  by each broker; best of ``--repeats`` runs, the configurations taking turns) and the p50/p99
  latency of one record at a time (send, wait for the ack) for acks=all on RF=3
  (``min.insync.replicas=2``), acks=1 on RF=3, and RF=1;
* the servers' CPU microseconds per record during each of those one-at-a-time runs
  (``*_one_at_a_time_server_cpu_us``, the brokers and the controller): one record at a time,
  most of it lies on the record's path (the leader's Produce, each follower's Fetch round and
  the leader's side of it), so it shows how much of the latency is CPU rather than waiting;
* the floor under that latency, in the same run (``bench/null_broker.py``): the same client and
  loop against a null broker that answers Produce at once and stores nothing
  (``null_broker_p50_ms``, ``null_broker_p99_ms``), and a raw loopback TCP round trip
  (``loopback_ping_pong_p50_ms``);
* catch-up: a follower stopped (SIGTERM) while its leader takes 1 GiB, restarted; MB/s from its
  first fetched byte to its log end offset matching the leader's;
* failover: time from kill -9 of a partition's leader to the next acks=all produce acknowledged
  (target <= broker.session.timeout.ms + 1 s), and the same after a SIGTERM's controlled
  shutdown (target <= 1 s); a producer sends a record every 5 ms throughout.

Each throughput figure comes with the CPU-seconds per 100 MB of the median run, taken over the
span its MB/s is timed over (first send to the end of the flush): of the servers
(``*_cpu_s_per_100mb``: user + system time of the brokers and the controller) and of this bench's
producer (``*_client_cpu_s_per_100mb``), next to the machine's floor measured in the same run
(``bench/floor.py``: loopback TCP and pwrite of 100 MB; ``acks_all_rf3_floor_cpu_s_per_100mb``).
With them, the ceiling that CPU alone sets (``*_cpu_ceiling_mb_s``: this machine's cores times
100 over the server + client CPU-s per 100 MB), ``*_busy_cores`` (how near the run came to it),
the ceiling if the servers met the 0.6 s goal with this client, and ``ratio_cpu_bound`` (the
ratio two CPU-bound runs give). ``--throughput-only`` stops there (A/B runs); ``--profile DIR``
first records every broker with py-spy (``PY_SPY`` or on PATH; raw stacks, one file per
broker) during an extra acks=all RF=3 run that counts in no figure.

Uses confluent-kafka when installed, else kafka-python. Prints a table, then one JSON line;
``ratio = acks_all_rf3_mb_s / rf1_mb_s``, target >= 0.5. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RunningCluster, cpu_seconds, print_figures
from bench.floor import floor_cpu_s_per_100mb
from bench.null_broker import measure_floors
from pykraft.dev import Node, plan_layout
from pykraft.free_ports import pick_free_ports

try:
    import confluent_kafka

    CLIENT = "confluent-kafka"
except ImportError:  # kafka-python is a pykraft dependency
    CLIENT = "kafka-python"

KIB, MB = 1024, 1_000_000
RECORD_BYTES = 1 * KIB
BATCH_BYTES = 64 * KIB
LINGER_MS = 5
PARTITIONS = 3
SESSION_TIMEOUT_S = 9.0  # Kafka's default broker.session.timeout.ms, which pykraft dev keeps
FAILOVER_SEND_INTERVAL_S = 0.005
TIMEOUT_S = 600.0  # any single measurement
GOAL_SERVER_CPU_S_PER_100MB = 0.6  # issue 18's goal for acks=all RF=3
Done = Callable[[str | None], None]  # a delivery callback: error text or None


# ------------------------------------------------------------------ the two clients


def _delivery_report(done: Done) -> Callable[[Any, Any], None]:
    def report(error: Any, _message: Any) -> None:
        done(None if error is None else str(error))

    return report


class Producer:
    """The little of a producer this bench needs, over confluent-kafka or kafka-python."""

    def __init__(
        self,
        bootstrap_servers: str,
        acks: str,
        linger_ms: int = LINGER_MS,
        report_only_errors: bool = False,
    ) -> None:
        if CLIENT == "confluent-kafka":
            self._producer: Any = confluent_kafka.Producer(
                {
                    "bootstrap.servers": bootstrap_servers,
                    # librdkafka's delivery.report.only.error: no Python callback per delivered
                    # record, only per failed one. The throughput runs use it so the bench's
                    # own loop takes less of this 2-core box from the brokers it measures.
                    "delivery.report.only.error": report_only_errors,
                    "acks": acks,
                    "linger.ms": linger_ms,
                    "batch.size": BATCH_BYTES,
                    "queue.buffering.max.kbytes": 256 * KIB,
                    "enable.idempotence": False,
                    "retry.backoff.ms": 50,
                    "topic.metadata.refresh.fast.interval.ms": 50,
                    "log_level": 2,
                }
            )  # librdkafka logs every refused connection of a failover
            # One delivery callback per ``done``, not a closure per record: up to 256 MB of
            # records wait in librdkafka's queue, and a closure each made the bench's own
            # collector walk them (11 full collections of ~75 ms in one throughput run).
            self._reports: dict[Done, Callable[[Any, Any], None]] = {}
        else:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(
                bootstrap_servers=bootstrap_servers.split(","),
                linger_ms=linger_ms,
                acks="all" if acks == "all" else int(acks),
                batch_size=BATCH_BYTES,
                enable_idempotence=False,
                retry_backoff_ms=50,
                buffer_memory=256 * KIB * KIB,
            )

    def send(self, topic: str, partition: int, value: bytes, done: Done) -> None:
        if CLIENT == "confluent-kafka":
            report = self._reports.get(done)
            if report is None:
                report = self._reports[done] = _delivery_report(done)
            while True:
                try:
                    self._producer.produce(topic, value, partition=partition, on_delivery=report)
                    return
                except BufferError:  # the local queue is full: let deliveries drain it
                    self._producer.poll(0.05)
        future = self._producer.send(topic, value=value, partition=partition)
        future.add_callback(lambda _metadata: done(None))
        future.add_errback(lambda error: done(str(error)))

    def poll(self, timeout_s: float = 0.0) -> None:
        if CLIENT == "confluent-kafka":
            self._producer.poll(timeout_s)
        elif timeout_s:
            time.sleep(timeout_s)  # kafka-python delivers from its own I/O thread

    def wait(self, delivered: threading.Event, timeout_s: float = 0.1) -> None:
        """Block until ``delivered`` is set or ``timeout_s`` passed, without spinning:
        confluent-kafka's poll returns as soon as it served a delivery report; kafka-python
        reports from its own I/O thread. (Polling every 0.5 ms cost the bench ~35% of a core
        on this 2-core box, taken from the brokers it measures.)"""
        if CLIENT == "confluent-kafka":
            self._producer.poll(timeout_s)
        else:
            delivered.wait(timeout_s)

    def flush(self, timeout_s: float = TIMEOUT_S) -> None:
        self._producer.flush(timeout_s)

    def close(self) -> None:
        if CLIENT != "confluent-kafka":
            self._producer.close(timeout=10)


# ------------------------------------------------------------------ the cluster


def http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


class Cluster(RunningCluster):
    """One controller, three brokers (node ids 10-12)."""

    def __init__(self, root: Path) -> None:
        layout = plan_layout(1, 3, 0, pick_free_ports(8))
        super().__init__(layout, root / "cluster")
        self.admin_url = layout.admin_url

    def broker(self, node_id: int) -> Node:
        return next(b for b in self.dev.layout.brokers if b.node_id == node_id)

    def signal(self, node_id: int, signum: signal.Signals) -> None:
        self.dev.processes[self.broker(node_id).name].send_signal(signum)

    def restart(self, node_id: int) -> None:
        process = self.dev.processes[self.broker(node_id).name]
        process.wait(60)
        self.dev.start(self.broker(node_id))
        wait_for(
            lambda: broker_state(self.broker(node_id)) == "RUNNING", f"broker {node_id} RUNNING"
        )

    def create_topic(self, name: str, replicas: list[list[int]], **configs: str) -> None:
        http(
            "POST",
            self.admin_url + "/v1/topics",
            {
                "name": name,
                "assignments": {str(p): r for p, r in enumerate(replicas)},
                "configs": configs,
            },
        )
        wait_for(
            lambda: all(
                p["leader"] >= 0 and len(p["isr"]) == len(p["replicas"])
                for p in self.partitions(name)
            ),
            f"{name} ready",
        )
        time.sleep(1.0)  # brokers apply the new leaderships from the metadata log

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = http("GET", self.admin_url + f"/v1/topics/{topic}")[
            "partitions"
        ]
        return rows

    def broker_pids(self) -> list[int]:
        return [self.dev.processes[b.name].pid for b in self.dev.layout.brokers]

    def server_pids(self) -> list[int]:
        """Every process of the cluster: the brokers and the controller."""
        return [process.pid for process in self.dev.processes.values()]

    def log_end_offset(self, node_id: int, topic: str, partition: int) -> int | None:
        try:
            rows = http("GET", self.broker(node_id).http_url + f"/v1/partitions?topic={topic}")
        except OSError:
            return None
        return next(
            (r["log_end_offset"] for r in rows["partitions"] if r["partition"] == partition), None
        )


def broker_state(node: Node) -> str | None:
    try:
        state: str = http("GET", node.http_url + "/v1/broker")["state"]
        return state
    except OSError:
        return None


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s}s")
        time.sleep(0.05)


# ------------------------------------------------------------------ measurements


class Throughput(NamedTuple):
    """One throughput run: MB/s, and the seconds and CPU-seconds it was measured over."""

    mb_s: float
    elapsed_s: float  # first send to the end of the flush
    server_cpu_s: float  # brokers and controller, user + system, over elapsed_s
    client_cpu_s: float  # this process (the producer and its librdkafka threads), likewise


def throughput_run(cluster: Cluster, topic: str, acks: str, records: int) -> Throughput:
    """``records`` records sent as fast as the producer takes them; the time and the CPU are
    both measured from the first send to the end of the flush (the producer's creation and
    close are outside both), so CPU over elapsed is how many cores the run kept busy."""
    producer = Producer(cluster.bootstrap_servers, acks, report_only_errors=True)
    value = os.urandom(RECORD_BYTES)
    failures: list[str] = []

    def done(error: str | None) -> None:
        if error is not None:
            failures.append(error)

    servers, client = cpu_seconds(cluster.server_pids()), time.process_time()
    started = time.perf_counter()
    for index in range(records):
        producer.send(topic, index % PARTITIONS, value, done)
        if index % 1000 == 0:
            producer.poll()
    producer.flush()
    elapsed = time.perf_counter() - started
    client = time.process_time() - client
    servers = cpu_seconds(cluster.server_pids()) - servers
    producer.close()
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, e.g. {failures[0]}")
    return Throughput(records * RECORD_BYTES / MB / elapsed, elapsed, servers, client)


def throughput_mb_s(cluster: Cluster, topic: str, acks: str, records: int) -> float:
    """MB/s alone (``bench/peers.py`` measures its CPU around the whole call)."""
    return throughput_run(cluster, topic, acks, records).mb_s


def send_one(producer: Producer, topic: str, partition: int, value: bytes) -> None:
    """Send one record and return once it is acknowledged; RuntimeError if it failed."""
    acknowledged = threading.Event()
    errors: list[str] = []

    def done(error: str | None) -> None:
        if error is not None:
            errors.append(error)
        acknowledged.set()

    producer.send(topic, partition, value, done)
    while not acknowledged.is_set():
        producer.wait(acknowledged)
    if errors:
        raise RuntimeError(f"send failed: {errors[0]}")


def latency_ms(bootstrap_servers: str, topic: str, acks: str, count: int) -> tuple[float, float]:
    """p50 and p99 of one record at a time, sent only once the previous one is acknowledged
    (``bench/null_broker.py`` times its null broker with this loop too)."""
    producer = Producer(bootstrap_servers, acks, linger_ms=0)
    value = os.urandom(RECORD_BYTES)
    samples = []
    for index in range(count):
        started = time.perf_counter()
        send_one(producer, topic, index % PARTITIONS, value)
        samples.append((time.perf_counter() - started) * 1000)
    producer.close()
    percentiles = statistics.quantiles(samples, n=100)
    return percentiles[49], percentiles[98]


def catch_up_mb_s(cluster: Cluster, size_bytes: int) -> tuple[float, int]:
    """A follower 1 GiB (``size_bytes``) behind: MB/s while it catches up, and the bytes."""
    topic = "catch-up"
    cluster.create_topic(topic, [[10, 11, 12]])
    cluster.signal(12, signal.SIGTERM)  # a controlled shutdown takes it out of the ISR at once
    cluster.dev.processes[cluster.broker(12).name].wait(60)
    producer = Producer(cluster.bootstrap_servers, "1")
    value = os.urandom(RECORD_BYTES)
    for _ in range(size_bytes // RECORD_BYTES):
        producer.send(topic, 0, value, lambda error: None)
    producer.flush()
    producer.close()
    target = cluster.log_end_offset(10, topic, 0)
    assert target is not None
    log_bytes = sum(
        f.stat().st_size for f in (cluster.dev.data_dir / "broker-10" / f"{topic}-0").glob("*.log")
    )
    cluster.dev.start(cluster.broker(12))
    wait_for(lambda: (cluster.log_end_offset(12, topic, 0) or 0) > 0, "the follower fetches")
    started = time.perf_counter()
    wait_for(lambda: cluster.log_end_offset(12, topic, 0) == target, "the follower catches up")
    elapsed = time.perf_counter() - started
    wait_for(lambda: broker_state(cluster.broker(12)) == "RUNNING", "broker 12 RUNNING")
    return log_bytes / MB / elapsed, log_bytes


def failover_s(cluster: Cluster, topic: str, signum: signal.Signals) -> float:
    """Seconds from ``signum`` to the leader of ``topic``-0 until a record sent after the signal
    is acknowledged with acks=all; then the old leader is restarted."""
    producer = Producer(cluster.bootstrap_servers, "all", linger_ms=0)
    signalled: list[float] = []
    acknowledged_at: list[float] = []
    stop = threading.Event()

    def counted(error: str | None) -> None:
        if error is None:
            acknowledged_at.append(time.monotonic())

    def sender() -> None:
        while not stop.is_set():
            producer.send(topic, 0, b"failover", counted if signalled else lambda error: None)
            producer.poll(FAILOVER_SEND_INTERVAL_S)

    leader = cluster.partitions(topic)[0]["leader"]
    thread = threading.Thread(target=sender)
    thread.start()
    try:
        time.sleep(1.0)  # a second of normal traffic first
        cluster.signal(leader, signum)
        signalled.append(time.monotonic())
        wait_for(lambda: bool(acknowledged_at), "an acknowledgement after the failover", 120)
    finally:
        stop.set()
        thread.join(30)
    producer.flush(30)
    producer.close()
    cluster.restart(leader)
    return acknowledged_at[0] - signalled[0]


# ------------------------------------------------------------------ profiles


def start_profiles(cluster: Cluster, directory: Path) -> list[Any]:
    """py-spy (``PY_SPY``, else on PATH) recording every broker, one flame graph each."""
    import subprocess

    directory.mkdir(parents=True, exist_ok=True)
    spy = os.environ.get("PY_SPY") or shutil.which("py-spy") or "py-spy"
    return [
        subprocess.Popen(
            [
                *(spy, "record", "--nonblocking", "--rate", "200", "--format", "raw"),
                *("--pid", str(pid), "--output", str(directory / f"broker-{node_id}.txt")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for node_id, pid in zip((10, 11, 12), cluster.broker_pids(), strict=True)
    ]


def stop_profiles(spies: list[Any]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    for spy in spies:
        spy.wait(60)


# ------------------------------------------------------------------ the run


CONFIGURATIONS = (("acks_all_rf3", "rf3", "all"), ("acks_1_rf3", "rf3", "1"), ("rf1", "rf1", "all"))


def cpu_ceilings(figures: dict[str, Any], cores: int) -> dict[str, float]:
    """What the measured CPU allows on this machine, whatever the code's latency: with client
    and servers sharing ``cores``, MB/s can be at most cores * 100 / (server + client CPU-s per
    100 MB). Next to it, the ceiling if the servers met issue 18's goal of 0.6 s per 100 MB for
    acks=all RF=3 with this client, and the RF=3 ÷ RF=1 ratio two CPU-bound runs give."""
    total = {
        name: figures[f"{name}_cpu_s_per_100mb"] + figures[f"{name}_client_cpu_s_per_100mb"]
        for name, _, _ in CONFIGURATIONS
    }
    ceilings = {f"{name}_cpu_ceiling_mb_s": round(cores * 100 / total[name], 1) for name in total}
    client_rf3 = figures["acks_all_rf3_client_cpu_s_per_100mb"]
    ceilings["acks_all_rf3_ceiling_at_goal_cpu_mb_s"] = round(
        cores * 100 / (GOAL_SERVER_CPU_S_PER_100MB + client_rf3), 1
    )
    ceilings["ratio_cpu_bound"] = round(total["rf1"] / total["acks_all_rf3"], 3)
    ceilings["cores"] = cores
    return ceilings


def measure(
    cluster: Cluster,
    megabytes: int,
    catch_up_bytes: int,
    latency_samples: int,
    repeats: int,
    throughput_only: bool = False,
    profile_to: Path | None = None,
) -> dict[str, Any]:
    records = megabytes * MB // RECORD_BYTES
    figures: dict[str, Any] = {
        "client": CLIENT,
        "record_bytes": RECORD_BYTES,
        "records": records,
        "repeats": repeats,
    }
    every_broker = [[10, 11, 12], [11, 12, 10], [12, 10, 11]]
    cluster.create_topic("rf3", every_broker, **{"min.insync.replicas": "2"})
    cluster.create_topic("rf1", [[10], [11], [12]])
    # Best of ``repeats``, the configurations taking turns: the machine is shared, and a busy
    # moment should not land on one configuration only.
    best: dict[str, float] = {}
    cpu: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _, _ in CONFIGURATIONS}
    if profile_to is not None:  # an extra run, counted nowhere: the sampling slows the brokers
        spies = start_profiles(cluster, profile_to)
        try:
            throughput_mb_s(cluster, "rf3", "all", records)
        finally:
            stop_profiles(spies)
    for _ in range(repeats):
        for name, topic, acks in CONFIGURATIONS:
            run = throughput_run(cluster, topic, acks, records)
            cpu[name].append((run.server_cpu_s, run.client_cpu_s, run.elapsed_s))
            best[name] = max(best.get(name, 0.0), run.mb_s)
    per_100mb = 100 * MB / (records * RECORD_BYTES)
    for name, _, _ in CONFIGURATIONS:
        figures[f"{name}_mb_s"] = round(best[name], 1)
        # The median run's CPU: user + system seconds of every server process (the brokers
        # and the controller), and of this bench's producer, per 100 MB of record values.
        servers, client, elapsed = sorted(cpu[name])[len(cpu[name]) // 2]
        figures[f"{name}_cpu_s_per_100mb"] = round(servers * per_100mb, 3)
        figures[f"{name}_client_cpu_s_per_100mb"] = round(client * per_100mb, 3)
        figures[f"{name}_busy_cores"] = round((servers + client) / elapsed, 2)
    figures["ratio"] = round(figures["acks_all_rf3_mb_s"] / figures["rf1_mb_s"], 3)
    figures.update(cpu_ceilings(figures, os.cpu_count() or 1))
    figures.update(floor_cpu_s_per_100mb(cluster.dev.data_dir))
    if throughput_only:
        return figures
    for name, topic, acks in CONFIGURATIONS:
        before = cpu_seconds(cluster.server_pids())
        p50, p99 = latency_ms(cluster.bootstrap_servers, topic, acks, latency_samples)
        used = cpu_seconds(cluster.server_pids()) - before
        figures[f"{name}_p50_ms"], figures[f"{name}_p99_ms"] = round(p50, 2), round(p99, 2)
        # What the servers' cores did per record meanwhile: one record at a time, most of it
        # lies on the record's path (the leader's Produce, each follower's Fetch round).
        figures[f"{name}_one_at_a_time_server_cpu_us"] = round(used / latency_samples * 1e6)
    # The floor under those: librdkafka, this loop and loopback against a broker that stores
    # nothing, and a raw TCP round trip (bench/null_broker.py), in the same sitting.
    figures.update(measure_floors(latency_samples, latency_ms))
    rate, log_bytes = catch_up_mb_s(cluster, catch_up_bytes)
    figures["catch_up_mb_s"], figures["catch_up_bytes"] = round(rate, 1), log_bytes
    cluster.create_topic("failover", [[10, 11, 12]], **{"min.insync.replicas": "2"})
    figures["failover_controlled_shutdown_s"] = round(
        failover_s(cluster, "failover", signal.SIGTERM), 3
    )
    cluster.create_topic("failover-kill", [[11, 12, 10]], **{"min.insync.replicas": "2"})
    figures["failover_kill9_s"] = round(failover_s(cluster, "failover-kill", signal.SIGKILL), 3)
    figures["failover_kill9_target_s"] = SESSION_TIMEOUT_S + 1
    figures["target_met"] = int(
        figures["ratio"] >= 0.5
        and figures["failover_kill9_s"] <= SESSION_TIMEOUT_S + 1
        and figures["failover_controlled_shutdown_s"] <= 1.0
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=128, help="MB per throughput run")
    parser.add_argument(
        "--catch-up-mib", type=int, default=1024, help="how far behind the follower starts (MiB)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="throughput runs per configuration; the best counts"
    )
    parser.add_argument(
        "--throughput-only",
        action="store_true",
        help="only the throughput runs and their CPU (no latency, catch-up or failover)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="record every broker with py-spy (raw stacks) during the first acks=all RF=3 run",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="16 MB per run, 64 MiB catch-up, fewer latency samples, 1 repeat",
    )
    args = parser.parse_args(argv)
    megabytes = 16 if args.quick else args.megabytes
    catch_up_bytes = (64 if args.quick else args.catch_up_mib) * KIB * KIB
    root = Path(tempfile.mkdtemp(prefix="pykraft-bench-replication-"))
    try:
        with Cluster(root) as cluster:
            figures = measure(
                cluster,
                megabytes,
                catch_up_bytes,
                300 if args.quick else 2000,
                1 if args.quick else args.repeats,
                args.throughput_only,
                args.profile,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
