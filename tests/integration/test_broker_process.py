"""Real broker processes (``python -m pykraft.broker_cmd``) against a real controller on free
127.0.0.1 ports: kill -9 and restart with a real Kafka client (kafka-python), and SIGTERM's
controlled shutdown moving leadership away first (KIP-631) while the new leaders serve every
acknowledged record. Every process is always stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from pykraft.dev import internal_topic_properties
from pykraft.free_ports import pick_free_ports as free_ports
from tests.integration.conftest import ROOT, Cluster, HttpError, http, records_to_end

pytestmark = pytest.mark.integration

# Fast sessions so a kill -9'd incarnation's registration expires quickly.
CONTROLLER_PROPERTIES = {"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "500"}
READY_TIMEOUT_S = 30.0


class BrokerProcess:
    def __init__(self, root: Path, node_id: int, controller_url: str) -> None:
        kafka_port, http_port = free_ports(2)
        self.node_id = node_id
        self.kafka_port = kafka_port
        self.http_url = f"http://127.0.0.1:{http_port}"
        self.log_path = root / f"broker-{node_id}.log"
        self.config_path = root / f"broker-{node_id}.properties"
        self.config_path.write_text(
            f"node.id={node_id}\nprocess.roles=broker\n"
            f"listeners=PLAINTEXT://127.0.0.1:{kafka_port}\nlog.dirs={root / f'broker-{node_id}'}\n"
            f"controller.quorum.bootstrap.servers={controller_url.removeprefix('http://')}\n"
            f"http.listener=127.0.0.1:{http_port}\nbroker.heartbeat.interval.ms=500\n"
            f"broker.session.timeout.ms=2000\n"
        )
        self.process: subprocess.Popen[bytes] | None = None
        # Where it listens, and what runs it (``ip netns exec NS``: tests/chaos/netns.py).
        self.host = "127.0.0.1"
        self.command_prefix: list[str] = []
        self.http_headers: dict[str, str] = {}  # Authorization, when it has http.bearer.token

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    *self.command_prefix,
                    *(
                        sys.executable,
                        "-m",
                        "pykraft.broker_cmd",
                        "--config",
                        str(self.config_path),
                    ),
                ],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
            )

    def status(self) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] = http(
                "GET", self.http_url + "/v1/broker", timeout=2, headers=self.http_headers
            )
            return answer
        except (OSError, HttpError):
            return None

    def wait_running(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.log_tail()
            status = self.status()
            if status is not None and status["state"] == "RUNNING":
                return status
            time.sleep(0.1)
        raise AssertionError(f"broker {self.node_id} not RUNNING\n{self.log_tail()}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def terminate(self, timeout_s: float = 40.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def start_cluster(
    cluster_factory: Any,
    brokers: list[BrokerProcess],
    tmp_path: Path,
    count: int,
    broker_properties: dict[str, str] | None = None,
) -> Cluster:
    """One controller and ``count`` running brokers; ``broker_properties`` go into each file,
    over internal topics sized to ``count`` brokers (as ``pykraft dev`` sizes them)."""
    cluster: Cluster = cluster_factory(size=1, extra=CONTROLLER_PROPERTIES)
    cluster.wait_for_leader()
    properties = {**internal_topic_properties(count), **(broker_properties or {})}
    for index in range(count):
        broker = BrokerProcess(tmp_path, 10 + index, cluster.controllers[0].url)
        with broker.config_path.open("a") as config:
            config.writelines(f"{key}={value}\n" for key, value in properties.items())
        brokers.append(broker)
        broker.start()
    for broker in brokers:
        broker.wait_running()
    return cluster


def test_a_killed_broker_reregisters_and_serves_every_acknowledged_record(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    cluster = start_cluster(cluster_factory, brokers, tmp_path, 1)
    broker = brokers[0]
    before = broker.status()
    assert before is not None
    cluster.request(
        "POST", "/v1/topics", {"name": "pets", "partitions": 2, "replication_factor": 1}
    )
    # kafka-python 3 defaults to idempotence (InitProducerId); plain acks=all producing here.
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False, linger_ms=5
    )
    futures = [
        producer.send("pets", key=b"%d" % (i % 7), value=b"value-%d" % i) for i in range(500)
    ]
    producer.flush(timeout=30)
    acknowledged = {(f.get(timeout=1).partition, f.get(timeout=1).offset) for f in futures}
    producer.close()
    assert len(acknowledged) == 500

    broker.kill()  # kill -9: no flush, no checkpoint, no clean-shutdown marker
    broker.start()
    after = broker.wait_running()
    # A new incarnation registered (after the old session expired) and was unfenced.
    assert after["broker_epoch"] > before["broker_epoch"]
    assert "recovered after an unclean shutdown" in broker.log_tail(100)

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    consumer.assign([TopicPartition("pets", 0), TopicPartition("pets", 1)])
    read = {(m.partition, m.offset): m.value for m in records_to_end(consumer)}
    consumer.close()
    assert set(read) == acknowledged
    assert sorted(read.values()) == sorted(b"value-%d" % i for i in range(500))


def test_sigterm_moves_leadership_away_before_the_broker_exits(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    cluster = start_cluster(cluster_factory, brokers, tmp_path, 3)
    cluster.request(
        "POST", "/v1/topics", {"name": "pets", "partitions": 3, "replication_factor": 3}
    )
    topic = wait_for(lambda: cluster.request("GET", "/v1/topics/pets"))
    victim = next(b for b in brokers if any(p["leader"] == b.node_id for p in topic["partitions"]))
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    futures = [producer.send("pets", value=b"pet-%d" % i) for i in range(200)]
    producer.flush(timeout=30)
    acknowledged = {(f.get(timeout=1).partition, f.get(timeout=1).offset) for f in futures}
    producer.close()
    start = cluster.request("GET", "/v1/cluster")["metadata_offset"]

    assert victim.terminate() == 0
    assert "controlled shutdown complete" in victim.log_tail()
    topic = cluster.request("GET", "/v1/topics/pets")
    assert all(p["leader"] not in (victim.node_id, -1) for p in topic["partitions"])
    registration = next(
        b
        for b in cluster.request("GET", "/v1/brokers")["brokers"]
        if b["broker_id"] == victim.node_id
    )
    assert registration["fenced"] and registration["in_controlled_shutdown"]
    # In the metadata log the leaders moved before the broker was fenced (KIP-631).
    records = http("GET", cluster.controllers[0].url + f"/v1/metadata/records?from={start + 1}")
    changes = [
        (batch["base_offset"] + i, record)
        for batch in records["batches"]
        for i, record in enumerate(batch["records"])
    ]
    moved = [
        o
        for o, r in changes
        if r["type"] == "PartitionChangeRecord" and r.get("leader", -2) not in (-2, victim.node_id)
    ]
    fenced = [
        o
        for o, r in changes
        if r["type"] == "BrokerRegistrationChangeRecord"
        and r["brokerId"] == victim.node_id
        and r["fenced"] == 1
    ]
    assert moved and fenced and max(moved) < min(fenced)
    for broker in brokers:
        if broker is not victim:
            status = broker.status()
            assert status is not None and status["state"] == "RUNNING"
    # The new leaders serve every record acknowledged with acks=all (RF=3, replicated).
    survivors = ",".join(b.bootstrap for b in brokers if b is not victim)
    consumer = KafkaConsumer(
        bootstrap_servers=survivors,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    consumer.assign([TopicPartition("pets", p) for p in range(3)])
    assert {(m.partition, m.offset) for m in records_to_end(consumer)} == acknowledged
    consumer.close()


def wait_for(read: Any, timeout_s: float = 10.0) -> Any:
    """``read()`` once every partition has a leader."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if all(p["leader"] >= 0 for p in value["partitions"]) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)
