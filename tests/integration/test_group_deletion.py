"""Deleted groups and offsets stay deleted across a restart of a real ``pykraft dev
--controllers 1 --brokers 1`` cluster: DeleteGroups and OffsetDelete write tombstones to
``__consumer_offsets`` (Kafka's ``GroupMetadataManager.cleanupGroupMetadata``), and the
coordinator that loads the partition again replays them. A group that had members gets a
tombstone for its group record too, so it does not come back EMPTY; a static member (KIP-345)
is in the group record with its instance id, so the reloaded group still has it. The cluster
always stops."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KafkaPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import GroupIdNotFoundError, NoError

from tests.integration.test_consumer_groups import PARTITIONS, DevCluster
from tests.integration.test_dev_cluster import kill_everything

pytestmark = pytest.mark.integration

TIMEOUT_S = 45.0
TOPIC = "deletions"
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: nothing committed


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    cluster = DevCluster(tmp_path_factory.mktemp("deletions") / "cluster")
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        kill_everything(cluster.data_dir, cluster.process)


def commit(dev: DevCluster, group: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": dev.bootstrap, "group.id": group})
    try:
        partitions = [ConfluentPartition(TOPIC, p, offset) for p in range(PARTITIONS)]
        consumer.commit(offsets=partitions, asynchronous=False)
    finally:
        consumer.close()


def committed(dev: DevCluster, group: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": dev.bootstrap, "group.id": group})
    try:
        partitions = [ConfluentPartition(TOPIC, p) for p in range(PARTITIONS)]
        return [tp.offset for tp in consumer.committed(partitions, timeout=TIMEOUT_S)]
    finally:
        consumer.close()


def member_of(dev: DevCluster, group: str, instance: str | None = None) -> Consumer:
    """A member of ``group`` on TOPIC that has its assignment (static with ``instance``)."""
    config = {"bootstrap.servers": dev.bootstrap, "group.id": group, "session.timeout.ms": 30_000}
    if instance is not None:
        config["group.instance.id"] = instance
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + TIMEOUT_S
    while not consumer.assignment():
        assert time.monotonic() < deadline, f"no assignment in {group}"
        consumer.poll(0.1)
    return consumer


def test_deleted_groups_and_offsets_stay_deleted_after_a_restart(dev: DevCluster) -> None:
    dev.create_topic(TOPIC)
    commit(dev, "gone", 10)
    commit(dev, "trimmed", 20)
    commit(dev, "kept", 30)
    member = member_of(dev, "left")
    member.commit(offsets=[ConfluentPartition(TOPIC, 0, 40)], asynchronous=False)
    member.close()  # dynamic: LeaveGroup, the group is EMPTY with a record of its generation
    member_of(dev, "static", "instance-1").close()  # static: no LeaveGroup, stays a member
    confluent = AdminClient({"bootstrap.servers": dev.bootstrap})  # alive until its answer
    futures = confluent.delete_consumer_groups(["gone"], request_timeout=20)
    assert futures["gone"].result(TIMEOUT_S) is None
    admin = KafkaAdminClient(bootstrap_servers=dev.bootstrap)
    try:
        deleted = admin.delete_group_offsets("trimmed", [KafkaPartition(TOPIC, 0)])
        assert deleted == {KafkaPartition(TOPIC, 0): NoError}
        assert admin.delete_groups(["left"]) == {"left": "OK"}
    finally:
        admin.close()
    dev.restart()
    assert committed(dev, "gone") == [NO_OFFSET] * PARTITIONS
    assert committed(dev, "trimmed") == [NO_OFFSET] + [20] * (PARTITIONS - 1)
    assert committed(dev, "kept") == [30] * PARTITIONS
    admin = KafkaAdminClient(bootstrap_servers=dev.bootstrap)
    try:
        assert admin.delete_groups(["gone", "left"]) == {
            "gone": GroupIdNotFoundError.__name__,
            "left": GroupIdNotFoundError.__name__,
        }
    finally:
        admin.close()
    assert committed(dev, "left")[0] == NO_OFFSET
    reconnected = AdminClient({"bootstrap.servers": dev.bootstrap})
    [static] = reconnected.describe_consumer_groups(["static"], request_timeout=20).values()
    described = static.result(TIMEOUT_S)
    assert [m.group_instance_id for m in described.members] == ["instance-1"]
