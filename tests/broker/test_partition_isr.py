"""A leader's ISR and high watermark, scenario by scenario: Kafka's PartitionTest ISR cases
(named per test) on a real log, with a fake clock and a recorded AlterPartition channel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from pykraft.broker.partition import PartitionError
from pykraft.protocol.errors import Errors
from pykraft.replica.isr import IsrState
from tests.broker.partition_fixtures import (
    F2,
    F3,
    LAG_MS,
    LOCAL,
    Env,
    broker_epoch,
    change,
)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    harness = Env(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


def lead(env: Env, isr: tuple[int, ...], replicas: tuple[int, ...] = (LOCAL, F2)) -> None:
    """Kafka's common set-up: 10 records at epoch 4, then leader at epoch 5."""
    env.seed(10, leader_epoch=4)
    assert env.partition.make_leader(
        change(leader_epoch=5, partition_epoch=1, replicas=replicas, isr=isr)
    )


def test_isr_expansion(env: Env) -> None:
    # Kafka testIsrExpansion.
    lead(env, isr=(LOCAL,))
    follower = env.partition.state.followers[F2]
    assert (follower.log_end_offset, follower.last_caught_up_time_ms) == (-1, 0)
    env.fetch_follower(F2, 3)
    assert env.alter.items == []
    assert env.partition.state.followers[F2].log_end_offset == 3
    env.fetch_follower(F2, 10)
    assert env.isr_update() == (LOCAL, F2)
    sent = env.alter.items[0][0].change
    assert [m.broker_epoch for m in sent.new_isr] == [broker_epoch(LOCAL), broker_epoch(F2)]
    assert env.partition.state.isr == (LOCAL,)
    assert env.partition.state.maximal_isr == {LOCAL, F2}
    assert env.partition.state.followers[F2].last_caught_up_time_ms == env.now_ms
    assert env.isr_commits == []  # proposed, not committed: not counted yet
    env.alter.complete(partition_epoch=2)
    # PartitionTest's alterPartitionListener.expands == 1 (IsrExpandsPerSec).
    assert env.isr_commits == [False]
    committed = env.partition.state
    assert committed.isr == (LOCAL, F2)
    assert committed.partition_epoch == 2
    assert committed.isr_state is IsrState.COMMITTED


def test_isr_not_expanded_if_update_fails(env: Env) -> None:
    # Kafka testIsrNotExpandedIfUpdateFails: INVALID_UPDATE_VERSION -> no retry, stay pending.
    lead(env, isr=(LOCAL,))
    env.fetch_follower(F2, 10)
    env.alter.fail(Errors.INVALID_UPDATE_VERSION)
    assert env.partition.state.isr == (LOCAL,)
    assert env.partition.state.maximal_isr == {LOCAL, F2}
    assert env.alter.items == []
    assert env.isr_commits == []  # a failed change is no expansion


@pytest.mark.parametrize(
    ("error", "retried", "pending"),
    [
        # Kafka testAlterIsrNewLeaderElected / testAlterIsrUnknownTopic /
        # testAlterIsrInvalidVersion / testInvalidAlterPartitionRequestsAreNotRetried:
        # wait for metadata; testAlterIsrUnexpectedError: retried.
        (Errors.NEW_LEADER_ELECTED, False, True),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, False, True),
        (Errors.UNKNOWN_TOPIC_ID, False, True),
        (Errors.INVALID_UPDATE_VERSION, False, True),
        (Errors.FENCED_LEADER_EPOCH, False, True),
        (Errors.INVALID_REQUEST, False, True),
        (Errors.UNKNOWN_SERVER_ERROR, True, True),
        (Errors.NOT_CONTROLLER, True, True),
        # testIsrNotExpandedIfReplicaIsFencedOrShutdown: the controller refused -> committed.
        (Errors.INELIGIBLE_REPLICA, False, False),
        (Errors.OPERATION_NOT_ATTEMPTED, False, False),
    ],
)
def test_alter_partition_failures(env: Env, error: Errors, retried: bool, pending: bool) -> None:
    # Kafka handleAlterIsrFailure: expansion of F2 answered with ``error``.
    lead(env, isr=(LOCAL,))
    env.fetch_follower(F2, 10)
    env.alter.fail(error)
    assert env.partition.state.isr == (LOCAL,)
    assert env.partition.state.is_inflight is pending
    assert env.partition.state.maximal_isr == ({LOCAL, F2} if pending else {LOCAL})
    assert len(env.alter.items) == (1 if retried else 0)


def test_retried_shrink_then_committed_moves_the_high_watermark(env: Env) -> None:
    # Kafka testRetryShrinkIsr.
    lead(env, isr=(LOCAL, F2))
    assert env.partition.high_watermark == 0
    env.now_ms += LAG_MS + 1
    assert env.partition.maybe_shrink_isr()
    assert env.isr_update() == (LOCAL,)
    assert env.partition.state.maximal_isr == {LOCAL, F2}
    env.alter.fail(Errors.NETWORK_EXCEPTION)
    assert env.isr_update() == (LOCAL,)  # sent again
    assert env.partition.high_watermark == 0
    env.alter.complete(partition_epoch=2)
    assert env.partition.state.isr == (LOCAL,)
    assert env.partition.high_watermark == 10
    assert env.isr_commits == [True]  # one shrink (IsrShrinksPerSec), however often retried


def test_maybe_shrink_isr(env: Env) -> None:
    # Kafka testMaybeShrinkIsr: F3 never fetched; right after election it counts as caught up.
    lead(env, isr=(LOCAL, F2, F3), replicas=(LOCAL, F2, F3))
    start_ms = env.now_ms
    env.fetch_follower(F2, 10)
    assert env.partition.state.followers[F3].last_caught_up_time_ms == start_ms
    assert not env.partition.maybe_shrink_isr()
    env.now_ms += LAG_MS + 1
    assert env.partition.maybe_shrink_isr()
    assert env.isr_update() == (LOCAL, F2)
    assert env.partition.high_watermark == 0  # the old ISR still counts until committed
    env.alter.complete(partition_epoch=2)
    assert env.partition.state.isr == (LOCAL, F2)
    assert env.partition.high_watermark == 10


def test_isr_not_shrunk_if_update_fails(env: Env) -> None:
    # Kafka testIsrNotShrunkIfUpdateFails: stays PendingShrinkIsr, HW unmoved.
    lead(env, isr=(LOCAL, F2))
    env.now_ms += LAG_MS + 1
    env.partition.maybe_shrink_isr()
    env.alter.fail(Errors.INVALID_UPDATE_VERSION)
    assert env.partition.state.isr_state is IsrState.PENDING_SHRINK
    assert env.partition.state.isr == (LOCAL, F2)
    assert env.partition.high_watermark == 0


def test_should_not_shrink_isr_if_previous_fetch_is_caught_up(env: Env) -> None:
    # Kafka testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp.
    lead(env, isr=(LOCAL, F2))
    start_ms = env.now_ms
    env.now_ms += 5000
    first_fetch_ms = env.now_ms
    env.fetch_follower(F2, 5)
    assert env.partition.state.followers[F2].last_caught_up_time_ms == start_ms
    assert env.partition.high_watermark == 5
    env.now_ms += 5001
    env.seed(5, leader_epoch=5)
    env.fetch_follower(F2, 10)  # the leader's end at its previous fetch
    assert env.partition.state.followers[F2].last_caught_up_time_ms == first_fetch_ms
    assert env.partition.high_watermark == 10
    env.now_ms = first_fetch_ms + LAG_MS  # lagging since, but within the limit
    assert not env.partition.maybe_shrink_isr()


def test_should_not_shrink_isr_if_follower_caught_up_to_log_end(env: Env) -> None:
    # Kafka testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd.
    lead(env, isr=(LOCAL, F2))
    env.fetch_follower(F2, 10)
    env.now_ms += LAG_MS + 1
    assert not env.partition.maybe_shrink_isr()
    assert env.alter.items == []


def test_single_in_flight_alter_isr(env: Env) -> None:
    # Kafka testSingleInFlightAlterIsr.
    lead(env, isr=(LOCAL, F2), replicas=(LOCAL, F2, F3))
    env.fetch_follower(F3, 10)
    assert env.partition.state.maximal_isr == {LOCAL, F2, F3}
    env.now_ms += LAG_MS + 1
    assert not env.partition.maybe_shrink_isr()
    assert len(env.alter.items) == 1


def test_alter_isr_leader_and_isr_race(env: Env) -> None:
    # Kafka testAlterIsrLeaderAndIsrRace: new metadata resets a pending shrink; its late answer
    # is ignored, and nothing new is proposed before it arrives (one per partition in flight).
    lead(env, isr=(LOCAL, F2))
    env.now_ms += LAG_MS + 1
    env.partition.maybe_shrink_isr()
    assert env.partition.state.is_inflight
    env.partition.make_leader(change(leader_epoch=5, partition_epoch=2, replicas=(LOCAL, F2)))
    assert not env.partition.state.is_inflight
    env.now_ms += LAG_MS + 1
    env.partition.maybe_shrink_isr()
    assert not env.partition.state.is_inflight  # refused: the old one is still queued
    env.alter.complete(partition_epoch=10)
    assert env.partition.state.isr == (LOCAL, F2)  # the stale answer changed nothing
    env.partition.maybe_shrink_isr()
    assert env.partition.state.isr_state is IsrState.PENDING_SHRINK


def test_high_watermark_does_not_advance_under_min_isr(env: Env) -> None:
    # Kafka testHighWatermarkAdvanceShouldNotAdvanceWhenUnderMinISR (KIP-966).
    env.min_isr = 3
    lead(env, isr=(LOCAL, F2), replicas=(LOCAL, F2, F3))
    env.fetch_follower(F2, 10)
    assert env.partition.high_watermark == 0
    env.fetch_follower(F3, 10)
    assert env.partition.high_watermark == 0
    assert len(env.partition.state.maximal_isr) == 3
    env.alter.complete(partition_epoch=2)
    assert env.partition.high_watermark == 10


@pytest.mark.parametrize(("state", "expected"), [("fenced", 20), ("shutdown", 20), ("up", 10)])
def test_high_watermark_increases_with_fenced_or_shutdown_follower(
    env: Env, state: str, expected: int
) -> None:
    # Kafka testHighWatermarkIncreasesWithFencedOrShutdownFollower: a caught-up follower out
    # of the ISR holds the HW back only while it may rejoin.
    lead(env, isr=(LOCAL, F2))
    env.fetch_follower(F2, 10)
    assert env.partition.high_watermark == 10
    if state == "fenced":
        env.brokers[F2] = attrs.evolve(env.brokers[F2], fenced=True)
    elif state == "shutdown":
        env.brokers[F2] = attrs.evolve(env.brokers[F2], in_controlled_shutdown=True)
    env.seed(10, leader_epoch=5)
    assert not env.partition.make_leader(
        change(leader_epoch=5, partition_epoch=2, replicas=(LOCAL, F2), isr=(LOCAL,))
    )
    assert env.partition.high_watermark == expected


def test_isr_not_expanded_if_replica_is_fenced(env: Env) -> None:
    # Kafka testIsrNotExpandedIfReplicaIsFencedOrShutdown.
    lead(env, isr=(LOCAL,))
    env.brokers[F2] = attrs.evolve(env.brokers[F2], fenced=True)
    env.fetch_follower(F2, 10)
    assert env.alter.items == []
    env.brokers[F2] = attrs.evolve(env.brokers[F2], fenced=False)
    env.fetch_follower(F2, 10)
    assert env.isr_update() == (LOCAL, F2)


def test_isr_expands_only_with_the_current_broker_epoch(env: Env) -> None:
    # Kafka testIsrCanExpandedIfBrokerEpochsMatchWithKraftMetadataCache: a fetch carrying
    # another epoch than the metadata's does not expand; -1 skips the check (old versions).
    lead(env, isr=(LOCAL,))
    env.brokers[F2] = attrs.evolve(env.brokers[F2], epoch=broker_epoch(F2) - 1)
    env.fetch_follower(F2, 10)  # newer than the metadata's: recorded, not eligible
    assert env.alter.items == []
    env.brokers[F2] = attrs.evolve(env.brokers[F2], epoch=broker_epoch(F2))
    env.fetch_follower(F2, 10, replica_epoch=-1)
    assert env.isr_update() == (LOCAL, F2)
    assert env.alter.items[0][0].change.new_isr[1].broker_epoch == -1


def test_fence_follower_fetch_with_stale_broker_epoch(env: Env) -> None:
    # Kafka testFenceFollowerFetchWithStaleBrokerEpoch.
    lead(env, isr=(LOCAL, F2))
    env.fetch_follower(F2, 10)
    before = env.partition.state.followers[F2]
    with pytest.raises(PartitionError) as raised:
        env.fetch_follower(F2, 10, replica_epoch=broker_epoch(F2) - 1)
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER
    assert env.partition.state.followers[F2] == before


def test_follower_does_not_join_isr_until_caught_up_within_the_leader_epoch(env: Env) -> None:
    # Kafka testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch.
    env.partition.make_leader(
        change(leader_epoch=8, partition_epoch=1, replicas=(LOCAL, F2, F3), isr=(LOCAL, F3))
    )
    env.append(b"a", b"b")
    env.append(b"c", b"d", b"e")
    env.fetch_follower(F3, 0)
    env.fetch_follower(F3, 2)
    assert env.partition.high_watermark == 2
    env.partition.make_follower(
        change(
            leader=F3, leader_epoch=9, partition_epoch=1, replicas=(LOCAL, F2, F3), isr=(LOCAL, F3)
        )
    )
    assert env.partition.make_leader(
        change(leader_epoch=10, partition_epoch=1, replicas=(LOCAL, F2, F3), isr=(LOCAL, F3))
    )
    epoch_start = env.partition.log_end_offset
    env.append(b"f", b"g")
    env.fetch_follower(F2, 0)
    env.fetch_follower(F2, 1)
    assert env.alter.items == []
    env.fetch_follower(F2, epoch_start)
    assert env.isr_update() == (LOCAL, F3, F2)
    assert env.partition.state.isr == (LOCAL, F3)


def test_update_follower_fetch_state(env: Env) -> None:
    # Kafka testUpdateFollowerFetchState.
    env.seed(6, leader_epoch=4)
    start_ms = env.now_ms
    env.partition.make_leader(change(leader_epoch=5, replicas=(LOCAL, F2)))
    assert env.partition.state.followers[F2].last_caught_up_time_ms == start_ms
    env.now_ms += 500
    env.fetch_follower(F2, 3)
    follower = env.partition.state.followers[F2]
    assert (follower.last_caught_up_time_ms, follower.log_end_offset) == (start_ms, 3)
    env.now_ms += 500
    env.fetch_follower(F2, 6)
    follower = env.partition.state.followers[F2]
    assert (follower.last_caught_up_time_ms, follower.log_end_offset) == (env.now_ms, 6)


def test_a_new_leader_epoch_forgets_follower_progress(env: Env) -> None:
    # Kafka makeLeader -> resetReplicaState(isNewLeader): unknown log ends, ISR members
    # caught up as of now, others never. Re-election keeps the log ends.
    lead(env, isr=(LOCAL, F2), replicas=(LOCAL, F2, F3))
    env.fetch_follower(F2, 10)
    env.fetch_follower(F3, 4)
    env.now_ms += 7
    env.partition.make_leader(
        change(leader_epoch=6, partition_epoch=2, replicas=(LOCAL, F2, F3), isr=(LOCAL, F2))
    )
    followers = env.partition.state.followers
    assert followers[F2].log_end_offset == 10 and followers[F2].last_caught_up_time_ms == env.now_ms
    assert followers[F3].log_end_offset == 4 and followers[F3].last_caught_up_time_ms == 0
    env.partition.make_follower(
        change(leader=F2, leader_epoch=7, partition_epoch=3, replicas=(LOCAL, F2, F3))
    )
    env.partition.make_leader(
        change(leader_epoch=8, partition_epoch=4, replicas=(LOCAL, F2, F3), isr=(LOCAL, F2))
    )
    followers = env.partition.state.followers
    assert followers[F2].log_end_offset == -1 and followers[F2].broker_epoch is None


def test_a_replica_added_by_a_reassignment_follows_catches_up_and_joins_the_isr(env: Env) -> None:
    # KIP-455 on the leader: the reassignment's PartitionChangeRecord adds F3 to the replicas
    # at the same leader epoch (partition epoch +1); F3 becomes a follower the leader tracks,
    # F2 keeps its progress, and F3 joins the ISR once caught up (Kafka PartitionTest's
    # testUpdateAssignmentAndIsr, then testIsrExpansion for the adding replica).
    lead(env, isr=(LOCAL, F2))
    env.fetch_follower(F2, 10)
    f2_progress = env.partition.state.followers[F2]
    # Not a new leader (Kafka's makeLeader answers isNewLeader = false), only new replicas.
    assert not env.partition.make_leader(
        change(leader_epoch=5, partition_epoch=2, replicas=(F3, LOCAL, F2), isr=(LOCAL, F2))
    )
    state = env.partition.state
    assert set(state.followers) == {F2, F3}
    assert state.followers[F2] == f2_progress
    env.fetch_follower(F3, 4)
    assert env.alter.items == []
    env.fetch_follower(F3, 10)
    assert env.isr_update() == (LOCAL, F2, F3)
