"""AlterReplicaLogDirs on a real broker with two log dirs (KIP-113): kafka-python's admin moves
a partition to the other dir while a producer keeps writing with acks=all; the move completes
(the ``-future`` copy swapped in, the old directory gone), and every acknowledged record is in
the destination's segment files (read here with ``storage.record_batch``) and consumable. The
broker is stopped cleanly and started again to check the moved log loads from its new dir.
Mirrors Kafka's ``AlterReplicaLogDirsRequestTest`` / ``ReassignPartitionsIntegrationTest
.testLogDirReassignment``. Every process is always stopped."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from pykraft.dev import internal_topic_properties
from pykraft.storage.record_batch import LOG_OVERHEAD, validate_batch
from pykraft.storage.topic_partition import is_future_dir
from tests.integration.conftest import Cluster, records_to_end
from tests.integration.test_broker_process import CONTROLLER_PROPERTIES, BrokerProcess

pytestmark = pytest.mark.integration

TOPIC = "moving"
MOVE_TIMEOUT_S = 40.0


def start_broker_with_two_dirs(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> tuple[Cluster, BrokerProcess, list[Path]]:
    cluster: Cluster = cluster_factory(size=1, extra=CONTROLLER_PROPERTIES)
    cluster.wait_for_leader()
    broker = BrokerProcess(tmp_path, 10, cluster.controllers[0].url)
    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    lines = [
        line
        for line in broker.config_path.read_text().splitlines()
        if not line.startswith("log.dirs=")
    ]
    lines.append("log.dirs=" + ",".join(str(d) for d in dirs))
    lines += [f"{key}={value}" for key, value in internal_topic_properties(1).items()]
    broker.config_path.write_text("\n".join(lines) + "\n")
    brokers.append(broker)
    broker.start()
    broker.wait_running()
    return cluster, broker, dirs


def offsets_on_disk(partition_dir: Path) -> list[int]:
    """Every offset in the complete, CRC-valid batches of a partition's segment files."""
    offsets: list[int] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + LOG_OVERHEAD <= len(data):
            length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
            if length <= 0 or position + LOG_OVERHEAD + length > len(data):
                break
            header = validate_batch(data, position)
            offsets.extend(range(header.base_offset, header.last_offset + 1))
            position += LOG_OVERHEAD + length
    return offsets


def test_a_partition_moves_to_the_other_dir_under_produce_traffic(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    _, broker, dirs = start_broker_with_two_dirs(cluster_factory, brokers, tmp_path)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    acknowledged: dict[int, bytes] = {}
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            value = f"record-{n}".encode()
            metadata = producer.send(TOPIC, value, partition=0).get(timeout=10)
            acknowledged[metadata.offset] = value
            n += 1

    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        deadline = time.monotonic() + MOVE_TIMEOUT_S
        while len(acknowledged) < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        (source,) = [d for d in dirs if (d / f"{TOPIC}-0").is_dir()]
        (destination,) = [d for d in dirs if d != source]
        answer = admin.alter_replica_log_dirs({(TOPIC, 0, broker.node_id): str(destination)})
        assert [error.errno for error in answer.values()] == [0]
        while time.monotonic() < deadline:
            names = [p.name for p in destination.iterdir()]
            if f"{TOPIC}-0" in names and not any(is_future_dir(n) for n in names):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the move did not finish\n{broker.log_tail()}")
        time.sleep(0.5)  # more acknowledged writes into the moved log
        stop.set()
        writer.join(15)
        assert not writer.is_alive()
        producer.flush()
        assert not (source / f"{TOPIC}-0").exists()
        described = admin.describe_log_dirs()
        assert described is not None
    finally:
        stop.set()
        producer.close()
        admin.close()
    assert broker.terminate() == 0
    assert len(acknowledged) > 200
    on_disk = offsets_on_disk(destination / f"{TOPIC}-0")
    assert on_disk == list(range(len(on_disk)))
    assert set(acknowledged) <= set(on_disk)
    # The moved log loads from its new dir after a restart, and serves every record.
    broker.start()
    broker.wait_running()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumed = {record.offset: record.value for record in records_to_end(consumer)}
    finally:
        consumer.close()
    assert {offset: consumed.get(offset) for offset in acknowledged} == acknowledged
