"""AlterPartition and ElectLeaders, following Kafka's ReplicationControlManagerTest
(testShrinkAndExpandIsr, testInvalidAlterPartitionRequests*, testAlterPartitionShouldRejectFenced
Brokers / ...ShuttingDownBrokers / ...BrokersWithStaleEpoch (KIP-903), testElectPreferredLeaders,
testElectUncleanLeaders) and KIP-497 / KIP-460.
"""

from __future__ import annotations

import pytest

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    AlterPartitionData,
    AlterPartitionRequest,
    BrokerState,
    ElectionType,
    ElectLeadersRequest,
    TopicPartitions,
)
from tests.quorum.helpers import Harness, apply, image_with, partition, topic_id

BROKERS = {1: "unfenced", 2: "unfenced", 3: "unfenced", 4: "fenced", 5: "shutdown"}
T = topic_id("t")


def alter_harness() -> Harness:
    # t-0: replicas 1..5, ISR [1, 2, 3], leader 1; one leader change makes both epochs 1.
    image = image_with(BROKERS, {"t": [((1, 2, 3, 4, 5), (1, 2, 3), 1)]})
    image = apply(image, [PartitionChangeRecord(partition_id=0, topic_id=T, leader=1)])
    return Harness(image)


def isr(*brokers: int) -> tuple[BrokerState, ...]:
    return tuple(BrokerState(b) for b in brokers)


def alter(
    h: Harness,
    *,
    sender: int = 1,
    leader_epoch: int = 1,
    partition_epoch: int = 1,
    new_isr: tuple[BrokerState, ...] = isr(1, 2),
    recovery: int = 0,
    topic: str = T,
    index: int = 0,
):
    epoch = h.image.cluster.brokers[sender].epoch
    request = AlterPartitionRequest(
        broker_id=sender,
        broker_epoch=epoch,
        partitions=(
            AlterPartitionData(topic, index, leader_epoch, partition_epoch, new_isr, recovery),
        ),
    )
    return h.controller.alter_partition(h.image, request, 0)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"topic": topic_id("nope")}, Errors.UNKNOWN_TOPIC_ID),
        ({"index": 9}, Errors.UNKNOWN_TOPIC_OR_PARTITION),
        # Epochs newer than the controller's: this controller must be stale.
        ({"leader_epoch": 2}, Errors.NOT_CONTROLLER),
        ({"partition_epoch": 2}, Errors.NOT_CONTROLLER),
        ({"leader_epoch": 0}, Errors.FENCED_LEADER_EPOCH),
        ({"sender": 2}, Errors.NOT_LEADER_OR_FOLLOWER),
        ({"partition_epoch": 0}, Errors.INVALID_UPDATE_VERSION),
        ({"new_isr": isr(1, 6)}, Errors.INVALID_REQUEST),
        ({"new_isr": isr(1, 1)}, Errors.INVALID_REQUEST),
        ({"new_isr": isr(2, 3)}, Errors.INVALID_REQUEST),
        ({"new_isr": isr(1, 2), "recovery": 1}, Errors.INVALID_REQUEST),
        ({"new_isr": isr(1), "recovery": 1}, Errors.INVALID_REQUEST),
        ({"new_isr": isr(1), "recovery": 7}, Errors.INVALID_REQUEST),
        # KIP-903: fenced, shutting-down and stale-epoch replicas cannot join the ISR.
        ({"new_isr": isr(1, 4)}, Errors.INELIGIBLE_REPLICA),
        ({"new_isr": isr(1, 5)}, Errors.INELIGIBLE_REPLICA),
        ({"new_isr": (BrokerState(1), BrokerState(2, broker_epoch=77))}, Errors.INELIGIBLE_REPLICA),
    ],
)
def test_alter_partition_rejections(fields, error) -> None:
    h = alter_harness()
    result = alter(h, **fields)
    assert result.records == ()
    assert result.response.error.is_success()
    (partition_result,) = result.response.partitions
    assert partition_result.error.error is error


def test_ineligible_replica_message_names_the_reason() -> None:
    result = alter(alter_harness(), new_isr=isr(1, 4, 5))
    assert result.response.partitions[0].error.message == (
        "Ineligible replicas in the new ISR: 4 (fenced), 5 (shutting down)."
    )


def test_shrink_and_expand_isr() -> None:
    # ReplicationControlManagerTest.testShrinkAndExpandIsr: the partition epoch goes up by one
    # per change, the leader epoch stays.
    h = alter_harness()
    shrink = alter(h, new_isr=isr(1, 2))
    assert shrink.records == (PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1, 2)),)
    (result,) = shrink.response.partitions
    assert (
        result.error.error,
        result.leader_id,
        result.leader_epoch,
        result.isr,
        result.partition_epoch,
    ) == (Errors.NONE, 1, 1, (1, 2), 2)
    h.commit(shrink)
    expand = alter(
        h,
        partition_epoch=2,
        new_isr=(BrokerState(1), BrokerState(2), BrokerState(3, broker_epoch=2)),
    )
    h.commit(expand)
    p = partition(h.image, "t", 0)
    assert (p.isr, p.leader_epoch, p.partition_epoch) == ((1, 2, 3), 1, 3)


def test_unchanged_isr_writes_nothing_and_answers_current_state() -> None:
    h = alter_harness()
    result = alter(h, new_isr=isr(1, 2, 3))
    assert result.records == ()
    assert result.response.partitions[0].partition_epoch == 1


def test_stale_broker_epoch_rejects_the_whole_request() -> None:
    h = alter_harness()
    request = AlterPartitionRequest(
        broker_id=1, broker_epoch=99, partitions=(AlterPartitionData(T, 0, 1, 1, isr(1)),)
    )
    result = h.controller.alter_partition(h.image, request, 0)
    assert result.records == () and result.response.partitions == ()
    assert result.response.error.error is Errors.STALE_BROKER_EPOCH


def test_recovering_leader_reports_recovered() -> None:
    # KIP-704: after an unclean election the leader alone is in the ISR and RECOVERING; it
    # reports RECOVERED once its log is consistent, then may grow the ISR.
    image = image_with(BROKERS, {"t": [((1, 2), (1,), 1)]})
    image = apply(
        image,
        [PartitionChangeRecord(partition_id=0, topic_id=T, leader=1, leader_recovery_state=1)],
    )
    h = Harness(image)
    result = alter(h, new_isr=isr(1), recovery=0)
    assert result.records == (
        PartitionChangeRecord(partition_id=0, topic_id=T, leader_recovery_state=0),
    )


def test_same_partition_twice_in_one_request() -> None:
    h = alter_harness()
    data = AlterPartitionData(T, 0, 1, 1, isr(1, 2))
    request = AlterPartitionRequest(broker_id=1, broker_epoch=0, partitions=(data, data))
    result = h.controller.alter_partition(h.image, request, 0)
    assert len(result.records) == 1
    assert [r.error.error for r in result.response.partitions] == [
        Errors.NONE,
        Errors.INVALID_REQUEST,
    ]


# --- ElectLeaders --------------------------------------------------------------------------


def elect_image() -> MetadataImage:
    return image_with(
        {1: "unfenced", 2: "unfenced", 3: "unfenced", 4: "fenced"},
        {
            "t": [
                ((1, 2, 3), (1, 2, 3), 2),  # 0: preferred 1 can lead -> elected
                ((1, 2, 3), (1, 2, 3), 1),  # 1: preferred already leads
                ((4, 2, 3), (4, 2, 3), 2),  # 2: preferred fenced
                ((1, 2), (2,), 2),  # 3: preferred out of the ISR
                ((4, 1), (4,), -1),  # 4: offline; only an unclean election helps
                ((4,), (4,), -1),  # 5: offline for good
            ]
        },
    )


@pytest.mark.parametrize(
    ("election_type", "partition_id", "error", "leader_after"),
    [
        # ReplicationControlManagerTest.testElectPreferredLeaders
        (ElectionType.PREFERRED, 0, Errors.NONE, 1),
        (ElectionType.PREFERRED, 1, Errors.ELECTION_NOT_NEEDED, 1),
        (ElectionType.PREFERRED, 2, Errors.PREFERRED_LEADER_NOT_AVAILABLE, 2),
        (ElectionType.PREFERRED, 3, Errors.PREFERRED_LEADER_NOT_AVAILABLE, 2),
        (ElectionType.PREFERRED, 4, Errors.PREFERRED_LEADER_NOT_AVAILABLE, -1),
        (ElectionType.PREFERRED, 9, Errors.UNKNOWN_TOPIC_OR_PARTITION, None),
        # ReplicationControlManagerTest.testElectUncleanLeaders
        (ElectionType.UNCLEAN, 0, Errors.ELECTION_NOT_NEEDED, 2),
        (ElectionType.UNCLEAN, 4, Errors.NONE, 1),
        (ElectionType.UNCLEAN, 5, Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, -1),
    ],
)
def test_elect_leaders(election_type, partition_id, error, leader_after) -> None:
    h = Harness(elect_image())
    response = h.run(ElectLeadersRequest(election_type, (TopicPartitions("t", (partition_id,)),)))
    (topic_result,) = response.results
    (partition_result,) = topic_result.partition_results
    assert partition_result.error.error is error
    if leader_after is not None:
        assert partition(h.image, "t", partition_id).leader == leader_after


def test_unclean_election_resets_isr_and_marks_recovering() -> None:
    h = Harness(elect_image())
    h.run(ElectLeadersRequest(ElectionType.UNCLEAN, (TopicPartitions("t", (4,)),)))
    p = partition(h.image, "t", 4)
    assert (p.leader, p.isr, p.leader_recovery_state.value, p.leader_epoch) == (1, (1,), 1, 1)


def test_elect_all_partitions_omits_those_not_needing_election() -> None:
    h = Harness(elect_image())
    response = h.run(ElectLeadersRequest(ElectionType.PREFERRED, None))
    (topic_result,) = response.results
    assert [(r.partition_id, r.error.error) for r in topic_result.partition_results] == [
        (0, Errors.NONE),
        (2, Errors.PREFERRED_LEADER_NOT_AVAILABLE),
        (3, Errors.PREFERRED_LEADER_NOT_AVAILABLE),
        (4, Errors.PREFERRED_LEADER_NOT_AVAILABLE),
        (5, Errors.PREFERRED_LEADER_NOT_AVAILABLE),
    ]


def test_elect_unknown_topic_and_type() -> None:
    h = Harness(elect_image())
    response = h.run(ElectLeadersRequest(0, (TopicPartitions("x", (0,)),)))
    error = response.results[0].partition_results[0].error
    assert (error.error, error.message) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as x")
    bad = h.controller.elect_leaders(h.image, ElectLeadersRequest(5, None), 0)
    assert bad.records == ()
    assert (bad.response.error.error, bad.response.error.message) == (
        Errors.INVALID_REQUEST,
        "Unknown election type 5",
    )
