"""DeleteRecords and DescribeLogDirs from real admin clients against the RF=3 cluster:
confluent-kafka's ``AdminClient.delete_records`` and kafka-python's ``KafkaAdminClient
.delete_records`` / ``describe_log_dirs`` (Kafka's ``PlaintextAdminIntegrationTest
.testDeleteRecords*``, ``testDescribeLogDirs``).

The answer comes once every live replica moved its log start (the low watermark), so right after
it every replica answers ListOffsets EARLIEST (asked as the debugging replica id -2, which any
replica serves) with the new log start, and a consumer from the beginning starts there. Then
the leader is paused (SIGSTOP) until the controller fences it and elects another ISR member: the
new leader serves the same log start, and deletes further; the old one, resumed, follows it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPartition
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from pykraft.protocol.api_keys import ApiKey
from tests.clients.conftest import DevCluster
from tests.clients.support import _exchange, metadata, unique_topic

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0
RECORDS = 20
EARLIEST = -2
DEBUGGING_REPLICA_ID = -2  # ListOffsets from a tool: any replica answers, up to its log end


@pytest.fixture
def topic(cluster: DevCluster) -> Iterator[str]:
    """A one-partition topic on all three brokers holding offsets 0-19."""
    name = unique_topic("delete-records")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=3)], operation_timeout=TIMEOUT_S
    )
    assert futures[name].result(timeout=TIMEOUT_S) is None
    cluster.wait_for_topic(name, 1)
    produce(cluster, name, RECORDS)
    yield name


def produce(cluster: DevCluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for index in range(count):
        producer.produce(topic, value=b"v%d" % index, partition=0)
    assert producer.flush(TIMEOUT_S) == 0


def leader_of(cluster: DevCluster, topic: str) -> int:
    [answer] = metadata(cluster.broker_ports[0], [topic]).topics
    [partition] = answer.partitions
    return int(partition.leader_id)


def earliest_on(port: int, topic: str) -> tuple[int, int]:
    """(error, offset) of ListOffsets EARLIEST on one broker's own replica."""
    request = ListOffsetsRequest(
        version=1,
        replica_id=DEBUGGING_REPLICA_ID,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, timestamp=EARLIEST
                    )
                ],
            )
        ],
    )
    body = _exchange(port, ApiKey.LIST_OFFSETS, 1, bytes(request.encode(version=1)))
    [answer] = ListOffsetsResponse.decode(body, version=1).topics
    [partition] = answer.partitions
    return int(partition.error_code), int(partition.offset)


def earliest_everywhere(cluster: DevCluster, topic: str) -> dict[int, tuple[int, int]]:
    return {node: earliest_on(port, topic) for node, (_, port) in cluster.brokers.items()}


def first_offset_read(cluster: DevCluster, topic: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": unique_topic("delete-records-reader"),
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ConfluentPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                offset = message.offset()
                assert offset is not None
                return offset
        raise AssertionError(f"nothing read from {topic}")
    finally:
        consumer.close()


def eventually(check: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def pid_of(cluster: DevCluster, node_id: int) -> int:
    [broker] = [b for b in cluster.info()["brokers"] if int(b["node_id"]) == node_id]
    return int(broker["pid"])


def test_confluent_kafka_delete_records_moves_every_replicas_log_start(
    cluster: DevCluster, topic: str
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.delete_records([ConfluentPartition(topic, 0, 7)])
    [deleted] = [future.result(timeout=TIMEOUT_S) for future in futures.values()]
    assert deleted.low_watermark == 7
    # Answered at the low watermark, which waits only for unfenced followers: a follower
    # fenced for a moment moves its log start once it fetches again.
    eventually(
        lambda: earliest_everywhere(cluster, topic) == {node: (0, 7) for node in cluster.brokers},
        f"the replicas' log starts: {earliest_everywhere(cluster, topic)}",
    )
    assert first_offset_read(cluster, topic) == 7
    # Offset -1 (OFFSET_END) deletes up to the high watermark.
    futures = admin.delete_records([ConfluentPartition(topic, 0, -1)])
    [deleted] = [future.result(timeout=TIMEOUT_S) for future in futures.values()]
    assert deleted.low_watermark == RECORDS


def test_kafka_python_delete_records_and_the_log_start_survives_a_leader_change(
    cluster: DevCluster, topic: str
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        answer = admin.delete_records({KafkaPartition(topic, 0): 5}, timeout_ms=30_000)
        assert [r["low_watermark"] for r in answer.values()] == [5], answer
        eventually(
            lambda: earliest_everywhere(cluster, topic) == {n: (0, 5) for n in cluster.brokers},
            f"the replicas' log starts: {earliest_everywhere(cluster, topic)}",
        )

        old_leader = leader_of(cluster, topic)
        pid = pid_of(cluster, old_leader)
        os.kill(pid, signal.SIGSTOP)
        try:
            eventually(
                lambda: leader_of_from_others(cluster, topic, old_leader) not in (old_leader, -1),
                "no new leader after the old one was paused",
            )
        finally:
            os.kill(pid, signal.SIGCONT)
        new_leader = leader_of_from_others(cluster, topic, old_leader)
        _, new_port = cluster.brokers[new_leader]
        assert earliest_on(new_port, topic) == (0, 5)
        assert first_offset_read(cluster, topic) == 5

        answer = admin.delete_records({KafkaPartition(topic, 0): 12}, timeout_ms=30_000)
        # The resumed old leader follows again (or, still fenced, does not count): the answer
        # comes once every live replica's log start is 12.
        assert [r["low_watermark"] for r in answer.values()] == [12], answer
        eventually(
            lambda: earliest_everywhere(cluster, topic) == {n: (0, 12) for n in cluster.brokers},
            f"the replicas' log starts: {earliest_everywhere(cluster, topic)}",
        )
    finally:
        admin.close()


def leader_of_from_others(cluster: DevCluster, topic: str, paused: int) -> int:
    """The leader as a broker other than the paused one sees it."""
    port = next(port for node, (_, port) in cluster.brokers.items() if node != paused)
    [answer] = metadata(port, [topic]).topics
    [partition] = answer.partitions
    return int(partition.leader_id)


def test_kafka_python_describe_log_dirs_lists_the_partition_on_every_broker(
    cluster: DevCluster, topic: str
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        answers: Any = admin.describe_log_dirs({topic: [0]})
    finally:
        admin.close()
    found = _partitions_by_dir(answers, topic)
    assert len(found) == len(cluster.brokers), answers  # one log dir per broker holds it
    for size, lag in found.values():
        assert size > 0 and lag == 0


def _partitions_by_dir(answers: Any, topic: str) -> dict[tuple[int, str], tuple[int, int]]:
    """(broker, log dir) -> (size, offset lag) of ``topic``-0, from kafka-python's answer."""
    found = {}
    for answer in answers:
        for log_dir in answer["log_dirs"]:
            assert log_dir["error_code"] == 0, answer
            assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0, answer
            for entry in log_dir["topics"]:
                assert entry["name"] == topic, answer  # only what was asked
                for partition in entry["partitions"]:
                    assert partition["partition_index"] == 0
                    assert partition["is_future_key"] is False
                    key = (answer["broker"], log_dir["log_dir"])
                    found[key] = (partition["partition_size"], partition["offset_lag"])
    return found
