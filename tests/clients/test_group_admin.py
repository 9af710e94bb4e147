"""Deleting consumer groups and their committed offsets with real admin clients against a real
pykraft cluster: confluent-kafka's ``AdminClient.delete_consumer_groups`` (DeleteGroups) and
kafka-python's ``KafkaAdminClient.delete_groups`` / ``delete_group_offsets`` (OffsetDelete),
with Kafka's answers: an empty group goes with its offsets, a group with members is
NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND; a live member's subscribed topic keeps its
offsets (GROUP_SUBSCRIBED_TO_TOPIC) while others' are deleted. (The deletions surviving a
coordinator reload are ``tests/integration/test_group_deletion.py``.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NoError,
    NonEmptyGroupError,
)

from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic
from tests.clients.test_kafka_python import bootstrap, create_topic

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0


def commit(cluster: DevCluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A simple consumer's commit (generation -1, no membership)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        partitions = [ConfluentPartition(t, p, o) for (t, p), o in offsets.items()]
        consumer.commit(offsets=partitions, asynchronous=False)
    finally:
        consumer.close()


def committed(cluster: DevCluster, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of ``topic`` (none: absent)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster))
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
    finally:
        admin.close()
    return {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == topic}


@contextmanager
def live_member(cluster: DevCluster, group: str, topic: str) -> Iterator[KafkaConsumer]:
    """A kafka-python member of ``group`` subscribed to ``topic``, STABLE once this yields."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap(cluster), group_id=group, enable_auto_commit=False
    )
    try:
        assert consumer.partitions_for_topic(topic), f"{topic} has no partitions"
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the member got no assignment"
            consumer.poll(timeout_ms=200)
        yield consumer
    finally:
        consumer.close()


def test_confluent_delete_consumer_groups(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=2)
    idle, busy = unique_topic("idle-group"), unique_topic("busy-group")
    commit(cluster, idle, {(topic, 0): 3, (topic, 1): 4})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    with live_member(cluster, busy, topic):
        futures = admin.delete_consumer_groups([idle, busy, "never-seen"], request_timeout=20)
        assert futures[idle].result(TIMEOUT_S) is None
        for group, code in ((busy, KafkaError.NON_EMPTY_GROUP), ("never-seen", 69)):
            with pytest.raises(KafkaException) as refused:
                futures[group].result(TIMEOUT_S)
            assert refused.value.args[0].code() == code
    assert committed(cluster, idle, topic) == {}
    # A new commit makes a new group of the same name.
    commit(cluster, idle, {(topic, 0): 9})
    assert committed(cluster, idle, topic) == {0: 9}


def test_kafka_python_delete_group_offsets_and_groups(cluster: DevCluster) -> None:
    used, other = create_topic(cluster, partitions=1), create_topic(cluster, partitions=1)
    group = unique_topic("offsets-group")
    commit(cluster, group, {(used, 0): 5, (other, 0): 6})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster))
    try:
        with live_member(cluster, group, used):
            answer = admin.delete_group_offsets(
                group, [KafkaPartition(used, 0), KafkaPartition(other, 0)]
            )
            assert answer == {
                KafkaPartition(used, 0): GroupSubscribedToTopicError,
                KafkaPartition(other, 0): NoError,
            }
            assert admin.delete_groups([group]) == {group: NonEmptyGroupError.__name__}
        assert committed(cluster, group, used) == {0: 5}
        assert committed(cluster, group, other) == {}
        # Empty now: its last offset goes, and the group with it (cleanupGroupMetadata).
        assert admin.delete_group_offsets(group, [KafkaPartition(used, 0)]) == {
            KafkaPartition(used, 0): NoError
        }
        assert admin.delete_groups([group]) == {group: GroupIdNotFoundError.__name__}
    finally:
        admin.close()
