"""Consumer groups end to end against a real ``pykraft dev --controllers 1 --brokers 1`` cluster.

kafka-python's KafkaConsumer and confluent-kafka's Consumer with a ``group.id`` find the
coordinator (the broker creates ``__consumer_offsets`` on the first FindCoordinator), join,
read every record produced, and commit. A second consumer in the group triggers a rebalance and
the partitions are split between the two. A consumer started again in the group resumes from
the committed offsets, and so does one after the whole cluster restarted: the offsets were
loaded back from ``__consumer_offsets``. The cluster always stops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPartition

from pykraft.protocol.java_hash import java_string_hash, kafka_abs
from tests.integration.conftest import ROOT, http
from tests.integration.test_dev_cluster import kill_everything, start_dev

pytestmark = pytest.mark.integration

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60
GROUP_TIMEOUT_S = 45.0
PARTITIONS = 4
# Small and quick: 3 offsets partitions, a short initial rebalance delay.
BROKER_PROPERTIES = (
    "offsets.topic.num.partitions=3",
    "group.initial.rebalance.delay.ms=200",
)


class DevCluster:
    def __init__(self, data_dir: Path, brokers: int = 1) -> None:
        self.data_dir = data_dir
        self.brokers = brokers
        self.process = self._start()

    def _start(self) -> subprocess.Popen[str]:
        extra = [arg for prop in BROKER_PROPERTIES for arg in ("--broker-property", prop)]
        if self.brokers == 1:
            return start_dev(self.data_dir, *extra)
        out = open(self.data_dir.parent / "dev.out", "a")  # noqa: SIM115 - handed to the child
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pykraft.dev",
                "--controllers",
                "1",
                "--brokers",
                str(self.brokers),
                "--base-port",
                "0",
                "--data-dir",
                str(self.data_dir),
                *extra,
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        out.close()
        return process

    @property
    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = json.loads((self.data_dir / "cluster.json").read_text())
        return info

    @property
    def bootstrap(self) -> str:
        return str(self.info["bootstrap_servers"])

    def output(self) -> str:
        return (self.data_dir.parent / "dev.out").read_text()

    def wait_ready(self, runs: int = 1) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.output().count("Press Ctrl-C to stop.") < runs:
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.1)

    def restart(self) -> None:
        """SIGTERM (controlled shutdown), then the same data directory again."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(STOP_TIMEOUT_S) == 0
        self.process = self._start()
        self.wait_ready(runs=2)

    def create_topic(self, name: str, replication_factor: int = 1) -> None:
        http(
            "POST",
            self.info["admin_url"] + "/v1/topics",
            {"name": name, "partitions": PARTITIONS, "replication_factor": replication_factor},
        )

    def leader_of(self, topic: str, partition: int) -> int:
        described = http("GET", self.info["admin_url"] + f"/v1/topics/{topic}")
        leaders = {p["partition"]: p["leader"] for p in described["partitions"]}
        return int(leaders[partition])


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    cluster = DevCluster(tmp_path_factory.mktemp("groups") / "cluster")
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        kill_everything(cluster.data_dir, cluster.process)


def produce(dev: DevCluster, topic: str, values: range, bootstrap: str | None = None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap or dev.bootstrap, linger_ms=5, acks="all")
    try:
        for i in values:
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def expected(values: range) -> list[bytes]:
    return sorted(b"v%d" % i for i in values)


# ------------------------------------------------------------------ kafka-python


def kafka_python_consumer(dev: DevCluster, topic: str, group: str) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=dev.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=1000,
    )
    consumer.subscribe([topic])
    return consumer


def read_kafka_python(consumer: KafkaConsumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(record.value for record in records)
    return values


def poll_until_split(consumers: Sequence[KafkaConsumer], topic: str) -> list[bytes]:
    """Poll each member from its own thread, as applications do, until their assignments split
    ``topic``'s partitions between them (or GROUP_TIMEOUT_S passes); returns what they read.

    Not one thread taking turns: kafka-python 3.0 runs a member's JoinGroup/SyncGroup on its IO
    thread and, when that finished while no ``poll()`` of the member was waiting (it was the
    other member's turn), discards the result and sends a fresh JoinGroup
    (``BaseCoordinator.join_group_async`` replaces any done ``_join_task``). From the leader of a
    Stable group that starts another rebalance (Kafka's ``GroupCoordinator.handleJoinGroup``),
    which the next turn repeats: the leader keeps its old assignment for good."""
    lock = threading.Lock()
    stop = threading.Event()
    read: list[bytes] = []
    errors: list[BaseException] = []
    # Each member's assignment after its last poll: it only changes inside poll() (on the IO
    # thread, in place), so the member's own thread reads it and the test's reads this copy.
    assignments: list[set[KafkaPartition]] = [set() for _ in consumers]

    def run(index: int, consumer: KafkaConsumer) -> None:
        try:
            while not stop.is_set():
                polled = consumer.poll(timeout_ms=200)
                with lock:
                    read.extend(record.value for records in polled.values() for record in records)
                    assignments[index] = consumer.assignment()
        except BaseException as error:  # re-raised by the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=item) for item in enumerate(consumers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    try:
        while time.monotonic() < deadline and not errors:
            with lock:
                if _split(assignments, topic):
                    break
            time.sleep(0.1)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return read


def _split(assignments: Sequence[set[KafkaPartition]], topic: str) -> bool:
    covered = set().union(*assignments)
    disjoint = sum(len(a) for a in assignments) == len(covered)
    return all(assignments) and disjoint and covered == _partitions(topic)


def _partitions(topic: str) -> set[KafkaPartition]:
    return {KafkaPartition(topic, p) for p in range(PARTITIONS)}


def test_kafka_python_group_reads_commits_rebalances_and_resumes(dev: DevCluster) -> None:
    topic, group = "kp-events", "kp-readers"
    dev.create_topic(topic)
    produce(dev, topic, range(200))
    first = kafka_python_consumer(dev, topic, group)
    second: KafkaConsumer | None = None
    try:
        assert sorted(read_kafka_python(first, 200)) == expected(range(200))
        first.commit()
        assert first.assignment() == _partitions(topic)
        # A second member: the group rebalances and splits the partitions.
        second = kafka_python_consumer(dev, topic, group)
        # Nothing is read twice: the second consumer starts from the committed offsets.
        assert poll_until_split([first, second], topic) == []
        assert first.assignment() and second.assignment()
        assert first.assignment() | second.assignment() == _partitions(topic)
        assert first.assignment().isdisjoint(second.assignment())
        assert second.poll(timeout_ms=500) == {}
    finally:
        first.close()
        if second is not None:
            second.close()
    produce(dev, topic, range(200, 250))
    resumed = kafka_python_consumer(dev, topic, group)
    try:
        assert sorted(read_kafka_python(resumed, 50)) == expected(range(200, 250))
        committed = {p: resumed.committed(KafkaPartition(topic, p)) for p in range(PARTITIONS)}
        assert sum(committed.values()) == 200
    finally:
        resumed.close()


def test_kafka_python_leader_whose_join_completed_between_polls_still_splits(
    dev: DevCluster,
) -> None:
    """How test_kafka_python_group_reads_commits_rebalances_and_resumes once failed in the full
    suite: the leader's JoinGroup/SyncGroup round trip finished while it was not in poll(), so
    kafka-python joined again and, being the leader of a Stable group, started another
    rebalance (``poll_until_split``). Here that is made to happen once; the members must still
    split the partitions, in one more generation, not rebalance on and on."""
    topic, group = "kp-between-polls", "kp-between-polls-readers"
    dev.create_topic(topic)
    first = kafka_python_consumer(dev, topic, group)
    second: KafkaConsumer | None = None
    try:
        wait_for(lambda: not first.poll(timeout_ms=200) and bool(first.assignment()))
        assert first.assignment() == _partitions(topic)
        generation = first._coordinator._generation.generation_id  # first leads it alone
        second = kafka_python_consumer(dev, topic, group)
        second.poll(timeout_ms=200)  # its JoinGroup starts the rebalance
        # kafka-python internals: the leader's heartbeat has seen the rebalance ...
        wait_for(first._coordinator.need_rejoin)
        # ... its JoinGroup goes out and completes the next generation while nobody polls it.
        first.poll(timeout_ms=1)
        join = first._coordinator._join_task
        assert join is not None
        wait_for(lambda: join.is_done)
        assert poll_until_split([first, second], topic) == []
        assert _split([first.assignment(), second.assignment()], topic)
        # The rebalance the leader's second JoinGroup started ends it (one more when a member
        # misses its own join between two polls after all, as a busy GIL may make it do).
        assert first._coordinator._generation.generation_id - generation in (2, 3)
    finally:
        first.close()
        if second is not None:
            second.close()


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# ------------------------------------------------------------------ confluent-kafka


def confluent_consumer(
    dev: DevCluster, topic: str, group: str, bootstrap: str | None = None
) -> ConfluentConsumer:
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap or dev.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10_000,
        }
    )
    consumer.subscribe([topic])
    return consumer


def read_confluent(consumer: ConfluentConsumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + GROUP_TIMEOUT_S
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        value = message.value()
        assert value is not None
        values.append(value)
    return values


def assigned(consumer: ConfluentConsumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_confluent_group_reads_commits_rebalances_and_resumes(dev: DevCluster) -> None:
    topic, group = "ck-events", "ck-readers"
    dev.create_topic(topic)
    produce(dev, topic, range(100))
    first = confluent_consumer(dev, topic, group)
    second: ConfluentConsumer | None = None
    try:
        assert sorted(read_confluent(first, 100)) == expected(range(100))
        first.commit(asynchronous=False)
        second = confluent_consumer(dev, topic, group)
        deadline = time.monotonic() + GROUP_TIMEOUT_S
        while time.monotonic() < deadline and not (
            assigned(first) and assigned(second) and not assigned(first) & assigned(second)
        ):
            assert first.poll(0.2) is None  # nothing left to read: all was committed
            assert second.poll(0.2) is None
        assert assigned(first) | assigned(second) == set(range(PARTITIONS))
        assert assigned(first) and assigned(second)
        assert not assigned(first) & assigned(second)
    finally:
        first.close()
        if second is not None:
            second.close()
    produce(dev, topic, range(100, 130))
    resumed = confluent_consumer(dev, topic, group)
    try:
        assert sorted(read_confluent(resumed, 30)) == expected(range(100, 130))
    finally:
        resumed.close()


# ------------------------------------------------------------------ persistence


def test_committed_offsets_survive_a_cluster_restart(dev: DevCluster) -> None:
    topic, group = "restart-events", "restart-readers"
    dev.create_topic(topic)
    produce(dev, topic, range(40))
    consumer = kafka_python_consumer(dev, topic, group)
    try:
        assert len(read_kafka_python(consumer, 40)) == 40
        consumer.commit()
    finally:
        consumer.close()
    dev.restart()
    checker = ConfluentConsumer({"bootstrap.servers": dev.bootstrap, "group.id": group})
    try:
        partitions = [ConfluentPartition(topic, p) for p in range(PARTITIONS)]
        committed = checker.committed(partitions, timeout=GROUP_TIMEOUT_S)
        assert sum(tp.offset for tp in committed) == 40
    finally:
        checker.close()
    produce(dev, topic, range(40, 45))
    resumed = kafka_python_consumer(dev, topic, group)
    try:
        assert sorted(read_kafka_python(resumed, 5)) == expected(range(40, 45))
    finally:
        resumed.close()


# ------------------------------------------------------------------ coordinator failover


@pytest.fixture
def three_brokers(tmp_path: Path) -> Iterator[DevCluster]:
    cluster = DevCluster(tmp_path / "cluster", brokers=3)
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        kill_everything(cluster.data_dir, cluster.process)


def test_group_moves_to_a_new_coordinator_when_its_broker_dies(
    three_brokers: DevCluster,
) -> None:
    """kill -9 of the coordinator: the new leader of the group's ``__consumer_offsets``
    partition (RF 3) loads the committed offsets and the group resumes there."""
    dev, topic, group = three_brokers, "failover-events", "failover-readers"
    dev.create_topic(topic, replication_factor=3)
    produce(dev, topic, range(60))
    consumer = confluent_consumer(dev, topic, group)
    try:
        assert sorted(read_confluent(consumer, 60)) == expected(range(60))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    offsets_partition = kafka_abs(java_string_hash(group)) % 3
    coordinator = dev.leader_of("__consumer_offsets", offsets_partition)
    victim = next(b for b in dev.info["brokers"] if b["node_id"] == coordinator)
    os.kill(victim["pid"], signal.SIGKILL)
    survivors = ",".join(
        b["bootstrap_server"] for b in dev.info["brokers"] if b["node_id"] != coordinator
    )
    produce(dev, topic, range(60, 70), bootstrap=survivors)
    resumed = confluent_consumer(dev, topic, group, bootstrap=survivors)
    try:
        assert sorted(read_confluent(resumed, 10)) == expected(range(60, 70))
    finally:
        resumed.close()
    assert dev.leader_of("__consumer_offsets", offsets_partition) != coordinator
