"""Topic configs reach the partition logs: on the first image after a restart, and on every
later ConfigRecord (Kafka's ``BrokerMetadataPublisher``: ``ReplicaManager.applyDelta``, then
``DynamicConfigPublisher`` -> ``LogManager.updateTopicConfig`` -> ``UnifiedLog.updateConfig``).

Real ``LogManager``s in ``tmp_path``; metadata deltas replayed from real records.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.config import BrokerConfig
from pykraft.broker.metadata_publisher import BrokerMetadataPublisher
from pykraft.broker.replica_manager import RecordedFetcherManager, ReplicaManager
from pykraft.broker.server import BrokerServer
from pykraft.broker.topic_configs import changed_topic_configs, dynamic_broker_configs
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import local_changes
from pykraft.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pykraft.storage.log_config import CleanupPolicy, LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import (
    BIRDS_ID,
    LOCAL,
    NOW_MS,
    OTHER,
    PETS0,
    PETS_ID,
    broker,
    partition_record,
    replay,
)
from tests.fake_clock import FakeClock

# Small segments, so a few appends make several; Kafka's default retention.ms (7 days) and
# cleanup.policy (delete).
BROKER_DEFAULTS = LogConfig(segment_bytes=1024)
TOPIC = ConfigResourceType.TOPIC.value
BROKER = ConfigResourceType.BROKER.value
# Batches stamped at 1 s after the epoch are far past a 7-day retention at NOW_MS.
OLD_TIMESTAMP = 1000


def topic_config(topic: str, name: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=TOPIC, resource_name=topic, name=name, value=value)


def hosted_topics() -> list[MetadataRecord]:
    """pets-0 led here; birds-0 on the other broker only."""
    return [
        broker(LOCAL),
        broker(OTHER),
        TopicRecord(name="pets", topic_id=PETS_ID),
        partition_record(PETS_ID, 0, (LOCAL,)),
        TopicRecord(name="birds", topic_id=BIRDS_ID),
        partition_record(BIRDS_ID, 0, (OTHER,)),
    ]


class Broker:
    """A ReplicaManager over a LogManager opened on ``log_dir``, fed metadata the way
    ``BrokerServer`` feeds it: partitions first, then the changed topic configs."""

    def __init__(self, log_dir: Path, defaults: LogConfig = BROKER_DEFAULTS) -> None:
        self.log_manager = LogManager.open([log_dir], defaults, now_ms=0)
        self.replica_manager = ReplicaManager(
            broker_id=LOCAL,
            log_manager=self.log_manager,
            fetcher_manager=RecordedFetcherManager(),
            monotonic_ms=FakeClock().monotonic_ms,
        )
        self.image = MetadataImage.EMPTY

    def publish(self, delta: MetadataDelta) -> None:
        self.image = delta.apply()
        self.replica_manager.apply_delta(local_changes(delta, LOCAL), self.image, NOW_MS)
        self.replica_manager.update_topic_configs(
            changed_topic_configs(delta, self.image), self.image
        )

    def publish_records(self, *records: MetadataRecord) -> None:
        self.publish(replay(self.image, records))

    def start_from(self, image: MetadataImage) -> None:
        """What ``BrokerServer`` does once caught up: the whole image as one delta."""
        self.replica_manager.delete_stray_logs(image)
        self.publish(MetadataDelta.between(MetadataImage.EMPTY, image))

    def log(self, topic_partition: TopicPartition = PETS0) -> PartitionLog:
        log = self.log_manager.get_log(topic_partition)
        assert log is not None
        return log

    def produce_old_batches(self, count: int) -> None:
        for n in range(count):
            result = self.replica_manager.append_to_local_log(
                {PETS0: keyed_batch(b"v" * 200, timestamp=OLD_TIMESTAMP + n)},
                required_acks=1,
                now_ms=NOW_MS,
            )
            assert result[PETS0].error.name == "NONE"

    def close(self) -> None:
        self.replica_manager.shutdown()
        self.log_manager.shutdown()


def keyed_batch(value: bytes, timestamp: int) -> bytearray:
    """A one-record batch with a key: a compacted topic refuses keyless records."""
    return bytearray(build_batch([SimpleRecord(value, b"k", timestamp)]))


# ------------------------------------------------------------------ restart


def test_a_compact_topic_keeps_its_policy_after_a_restart(tmp_path: Path) -> None:
    first = Broker(tmp_path)
    first.publish_records(*hosted_topics(), topic_config("pets", "cleanup.policy", "compact"))
    assert first.log().config.cleanup_policy == {CleanupPolicy.COMPACT}
    first.produce_old_batches(12)
    image = first.image
    first.close()

    restarted = Broker(tmp_path)
    # Logs load before the metadata is read: with the broker defaults.
    assert restarted.log().config.cleanup_policy == {CleanupPolicy.DELETE}
    restarted.start_from(image)
    log = restarted.log()
    assert log.config == LogConfig.from_properties(
        {"cleanup.policy": "compact"}, defaults=BROKER_DEFAULTS
    )
    # Kafka UnifiedLog.deleteOldSegments: a compact-only log loses nothing to retention.ms,
    # though every batch is older than 7 days.
    segments = len(log.segments)
    assert segments > 1 and log.high_watermark == 12
    assert log.delete_old_segments(NOW_MS).deletions == ()
    assert (len(log.segments), log.log_start_offset) == (segments, 0)
    restarted.close()


def test_opening_a_partition_hands_its_loaded_log_the_topic_config(tmp_path: Path) -> None:
    # Kafka loads logs with the image's topic configs (LogManager.startup after the first
    # publish); pykraft loads them first, so becoming leader applies the topic's config.
    first = Broker(tmp_path)
    first.publish_records(*hosted_topics(), topic_config("pets", "cleanup.policy", "compact"))
    image = first.image
    first.close()
    restarted = Broker(tmp_path)
    delta = MetadataDelta.between(MetadataImage.EMPTY, image)
    restarted.replica_manager.apply_delta(local_changes(delta, LOCAL), image, NOW_MS)
    assert restarted.log().config.cleanup_policy == {CleanupPolicy.COMPACT}
    restarted.close()


def test_a_restart_after_an_override_was_removed_goes_back_to_the_defaults(
    tmp_path: Path,
) -> None:
    first = Broker(tmp_path)
    first.publish_records(*hosted_topics(), topic_config("pets", "retention.ms", "5000"))
    first.close()
    # While this broker was down the override went away.
    image = replay(first.image, [topic_config("pets", "retention.ms", None)]).apply()
    restarted = Broker(tmp_path)
    restarted.start_from(image)
    assert restarted.log().config == BROKER_DEFAULTS
    restarted.close()


# ------------------------------------------------------------------ config changes


def test_a_retention_ms_change_reaches_the_open_log(tmp_path: Path) -> None:
    node = Broker(tmp_path)
    node.publish_records(*hosted_topics())
    node.produce_old_batches(12)
    log = node.log()
    assert log.config == BROKER_DEFAULTS
    node.publish_records(topic_config("pets", "retention.ms", "-1"))
    assert log.config.retention_ms == -1
    assert node.log_manager.config_for("pets").retention_ms == -1
    assert log.delete_old_segments(NOW_MS).deletions == ()  # unlimited: nothing is too old

    node.publish_records(topic_config("pets", "retention.ms", "60000"))
    assert log.config == LogConfig(segment_bytes=1024, retention_ms=60_000)
    decision = log.delete_old_segments(NOW_MS)
    # Every closed segment is older than a minute; the active one always stays.
    assert decision.deletions and len(log.segments) == 1
    assert log.log_start_offset == decision.log_start_offset > 0

    # Deleting the override: the log follows the broker default again.
    node.publish_records(topic_config("pets", "retention.ms", None))
    assert log.config == BROKER_DEFAULTS
    node.close()


def test_a_delta_that_changes_no_config_and_no_partition_walks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller's NoOpRecord every 500 ms: its publish read no config and listed no
    hosted partition (1 ms at 10,000 partitions); real changes still reach the logs."""
    node = Broker(tmp_path)
    node.publish_records(*hosted_topics())
    hosted = node.replica_manager.hosted
    config_reads: list[MetadataImage] = []
    listings: list[int] = []
    list_topic_ids = hosted.topic_ids

    def counted_configs(image: MetadataImage, broker_id: int) -> dict[str, str]:
        config_reads.append(image)
        return dynamic_broker_configs(image, broker_id)

    def counted_topic_ids() -> dict[TopicPartition, str]:
        listings.append(1)
        return list_topic_ids()

    monkeypatch.setattr("pykraft.broker.hosted_partitions.dynamic_broker_configs", counted_configs)
    monkeypatch.setattr(hosted, "topic_ids", counted_topic_ids)
    node.publish_records(NoOpRecord())
    assert (config_reads, listings) == ([], [])
    node.publish_records(topic_config("pets", "retention.ms", "60000"))
    assert node.log().config.retention_ms == 60_000
    assert (len(config_reads), listings) == (1, [])
    node.publish_records(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER))
    assert node.replica_manager.get_partition(PETS0) is not None
    assert (len(config_reads), listings) == (1, [1])
    node.close()


def test_a_change_to_a_topic_not_hosted_here_touches_no_log(tmp_path: Path) -> None:
    node = Broker(tmp_path)
    node.publish_records(*hosted_topics())
    node.publish_records(topic_config("birds", "cleanup.policy", "compact"))
    assert node.log().config == BROKER_DEFAULTS
    assert "birds" not in node.log_manager.topic_configs
    assert [tp.topic for tp in node.log_manager.logs] == ["pets"]
    node.close()


def test_an_invalid_override_leaves_the_broker_defaults(tmp_path: Path) -> None:
    # The controller validates configs; one storage still refuses is logged, not raised.
    node = Broker(tmp_path)
    node.publish_records(*hosted_topics(), topic_config("pets", "retention.ms", "60000"))
    node.publish_records(topic_config("pets", "segment.bytes", "1"))
    assert node.log().config == BROKER_DEFAULTS
    node.close()


# ------------------------------------------------------------------ changed_topic_configs


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([], set()),
        ([TopicRecord(name="cats", topic_id="A7cwCm1cSemw_Tm0Qqi1zA")], set()),
        ([topic_config("pets", "retention.ms", "1000")], {"pets"}),
        ([topic_config("pets", "cleanup.policy", None)], {"pets"}),
        ([topic_config("birds", "cleanup.policy", "compact")], {"birds"}),
        # Set back to what it was within one delta: nothing changed.
        (
            [topic_config("pets", "retention.ms", "1"), topic_config("pets", "retention.ms", None)],
            set(),
        ),
        ([ConfigRecord(resource_type=BROKER, resource_name="1", name="x", value="y")], set()),
        ([RemoveTopicRecord(topic_id=PETS_ID)], {"pets"}),
    ],
)
def test_changed_topic_configs(records: list[MetadataRecord], expected: set[str]) -> None:
    base = replay(
        MetadataImage.EMPTY, [*hosted_topics(), topic_config("pets", "cleanup.policy", "compact")]
    ).apply()
    delta = replay(base, records)
    assert changed_topic_configs(delta, delta.apply()) == expected


def test_a_snapshot_delta_names_every_topic_with_overrides() -> None:
    image = replay(
        MetadataImage.EMPTY, [*hosted_topics(), topic_config("pets", "cleanup.policy", "compact")]
    ).apply()
    assert changed_topic_configs(MetadataDelta.between(MetadataImage.EMPTY, image), image) == {
        "pets"
    }


# ------------------------------------------------------------------ the broker's wiring


def test_the_broker_applies_the_file_default_and_topic_config_changes(tmp_path: Path) -> None:
    """BrokerServer's own steps, without ports: ``log.cleanup.policy`` from the broker file is
    every log's default, and the metadata listener hands topic config changes to open logs."""
    config = BrokerConfig.from_properties(
        {
            "node.id": str(LOCAL),
            "controller.quorum.bootstrap.servers": "127.0.0.1:19093",
            "log.dirs": str(tmp_path),
            "log.cleanup.policy": "compact",
        }
    )
    server = BrokerServer(config, cluster_id="q1Sh-9_ISia_zwGINzRvyQ", clock=FakeClock())
    log_manager = server._open_logs(NOW_MS)
    server.log_manager = log_manager
    server.replica_manager = ReplicaManager(
        broker_id=LOCAL,
        log_manager=log_manager,
        fetcher_manager=RecordedFetcherManager(),
        monotonic_ms=server.clock.monotonic_ms,
    )
    server.publisher = BrokerMetadataPublisher(
        LOCAL, server.replica_manager, wall_clock_ms=lambda: NOW_MS
    )
    server._install_publisher()  # caught up with an empty metadata log
    delta = replay(MetadataImage.EMPTY, hosted_topics())
    image = delta.apply()
    server._on_metadata(delta, image)  # the MetadataLoader listener
    log = log_manager.get_log(PETS0)
    assert log is not None and log.config.cleanup_policy == {CleanupPolicy.COMPACT}

    delta = replay(
        image,
        [
            topic_config("pets", "retention.ms", "60000"),
            topic_config("pets", "cleanup.policy", "compact,delete"),
        ],
    )
    server._on_metadata(delta, delta.apply())
    assert log.config.retention_ms == 60_000
    assert log.config.cleanup_policy == {CleanupPolicy.COMPACT, CleanupPolicy.DELETE}
    server.replica_manager.shutdown()
    log_manager.shutdown()
