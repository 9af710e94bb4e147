"""The log cleaner in a real broker (issue 14): a compacted topic written with many updates over
1,000 keys shrinks to about one record per key once cleaned, and a consumer reading from the
start sees the latest value of every key (Kafka's LogCleanerIntegrationTest, end to end through
confluent-kafka). ``__consumer_offsets`` stays bounded under a long commit loop.

The issue's 1,000,000 updates by default (about 10 s of the test's time here: lz4 batches of
~9,000 records, cleaned while they are produced); ``PYKRAFT_COMPACTION_UPDATES`` sets another
count, ``PYKRAFT_COMPACTION_TIMEOUT_S`` the waits (120 s).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.cimpl import NewTopic

from pykraft.storage.cleaner_batches import read_batch
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from tests.clients.conftest import DevCluster
from tests.clients.support import metadata, unique_topic

pytestmark = pytest.mark.integration

KEYS = 1_000
UPDATES = int(os.environ.get("PYKRAFT_COMPACTION_UPDATES", "1000000"))
TIMEOUT_S = float(os.environ.get("PYKRAFT_COMPACTION_TIMEOUT_S", "120"))
SEGMENT_MS = 2_000  # the active segment rolls on the first append after this
PROPERTIES = (
    "--broker-property", "log.cleaner.backoff.ms=200",
    "--broker-property", "group.initial.rebalance.delay.ms=0",
)  # fmt: skip


@pytest.fixture(scope="module")
def compaction_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    dev = DevCluster(
        tmp_path_factory.mktemp("compaction") / "cluster",
        controllers=1,
        brokers=1,
        extra_args=PROPERTIES,
    )
    try:
        dev.start()
        dev.wait_ready()
        yield dev
    finally:
        dev.stop()


def eventually(check: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} after {timeout_s}s"
        time.sleep(0.25)


def partition_dir(cluster: DevCluster, topic: str, partition: int = 0) -> Path:
    [found] = cluster.data_dir.glob(f"*/{topic}-{partition}")
    return found


def log_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("*.log"))


def cleaned_up_to(directory: Path) -> int:
    """The partition's first dirty offset in its log dir's cleaner-offset-checkpoint."""
    path = directory.parent / "cleaner-offset-checkpoint"
    if not path.exists():
        return -1
    topic, partition = directory.name.rsplit("-", 1)
    for line in path.read_text().splitlines()[2:]:
        name, number, offset = line.split()
        if (name, number) == (topic, partition):
            return int(offset)
    return -1


def produce_updates(cluster: DevCluster, topic: str) -> dict[bytes, bytes]:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
        }
    )
    latest: dict[bytes, bytes] = {}
    for update in range(UPDATES):
        key, value = b"key-%d" % (update % KEYS), b"value-%d" % update
        latest[key] = value
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(TIMEOUT_S) == 0
    # After segment.ms, one more record rolls the segment holding the last updates away from
    # the active one: the cleaner never cleans the active segment.
    time.sleep(SEGMENT_MS / 1000 + 0.5)
    producer.produce(topic, b"sentinel", b"sentinel")
    assert producer.flush(TIMEOUT_S) == 0
    latest[b"sentinel"] = b"sentinel"
    return latest


def read_all(cluster: DevCluster, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": unique_topic("reader"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    records: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                return records
            assert error is None, error
            records.append((message.key(), message.value()))
        raise AssertionError(f"no end of {topic} after {TIMEOUT_S}s ({len(records)} read)")
    finally:
        consumer.close()


def test_compacted_topic_shrinks_to_the_latest_value_of_each_key(
    compaction_cluster: DevCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": compaction_cluster.bootstrap_servers})
    topic = unique_topic("compacted")
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(1024 * 1024),
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
    }
    new = NewTopic(topic, num_partitions=1, replication_factor=1, config=configs)
    futures = admin.create_topics([new], operation_timeout=TIMEOUT_S)
    assert futures[topic].result(timeout=TIMEOUT_S) is None
    compaction_cluster.wait_for_topic(topic, 1)
    latest = produce_updates(compaction_cluster, topic)
    directory = partition_dir(compaction_cluster, topic)
    # Cleaned up to the sentinel (the active segment's first record): the cleaner says so in its
    # checkpoint (Kafka's cleaner-offset-checkpoint) once the swap is done.
    eventually(lambda: cleaned_up_to(directory) >= UPDATES, f"{directory} cleaned")
    records = read_all(compaction_cluster, topic)
    assert dict(records) == latest, "a reader from the start sees every key's latest value"
    assert len(records) <= len(latest) + 10, f"{len(records)} records left of {UPDATES}"
    assert log_bytes(directory) < 100 * len(latest), "about one record's bytes per key"


def test_consumer_offsets_stay_bounded_under_a_commit_loop(
    compaction_cluster: DevCluster,
) -> None:
    """Every commit of one group rewrites the same few keys of ``__consumer_offsets``; with a
    small ``segment.bytes`` (set as an operator would) its partition stops growing."""
    admin = AdminClient({"bootstrap.servers": compaction_cluster.bootstrap_servers})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "__consumer_offsets",
        incremental_configs=[
            ConfigEntry(
                "segment.bytes", str(64 * 1024), incremental_operation=AlterConfigOpType.SET
            ),
            ConfigEntry("segment.ms", "1000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "min.cleanable.dirty.ratio", "0.1", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    topic = unique_topic("committed")
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    compaction_cluster.wait_for_topic(topic, 1)
    group = unique_topic("committer")
    consumer = Consumer(
        {
            "bootstrap.servers": compaction_cluster.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=TIMEOUT_S)
        directories = [p for p in compaction_cluster.data_dir.glob("*/__consumer_offsets-*")]
        sizes: list[int] = []
        for offset in range(2, 6_002):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            if offset % 1_000 == 0:
                sizes.append(sum(log_bytes(d) for d in directories))
        total_written = 6_000 * 100  # bytes of commit records, at the least
        time.sleep(1.5)
        consumer.commit(offsets=[TopicPartition(topic, 0, 9_999)], asynchronous=False)
        eventually(
            lambda: sum(log_bytes(d) for d in directories) < 4 * 64 * 1024,
            "__consumer_offsets cleaned",
        )
        assert max(sizes) < total_written, f"never bounded: {sizes}"
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed[0].offset == 9_999
    finally:
        consumer.close()


def test_a_follower_behind_the_cleaned_region_catches_up(tmp_path: Path) -> None:
    """A follower paused while its leader compacts resumes from an offset the cleaner removed,
    replicates the gaps as they are (Kafka's follower append), rejoins the ISR, and its files
    then hold every key's latest value."""
    dev = DevCluster(
        tmp_path / "cluster",
        controllers=1,
        brokers=2,
        extra_args=(*PROPERTIES, "--broker-property", "replica.lag.time.max.ms=3000"),
    )
    try:
        dev.start()
        dev.wait_ready()
        admin = AdminClient({"bootstrap.servers": dev.bootstrap_servers})
        topic = unique_topic("replicated")
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(64 * 1024),
            "min.cleanable.dirty.ratio": "0.01",
        }
        futures = admin.create_topics([NewTopic(topic, 1, 2, config=configs)])
        assert futures[topic].result(timeout=TIMEOUT_S) is None
        dev.wait_for_topic(topic, 1)
        leader = partition_state(dev, topic)[0]
        [follower] = [node for node in dev.brokers if node != leader]
        pids = {int(b["node_id"]): int(b["pid"]) for b in dev.info()["brokers"]}
        latest = {b"key-%d" % k: b"first-%d" % k for k in range(KEYS)}
        produce_all(dev, topic, list(latest.items()))
        os.kill(pids[follower], signal.SIGSTOP)
        try:
            eventually(lambda: partition_state(dev, topic)[1] == [leader], "the ISR shrank")
            updates = [(b"key-%d" % (i % KEYS), b"value-%d" % i) for i in range(50_000)]
            produce_all(dev, topic, updates, acks="1")
            latest.update(updates)
            leader_dir = dev.data_dir / f"broker-{leader}" / f"{topic}-0"
            eventually(lambda: cleaned_up_to(leader_dir) > KEYS, "the leader cleaned")
        finally:
            os.kill(pids[follower], signal.SIGCONT)
        eventually(lambda: sorted(partition_state(dev, topic)[1]) == sorted(dev.brokers), "ISR")
    finally:
        dev.stop()
    # The follower's own files (a copy, opened as its broker would) hold every latest value.
    copy = tmp_path / "follower-copy" / f"{topic}-0"
    shutil.copytree(dev.data_dir / f"broker-{follower}" / f"{topic}-0", copy)
    replica = PartitionLog.open(copy, LogConfig())
    assert latest_values(replica) == latest
    replica.close()


def latest_values(log: PartitionLog) -> dict[bytes | None, bytes | None]:
    latest: dict[bytes | None, bytes | None] = {}
    for segment in log.local_log.segments:
        for location in segment.iter_headers():
            data = segment.read_batch(location)
            if not location.header.is_control:
                latest.update((r.key, r.value) for r in read_batch(data)[1])
    return latest


def partition_state(cluster: DevCluster, topic: str) -> tuple[int, list[int]]:
    """(leader, ISR) of partition 0 as a broker that answers sees it."""
    for port in cluster.broker_ports:
        try:
            answer = metadata(port, [topic])
        except OSError:
            continue
        [partition] = answer.topics[0].partitions
        return int(partition.leader_id), list(partition.isr_nodes)
    raise AssertionError("no broker answers Metadata")


def produce_all(
    cluster: DevCluster, topic: str, records: list[tuple[bytes, bytes]], acks: str = "all"
) -> None:
    """Every record delivered (batches stay well under the topic's 64 KiB segment.bytes)."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "linger.ms": 20,
            "batch.size": 16_384,
            "acks": acks,
        }
    )
    errors: list[object] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            errors.append(error)

    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [], errors[:3]
