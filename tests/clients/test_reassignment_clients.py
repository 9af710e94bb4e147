"""Partition reassignment (KIP-455) through real admin clients against a ``pykraft dev`` cluster:
kafka-python's ``KafkaAdminClient.alter_partition_reassignments`` /
``list_partition_reassignments`` (AlterPartitionReassignments / ListPartitionReassignments v0).
confluent-kafka's Python AdminClient (2.16) has no reassignment call, so it is not used here.

A one-partition topic moves to another broker with its records; the per-partition errors
Kafka's controller gives come back as kafka-python's error classes.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0


def test_kafka_python_moves_a_partition_and_reports_kafkas_errors(cluster: DevCluster) -> None:
    brokers = sorted(cluster.brokers)
    source, target = brokers[0], brokers[1]
    servers = cluster.bootstrap_servers.split(",")
    topic = unique_topic("reassign")
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        admin.create_topics(
            [NewTopic(topic, num_partitions=-1, replication_factor=-1,
                      replica_assignments={0: [source]})],
            timeout_ms=int(TIMEOUT_S * 1000),
        )  # fmt: skip
        producer = KafkaProducer(bootstrap_servers=servers, acks="all")
        for i in range(50):
            producer.send(topic, value=b"v%d" % i, partition=0)
        producer.flush(timeout=TIMEOUT_S)
        producer.close()

        tp = TopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [target]}) == {tp: None}
        deadline = time.monotonic() + TIMEOUT_S
        while admin.list_partition_reassignments([tp]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments({topic: [0]}) == {}
        (description,) = admin.describe_topics([topic])
        (partition,) = description["partitions"]
        assert (partition["replica_nodes"], partition["leader_id"]) == ([target], target)

        # Kafka's per-partition errors: nothing to cancel, a broker nobody registered, a
        # partition that does not exist.
        missing = TopicPartition(topic, 7)
        assert admin.alter_partition_reassignments({tp: None}) == {
            tp: NoReassignmentInProgressError
        }
        assert admin.alter_partition_reassignments({tp: [target, 999]}) == {
            tp: InvalidReplicationAssignmentError
        }
        assert admin.alter_partition_reassignments({missing: [target]}) == {
            missing: UnknownTopicOrPartitionError
        }
    finally:
        admin.close()

    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < 50 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value for r in records)
    consumer.close()
    assert values == [b"v%d" % i for i in range(50)]
