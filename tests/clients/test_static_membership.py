"""Static membership (KIP-345) with real consumers against a real pykraft cluster: confluent-kafka
(librdkafka) and kafka-python members with ``group.instance.id`` on a 4-partition topic.

A static member that closes sends no LeaveGroup; restarted with the same ``group.instance.id``
within ``session.timeout.ms`` it gets its partitions back without a rebalance, so the other
member's assignment never changes (no revoke, no new assignment). A second process started with
an instance id already in use takes it over and the first is fenced (FENCED_INSTANCE_ID: fatal
in librdkafka, ``FencedInstanceIdError`` on kafka-python's next commit).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KafkaPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import FencedInstanceIdError

from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic
from tests.clients.test_kafka_python import bootstrap, create_topic

pytestmark = pytest.mark.clients

PARTITIONS = 4
SESSION_TIMEOUT_MS = 10_000
TIMEOUT_S = 30.0
# How long the surviving member keeps polling after a restart: several heartbeat intervals, in
# which a rebalance would have reached it.
QUIET_S = 3.0
# How long each kafka-python poll may wait (see the test's ``poll``).
POLL_MS = 1000


def wait_until(condition: Callable[[], bool], poll: Callable[[], None], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        poll()


# ------------------------------------------------------------------ confluent-kafka


class Member:
    """A librdkafka static member that records its rebalance callbacks and errors."""

    def __init__(self, cluster: DevCluster, group: str, instance: str, topic: str) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []
        self.errors: list[KafkaError] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "group.instance.id": instance,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
                "error_cb": self.errors.append,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        self.events.append(("assign", frozenset(p.partition for p in partitions)))

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        self.events.append(("revoke", frozenset(p.partition for p in partitions)))

    def poll(self) -> None:
        message = self.consumer.poll(0.1)
        error = None if message is None else message.error()
        if error is not None:
            self.errors.append(error)

    def assigned(self) -> frozenset[int]:
        return frozenset(p.partition for p in self.consumer.assignment())

    def fenced(self) -> bool:
        # librdkafka raises FENCED_INSTANCE_ID as its fatal error (error_cb gets _FATAL).
        return any(
            e.code() in (KafkaError.FENCED_INSTANCE_ID, KafkaError._FATAL)
            and "fenced" in e.str().lower()
            for e in self.errors
        )


def poll_all(*members: Member) -> Callable[[], None]:
    def poll() -> None:
        for member in members:
            member.poll()

    return poll


def test_confluent_static_member_restart_and_fencing(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=PARTITIONS)
    group = unique_topic("static-confluent")
    first = Member(cluster, group, "instance-a", topic)
    second = Member(cluster, group, "instance-b", topic)
    both = poll_all(first, second)
    wait_until(
        lambda: len(first.assigned()) == len(second.assigned()) == PARTITIONS // 2,
        both,
        "both members own half the partitions",
    )
    owned_first, owned_second = first.assigned(), second.assigned()
    assert owned_first | owned_second == frozenset(range(PARTITIONS))
    events_before = list(second.events)
    first.consumer.close()  # a static member sends no LeaveGroup

    restarted = Member(cluster, group, "instance-a", topic)
    wait_until(lambda: bool(restarted.assigned()), poll_all(restarted, second), "restarted")
    assert restarted.assigned() == owned_first
    deadline = time.monotonic() + QUIET_S
    while time.monotonic() < deadline:
        poll_all(restarted, second)()
    assert second.events == events_before  # no revoke, no new assignment
    assert second.assigned() == owned_second
    assert not restarted.errors and not second.errors

    duplicate = Member(cluster, group, "instance-b", topic)
    try:
        everyone = poll_all(restarted, second, duplicate)
        wait_until(second.fenced, everyone, f"instance-b is fenced: {second.errors}")
        wait_until(lambda: bool(duplicate.assigned()), everyone, "the duplicate is assigned")
        assert duplicate.assigned() == owned_second
        assert restarted.assigned() == owned_first and not restarted.errors
    finally:
        for member in (restarted, second, duplicate):
            member.consumer.close()


# ------------------------------------------------------------------ kafka-python


class Recorder(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoke", frozenset(tp.partition for tp in revoked)))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assign", frozenset(tp.partition for tp in assigned)))


def kafka_python_member(
    cluster: DevCluster, group: str, instance: str, topic: str, listener: Recorder | None = None
) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap(cluster),
        group_id=group,
        group_instance_id=instance,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=500,
        enable_auto_commit=False,
    )
    consumer.subscribe([topic], listener=listener or Recorder())
    # The member knows the topic's partitions before it joins. Otherwise a leader's first
    # assignment is made without them and the metadata that follows makes it rejoin; kafka-python
    # 3.0.12 loses such a rejoin when poll()'s timeout ends while its JoinGroup/SyncGroup is in
    # flight: the task completes unawaited, need_rejoin() turns False (the assignment snapshot
    # now equals the metadata), so the assignment is never applied nor the heartbeat re-enabled
    # (seen in CI, and in 1 of 5 forced rejoins on a loaded machine).
    assert consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
    return consumer


def starts(topic: str, partitions: frozenset[int]) -> dict[KafkaPartition, OffsetAndMetadata]:
    """Offset 0 of each partition: a commit that is sent even though nothing was consumed."""
    return {KafkaPartition(topic, p): OffsetAndMetadata(0, "", -1) for p in partitions}


def owned(consumer: KafkaConsumer) -> frozenset[int]:
    return frozenset(tp.partition for tp in consumer.assignment())


def test_kafka_python_static_member_restart_and_fencing(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=PARTITIONS)
    group = unique_topic("static-kafka-python")
    listener = Recorder()

    def poll(*consumers: KafkaConsumer) -> Callable[[], None]:
        def each() -> None:
            for consumer in consumers:
                # Long polls: a rebalance's JoinGroup/SyncGroup round then ends within the poll
                # that began it. One that outlives its poll is lost by kafka-python 3.0.12 (see
                # kafka_python_member): the next poll finds its task done and sends a new
                # JoinGroup, a new rebalance, which with 100 ms polls on a loaded CI machine
                # could repeat until the test timed out ("both members own half").
                consumer.poll(timeout_ms=POLL_MS)

        return each

    # The first member is stable before the second joins. Joining both at once, kafka-python
    # 3.0.12's first member sometimes left its next join task pending forever (seen on a 2nd-
    # generation rejoin racing the second member's join): its session expired, 1 run in 2-3.
    # Probably the lost rejoin described in kafka_python_member.
    first = kafka_python_member(cluster, group, "instance-a", topic)
    wait_until(lambda: len(owned(first)) == PARTITIONS, poll(first), "the first member owns all")
    second = kafka_python_member(cluster, group, "instance-b", topic, listener)
    wait_until(
        lambda: len(owned(first)) == len(owned(second)) == PARTITIONS // 2,
        poll(first, second),
        "both members own half the partitions",
    )
    owned_first, owned_second = owned(first), owned(second)
    events_before = list(listener.events)
    first.close()  # static: no LeaveGroup (kafka-python's is_dynamic_member)

    restarted = kafka_python_member(cluster, group, "instance-a", topic)
    try:
        wait_until(lambda: bool(owned(restarted)), poll(restarted, second), "restarted")
        assert owned(restarted) == owned_first
        deadline = time.monotonic() + QUIET_S
        while time.monotonic() < deadline:
            poll(restarted, second)()
        assert listener.events == events_before
        assert owned(second) == owned_second
        second.commit(starts(topic, owned_second))  # still the holder of instance-b

        duplicate = kafka_python_member(cluster, group, "instance-b", topic)
        try:
            wait_until(lambda: bool(owned(duplicate)), poll(restarted, duplicate), "duplicate")
            assert owned(duplicate) == owned_second
            with pytest.raises(FencedInstanceIdError):
                second.commit(starts(topic, owned_second))
        finally:
            duplicate.close()
    finally:
        restarted.close()
        second.close()
