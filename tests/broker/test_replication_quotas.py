"""The leader side of KIP-73 on a real ReplicaManager: Kafka's ``ReplicaManager.readFromLocalLog``
/ ``shouldLeaderThrottle`` (records of a throttled partition left out for a follower outside the
ISR while the leader quota is exceeded; offsets and high watermark still answered) and
``KafkaApis.handleFetchRequest``'s ``quotas.leader.record`` of the throttled bytes sent; plus the
throttles read from the published image (BrokerConfigHandler / TopicConfigHandler)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker import replication_quotas
from pykraft.broker.replica_manager import FetchParams, LogReadResult
from pykraft.broker.replication_quotas import ReplicationQuotas
from pykraft.fetcher.replication_quota import ThrottleSettings
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ConfigRecord, ConfigResourceType, NoOpRecord, TopicRecord
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import (
    LOCAL,
    OTHER,
    PETS0,
    PETS_ID,
    Cluster,
    at,
    batch,
    partition_record,
)

PETS1 = TopicPartition("pets", 1)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path)
    try:
        # pets-0: OTHER is being added (outside the ISR); pets-1: OTHER is in sync.
        harness.start(
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 0, (LOCAL, OTHER), leader=LOCAL, isr=(LOCAL,)),
            partition_record(PETS_ID, 1, (LOCAL, OTHER), leader=LOCAL, isr=(LOCAL, OTHER)),
        )
        quotas = ReplicationQuotas(LOCAL, window_num=2, window_size_ms=1000)
        # 100 B/s, both partitions throttled on this leader.
        quotas.leader.update(ThrottleSettings(100, {"pets": None}))
        harness.replica_manager.replication_quotas = quotas
        for tp in (PETS0, PETS1):
            harness.produce(tp, batch(b"x" * 300))
        yield harness
    finally:
        harness.close()


def follower_fetch(cluster: Cluster, *partitions: TopicPartition, replica: int = OTHER):
    params = FetchParams(
        replica_id=replica,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=tuple(at(tp, 0) for tp in partitions),
    )
    results: list[LogReadResult] = asyncio.run(cluster.replica_manager.fetch_messages(params))
    return results


def test_a_follower_outside_the_isr_is_held_back_once_over_the_quota(cluster: Cluster) -> None:
    quota = cluster.replica_manager.replication_quotas
    assert quota is not None
    (first,) = follower_fetch(cluster, PETS0)
    sent = first.size_in_bytes
    assert sent > 100  # under the quota when asked: the whole batch goes
    assert quota.leader.is_quota_exceeded(cluster.clock.monotonic_ms())
    (held,) = follower_fetch(cluster, PETS0)
    assert (held.slices, held.error) == ((), first.error)
    assert held.high_watermark == first.high_watermark
    assert held.log_end_offset == first.log_end_offset
    # Once the bytes sent average 100 B/s or less, the follower gets records again.
    cluster.clock.now_ms += sent * 1000 // 100
    (again,) = follower_fetch(cluster, PETS0)
    assert again.size_in_bytes == sent


def test_in_sync_followers_and_consumers_are_never_throttled(cluster: Cluster) -> None:
    quota = cluster.replica_manager.replication_quotas
    assert quota is not None
    follower_fetch(cluster, PETS0)
    assert quota.leader.is_quota_exceeded(cluster.clock.monotonic_ms())
    (in_sync,) = follower_fetch(cluster, PETS1)
    assert in_sync.size_in_bytes > 0
    (consumer,) = cluster.fetch(at(PETS0, 0))
    assert consumer.size_in_bytes > 0


def test_unthrottled_partitions_are_neither_held_back_nor_counted(cluster: Cluster) -> None:
    quota = cluster.replica_manager.replication_quotas
    assert quota is not None
    quota.leader.update(ThrottleSettings(100, {"pets": frozenset({1})}))
    for _ in range(3):
        (result,) = follower_fetch(cluster, PETS0)
        assert result.size_in_bytes > 0
    assert quota.leader.rate(cluster.clock.monotonic_ms()) == 0


def test_throttles_follow_the_published_configs(cluster: Cluster) -> None:
    broker, topic = ConfigResourceType.BROKER, ConfigResourceType.TOPIC
    cluster.publish(
        ConfigRecord(
            resource_type=broker,
            resource_name=str(LOCAL),
            name="leader.replication.throttled.rate",
            value="5000",
        ),
        ConfigRecord(
            resource_type=topic,
            resource_name="pets",
            name="leader.replication.throttled.replicas",
            value=f"0:{LOCAL},1:{OTHER}",
        ),
    )
    quotas = ReplicationQuotas(LOCAL)
    quotas.update(cluster.image)
    assert quotas.leader.settings == ThrottleSettings(5000, {"pets": frozenset({0})})
    assert quotas.follower.settings == ThrottleSettings()


def test_an_image_with_the_same_configs_is_not_read_again(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller's NoOpRecord every 500 ms publishes an image sharing the last one's
    configs: the throttles stay as they are, and the configs are not walked again."""
    rate = "leader.replication.throttled.rate"
    broker = ConfigResourceType.BROKER
    cluster.publish(
        ConfigRecord(resource_type=broker, resource_name=str(LOCAL), name=rate, value="5000")
    )
    reads: list[MetadataImage] = []
    read = replication_quotas.throttle_settings

    def counted(image: MetadataImage, broker_id: int) -> tuple[ThrottleSettings, ThrottleSettings]:
        reads.append(image)
        return read(image, broker_id)

    monkeypatch.setattr(replication_quotas, "throttle_settings", counted)
    quotas = ReplicationQuotas(LOCAL)
    quotas.update(cluster.image)
    cluster.publish(NoOpRecord())
    quotas.update(cluster.image)
    assert (len(reads), quotas.leader.settings) == (1, ThrottleSettings(5000, {}))
    cluster.publish(
        ConfigRecord(resource_type=broker, resource_name=str(LOCAL), name=rate, value=None)
    )
    quotas.update(cluster.image)
    assert (len(reads), quotas.leader.settings) == (2, ThrottleSettings())


def test_the_metrics_show_each_sides_rate_and_bytes() -> None:
    from pykraft.broker.metrics import BrokerMetrics

    metrics = BrokerMetrics()
    metrics.set_replication_throttle("follower", byte_rate=1024.5, total_bytes=4096)
    text = metrics.render()
    assert 'pykraft_replication_throttled_byte_rate{side="follower"} 1024.5' in text
    assert 'pykraft_replication_throttled_bytes{side="follower"} 4096' in text
