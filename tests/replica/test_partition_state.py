"""The pure leader core, one line per case: follower progress (Kafka's ReplicaTest), the
high watermark (PartitionTest's maybeIncrementLeaderHW cases), acks=all completion
(checkEnoughReplicasReachOffset), ISR proposals and AlterPartition outcomes."""

from __future__ import annotations

import attrs
import pytest
from immutables import Map

from pykraft.metadata.image import BrokerRegistration
from pykraft.protocol.errors import Errors
from pykraft.replica.isr import (
    AlterPartitionOutcome,
    AlterPartitionResult,
    BrokerState,
    IsrState,
    PendingIsrChange,
    ReplicaState,
    alter_partition_error_outcome,
    is_caught_up,
    is_replica_isr_eligible,
    is_stale_broker_epoch,
    reset_replica_state,
    update_fetch_state,
)
from pykraft.replica.partition_state import (
    LeaderAndIsr,
    PartitionRole,
    PartitionState,
    check_current_leader_epoch,
    check_enough_replicas_reach_offset,
    handle_alter_partition_result,
    high_watermark_candidate,
    is_stale,
    leader_state,
    needs_expand_isr,
    out_of_sync_replicas,
    prepare_isr_expand,
    prepare_isr_shrink,
    with_follower,
)

LOCAL, F2, F3 = 1, 2, 3
LAG = 30_000
NOW = 100_000


def broker(
    broker_id: int, *, fenced: bool = False, in_controlled_shutdown: bool = False
) -> BrokerRegistration:
    return BrokerRegistration(
        id=broker_id,
        epoch=100 + broker_id,
        incarnation_id="x",
        fenced=fenced,
        in_controlled_shutdown=in_controlled_shutdown,
    )


def at(log_end_offset: int, caught_up_ms: int = NOW, epoch: int | None = None) -> ReplicaState:
    """A follower that fetched up to ``log_end_offset``, caught up at ``caught_up_ms``."""
    return ReplicaState(
        log_start_offset=0,
        log_end_offset=log_end_offset,
        last_caught_up_time_ms=caught_up_ms,
        broker_epoch=epoch,
    )


def leading(
    isr: tuple[int, ...], followers: dict[int, ReplicaState], epoch_start: int = 0
) -> PartitionState:
    return PartitionState(
        role=PartitionRole.LEADER,
        leader_id=LOCAL,
        leader_epoch=5,
        partition_epoch=1,
        replicas=(LOCAL, *followers),
        isr=isr,
        leader_epoch_start_offset=epoch_start,
        followers=Map(followers),
    )


def all_up(broker_id: int) -> BrokerRegistration:
    return broker(broker_id)


# ------------------------------------------------------------------ follower progress


@pytest.mark.parametrize(
    ("replica", "fetch", "leader_end", "now", "expected_caught_up"),
    [
        # Kafka ReplicaTest.testUpdateFetchState and friends.
        (ReplicaState(), 5, 10, 1000, 0),  # behind, never caught up
        (ReplicaState(), 10, 10, 1000, 1000),  # at the leader's end now
        (ReplicaState(), 12, 10, 1000, 1000),  # past it (the leader appended since)
        # reached the leader end of its previous fetch: caught up as of that fetch
        (
            ReplicaState(last_fetch_leader_log_end_offset=8, last_fetch_time_ms=700),
            8,
            10,
            1000,
            700,
        ),
        (ReplicaState(last_fetch_leader_log_end_offset=9, last_fetch_time_ms=700), 8, 10, 1000, 0),
        # never goes back in time
        (
            ReplicaState(
                last_caught_up_time_ms=900,
                last_fetch_leader_log_end_offset=8,
                last_fetch_time_ms=700,
            ),
            8,
            10,
            1000,
            900,
        ),
    ],
)
def test_update_fetch_state(
    replica: ReplicaState, fetch: int, leader_end: int, now: int, expected_caught_up: int
) -> None:
    updated = update_fetch_state(
        replica,
        fetch_offset=fetch,
        log_start_offset=3,
        fetch_time_ms=now,
        leader_end_offset=leader_end,
        broker_epoch=7,
    )
    # Every field (update_fetch_state builds the value positionally).
    assert updated.last_caught_up_time_ms == expected_caught_up
    assert (
        updated.log_start_offset,
        updated.log_end_offset,
        updated.last_fetch_time_ms,
        updated.broker_epoch,
    ) == (3, fetch, now, 7)
    assert updated.last_fetch_leader_log_end_offset == max(
        leader_end, replica.last_fetch_leader_log_end_offset
    )


@pytest.mark.parametrize(
    ("log_end", "caught_up_ms", "leader_end", "now", "expected"),
    [
        (10, 0, 10, 10**9, True),  # at the leader's log end: always caught up
        (9, NOW - LAG, 10, NOW, True),  # exactly the max lag
        (9, NOW - LAG - 1, 10, NOW, False),
    ],
)
def test_is_caught_up(
    log_end: int, caught_up_ms: int, leader_end: int, now: int, expected: bool
) -> None:
    assert is_caught_up(at(log_end, caught_up_ms), leader_end, now, LAG) is expected


def test_reset_replica_state() -> None:
    # Kafka ReplicaTest.testResetReplicaStateWhenLeaderIsReelected / ...IsElected.
    old = at(7, caught_up_ms=10, epoch=3)
    new_leader = reset_replica_state(
        old, now_ms=NOW, leader_end_offset=9, is_new_leader=True, is_in_sync=True
    )
    assert new_leader == ReplicaState(
        last_fetch_leader_log_end_offset=-1, last_caught_up_time_ms=NOW
    )
    reelected = reset_replica_state(
        old, now_ms=NOW, leader_end_offset=9, is_new_leader=False, is_in_sync=False
    )
    assert (reelected.log_end_offset, reelected.broker_epoch) == (7, 3)
    assert (reelected.last_caught_up_time_ms, reelected.last_fetch_time_ms) == (0, 0)
    assert reelected.last_fetch_leader_log_end_offset == 9


@pytest.mark.parametrize(
    ("registration", "fetch_epoch", "stale"),
    [
        (broker(F2), 102, False),
        (broker(F2), 101, True),  # an older incarnation than the metadata's
        (broker(F2), 103, False),  # newer than the metadata (it lags): not stale
        (broker(F2), -1, False),  # not sent (Fetch < v15)
        (broker(F2, fenced=True), 101, False),  # fenced: no alive epoch to compare
        (None, 1, False),
    ],
)
def test_is_stale_broker_epoch(
    registration: BrokerRegistration | None, fetch_epoch: int, stale: bool
) -> None:
    assert is_stale_broker_epoch(registration, fetch_epoch) is stale


@pytest.mark.parametrize(
    ("replica", "registration", "eligible"),
    [
        (at(5, epoch=102), broker(F2), True),
        (at(5, epoch=-1), broker(F2), True),  # -1 skips the epoch check
        (at(5, epoch=103), broker(F2), False),  # epoch mismatch
        (at(5, epoch=None), broker(F2), False),  # never fetched
        (at(5, epoch=102), broker(F2, fenced=True), False),
        (at(5, epoch=102), broker(F2, in_controlled_shutdown=True), False),
        (at(5, epoch=102), None, False),
        (None, broker(F2), False),
    ],
)
def test_is_replica_isr_eligible(
    replica: ReplicaState | None, registration: BrokerRegistration | None, eligible: bool
) -> None:
    # Kafka Partition.isReplicaIsrEligible / isBrokerEpochIsrEligible (KIP-903).
    assert is_replica_isr_eligible(replica, registration) is eligible


# ------------------------------------------------------------------ metadata


def test_a_lower_partition_epoch_is_stale_an_equal_one_is_not() -> None:
    state = PartitionState(partition_epoch=5)
    for epoch, stale in [(4, True), (5, False), (6, False)]:
        change = LeaderAndIsr(
            leader=LOCAL, leader_epoch=1, partition_epoch=epoch, replicas=(LOCAL,), isr=(LOCAL,)
        )
        assert is_stale(state, change) is stale


@pytest.mark.parametrize(
    ("local", "requested", "expected"),
    [
        (5, -1, Errors.NONE),
        (5, 5, Errors.NONE),
        (5, 4, Errors.FENCED_LEADER_EPOCH),
        (5, 6, Errors.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_check_current_leader_epoch(local: int, requested: int, expected: Errors) -> None:
    assert check_current_leader_epoch(local, requested) is expected


def test_leader_state_drops_a_pending_change_and_departed_replicas() -> None:
    pending = prepare_isr_shrink(
        leading((LOCAL, F2, F3), {F2: at(10), F3: at(3)}), frozenset({F3}), 101
    )
    change = LeaderAndIsr(
        leader=LOCAL, leader_epoch=5, partition_epoch=2, replicas=(LOCAL, F2), isr=(LOCAL, F2)
    )
    state = leader_state(pending, change, log_end_offset=10, now_ms=NOW)
    assert state.isr_state is IsrState.COMMITTED
    assert dict(state.followers) == {F2: at(10)}  # same epoch: progress kept, F3 gone


# ------------------------------------------------------------------ high watermark


@pytest.mark.parametrize(
    ("isr", "followers", "min_isr", "expected"),
    [
        ((LOCAL,), {}, 1, 10),  # RF=1: the leader's own log end
        ((LOCAL, F2), {F2: at(7)}, 1, 7),  # the slowest ISR member
        ((LOCAL, F2), {F2: at(12)}, 1, 10),  # never past the leader's log end
        ((LOCAL, F2), {F2: ReplicaState()}, 1, -1),  # unknown log end: holds it at -1
        # Outside the ISR, caught up and eligible: waits for it (it is about to join) ...
        ((LOCAL,), {F2: at(3, epoch=102)}, 1, 3),
        # ... but not for one that lags, or that is not eligible (never fetched / fenced).
        ((LOCAL,), {F2: at(3, caught_up_ms=NOW - LAG - 1, epoch=102)}, 1, 10),
        ((LOCAL,), {F2: at(3, epoch=None)}, 1, 10),
        # KIP-966: no movement while the committed ISR is below min.insync.replicas ...
        ((LOCAL,), {F2: at(10, epoch=102)}, 2, None),
        # ... capped at the replication factor.
        ((LOCAL,), {}, 3, 10),
    ],
)
def test_high_watermark_candidate(
    isr: tuple[int, ...], followers: dict[int, ReplicaState], min_isr: int, expected: int | None
) -> None:
    state = leading(isr, followers)
    assert (
        high_watermark_candidate(
            state,
            log_end_offset=10,
            now_ms=NOW,
            replica_lag_time_max_ms=LAG,
            min_insync_replicas=min_isr,
            brokers=all_up,
        )
        == expected
    )


def test_the_maximal_isr_counts_a_replica_being_added_not_one_being_removed() -> None:
    # KIP-497: PendingExpandIsr.maximalIsr = isr + new; PendingShrinkIsr.maximalIsr = isr.
    followers = {F2: at(10, epoch=102), F3: at(4, caught_up_ms=0, epoch=103)}
    expanding = prepare_isr_expand(leading((LOCAL, F2), followers), F3, 101)
    assert expanding.maximal_isr == {LOCAL, F2, F3}
    shrinking = prepare_isr_shrink(leading((LOCAL, F2, F3), followers), frozenset({F3}), 101)
    assert shrinking.maximal_isr == {LOCAL, F2, F3}
    committed = leading((LOCAL, F2), followers)
    for state in (expanding, shrinking, committed):  # the set-free forms agree with the set
        assert state.maximal_isr_size == len(state.maximal_isr)
        for replica in (LOCAL, F2, F3, 99):
            assert state.in_maximal_isr(replica) == (replica in state.maximal_isr)
    assert committed.maximal_isr_size == 2 and not committed.in_maximal_isr(F3)
    for state in (expanding, shrinking):
        assert (
            high_watermark_candidate(
                state,
                log_end_offset=10,
                now_ms=NOW,
                replica_lag_time_max_ms=LAG,
                min_insync_replicas=1,
                brokers=all_up,
            )
            == 4
        )


@pytest.mark.parametrize(
    ("role", "isr", "pending_f3", "high_watermark", "min_isr", "expected"),
    [
        # Kafka checkEnoughReplicasReachOffset.
        (PartitionRole.LEADER, (LOCAL, F2), False, 5, 2, (False, Errors.NONE)),
        (PartitionRole.LEADER, (LOCAL, F2), False, 6, 2, (True, Errors.NONE)),
        (
            PartitionRole.LEADER,
            (LOCAL,),
            False,
            6,
            2,
            (True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
        ),
        (PartitionRole.LEADER, (LOCAL,), True, 6, 2, (True, Errors.NONE)),  # maximal ISR
        (
            PartitionRole.LEADER,
            (LOCAL,),
            False,
            6,
            5,
            (True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
        ),
        (PartitionRole.FOLLOWER, (), False, 6, 1, (False, Errors.NOT_LEADER_OR_FOLLOWER)),
    ],
)
def test_check_enough_replicas_reach_offset(
    role: PartitionRole,
    isr: tuple[int, ...],
    pending_f3: bool,
    high_watermark: int,
    min_isr: int,
    expected: tuple[bool, Errors],
) -> None:
    state = leading(isr, {F2: at(6, epoch=102), F3: at(6, epoch=103)})
    if pending_f3:
        state = prepare_isr_expand(state, F3, 101)
    state = state._replace(role=role)
    assert check_enough_replicas_reach_offset(state, high_watermark, 6, min_isr) == expected


# ------------------------------------------------------------------ ISR proposals


@pytest.mark.parametrize(
    ("follower", "high_watermark", "epoch_start", "expected"),
    [
        (at(10, epoch=102), 10, 0, True),
        (at(9, epoch=102), 10, 0, False),  # below the high watermark
        (at(10, epoch=102), 10, 11, False),  # not yet inside the current leader epoch
        (at(10, epoch=99), 10, 0, False),  # not eligible (broker epoch mismatch)
    ],
)
def test_needs_expand_isr(
    follower: ReplicaState, high_watermark: int, epoch_start: int, expected: bool
) -> None:
    # Kafka needsExpandIsr / isFollowerInSync.
    state = leading((LOCAL,), {F2: follower}, epoch_start)
    assert needs_expand_isr(state, F2, high_watermark, broker(F2)) is expected
    assert not needs_expand_isr(
        prepare_isr_expand(state, F3, 101), F2, high_watermark, broker(F2)
    )  # one change in flight at a time


def test_expand_sends_broker_epochs_unknown_ones_as_minus_one() -> None:
    # Kafka addBrokerEpochToIsr.
    state = leading((LOCAL, F3), {F2: at(10, epoch=102), F3: ReplicaState()})
    pending = prepare_isr_expand(state, F2, 101).pending_isr_change
    assert pending is not None and pending.kind is IsrState.PENDING_EXPAND
    assert pending.new_isr == (
        BrokerState(broker_id=LOCAL, broker_epoch=101),
        BrokerState(broker_id=F3, broker_epoch=-1),
        BrokerState(broker_id=F2, broker_epoch=102),
    )
    assert (pending.leader_epoch, pending.partition_epoch) == (5, 1)


def test_out_of_sync_replicas() -> None:
    # Kafka getOutOfSyncReplicas: stuck or slow for the max lag; none while in flight.
    state = leading((LOCAL, F2, F3), {F2: at(10, caught_up_ms=0), F3: at(8, caught_up_ms=0)})
    assert out_of_sync_replicas(state, 10, NOW, LAG) == {F3}
    assert out_of_sync_replicas(state, 12, NOW, LAG) == {F2, F3}
    assert out_of_sync_replicas(state, 12, LAG, LAG) == set()
    shrinking = prepare_isr_shrink(state, frozenset({F3}), 101)
    assert out_of_sync_replicas(shrinking, 12, NOW, LAG) == set()


# ------------------------------------------------------------------ AlterPartition answers


def test_a_committed_answer_takes_the_controller_isr_and_epoch() -> None:
    state = prepare_isr_expand(leading((LOCAL,), {F2: at(10, epoch=102)}), F2, 101)
    sent = state.pending_isr_change
    assert sent is not None
    ok = AlterPartitionResult(
        error=Errors.NONE, leader_id=LOCAL, leader_epoch=5, isr=(LOCAL, F2), partition_epoch=2
    )
    committed, outcome = handle_alter_partition_result(state, sent, ok)
    assert outcome is AlterPartitionOutcome.COMMITTED
    assert (committed.isr, committed.partition_epoch, committed.is_inflight) == (
        (LOCAL, F2),
        2,
        False,
    )
    # Kafka handleAlterPartitionUpdate: another leader epoch, or an older partition epoch,
    # is ignored (still pending); an answer for a change no longer pending too.
    for stale in (attrs.evolve(ok, leader_epoch=6), attrs.evolve(ok, partition_epoch=0)):
        assert handle_alter_partition_result(state, sent, stale) == (
            state,
            AlterPartitionOutcome.IGNORED,
        )
    assert handle_alter_partition_result(committed, sent, ok)[1] is AlterPartitionOutcome.IGNORED


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (Errors.OPERATION_NOT_ATTEMPTED, AlterPartitionOutcome.RESET),
        (Errors.INELIGIBLE_REPLICA, AlterPartitionOutcome.RESET),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, AlterPartitionOutcome.WAIT_FOR_METADATA),
        (Errors.UNKNOWN_TOPIC_ID, AlterPartitionOutcome.WAIT_FOR_METADATA),
        (Errors.FENCED_LEADER_EPOCH, AlterPartitionOutcome.WAIT_FOR_METADATA),
        (Errors.INVALID_UPDATE_VERSION, AlterPartitionOutcome.WAIT_FOR_METADATA),
        (Errors.INVALID_REQUEST, AlterPartitionOutcome.WAIT_FOR_METADATA),
        (Errors.NEW_LEADER_ELECTED, AlterPartitionOutcome.WAIT_FOR_METADATA),
        (Errors.NOT_CONTROLLER, AlterPartitionOutcome.RETRY),
        (Errors.UNKNOWN_SERVER_ERROR, AlterPartitionOutcome.RETRY),
        (Errors.NETWORK_EXCEPTION, AlterPartitionOutcome.RETRY),
    ],
)
def test_alter_partition_error_outcome(error: Errors, outcome: AlterPartitionOutcome) -> None:
    # Kafka Partition.handleAlterPartitionError.
    assert alter_partition_error_outcome(error) is outcome


def test_with_follower_is_evolve_of_one_follower_for_every_field() -> None:
    # Built field by field for speed: a field added to PartitionState and not copied there would
    # silently reset at every follower fetch. Every field is given a non-default value here.
    values = {
        "role": PartitionRole.LEADER,
        "leader_id": LOCAL,
        "leader_epoch": 7,
        "partition_epoch": 9,
        "replicas": (LOCAL, F2, F3),
        "isr": (LOCAL, F2),
        "pending_isr_change": PendingIsrChange(
            kind=IsrState.PENDING_EXPAND,
            leader_epoch=7,
            partition_epoch=9,
            new_isr=tuple(BrokerState(broker_id=b) for b in (LOCAL, F2, F3)),
            changed=frozenset({F3}),
        ),
        "leader_epoch_start_offset": 40,
        "followers": Map({F2: at(10)}),
    }
    assert set(values) == set(PartitionState._fields)
    state = PartitionState(**values)  # type: ignore[arg-type]
    assert all(
        getattr(state, name) != PartitionState._field_defaults.get(name)
        for name in PartitionState._fields
    )
    assert with_follower(state, F3, at(12)) == state._replace(
        followers=state.followers.set(F3, at(12))
    )
