"""BrokerMetadataPublisher: nothing before the initial catch-up; then stray logs go, the whole
image is applied, and each later delta reaches the replicas before the listeners (Kafka's
BrokerServer installing its BrokerMetadataPublisher; KAFKA-14616 for the stray logs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.metadata_publisher import BrokerMetadataPublisher
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.metadata.records import MetadataRecord, PartitionChangeRecord, TopicRecord
from pykraft.replica.partition_state import PartitionRole
from tests.broker.replica_harness import (
    LOCAL,
    NOW_MS,
    OTHER,
    PETS0,
    PETS1,
    PETS_ID,
    Cluster,
    batch,
    broker,
    partition_record,
    pets_led_here,
    replay,
)


def image_of(*records: MetadataRecord) -> tuple[MetadataDelta, MetadataImage]:
    delta = replay(MetadataImage.EMPTY, records)
    return delta, delta.apply()


def test_install_deletes_stray_logs_then_applies_the_whole_image(tmp_path: Path) -> None:
    first = Cluster(tmp_path)
    first.start(*pets_led_here(), partition_record(PETS_ID, 1, (LOCAL,)))
    first.produce(PETS0, batch(b"a"))
    first.close()
    restarted = Cluster(tmp_path)
    seen: list[tuple[PartitionRole | None, LocalReplicaChanges]] = []

    def listener(changes: LocalReplicaChanges, image: MetadataImage) -> None:
        partition = restarted.replica_manager.get_partition(PETS0)
        seen.append((None if partition is None else partition.role, changes))

    publisher = BrokerMetadataPublisher(
        LOCAL, restarted.replica_manager, wall_clock_ms=lambda: NOW_MS, listeners=(listener,)
    )
    try:
        _, image = image_of(
            broker(LOCAL),
            broker(OTHER),
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 0, (LOCAL, OTHER)),
            partition_record(PETS_ID, 1, (OTHER,)),
        )
        changes = publisher.install(image)
        assert set(restarted.log_manager.logs) == {PETS0}  # pets-1 moved away: stray
        assert set(changes.leaders) == {PETS0}
        assert restarted.replica_manager.partition_or_error(PETS0).log_end_offset == 1
        assert seen == [(PartitionRole.LEADER, changes)]  # the listener runs after the replicas
        delta = MetadataDelta(image)
        delta.replay(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER))
        later = publisher.publish(delta, delta.apply())
        assert set(later.followers) == {PETS0}
        assert seen[-1] == (PartitionRole.FOLLOWER, later)
    finally:
        restarted.close()


def test_nothing_is_published_before_install_and_install_happens_once(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    publisher = BrokerMetadataPublisher(
        LOCAL, cluster.replica_manager, wall_clock_ms=lambda: NOW_MS
    )
    delta, image = image_of(broker(LOCAL), *pets_led_here())
    try:
        with pytest.raises(AssertionError):
            publisher.publish(delta, image)
        assert cluster.replica_manager.get_partition(PETS0) is None
        publisher.install(image)
        with pytest.raises(AssertionError):
            publisher.install(image)
        assert cluster.replica_manager.get_partition(PETS1) is None
    finally:
        cluster.close()
