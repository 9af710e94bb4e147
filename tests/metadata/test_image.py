"""MetadataImage is an immutable value with structural sharing (DESIGN.md §3.2)."""

from __future__ import annotations

import tracemalloc

from immutables import Map

from pykraft.metadata.delta import MetadataDelta, apply_records
from pykraft.metadata.image import (
    ClusterImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from pykraft.metadata.records import (
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

BIG = "ThIaNwRnSM2Nt9Mx1v0RvA"
SMALL = "f62ptyETTjet8SL5ZeREiw"
PARTITIONS = 100_000


def big_image() -> MetadataImage:
    # Built directly (not replayed) to keep the test quick; replay is covered elsewhere.
    partition = PartitionRecord(
        topic_id=BIG, partition_id=0, replicas=(0, 1, 2), isr=(0, 1, 2), leader=0
    )
    registration = PartitionRegistration.from_record(partition)
    big = TopicImage(
        name="big", topic_id=BIG, partitions=Map({p: registration for p in range(PARTITIONS)})
    )
    base = apply_records(
        MetadataImage.EMPTY,
        [
            RegisterBrokerRecord(broker_id=0, incarnation_id="i", broker_epoch=1),
            TopicRecord(name="small", topic_id=SMALL),
            PartitionRecord(topic_id=SMALL, partition_id=0, replicas=(0,), isr=(0,), leader=0),
        ],
        offset=2,
        epoch=1,
    )
    topics = TopicsImage(
        by_id=base.topics.by_id.set(BIG, big), by_name=base.topics.by_name.set("big", big)
    )
    return MetadataImage(
        offset=2, epoch=1, cluster=base.cluster, configs=base.configs, topics=topics
    )


def test_a_small_delta_shares_everything_it_does_not_touch() -> None:
    image = big_image()
    delta = MetadataDelta(image)
    delta.replay(PartitionChangeRecord(topic_id=BIG, partition_id=7, isr=(0, 1)))
    tracemalloc.start()
    try:
        after = delta.apply(offset=3)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Copying 100,000 map entries costs megabytes; a HAMT path copy costs a few kilobytes.
    assert peak_bytes < 64 * 1024, peak_bytes
    big_before, big_after = image.topics.by_id[BIG], after.topics.by_id[BIG]
    assert big_after.partitions[7].isr == (0, 1)
    assert big_before.partitions[7].isr == (0, 1, 2)  # the base image never changes
    assert big_after.partitions[8] is big_before.partitions[8]
    assert after.topics.by_id[SMALL] is image.topics.by_id[SMALL]
    assert after.topics.by_name["big"] is big_after
    assert after.cluster is image.cluster
    assert after.configs is image.configs
    assert after.features is image.features
    assert len(big_after.partitions) == PARTITIONS


def test_images_are_values() -> None:
    image = big_image()
    assert image == big_image()
    assert hash(ClusterImage()) == hash(ClusterImage())
    assert MetadataImage.EMPTY.is_empty()
    assert not image.is_empty()
    assert image.topics.partition_count() == PARTITIONS + 1
    assert image.topics.get_partition(SMALL, 0) is not None
    assert image.topics.get_partition(SMALL, 1) is None
    assert image.topics.get_partition("f62ptyETTjet8SL5ZeREiA", 0) is None
    assert dict(image.configs.config(2, "nothing")) == {}
