"""A KIP-848 consumer group survives its coordinator's death: ``pykraft dev`` with three
brokers, a confluent-kafka consumer with ``group.protocol=consumer`` owning every partition,
then kill -9 of the broker leading the group's ``__consumer_offsets`` partition (RF 3). The new
leader loads the group back from its records (``coordinator.group.consumer_replay``): the
member's heartbeats go on with its member id and epoch, nothing is revoked or lost, and it reads
what is produced after the failover. The cluster always stops."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from pykraft.protocol.java_hash import java_string_hash, kafka_abs
from tests.integration.test_consumer_groups import DevCluster, expected, produce
from tests.integration.test_dev_cluster import kill_everything

pytestmark = pytest.mark.integration

PARTITIONS_OF_OFFSETS = 3  # offsets.topic.num.partitions of test_consumer_groups' cluster
READ_TIMEOUT_S = 60.0


@pytest.fixture
def three_brokers(tmp_path: Path) -> Iterator[DevCluster]:
    cluster = DevCluster(tmp_path / "cluster", brokers=3)
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        kill_everything(cluster.data_dir, cluster.process)


def read(consumer: Consumer, values: list[bytes], count: int) -> None:
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(set(values)) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue  # a dead leader's partitions report errors until they move
        value = message.value()
        assert isinstance(value, bytes)
        values.append(value)


def test_a_consumer_group_survives_a_coordinator_failover(three_brokers: DevCluster) -> None:
    dev, topic, group = three_brokers, "kip848-failover", "kip848-failover-readers"
    dev.create_topic(topic, replication_factor=3)
    produce(dev, topic, range(20))
    revoked: list[list[TopicPartition]] = []
    owned: set[int] = set()
    consumer = Consumer(
        {
            "bootstrap.servers": dev.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda _, ps: owned.update(p.partition for p in ps),
        on_revoke=lambda _, ps: revoked.append(ps),
        on_lost=lambda _, ps: revoked.append(ps),
    )
    values: list[bytes] = []
    try:
        read(consumer, values, 20)
        assert sorted(set(values)) == expected(range(20))
        offsets_partition = kafka_abs(java_string_hash(group)) % PARTITIONS_OF_OFFSETS
        coordinator = dev.leader_of("__consumer_offsets", offsets_partition)
        victim = next(b for b in dev.info["brokers"] if b["node_id"] == coordinator)
        os.kill(victim["pid"], signal.SIGKILL)
        survivors = ",".join(
            b["bootstrap_server"] for b in dev.info["brokers"] if b["node_id"] != coordinator
        )
        produce(dev, topic, range(20, 30), bootstrap=survivors)
        read(consumer, values, 30)
        assert sorted(set(values)) == expected(range(30))
        assert dev.leader_of("__consumer_offsets", offsets_partition) != coordinator
        # The member kept its place: nothing was revoked or lost across the failover.
        assert revoked == []
        assert len(owned) >= 1
    finally:
        consumer.close()
