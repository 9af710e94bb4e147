"""local_changes() against the scenarios of Kafka's TopicsImageTest (testBasicLocalChanges,
testDeleteAfterChanges, testUpdatedLeaders, testLocalReassignmentChanges)."""

from __future__ import annotations

from pykraft.metadata.delta import MetadataDelta, apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges, local_changes
from pykraft.metadata.records import (
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pykraft.storage.topic_partition import TopicPartition

LOCAL = 3
FOO = "ThIaNwRnSM2Nt9Mx1v0RvA"
BAR = "f62ptyETTjet8SL5ZeREiw"
BAZ = "tgHBnRglT5W_RlENnuG5vg"
NEW_FOO = "b66ybsWIQoygs01vdjH07A"
ZOO = "0hHJ3X5ZQ-CFfQ5xgpj90w"


def partition(topic_id: str, partition_id: int, replicas: tuple[int, ...]) -> PartitionRecord:
    """Kafka's newPartitionRecord / newPartition: ISR = replicas, leader = first, epochs 1."""
    return PartitionRecord(
        topic_id=topic_id,
        partition_id=partition_id,
        replicas=replicas,
        isr=replicas,
        leader=replicas[0],
        leader_epoch=1,
        partition_epoch=1,
    )


# TopicsImageTest.IMAGE1
IMAGE1 = apply_records(
    MetadataImage.EMPTY,
    [
        TopicRecord(name="foo", topic_id=FOO),
        PartitionRecord(
            topic_id=FOO,
            partition_id=0,
            replicas=(2, 3, 4),
            isr=(2, 3),
            leader=2,
            leader_epoch=1,
            partition_epoch=345,
        ),
        PartitionRecord(
            topic_id=FOO,
            partition_id=1,
            replicas=(3, 4, 5),
            isr=(3, 4, 5),
            leader=3,
            leader_epoch=4,
            partition_epoch=684,
        ),
        PartitionRecord(
            topic_id=FOO,
            partition_id=2,
            replicas=(2, 4, 5),
            isr=(2, 4, 5),
            leader=2,
            leader_epoch=10,
            partition_epoch=84,
        ),
        TopicRecord(name="bar", topic_id=BAR),
        PartitionRecord(
            topic_id=BAR,
            partition_id=0,
            replicas=(0, 1, 2, 3, 4),
            isr=(0, 1, 2, 3),
            removing_replicas=(1,),
            adding_replicas=(3, 4),
            leader=0,
            leader_epoch=1,
            partition_epoch=345,
        ),
    ],
    offset=10,
    epoch=1,
)

# TopicsImageTest.DELTA1_RECORDS
DELTA1_RECORDS: list[MetadataRecord] = [
    RemoveTopicRecord(topic_id=FOO),
    PartitionChangeRecord(topic_id=BAR, partition_id=0, leader=1),
    TopicRecord(name="baz", topic_id=BAZ),
    PartitionRecord(
        topic_id=BAZ,
        partition_id=0,
        replicas=(1, 2, 3, 4),
        isr=(3, 4),
        removing_replicas=(2,),
        adding_replicas=(1,),
        leader=3,
        leader_epoch=2,
        partition_epoch=1,
    ),
]


def changes_for(image: MetadataImage, records: list[MetadataRecord]) -> LocalReplicaChanges:
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return local_changes(delta, LOCAL)


def keys(topic: str, *partitions: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in partitions}


def test_basic_local_changes() -> None:
    # foo deleted; bar-0 stays a follower with a new partition epoch; baz-0 new, led here;
    # a new foo (another id) with foo-1 followed here; baz-1 new, followed here.
    changes = changes_for(
        IMAGE1,
        [
            *DELTA1_RECORDS,
            TopicRecord(name="foo", topic_id=NEW_FOO),
            partition(NEW_FOO, 0, (0, 1, 2)),
            partition(NEW_FOO, 1, (0, 1, LOCAL)),
            PartitionRecord(
                topic_id=BAZ,
                partition_id=1,
                replicas=(4, 2, LOCAL),
                isr=(4, 2, LOCAL),
                leader=4,
                leader_epoch=2,
                partition_epoch=1,
            ),
        ],
    )
    assert changes.deletes == keys("foo", 0, 1)
    assert set(changes.elected_leaders) == keys("baz", 0)
    assert set(changes.leaders) == keys("baz", 0)
    assert set(changes.followers) == keys("baz", 1) | keys("bar", 0) | keys("foo", 1)
    # The re-created foo's partitions carry the new id, so the broker can tell them apart.
    assert changes.followers[TopicPartition("foo", 1)].topic_id == NEW_FOO
    assert changes.topic_ids == {"foo": NEW_FOO, "bar": BAR, "baz": BAZ}
    bar = changes.followers[TopicPartition("bar", 0)]
    assert (bar.leader, bar.leader_epoch, bar.partition_epoch) == (1, 2, 346)
    assert (bar.replicas, bar.isr) == ((0, 1, 2, 3, 4), (0, 1, 2, 3))


ZOO_IMAGE = apply_records(
    MetadataImage.EMPTY,
    [
        TopicRecord(name="zoo", topic_id=ZOO),
        partition(ZOO, 0, (LOCAL, 1, 2)),
    ],
    offset=1,
    epoch=1,
)


def test_delete_after_changes() -> None:
    changes = changes_for(
        ZOO_IMAGE,
        [
            PartitionChangeRecord(topic_id=ZOO, partition_id=0, leader=1),  # leader to follower
            RemoveTopicRecord(topic_id=ZOO),
        ],
    )
    assert changes.deletes == keys("zoo", 0)
    assert (changes.elected_leaders, changes.leaders, changes.followers) == ({}, {}, {})


def test_updated_leaders() -> None:
    # An ISR change on a partition led here: a leader (partition epoch moved), not elected.
    changes = changes_for(
        ZOO_IMAGE,
        [
            PartitionChangeRecord(topic_id=ZOO, partition_id=0, isr=(LOCAL, 1)),
        ],
    )
    assert changes.deletes == frozenset()
    assert changes.elected_leaders == {}
    assert set(changes.leaders) == keys("zoo", 0)
    assert changes.leaders[TopicPartition("zoo", 0)].isr == (LOCAL, 1)
    assert changes.followers == {}


def test_local_reassignment_changes() -> None:
    image = apply_records(
        MetadataImage.EMPTY,
        [
            TopicRecord(name="zoo", topic_id=ZOO),
            partition(ZOO, 0, (0, 1, LOCAL)),
            partition(ZOO, 1, (LOCAL, 1, 2)),
            partition(ZOO, 2, (0, 1, LOCAL)),
            partition(ZOO, 3, (LOCAL, 1, 2)),
            partition(ZOO, 4, (0, 1, 2)),
            partition(ZOO, 5, (0, 1, 2)),
        ],
        offset=6,
        epoch=1,
    )
    changes = changes_for(
        image,
        [
            # zoo-0: follower to leader; zoo-1: leader to follower.
            PartitionChangeRecord(topic_id=ZOO, partition_id=0, leader=LOCAL),
            PartitionChangeRecord(topic_id=ZOO, partition_id=1, leader=1),
            # zoo-2: follower to removed; zoo-3: leader to removed.
            PartitionChangeRecord(topic_id=ZOO, partition_id=2, isr=(0, 1, 2), replicas=(0, 1, 2)),
            PartitionChangeRecord(
                topic_id=ZOO, partition_id=3, leader=0, isr=(0, 1, 2), replicas=(0, 1, 2)
            ),
            # zoo-4: not a replica to leader; zoo-5: not a replica to follower.
            PartitionChangeRecord(
                topic_id=ZOO,
                partition_id=4,
                leader=LOCAL,
                isr=(LOCAL, 1, 2),
                replicas=(LOCAL, 1, 2),
            ),
            PartitionChangeRecord(
                topic_id=ZOO, partition_id=5, isr=(0, 1, LOCAL), replicas=(0, 1, LOCAL)
            ),
        ],
    )
    assert changes.deletes == keys("zoo", 2, 3)
    assert set(changes.elected_leaders) == keys("zoo", 0, 4)
    assert set(changes.leaders) == keys("zoo", 0, 4)
    assert set(changes.followers) == keys("zoo", 1, 5)
    assert changes.followers[TopicPartition("zoo", 1)].leader == 1


def test_untouched_partitions_and_other_brokers_partitions_are_not_local_changes() -> None:
    changes = changes_for(
        IMAGE1,
        [
            PartitionChangeRecord(topic_id=FOO, partition_id=2, isr=(2, 4)),  # not a replica here
        ],
    )
    assert changes.is_empty()


def test_a_restated_partition_with_the_same_epoch_is_not_a_change() -> None:
    # TopicDelta.localChanges compares partition epochs, not contents.
    changes = changes_for(ZOO_IMAGE, [partition(ZOO, 0, (LOCAL, 1, 2))])
    assert changes.is_empty()


def test_snapshot_load_reports_the_same_changes_as_the_log() -> None:
    target = apply_records(IMAGE1, DELTA1_RECORDS, offset=20, epoch=2)
    between = local_changes(MetadataDelta.between(IMAGE1, target), LOCAL)
    assert between == changes_for(IMAGE1, DELTA1_RECORDS)
