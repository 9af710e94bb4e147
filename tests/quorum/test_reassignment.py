"""Partition reassignment in the controller (KIP-455), following Kafka's
ReplicationControlManagerTest (testReassignPartitions, testCancelReassignPartitions,
testReassignPartitionsHandlesNewReassignmentThatRemovesPreviouslyAddingReplicas,
testAlterPartitionReassignmentsWithInvalidReplicas...), PartitionReassignmentReplicasTest and
PartitionReassignmentRevertTest.
"""

from __future__ import annotations

import pytest

from pykraft.metadata.api.reassignments import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    ListReassignmentsTopic,
    ReassignablePartition,
    ReassignableTopic,
)
from pykraft.metadata.image import MetadataImage, PartitionRegistration
from pykraft.metadata.records import ConfigRecord, ConfigResourceType, PartitionChangeRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import AlterPartitionData, AlterPartitionRequest, BrokerState
from pykraft.quorum.managers import reassignment
from pykraft.quorum.managers.reassignment import list_partition_reassignments
from pykraft.quorum.managers.reassignment_replicas import (
    CompletedReassignment,
    ReassignmentReplicas,
    ReassignmentRevert,
)
from tests.quorum.helpers import Harness, apply, image_with, partition, topic_id

BROKERS = {10: "unfenced", 11: "unfenced", 12: "unfenced", 13: "unfenced"}
T = topic_id("t")


def harness(*partitions: tuple[tuple[int, ...], tuple[int, ...], int]) -> Harness:
    return Harness(image_with(BROKERS, {"t": list(partitions) or [((10, 11), (10, 11), 10)]}))


def reassign(h: Harness, *targets: tuple[int, tuple[int, ...] | None], topic: str = "t"):
    request = AlterPartitionReassignmentsRequest(
        (ReassignableTopic(topic, tuple(ReassignablePartition(i, r) for i, r in targets)),)
    )
    result = h.controller.alter_partition_reassignments(h.image, request, 0)
    h.commit(result)
    return [(p.partition_index, p.error.error) for p in result.response.responses[0].partitions]


def expand_isr(h: Harness, new_isr: tuple[int, ...], index: int = 0):
    """The leader's AlterPartition with ``new_isr``, at the epochs the image shows."""
    p = partition(h.image, "t", index)
    request = AlterPartitionRequest(
        broker_id=p.leader,
        broker_epoch=h.image.cluster.brokers[p.leader].epoch,
        partitions=(
            AlterPartitionData(
                T, index, p.leader_epoch, p.partition_epoch, tuple(BrokerState(b) for b in new_isr)
            ),
        ),
    )
    return h.commit(h.controller.alter_partition(h.image, request, 0)).partitions[0]


def state(p: PartitionRegistration) -> tuple[object, ...]:
    return (p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader)


# ---------------------------------------------------------------- PartitionReassignmentReplicas


@pytest.mark.parametrize(
    ("current", "target", "replicas", "adding", "removing"),
    [
        ((3, 2, 1), (3, 2, 1), (3, 2, 1), (), ()),  # testNoneAddedOrRemoved
        ((3, 2, 1), (3, 6, 2, 1, 5), (3, 6, 2, 1, 5), (5, 6), ()),  # testAdditions
        ((3, 2, 1, 0), (3, 1), (3, 1, 0, 2), (), (0, 2)),  # testRemovals
        ((3, 2, 1, 0), (7, 3, 1, 9), (7, 3, 1, 9, 0, 2), (7, 9), (0, 2)),  # ...AndRemovals
        ((0, 1, 2, 3), (3, 2, 1, 0), (3, 2, 1, 0), (), ()),  # testRearrangement
    ],
)
def test_reassignment_replicas(current, target, replicas, adding, removing) -> None:
    moving = ReassignmentReplicas.of(current, target)
    assert (moving.replicas, moving.adding, moving.removing) == (replicas, adding, removing)
    assert moving.target_replicas() == target
    assert moving.original_replicas() == tuple(r for r in replicas if r not in adding)


@pytest.mark.parametrize(
    ("current", "target", "isr", "completed"),
    [
        ((0, 1, 2), (3, 4, 5), (0, 1, 2), None),  # testDoesNotCompleteReassignment
        ((0, 1, 2), (3, 4, 5), (0, 1, 2, 3, 4), None),  # 5 still lags
        ((0, 1, 2), (3, 4, 5), (0, 1, 2, 3, 4, 5), ((3, 4, 5), (3, 4, 5))),  # ...AllNewReplicas
        ((0, 1, 2), (0, 1, 3), (0, 1, 2, 3), ((0, 1, 3), (0, 1, 3))),  # ...SomeNewReplicas
        ((0, 1, 2), (0, 1), (0, 2), None),  # 1 is out of the ISR
        ((0, 1, 2), (0, 1), (2,), None),  # never into an empty ISR
        ((0, 1), (0, 1), (0, 1), None),  # nothing in progress
    ],
)
def test_maybe_complete_reassignment(current, target, isr, completed) -> None:
    moving = ReassignmentReplicas.of(current, target)
    expected = None if completed is None else CompletedReassignment(*completed)
    assert moving.maybe_complete_reassignment(isr) == expected


def registration(replicas, isr, adding=(), removing=()) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=replicas,
        isr=isr,
        adding_replicas=adding,
        removing_replicas=removing,
        leader=isr[0],
    )


@pytest.mark.parametrize(
    ("part", "revert"),
    [
        (registration((3, 2, 1), (3, 2)), ((3, 2, 1), (3, 2), False)),  # testNoneAddedOrRemoved
        (registration((3, 2, 1), (3, 2), removing=(2, 1)), ((3, 2, 1), (3, 2), False)),
        (registration((4, 5, 3, 2, 1), (4, 2), adding=(4, 5)), ((3, 2, 1), (2,), False)),
        (
            registration((4, 5, 3, 2, 1), (4, 2), adding=(4, 5), removing=(2,)),
            ((3, 2, 1), (2,), False),
        ),
        # testIsrSpecialCase: only adding replicas in sync -> the first original one, unclean.
        (
            registration((4, 5, 3, 2, 1), (4,), adding=(4, 5), removing=(2,)),
            ((3, 2, 1), (3,), True),
        ),
    ],
)
def test_reassignment_revert(part, revert) -> None:
    assert ReassignmentRevert.of(part) == ReassignmentRevert(*revert)


# ---------------------------------------------------------------- AlterPartitionReassignments


def test_a_move_adds_then_completes_when_the_target_is_in_sync() -> None:
    # The move: [10, 11] -> [11, 12] with leader 10 being removed.
    h = harness()
    before = partition(h.image, "t", 0)
    assert reassign(h, (0, (11, 12))) == [(0, Errors.NONE)]
    moving = partition(h.image, "t", 0)
    assert state(moving) == ((11, 12, 10), (10, 11), (12,), (10,), 10)
    assert moving.leader_epoch == before.leader_epoch  # nobody left yet: no fencing
    # The leader adds the caught-up replica 12: the same record completes the reassignment.
    result = expand_isr(h, (10, 11, 12))
    done = partition(h.image, "t", 0)
    assert state(done) == ((11, 12), (11, 12), (), (), 11)
    assert done.leader_epoch == moving.leader_epoch + 1
    # Kafka: the ISR was changed but leadership moved, so the old leader is told.
    assert result.error.error is Errors.NEW_LEADER_ELECTED
    assert list_partition_reassignments(h.image, ListPartitionReassignmentsRequest()).topics == ()


def test_a_move_waits_for_every_adding_replica() -> None:
    h = harness()
    reassign(h, (0, (12, 13)))
    expand_isr(h, (10, 11, 12))
    # Adding replicas stay listed until the reassignment completes, in sync or not (Kafka).
    assert state(partition(h.image, "t", 0)) == (
        (12, 13, 10, 11),
        (10, 11, 12),
        (12, 13),
        (10, 11),
        10,
    )
    expand_isr(h, (10, 11, 12, 13))
    assert state(partition(h.image, "t", 0)) == ((12, 13), (12, 13), (), (), 12)


def test_a_target_already_in_sync_completes_at_once_and_fences_the_removed() -> None:
    h = harness(((10, 11, 12), (10, 11, 12), 10))
    epoch = partition(h.image, "t", 0).leader_epoch
    assert reassign(h, (0, (10, 11))) == [(0, Errors.NONE)]
    done = partition(h.image, "t", 0)
    assert state(done) == ((10, 11), (10, 11), (), (), 10)
    # triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: 12 left, the leader epoch moves.
    assert done.leader_epoch == epoch + 1


def test_reordering_the_replicas_is_no_reassignment() -> None:
    h = harness()
    epoch = partition(h.image, "t", 0).leader_epoch
    assert reassign(h, (0, (11, 10))) == [(0, Errors.NONE)]
    assert state(partition(h.image, "t", 0)) == ((11, 10), (10, 11), (), (), 10)
    assert partition(h.image, "t", 0).leader_epoch == epoch


def test_resending_the_target_in_progress_changes_nothing() -> None:
    h = harness()
    reassign(h, (0, (11, 12)))
    request = AlterPartitionReassignmentsRequest(
        (ReassignableTopic("t", (ReassignablePartition(0, (11, 12)),)),)
    )
    result = h.controller.alter_partition_reassignments(h.image, request, 0)
    assert result.records == ()
    assert result.response.responses[0].partitions[0].error.error is Errors.NONE


def test_a_new_target_can_drop_a_replica_being_added() -> None:
    # testReassignPartitionsHandlesNewReassignmentThatRemovesPreviouslyAddingReplicas
    h = harness()
    reassign(h, (0, (11, 12)))
    reassign(h, (0, (11, 13)))
    p = partition(h.image, "t", 0)
    assert p.replicas == (11, 13, 10, 12)
    assert (p.adding_replicas, p.removing_replicas) == ((13,), (10, 12))
    expand_isr(h, (10, 11, 13))
    assert state(partition(h.image, "t", 0)) == ((11, 13), (11, 13), (), (), 11)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ((), "includes an empty replica list"),
        ((11, 12, 11), "includes the broker 11 more than once"),
        ((11, 99), "includes broker 99, but no such broker is registered"),
    ],
)
def test_invalid_targets(target, message) -> None:
    h = harness()
    request = AlterPartitionReassignmentsRequest(
        (ReassignableTopic("t", (ReassignablePartition(0, target),)),)
    )
    result = h.controller.alter_partition_reassignments(h.image, request, 0)
    error = result.response.responses[0].partitions[0].error
    assert result.records == ()
    assert error.error is Errors.INVALID_REPLICA_ASSIGNMENT
    assert message in (error.message or "")


def test_unknown_topics_and_partitions_fail_alone() -> None:
    h = harness()
    assert reassign(h, (0, (10, 11)), topic="nope") == [(0, Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    assert reassign(h, (7, (10, 11)), (0, (11, 12))) == [
        (7, Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (0, Errors.NONE),
    ]
    assert partition(h.image, "t", 0).adding_replicas == (12,)


def test_a_partition_named_twice_is_refused_and_written_nowhere() -> None:
    # Both entries would be built from the same image: two conflicting records.
    h = harness(((10, 11), (10, 11), 10), ((10, 11), (10, 11), 10))
    before = h.image
    assert reassign(h, (0, (11, 12)), (1, (11, 12)), (0, (12, 13))) == [
        (0, Errors.INVALID_REQUEST),
        (1, Errors.NONE),
        (0, Errors.INVALID_REQUEST),
    ]
    assert partition(h.image, "t", 0) == partition(before, "t", 0)
    assert partition(h.image, "t", 1).adding_replicas == (12,)


def test_more_records_than_one_batch_are_refused_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # QuorumController.MAX_RECORDS_PER_USER_OP bounds one operation's records.
    monkeypatch.setattr(reassignment, "MAX_BATCH_RECORDS", 1)
    h = harness(((10, 11), (10, 11), 10), ((10, 11), (10, 11), 10))
    request = AlterPartitionReassignmentsRequest(
        (
            ReassignableTopic(
                "t", (ReassignablePartition(0, (11, 12)), ReassignablePartition(1, (11, 12)))
            ),
        )
    )
    result = h.controller.alter_partition_reassignments(h.image, request, 0)
    assert result.records == ()
    errors = [p.error.error for p in result.response.responses[0].partitions]
    assert errors == [Errors.INVALID_REQUEST, Errors.INVALID_REQUEST]
    # One record is within the bound.
    assert reassign(h, (0, (11, 12))) == [(0, Errors.NONE)]


# ---------------------------------------------------------------- cancellation


def test_cancel_without_a_reassignment() -> None:
    assert reassign(harness(), (0, None)) == [(0, Errors.NO_REASSIGNMENT_IN_PROGRESS)]


def test_cancel_reverts_to_the_original_replicas() -> None:
    # testCancelReassignPartitions: the adding replica leaves the ISR and the replicas.
    h = harness()
    reassign(h, (0, (11, 12, 13)))
    expand_isr(h, (10, 11, 12))  # 13 still lags
    assert reassign(h, (0, None)) == [(0, Errors.NONE)]
    p = partition(h.image, "t", 0)
    # Kafka's originalReplicas() is replicas minus adding: the target's order, not the original.
    assert state(p) == ((11, 10), (10, 11), (), (), 10)


def unclean_revert_image(unclean: str | None) -> MetadataImage:
    # [10, 11] -> [12, 13], then 10 and 11 fell out: only 12 (adding) is in sync and leads.
    image = image_with(BROKERS, {"t": [((12, 13, 10, 11), (12,), 12)]})
    image = apply(
        image,
        [
            PartitionChangeRecord(
                partition_id=0, topic_id=T, adding_replicas=(12, 13), removing_replicas=(10, 11)
            )
        ],
    )
    if unclean is not None:
        image = apply(
            image,
            [
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="t",
                    name="unclean.leader.election.enable",
                    value=unclean,
                )
            ],
        )
    return image


def test_a_cancel_needing_an_unclean_election_is_refused_by_default() -> None:
    h = Harness(unclean_revert_image(None))
    request = AlterPartitionReassignmentsRequest(
        (ReassignableTopic("t", (ReassignablePartition(0, None),)),)
    )
    result = h.controller.alter_partition_reassignments(h.image, request, 0)
    error = result.response.responses[0].partitions[0].error
    assert (result.records, error.error) == ((), Errors.INVALID_REPLICA_ASSIGNMENT)
    assert "would require an unclean leader election" in (error.message or "")


def test_a_cancel_needing_an_unclean_election_with_it_enabled() -> None:
    h = Harness(unclean_revert_image("true"))
    assert reassign(h, (0, None)) == [(0, Errors.NONE)]
    p = partition(h.image, "t", 0)
    assert state(p) == ((10, 11), (10,), (), (), 10)


# ---------------------------------------------------------------- ListPartitionReassignments


def test_list_shows_reassignments_in_progress_only() -> None:
    h = harness(((10, 11), (10, 11), 10), ((11, 12), (11, 12), 11), ((12, 13), (12, 13), 12))
    reassign(h, (0, (11, 12)), (2, (13, 10)))
    everything = list_partition_reassignments(h.image, ListPartitionReassignmentsRequest())
    listed = [
        (t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
        for t in everything.topics
        for p in t.partitions
    ]
    assert listed == [("t", 0, (11, 12, 10), (12,), (10,)), ("t", 2, (13, 10, 12), (10,), (12,))]
    asked = ListPartitionReassignmentsRequest(
        (ListReassignmentsTopic("t", (2, 1, 2)), ListReassignmentsTopic("nope", (0,)))
    )
    some = list_partition_reassignments(h.image, asked)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in some.topics] == [
        ("t", [2])
    ]
