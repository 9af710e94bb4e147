"""confluent-kafka (librdkafka 2.16) with ``group.protocol=consumer`` (KIP-848) against a real
pykraft cluster, as Kafka's ``PlaintextConsumerTest`` / ``ConsumerGroupHeartbeatRequestTest`` run
the consumer protocol: members join one by one and the partitions spread evenly, assignment moves
incrementally (a member's partitions that do not move are never revoked, seen through the
``on_assign`` / ``on_revoke`` callbacks), committed offsets are where a restarted group resumes,
and a regular-expression subscription picks up a topic created after it.

The session cluster runs ``group.consumer.heartbeat.interval.ms=500`` (and its minimum), as
Kafka's own consumer-protocol integration tests set it, so each reconciliation step takes
about half a second instead of five.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic

pytestmark = pytest.mark.clients

PARTITIONS = 6
TIMEOUT_S = 30.0
POLL_S = 0.05


def create_topic(cluster: DevCluster, name: str, partitions: int = PARTITIONS) -> str:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)],
        operation_timeout=TIMEOUT_S,
        request_timeout=TIMEOUT_S,
    )
    assert futures[name].result(timeout=TIMEOUT_S) is None
    cluster.wait_for_topic(name, partitions)
    return name


def produce(cluster: DevCluster, topic: str, per_partition: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for partition in range(PARTITIONS):
        for index in range(per_partition):
            producer.produce(
                topic, value=f"{tag}-{partition}-{index}".encode(), partition=partition
            )
    assert producer.flush(TIMEOUT_S) == 0


class Member:
    """One consumer-protocol consumer and what its rebalance callbacks told it."""

    def __init__(self, cluster: DevCluster, group: str, name: str, **config: Any) -> None:
        self.name = name
        self.owned: set[tuple[str, int]] = set()
        self.revoked: list[set[tuple[str, int]]] = []
        self.assigned: list[set[tuple[str, int]]] = []
        self.read: list[tuple[str, int, int, bytes]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "group.protocol": "consumer",
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": False,
                **config,
            }
        )

    def subscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        added = {(p.topic, p.partition) for p in partitions}
        assert not added & self.owned, f"{self.name} was given {added & self.owned} again"
        self.assigned.append(added)
        self.owned |= added

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        removed = {(p.topic, p.partition) for p in partitions}
        self.revoked.append(removed)
        self.owned -= removed

    def poll(self) -> None:
        record = self.consumer.poll(POLL_S)
        if record is None:
            return
        assert record.error() is None, f"{self.name}: {record.error()}"
        topic, partition, offset, value = (
            record.topic(),
            record.partition(),
            record.offset(),
            record.value(),
        )
        assert topic is not None and partition is not None and offset is not None
        assert isinstance(value, bytes)
        self.read.append((topic, partition, offset, value))

    def close(self) -> None:
        self.consumer.close()


def poll_until(members: list[Member], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for member in members:
            member.poll()
        if done():
            return
    owned = {m.name: sorted(m.owned) for m in members}
    raise AssertionError(f"not {what} within {TIMEOUT_S}s: {owned}")


def spread(members: list[Member], topic: str, sizes: list[int]) -> Callable[[], bool]:
    def check() -> bool:
        owned = [m.owned for m in members]
        union = set().union(*owned)
        return (
            sorted(len(o) for o in owned) == sorted(sizes)
            and union == {(topic, p) for p in range(PARTITIONS)}
            and sum(len(o) for o in owned) == PARTITIONS
        )

    return check


def test_members_join_spread_evenly_move_incrementally_and_resume_from_commits(
    cluster: DevCluster,
) -> None:
    topic = create_topic(cluster, unique_topic("kip848"))
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    produce(cluster, topic, 5, "first")
    first, second, third = (Member(cluster, group, f"member-{n}") for n in (1, 2, 3))
    members = [first]
    try:
        first.subscribe([topic])
        poll_until(members, spread(members, topic, [6]), "all six partitions with one member")

        for joining, sizes in ((second, [3, 3]), (third, [2, 2, 2])):
            before = {m.name: set(m.owned) for m in members}
            revoked_before = {m.name: len(m.revoked) for m in members}
            joining.subscribe([topic])
            members.append(joining)
            poll_until(members, spread(members, topic, sizes), f"spread as {sizes}")
            for member in members[:-1]:
                # Incremental: only what moved was revoked; what it kept it held throughout.
                revoked = set().union(*member.revoked[revoked_before[member.name] :])
                assert revoked == before[member.name] - member.owned
                assert member.owned <= before[member.name]
            assert not joining.revoked

        def distinct() -> set[tuple[int, int]]:
            return {(p, offset) for m in members for _, p, offset, _ in m.read}

        def caught_up() -> bool:
            """Each owner has read its partitions to the end (a partition that moved is read
            again by its new owner: nothing was committed yet)."""
            return all(
                (p, 4) in {(rp, offset) for _, rp, offset, _ in m.read}
                for m in members
                for _, p in m.owned
            )

        poll_until(members, caught_up, "every partition read to its end by its owner")
        assert distinct() == {(p, offset) for p in range(PARTITIONS) for offset in range(5)}
        for member in members:
            member.consumer.commit(asynchronous=False)
    finally:
        for member in (first, second, third):
            member.close()

    produce(cluster, topic, 1, "second")
    resumed = Member(cluster, group, "member-4")
    try:
        resumed.subscribe([topic])
        poll_until([resumed], lambda: len(resumed.read) >= 6, "the six new records read")
        time.sleep(0.5)
        resumed.poll()
        assert sorted(v for _, _, _, v in resumed.read) == sorted(
            f"second-{p}-0".encode() for p in range(PARTITIONS)
        )
    finally:
        resumed.close()


def test_a_regex_subscription_picks_up_a_topic_created_later(cluster: DevCluster) -> None:
    prefix = f"topic-{uuid.uuid4().hex[:8]}"
    early = create_topic(cluster, f"{prefix}-early", partitions=2)
    member = Member(
        cluster,
        f"regex-{uuid.uuid4().hex[:8]}",
        "regex",
        **{"topic.metadata.refresh.interval.ms": 1000},
    )
    try:
        member.subscribe([f"^{prefix}-.*"])
        poll_until([member], lambda: member.owned == {(early, 0), (early, 1)}, "the early topic")
        late = create_topic(cluster, f"{prefix}-late", partitions=2)
        expected = {(early, 0), (early, 1), (late, 0), (late, 1)}
        poll_until([member], lambda: member.owned == expected, "the late topic too")
        assert not member.revoked  # the early topic's partitions never moved
    finally:
        member.close()


def test_a_classic_group_restarted_with_the_consumer_protocol_resumes_from_its_offsets(
    cluster: DevCluster,
) -> None:
    """The issue's conversion, as pykraft does it: the classic members leave, the same group id
    comes back with ``group.protocol=consumer`` and reads on from the classic commits (online
    conversion with both kinds of members at once is not built)."""
    topic = create_topic(cluster, unique_topic("convert"))
    group = f"convert-{uuid.uuid4().hex[:8]}"
    produce(cluster, topic, 2, "before")
    classic = Member(cluster, group, "classic", **{"group.protocol": "classic"})
    try:
        classic.subscribe([topic])
        poll_until([classic], lambda: len(classic.read) == 12, "the classic member reads all")
        classic.consumer.commit(asynchronous=False)
    finally:
        classic.close()
    produce(cluster, topic, 1, "after")
    converted = Member(cluster, group, "converted")
    try:
        converted.subscribe([topic])
        poll_until([converted], lambda: len(converted.read) >= 6, "the new records read")
        time.sleep(0.5)
        converted.poll()
        assert sorted(v for _, _, _, v in converted.read) == sorted(
            f"after-{p}-0".encode() for p in range(PARTITIONS)
        )
    finally:
        converted.close()


def test_a_static_member_restarted_in_time_gets_its_partitions_back_without_a_rebalance(
    cluster: DevCluster,
) -> None:
    """KIP-345 in the consumer protocol: closing sends member epoch -2, the member keeps its
    place for the session timeout; its restart (a new member id, same ``group.instance.id``)
    takes its partitions back and the other member sees no revocation or assignment."""
    topic = create_topic(cluster, unique_topic("static"))
    group = f"static-{uuid.uuid4().hex[:8]}"
    first = Member(cluster, group, "static-a", **{"group.instance.id": "instance-a"})
    second = Member(cluster, group, "static-b", **{"group.instance.id": "instance-b"})
    restarted: Member | None = None
    first_open = True
    try:
        first.subscribe([topic])
        poll_until([first], spread([first], topic, [6]), "six partitions for the first")
        second.subscribe([topic])
        poll_until([first, second], spread([first, second], topic, [3, 3]), "spread as 3/3")
        kept, events = set(first.owned), (len(second.assigned), len(second.revoked))
        first.close()
        first_open = False
        restarted = Member(cluster, group, "static-a2", **{"group.instance.id": "instance-a"})
        restarted.subscribe([topic])
        poll_until([restarted, second], lambda: restarted.owned == kept, "its partitions back")
        assert (len(second.assigned), len(second.revoked)) == events
    finally:
        for member in (first if first_open else None, second, restarted):
            if member is not None:
                member.close()


def test_a_rolling_restart_upgrades_a_classic_group_online(cluster: DevCluster) -> None:
    """KIP-848's online upgrade: two classic members; one restarts with the consumer protocol
    while the other still runs (the group converts, the classic member is driven through its
    JoinGroup/SyncGroup), then the other; the records are consumed once from the commits."""
    topic = create_topic(cluster, unique_topic("rolling"))
    group = f"rolling-{uuid.uuid4().hex[:8]}"
    produce(cluster, topic, 2, "old")
    classic = [
        Member(cluster, group, f"classic-{n}", **{"group.protocol": "classic"}) for n in (1, 2)
    ]
    upgraded: list[Member] = []
    open_members = list(classic)

    def read_to_end(members: list[Member], per_partition: int) -> None:
        def done() -> bool:
            return all(
                (p, per_partition - 1) in {(rp, o) for _, rp, o, _ in m.read}
                for m in members
                for _, p in m.owned
            )

        poll_until(members, done, "every owned partition read to its end")
        for member in members:
            member.consumer.commit(asynchronous=False)

    def restart(old: Member, name: str) -> None:
        running = [m for m in open_members if m is not old]
        old.close()
        open_members.remove(old)
        # The survivors take the partitions over (a classic rebalance, or a reassignment).
        poll_until(
            running, spread(running, topic, [6] if len(running) == 1 else [3, 3]), "taken over"
        )
        new = Member(cluster, group, name)
        new.subscribe([topic])
        open_members.append(new)
        upgraded.append(new)
        poll_until(open_members, spread(open_members, topic, [3, 3]), "spread over old and new")

    try:
        for member in classic:
            member.subscribe([topic])
        poll_until(classic, spread(classic, topic, [3, 3]), "the classic group spread")
        read_to_end(classic, 2)
        restart(classic[0], "upgraded-1")
        restart(classic[1], "upgraded-2")
        produce(cluster, topic, 1, "new")
        read_to_end(upgraded, 3)
        # Everything old was committed before the restarts: only the new records are read.
        values = [v for m in upgraded for _, _, _, v in m.read]
        assert sorted(values) == sorted(f"new-{p}-0".encode() for p in range(PARTITIONS))
    finally:
        for member in open_members:
            member.close()


def test_a_classic_member_joins_a_consumer_group_and_keeps_the_group_when_alone(
    cluster: DevCluster,
) -> None:
    """The other direction: a classic consumer joins a consumer group (served through its
    JoinGroup/SyncGroup), and when the consumer-protocol member leaves the group becomes
    classic again (``group.consumer.migration.policy=bidirectional``) and it takes all six."""
    topic = create_topic(cluster, unique_topic("downgrade"))
    group = f"downgrade-{uuid.uuid4().hex[:8]}"
    modern = Member(cluster, group, "modern")
    classic = Member(cluster, group, "classic", **{"group.protocol": "classic"})
    modern_open = True
    try:
        modern.subscribe([topic])
        poll_until([modern], spread([modern], topic, [6]), "six for the consumer member")
        classic.subscribe([topic])
        poll_until([modern, classic], spread([modern, classic], topic, [3, 3]), "spread as 3/3")
        modern.close()
        modern_open = False
        poll_until([classic], spread([classic], topic, [6]), "six for the classic member")
    finally:
        classic.close()
        if modern_open:
            modern.close()


def test_offsets_sent_in_a_transaction_by_a_consumer_protocol_member(cluster: DevCluster) -> None:
    """KIP-447 with KIP-848: TxnOffsetCommit carries the member id and member epoch of
    ``consumer_group_metadata()``; the offsets land with the commit, an abort drops them."""
    topic = create_topic(cluster, unique_topic("eos"))
    group = f"eos-{uuid.uuid4().hex[:8]}"
    produce(cluster, topic, 2, "in")
    member = Member(cluster, group, "eos", **{"isolation.level": "read_committed"})
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"eos-{group}"}
    )
    try:
        producer.init_transactions(TIMEOUT_S)
        member.subscribe([topic])
        poll_until([member], lambda: len(member.read) == 12, "all twelve read")
        positions = member.consumer.position(member.consumer.assignment())
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            positions, member.consumer.consumer_group_metadata(), TIMEOUT_S
        )
        producer.commit_transaction(TIMEOUT_S)
        committed = member.consumer.committed(positions, TIMEOUT_S)
        assert {(p.partition, p.offset) for p in committed} == {(p, 2) for p in range(PARTITIONS)}
        producer.begin_transaction()
        ahead = [TopicPartition(topic, p, 7) for p in range(PARTITIONS)]
        producer.send_offsets_to_transaction(
            ahead, member.consumer.consumer_group_metadata(), TIMEOUT_S
        )
        producer.abort_transaction(TIMEOUT_S)
        again = member.consumer.committed(positions, TIMEOUT_S)
        assert {(p.partition, p.offset) for p in again} == {(p, 2) for p in range(PARTITIONS)}
    finally:
        member.close()
