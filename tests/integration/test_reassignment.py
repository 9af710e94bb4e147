"""Partition reassignment (KIP-455) with a replication throttle (KIP-73) on real processes: three
controllers and three brokers (the harness numbers brokers 10, 11, 12), the issue's move of a
partition from brokers [10, 11] to [11, 12] with live acks=all traffic.

A 1-partition topic on [10, 11] gets ~5 MB; a producer keeps writing acks=all throughout.
``pykraft reassign-partitions --execute --throttle`` sets the throttle — 1 MB/s on the leader
side (10, 11) for the current replicas and on the follower side (12) for the added one — and
starts the move; ``--verify`` polls it and, once done, clears the throttles. The copy must take
at least ~4 s (5 MB at 1 MB/s, less the one window a fresh quota admits) and broker 12's
``pykraft_replication_throttled_bytes{side="follower"}`` must never grow far above the limit
(how fast it grows below the limit measures the machine, not the throttle). Every acknowledged
record must be in the segment files of both new replicas afterwards, read from disk, and broker
10 must have dropped its replica. Every process is always stopped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from pykraft.storage.record_batch import BATCH_HEADER_SIZE, CorruptRecordError, parse_header
from pykraft.storage.records import decode_records
from tests.integration.conftest import ROOT, Cluster
from tests.integration.test_broker_process import CONTROLLER_PROPERTIES, BrokerProcess

pytestmark = pytest.mark.integration

TOPIC = "moving"
THROTTLE = 1_000_000  # bytes/s
PRELOAD_RECORDS = 5_000
RECORD_BYTES = 1_000
BROKER_PROPERTIES = {
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.lag.time.max.ms": "10000",
    # Kafka's SimpleRate averages over up to window.num windows, crediting a quota's idle
    # windows to the next burst (11 s by default: more than this test's 5 MB at 1 MB/s).
    "replication.quota.window.num": "2",
}
MOVE_TIMEOUT_S = 90.0
_FOLLOWER_BYTES = re.compile(
    r'^pykraft_replication_throttled_bytes\{side="follower"\} (\S+)$', re.M
)


def start(cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path) -> Cluster:
    cluster: Cluster = cluster_factory(size=3, extra=CONTROLLER_PROPERTIES)
    cluster.wait_for_leader()
    servers = ",".join(c.url.removeprefix("http://") for c in cluster.controllers)
    for node_id in (10, 11, 12):
        broker = BrokerProcess(tmp_path, node_id, cluster.controllers[0].url)
        text = re.sub(
            r"^controller\.quorum\.bootstrap\.servers=.*$",
            f"controller.quorum.bootstrap.servers={servers}",
            broker.config_path.read_text(),
            flags=re.M,
        )
        extra = "".join(f"{key}={value}\n" for key, value in BROKER_PROPERTIES.items())
        broker.config_path.write_text(text + extra)
        brokers.append(broker)
        broker.start()
    for broker in brokers:
        broker.wait_running()
    return cluster


def tool(bootstrap: str, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "reassign-partitions", "--bootstrap-server",
         bootstrap, *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def follower_bytes(broker: BrokerProcess) -> float:
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found = _FOLLOWER_BYTES.search(text)
    return float(found.group(1)) if found else 0.0


def replica_records(log_dir: Path) -> dict[int, bytes]:
    """Offset -> value of every data record in a replica's segment files, read from disk; a
    batch still being written at the end is left for the next read."""
    stored: dict[int, bytes] = {}
    for segment in sorted(log_dir.glob("*.log")):
        data = memoryview(segment.read_bytes())
        position = 0
        while position + BATCH_HEADER_SIZE <= len(data):
            try:
                header = parse_header(data, position)
            except CorruptRecordError:
                break
            end = position + header.size_in_bytes
            if end > len(data):
                break
            if not header.is_control:
                body = data[position + BATCH_HEADER_SIZE : end]
                for record in decode_records(header, body, position):
                    stored[record.offset] = bytes(record.value or b"")
            position = end
    return stored


class Sampler:
    """Broker 12's follower throttled bytes every 0.25 s, on a thread: (monotonic s, bytes)."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), follower_bytes(self.broker)))
            self._stop.wait(0.25)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


class LiveProducer:
    """acks=all writes (~100 records/s) on a thread; ``acknowledged`` offset -> value."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, retries=20,
            retry_backoff_ms=200, linger_ms=5, request_timeout_ms=20_000,
        )  # fmt: skip
        self.acknowledged: dict[int, bytes] = {}
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            value = b"live-%06d-" % sequence + b"l" * 200
            future = self.producer.send(TOPIC, value=value, partition=0)
            future.add_callback(lambda meta, v=value: self.acknowledged.__setitem__(meta.offset, v))
            future.add_errback(lambda error: self.failures.append(repr(error)))
            sequence += 1
            time.sleep(0.01)

    def __enter__(self) -> LiveProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.producer.flush(timeout=60)
        self.producer.close(timeout=10)


def test_move_a_partition_with_live_traffic_under_a_throttle(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    cluster = start(cluster_factory, brokers, tmp_path)
    _, b11, b12 = brokers
    cluster.request("POST", "/v1/topics", {"name": TOPIC, "assignments": {"0": [10, 11]}})
    bootstrap = b11.bootstrap
    preload = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    futures = [
        preload.send(TOPIC, value=b"pre-%06d-" % i + b"p" * (RECORD_BYTES - 11), partition=0)
        for i in range(PRELOAD_RECORDS)
    ]
    preload.flush(timeout=120)
    acknowledged: dict[int, bytes] = {}
    for i, future in enumerate(futures):
        acknowledged[future.get(timeout=1).offset] = b"pre-%06d-" % i + b"p" * (RECORD_BYTES - 11)
    preload.close()

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [11, 12]}]}
        )
    )

    with LiveProducer(bootstrap) as live, Sampler(b12) as sampler:
        time.sleep(1.0)
        start_bytes, started = follower_bytes(b12), time.monotonic()
        out = tool(
            bootstrap, "--execute", "--reassignment-json-file", str(plan),
            "--throttle", str(THROTTLE),
        )  # fmt: skip
        assert "Successfully started partition reassignment for moving-0" in out
        while True:
            status = tool(
                bootstrap, "--verify", "--reassignment-json-file", str(plan),
                "--preserve-throttles",
            )  # fmt: skip
            if "Reassignment of partition moving-0 is completed." in status:
                break
            assert "is still in progress" in status, status
            assert time.monotonic() - started < MOVE_TIMEOUT_S, status
            time.sleep(0.5)
        took_s = time.monotonic() - started
        time.sleep(1.0)  # live traffic continues on the new replicas

    # The throttle visibly bounded the copy: >= ~4 s for 5 MB at 1 MB/s (a fresh quota admits
    # one window at once), and broker 12 never fetched far above the limit. No lower bound on
    # the rate: below the limit it measures how fast six processes copy on a shared machine.
    samples = [(t, b - start_bytes) for t, b in sampler.samples if t >= started]
    copied = samples[-1][1]
    assert copied >= PRELOAD_RECORDS * RECORD_BYTES * 0.9, copied
    assert took_s >= 3.5, (took_s, samples)
    moving = [(t, b) for t, b in samples if 0 < b < copied * 0.95]
    assert moving, samples
    first_t, first_b = moving[0]
    last_t, last_b = moving[-1]
    assert last_t - first_t >= 2.5, samples
    # After the first window's burst, the copy ran at most at about the throttle.
    rate = (last_b - first_b) / (last_t - first_t)
    assert rate <= THROTTLE * 1.3, (rate, samples)
    # Any 3 s span after the first second (one fetch carries up to replica.fetch.max.bytes,
    # 1 MiB, so shorter spans are lumpy).
    spans = [
        (b1 - b0) / (t1 - t0)
        for i, (t0, b0) in enumerate(moving)
        for t1, b1 in moving[i + 1 :]
        if t0 - first_t >= 1.0 and t1 - t0 >= 3.0
    ]
    assert all(span <= THROTTLE * 1.5 for span in spans), (spans, samples)

    done = tool(bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert "Clearing broker-level throttles on brokers 10,11,12" in done, done
    topic_configs = cluster.request("GET", f"/v1/configs/topic/{TOPIC}")["configs"]
    assert not topic_configs.get("follower.replication.throttled.replicas"), topic_configs

    # Every acknowledged record is on each new replica, at its offset: read from its segment
    # files, not through the leader (11), so broker 12's own copy is what is checked.
    assert live.failures == [], live.failures[:3]
    acknowledged.update(live.acknowledged)
    assert len(live.acknowledged) > 50
    for broker_id in (11, 12):
        log_dir = tmp_path / f"broker-{broker_id}" / f"{TOPIC}-0"
        deadline = time.monotonic() + 30
        while True:
            stored = replica_records(log_dir)
            missing = [o for o, value in acknowledged.items() if stored.get(o) != value]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # the follower may still be fetching the last records
        assert missing == [], (
            f"broker {broker_id}: {len(missing)} acknowledged records missing, first "
            f"{sorted(missing)[:5]}"
        )

    # The replica set is [11, 12] and broker 10 let its replica go.
    topic = cluster.request("GET", f"/v1/topics/{TOPIC}")
    (partition,) = topic["partitions"]
    assert sorted(partition["replicas"]) == [11, 12]
    assert partition["adding_replicas"] == [] and partition["removing_replicas"] == []
    deadline = time.monotonic() + 20
    while (tmp_path / "broker-10" / f"{TOPIC}-0").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (tmp_path / "broker-10" / f"{TOPIC}-0").exists()
