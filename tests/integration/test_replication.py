"""Replication between real broker processes: one controller, three brokers, an RF=3 topic.

kafka-python produces with acks=all; every replica's segment files (read here with
``storage.record_batch``, never through the running brokers) must hold the same batches, byte for
byte, below the high watermark. Then a follower is killed with SIGKILL, more records are
acknowledged without it (the leader drops it from the ISR after ``replica.lag.time.max.ms``),
and once restarted it catches up through its replica fetchers: truncating whatever it had
beyond the leader, fetching the rest (DESIGN.md §3.4, §5). Every process is always stopped.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from pykraft.storage.record_batch import LOG_OVERHEAD, validate_batch
from tests.integration.conftest import Cluster, HttpError, http
from tests.integration.test_broker_process import BrokerProcess, start_cluster

pytestmark = pytest.mark.integration

TOPIC = "pets"
PARTITIONS = 2
# Quick ISR shrink once a follower dies; quick follower fetch loops.
BROKER_PROPERTIES = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
}
CATCH_UP_TIMEOUT_S = 40.0

Batch = tuple[int, int, bytes]  # base offset, last offset, the batch's bytes


def start_brokers(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path, count: int
) -> Cluster:
    return start_cluster(cluster_factory, brokers, tmp_path, count, BROKER_PROPERTIES)


def partitions_of(broker: BrokerProcess) -> dict[int, dict[str, Any]]:
    """``/v1/partitions`` of one broker, by partition (empty while it is down)."""
    try:
        rows = http("GET", broker.http_url + f"/v1/partitions?topic={TOPIC}", timeout=2)
    except (OSError, HttpError):
        return {}
    return {row["partition"]: row for row in rows["partitions"]}


def eventually(
    condition: Callable[[], bool],
    what: str,
    brokers: list[BrokerProcess],
    timeout_s: float = CATCH_UP_TIMEOUT_S,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            states = {b.node_id: partitions_of(b) for b in brokers}
            tails = "\n".join(f"--- broker {b.node_id}\n{b.log_tail(15)}" for b in brokers)
            raise AssertionError(f"{what} not reached in {timeout_s}s: {states}\n{tails}")
        time.sleep(0.2)


def in_sync(brokers: list[BrokerProcess]) -> bool:
    """Every replica of every partition has the leader's log end offset as log end and high
    watermark."""
    views = [partitions_of(b) for b in brokers]
    for partition in range(PARTITIONS):
        rows = [view.get(partition) for view in views]
        if any(row is None for row in rows):
            return False
        ends = {(row["log_end_offset"], row["high_watermark"]) for row in rows if row}
        if len(ends) != 1 or next(iter(ends))[0] != next(iter(ends))[1]:
            return False
    return True


def segment_batches(log_dir: Path, partition: int) -> list[Batch]:
    """The complete batches in a replica's segment files, in offset order (a batch still being
    written at the tail is left out)."""
    batches: list[Batch] = []
    for segment in sorted((log_dir / f"{TOPIC}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + LOG_OVERHEAD <= len(data):
            length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
            end = position + LOG_OVERHEAD + length
            if length <= 0 or end > len(data):
                break
            header = validate_batch(data, position)
            batches.append((header.base_offset, header.last_offset, data[position:end]))
            position = end
    return batches


def assert_replicas_agree(brokers: list[BrokerProcess], tmp_path: Path) -> int:
    """Below the high watermark every replica holds the same batches; returns how many
    records that is over all partitions."""
    total = 0
    for partition in range(PARTITIONS):
        high_watermark = min(partitions_of(b)[partition]["high_watermark"] for b in brokers)
        copies = {
            broker.node_id: [
                batch
                for batch in segment_batches(tmp_path / f"broker-{broker.node_id}", partition)
                if batch[1] < high_watermark
            ]
            for broker in brokers
        }
        reference = copies[brokers[0].node_id]
        for node_id, batches in copies.items():
            assert batches == reference, f"broker {node_id} differs on {TOPIC}-{partition}"
        offsets = [offset for base, last, _ in reference for offset in range(base, last + 1)]
        assert offsets == list(range(high_watermark)), "a hole below the high watermark"
        total += high_watermark
    return total


def produce(brokers: list[BrokerProcess], first: int, count: int) -> set[tuple[int, int]]:
    producer = KafkaProducer(
        bootstrap_servers=[b.bootstrap for b in brokers if b.status() is not None],
        acks="all",
        enable_idempotence=False,
        linger_ms=5,
        retries=10,
        request_timeout_ms=30_000,
    )
    try:
        futures = [
            producer.send(TOPIC, key=b"%d" % (i % 11), value=b"value-%d" % i)
            for i in range(first, first + count)
        ]
        producer.flush(timeout=60)
        return {(f.get(timeout=1).partition, f.get(timeout=1).offset) for f in futures}
    finally:
        producer.close()


def test_rf3_replicas_agree_and_a_killed_follower_catches_up(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    cluster = start_brokers(cluster_factory, brokers, tmp_path, 3)
    cluster.request(
        "POST",
        "/v1/topics",
        {
            "name": TOPIC,
            "partitions": PARTITIONS,
            "replication_factor": 3,
            "configs": {"min.insync.replicas": "2"},
        },
    )
    eventually(lambda: in_sync(brokers), "all replicas created", brokers)

    acknowledged = produce(brokers, 0, 400)
    assert len(acknowledged) == 400
    eventually(lambda: in_sync(brokers), "followers caught up", brokers)
    assert assert_replicas_agree(brokers, tmp_path) == 400

    # A follower of every partition (with two partitions, one broker leads none).
    topic = cluster.request("GET", f"/v1/topics/{TOPIC}")
    leaders = {p["leader"] for p in topic["partitions"]}
    victim = next(b for b in brokers if b.node_id not in leaders)
    victim.kill()
    survivors = [b for b in brokers if b is not victim]
    acknowledged |= produce(survivors, 400, 300)
    assert len(acknowledged) == 700  # acks=all with min.insync.replicas=2 of 3

    victim.start()
    victim.wait_running()
    eventually(lambda: in_sync(brokers), "the restarted follower caught up", brokers)
    assert assert_replicas_agree(brokers, tmp_path) == 700
    # It is a follower again, fetching from the same leaders.
    rows = partitions_of(victim)
    assert all(row["role"] == "follower" for row in rows.values())
    # KIP-227: each leader keeps a fetch session for each of its two followers (and, until
    # evicted, the killed follower's old one), holding the partitions it leads.
    for leader in (b for b in brokers if b.node_id in leaders):
        led = sum(1 for p in topic["partitions"] if p["leader"] == leader.node_id)
        sessions = fetch_session_gauges(leader)
        assert sessions[0] >= 2 and sessions[1] >= 2 * led, (leader.node_id, sessions)


def fetch_session_gauges(broker: BrokerProcess) -> tuple[float, float]:
    """The leader's FetchSessionCache gauges: sessions, partitions cached."""
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=5) as answer:
        lines = answer.read().decode().splitlines()
    values = dict(line.rsplit(" ", 1) for line in lines if line and not line.startswith("#"))
    return (
        float(values["kafka_server_fetchsessioncache_numincrementalfetchsessions"]),
        float(values["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"]),
    )
