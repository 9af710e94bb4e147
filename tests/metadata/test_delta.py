"""MetadataDelta replay rules, each case citing the Kafka behaviour it follows.

Kafka references: metadata/src/test/java/org/apache/kafka/metadata/PartitionRegistrationTest.java
(merge), .../image/ClusterImageTest.java and ClusterDelta.replay (brokers), TopicsImageTest.java
(topics), ConfigurationsImageTest.java and MetadataDelta.replay(RemoveTopicRecord) (configs),
FeaturesDelta.replay (level 0 removes), ProducerIdsDelta.replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata.delta import MetadataDelta, apply_records
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.image import MetadataImage, PartitionRegistration
from pykraft.metadata.local_changes import local_changes
from pykraft.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LeaderRecoveryState,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from tests.metadata.strategies import record_sequences

# Topic ids from Kafka's TopicsImageTest.
FOO = "ThIaNwRnSM2Nt9Mx1v0RvA"
BAR = "f62ptyETTjet8SL5ZeREiw"
RECOVERED, RECOVERING = LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING

BASE = apply_records(
    MetadataImage.EMPTY,
    [
        RegisterBrokerRecord(broker_id=1, incarnation_id="inc-1", broker_epoch=10, fenced=False),
        RegisterBrokerRecord(broker_id=2, incarnation_id="inc-2", broker_epoch=20),
        TopicRecord(name="foo", topic_id=FOO),
        # PartitionRegistrationTest.testPartitionControlInfoMergeAndDiff's partition "a".
        PartitionRecord(partition_id=0, topic_id=FOO, replicas=(1, 2, 3), isr=(1, 2), leader=1),
        ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value="1000"),
    ],
    offset=4,
    epoch=1,
)


def change(**fields: Any) -> PartitionChangeRecord:
    return PartitionChangeRecord(topic_id=FOO, partition_id=0, **fields)


def foo_0(**fields: Any) -> PartitionRecord:
    return PartitionRecord(topic_id=FOO, partition_id=0, **fields)


def check_partition(records: list[MetadataRecord], **expected: Any) -> None:
    partition = apply_records(BASE, records).topics.get_partition(FOO, 0)
    assert partition is not None
    actual = {name: getattr(partition, name) for name in expected}
    assert actual == expected


def test_merge_rules() -> None:
    # testPartitionControlInfoMergeAndDiff: a new leader and ISR bump both epochs by one.
    check_partition(
        [change(leader=3, isr=(3,))], leader=3, isr=(3,), leader_epoch=1, partition_epoch=1
    )
    # ... an ISR-only change (c.diff(a)) bumps the partition epoch alone.
    check_partition([change(isr=(1,))], isr=(1,), leader=1, leader_epoch=0, partition_epoch=1)
    # Every PartitionChangeRecord bumps the partition epoch, even one that changes nothing.
    check_partition([change()], replicas=(1, 2, 3), isr=(1, 2), leader_epoch=0, partition_epoch=1)
    # merge bumps the leader epoch whenever the leader field is set, even to the same leader.
    check_partition([change(leader=1)], leader=1, leader_epoch=1, partition_epoch=1)
    # NO_LEADER (-1) is a leader change too.
    check_partition([change(leader=-1, isr=(2,))], leader=-1, leader_epoch=1, partition_epoch=1)
    # Two leader changes in one delta bump twice.
    check_partition(
        [change(leader=2), change(leader=3)], leader=3, leader_epoch=2, partition_epoch=2
    )
    # testMergePartitionChangeRecordWithReassignmentData, step 1 then step 2.
    start = change(removing_replicas=(3,), adding_replicas=(4,), replicas=(1, 2, 3, 4))
    check_partition(
        [start],
        replicas=(1, 2, 3, 4),
        isr=(1, 2),
        removing_replicas=(3,),
        adding_replicas=(4,),
        leader_epoch=0,
        partition_epoch=1,
    )
    finish = change(isr=(1, 2, 4), removing_replicas=(), adding_replicas=(), replicas=(1, 2, 4))
    check_partition(
        [start, finish],
        replicas=(1, 2, 4),
        isr=(1, 2, 4),
        removing_replicas=(),
        adding_replicas=(),
        leader_epoch=0,
        partition_epoch=2,
    )
    # KIP-704 / LeaderRecoveryState.changeTo: an unclean election marks RECOVERING ...
    unclean = change(leader=3, isr=(3,), leader_recovery_state=1)
    check_partition([unclean], leader_recovery_state=RECOVERING, leader_epoch=1)
    # ... NO_CHANGE (-1) keeps it ...
    check_partition([unclean, change(isr=(3, 1))], leader_recovery_state=RECOVERING)
    # ... and the leader's AlterPartition sets RECOVERED without a new leader epoch.
    check_partition(
        [unclean, change(leader_recovery_state=0)],
        leader_recovery_state=RECOVERED,
        leader_epoch=1,
        partition_epoch=2,
    )
    # KIP-966: the ELR fields change only when the record carries them ([] clears them).
    to_elr = change(isr=(1,), eligible_leader_replicas=(2,), last_known_elr=(3,))
    check_partition([to_elr], isr=(1,), elr=(2,), last_known_elr=(3,), partition_epoch=1)
    check_partition([to_elr, change(leader=2)], elr=(2,), last_known_elr=(3,))
    check_partition(
        [to_elr, change(isr=(1, 2), eligible_leader_replicas=(), last_known_elr=())],
        elr=(),
        last_known_elr=(),
    )
    # TopicDelta.replay(PartitionRecord) replaces the registration wholesale.
    check_partition(
        [
            change(leader=2),
            foo_0(replicas=(4,), isr=(4,), leader=4, leader_epoch=7, partition_epoch=9),
        ],
        replicas=(4,),
        leader=4,
        leader_epoch=7,
        partition_epoch=9,
    )


def test_merge_is_kafkas_partition_registration_merge() -> None:
    a = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2), leader=1)
    b = PartitionRegistration(
        replicas=(1, 2, 3), isr=(3,), leader=3, leader_epoch=1, partition_epoch=1
    )
    assert a.merge(change(leader=3, isr=(3,))) == b
    assert a.merge(change()) is not a  # a new value; "a" itself never changes
    assert a.partition_epoch == 0


Probe = Callable[[MetadataImage], Any]


def check(records: list[MetadataRecord], probe: Probe, expected: Any) -> None:
    assert probe(apply_records(BASE, records)) == expected


def fenced(broker_id: int) -> Probe:
    return lambda image: image.cluster.brokers[broker_id].fenced


def shutting_down(broker_id: int) -> Probe:
    return lambda image: image.cluster.brokers[broker_id].in_controlled_shutdown


def broker_ids(image: MetadataImage) -> list[int]:
    return sorted(image.cluster.brokers)


def topic_names(image: MetadataImage) -> list[str]:
    return sorted(image.topics.by_name)


def foo_config(image: MetadataImage) -> dict[str, str]:
    return dict(image.configs.config(2, "foo"))


def change_broker(broker_id: int, epoch: int, **fields: int) -> BrokerRegistrationChangeRecord:
    return BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, **fields)


def test_cluster_rules() -> None:
    # ClusterDelta.replay(FenceBrokerRecord / UnfenceBrokerRecord).
    check([FenceBrokerRecord(id=1, epoch=10)], fenced(1), True)
    check([UnfenceBrokerRecord(id=2, epoch=20)], fenced(2), False)
    # BrokerRegistrationChangeRecord: fenced 1 fences, -1 unfences, 0 keeps.
    check([change_broker(1, 10, fenced=1)], fenced(1), True)
    check([change_broker(2, 20, fenced=-1)], fenced(2), False)
    check([change_broker(1, 10, fenced=0)], fenced(1), False)
    # inControlledShutdown 1 sets it; 0 means "no change", never "clear".
    check([change_broker(1, 10, in_controlled_shutdown=1)], shutting_down(1), True)
    check(
        [change_broker(1, 10, in_controlled_shutdown=1), change_broker(1, 10)],
        shutting_down(1),
        True,
    )
    # A new RegisterBrokerRecord for the same id replaces the old incarnation (KIP-631).
    reregister = RegisterBrokerRecord(broker_id=1, incarnation_id="inc-1b", broker_epoch=11)
    check(
        [reregister],
        lambda i: (
            i.cluster.brokers[1].incarnation_id,
            i.cluster.brokers[1].epoch,
            i.cluster.brokers[1].fenced,
        ),
        ("inc-1b", 11, True),
    )
    check([UnregisterBrokerRecord(broker_id=1, broker_epoch=10)], broker_ids, [2])
    # ClusterDelta.replay(UnregisterBrokerRecord) does not check that the broker exists.
    check([UnregisterBrokerRecord(broker_id=9, broker_epoch=0)], broker_ids, [1, 2])


def test_topic_and_config_rules() -> None:
    # MetadataDelta.replay(RemoveTopicRecord): the topic and its configs go.
    check([RemoveTopicRecord(topic_id=FOO)], topic_names, [])
    check([RemoveTopicRecord(topic_id=FOO)], lambda i: dict(i.configs.resources), {})
    # A new topic may take a deleted topic's name in the same delta; old configs stay gone.
    recreate: list[MetadataRecord] = [
        RemoveTopicRecord(topic_id=FOO),
        TopicRecord(name="foo", topic_id=BAR),
    ]
    check(recreate, lambda i: i.topics.by_name["foo"].topic_id, BAR)
    check(recreate, lambda i: len(i.topics.by_name["foo"].partitions), 0)
    check(
        [
            *recreate,
            ConfigRecord(
                resource_type=2, resource_name="foo", name="cleanup.policy", value="compact"
            ),
        ],
        foo_config,
        {"cleanup.policy": "compact"},
    )
    # TopicsDelta: a topic created and deleted within one delta leaves no trace.
    check(
        [TopicRecord(name="bar", topic_id=BAR), RemoveTopicRecord(topic_id=BAR)],
        topic_names,
        ["foo"],
    )
    # ConfigRecord: a value sets, None deletes (and an empty resource disappears).
    check(
        [ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value="5")],
        foo_config,
        {"retention.ms": "5"},
    )
    check(
        [ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value=None)],
        lambda i: dict(i.configs.resources),
        {},
    )
    check(
        [ConfigRecord(resource_type=2, resource_name="foo", name="absent", value=None)],
        foo_config,
        {"retention.ms": "1000"},
    )
    check(
        [ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="1")],
        lambda i: dict(i.configs.config(4, "")),
        {"log.retention.ms": "1"},
    )


def test_feature_producer_id_and_no_op_rules() -> None:
    # FeaturesDelta.replay: a level sets the feature, level 0 removes it.
    check(
        [FeatureLevelRecord(name="metadata.version", feature_level=7)],
        lambda i: dict(i.features),
        {"metadata.version": 7},
    )
    check(
        [
            FeatureLevelRecord(name="metadata.version", feature_level=7),
            FeatureLevelRecord(name="metadata.version", feature_level=0),
        ],
        lambda i: dict(i.features),
        {},
    )
    # ProducerIdsDelta.replay: the last record's next_producer_id wins.
    check(
        [
            ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000),
            ProducerIdsRecord(broker_id=2, broker_epoch=20, next_producer_id=2000),
        ],
        lambda i: i.producer_ids.next_producer_id,
        2000,
    )
    # NoOpRecord only moves the offset.
    check([NoOpRecord()], lambda i: attrs.evolve(i, offset=BASE.offset), BASE)


# (record replayed onto BASE, a fragment of the error). The controller never writes these; the
# broker must refuse them rather than corrupt its image (Kafka throws from the same places).
REPLAY_ERRORS: list[tuple[MetadataRecord, str]] = [
    (
        PartitionRecord(topic_id=BAR, partition_id=0, replicas=(1,), isr=(1,), leader=1),
        f"topic id {BAR} is unknown",
    ),
    (PartitionChangeRecord(topic_id=BAR, partition_id=0), f"topic id {BAR} is unknown"),
    (PartitionChangeRecord(topic_id=FOO, partition_id=5), "partition 5 of topic 'foo' is unknown"),
    (RemoveTopicRecord(topic_id=BAR), f"topic id {BAR} is unknown"),
    (TopicRecord(name="foo", topic_id=BAR), "a topic named 'foo' already exists"),
    (TopicRecord(name="other", topic_id=FOO), f"topic id {FOO} is already in use"),
    (FenceBrokerRecord(id=9, epoch=1), "tried to fence broker 9, but it is not registered"),
    (UnfenceBrokerRecord(id=9, epoch=1), "tried to unfence broker 9, but it is not registered"),
    (FenceBrokerRecord(id=1, epoch=9), "at epoch 9, but its registration has epoch 10"),
    (change_broker(2, 21, fenced=-1), "tried to change broker 2 at epoch 21"),
    (change_broker(1, 10, fenced=5), "5 is not a valid BrokerRegistrationFencingChange"),
    (
        foo_0(replicas=(1,), isr=(1,), leader=1, leader_recovery_state=5),
        "5 is not a valid LeaderRecoveryState",
    ),
    (change(leader_recovery_state=7), "7 is not a valid LeaderRecoveryState"),
]


@pytest.mark.parametrize(("record", "fragment"), REPLAY_ERRORS)
def test_refused_records_raise_and_leave_the_delta_unchanged(record, fragment) -> None:
    delta = MetadataDelta(BASE)
    delta.replay(change(isr=(1,)))
    before = delta.apply()
    with pytest.raises(MetadataReplayError) as error:
        delta.replay(record)
    assert fragment in str(error.value)
    assert error.value.record is record
    assert delta.apply() == before
    assert local_changes(delta, 1) == local_changes(_replayed([change(isr=(1,))]), 1)


def _replayed(records: list[MetadataRecord]) -> MetadataDelta:
    delta = MetadataDelta(BASE)
    for record in records:
        delta.replay(record)
    return delta


def test_a_deleted_topic_is_unknown_to_later_records() -> None:
    delta = _replayed([RemoveTopicRecord(topic_id=FOO)])
    with pytest.raises(MetadataReplayError, match="is unknown"):
        delta.replay(change(leader=2))
    with pytest.raises(MetadataReplayError, match="already in use"):
        delta.replay(TopicRecord(name="again", topic_id=FOO))  # ids are never reused


def test_offsets_must_increase_and_stamp_the_image() -> None:
    delta = MetadataDelta(BASE)
    delta.replay(NoOpRecord(), offset=5, epoch=2)
    with pytest.raises(MetadataReplayError, match="offset 5 is not after"):
        delta.replay(NoOpRecord(), offset=5)
    image = delta.apply()
    assert (image.offset, image.epoch) == (5, 2)
    assert (delta.apply(offset=9, epoch=3).offset, delta.apply(offset=9, epoch=3).epoch) == (9, 3)


def test_base_image_is_never_changed() -> None:
    before = attrs.evolve(BASE)
    apply_records(
        BASE, [change(leader=2), RemoveTopicRecord(topic_id=FOO), FenceBrokerRecord(id=1, epoch=10)]
    )
    assert before == BASE
    assert BASE.topics.get_partition(FOO, 0) == PartitionRegistration(
        replicas=(1, 2, 3), isr=(1, 2), leader=1
    )


@settings(max_examples=150, deadline=None)
@given(records=record_sequences(), data=st.data())
def test_replaying_in_batches_equals_replaying_at_once(records, data) -> None:
    """Structural sharing must not leak: an image built batch by batch (each batch a new delta
    on the previous image, as a broker does) equals the one built in a single delta."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(records)), max_size=4)))
    image = MetadataImage.EMPTY
    for start, end in zip([0, *cuts], [*cuts, len(records)], strict=True):
        image = apply_records(image, records[start:end])
    assert image == apply_records(MetadataImage.EMPTY, records)


@settings(max_examples=150, deadline=None)
@given(records=record_sequences(), data=st.data())
def test_delta_between_images_matches_the_replayed_delta(records, data) -> None:
    """Loading a snapshot over an image (MetadataDelta.between) tells each broker the same
    local changes as replaying the records that led from one image to the other."""
    cut = data.draw(st.integers(0, len(records)))
    base = apply_records(MetadataImage.EMPTY, records[:cut])
    replayed = MetadataDelta(base)
    for record in records[cut:]:
        replayed.replay(record)
    target = replayed.apply()
    between = MetadataDelta.between(base, target)
    assert between.apply() == target
    for broker_id in range(5):
        assert local_changes(between, broker_id) == local_changes(replayed, broker_id)
