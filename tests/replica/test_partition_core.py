"""PartitionCore: each input answers a Ready (persist, apply, answer) and the core changes only
when the shell advances it (etcd-io/raft's Ready/Advance contract; Kafka's Partition decisions)."""

from __future__ import annotations

import pytest

from pykraft.metadata.image import BrokerRegistration
from pykraft.protocol.errors import Errors
from pykraft.replica.isr import AlterPartitionOutcome, AlterPartitionResult, IsrState
from pykraft.replica.partition_core import LogView, PartitionCore, check_transition, diverging_epoch
from pykraft.replica.partition_state import PartitionError, PartitionRole, PartitionState
from pykraft.replica.ready import Ready
from pykraft.storage.leader_epoch_cache import EpochEntry, OffsetAndEpoch
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.partition_fixtures import F2, LOCAL, change

TP = TopicPartition("pets", 0)
LAG_MS = 30_000
NOW = 1_000_000
BROKERS = {
    broker_id: BrokerRegistration(
        id=broker_id, epoch=100 + broker_id, incarnation_id="i", fenced=False
    )
    for broker_id in (LOCAL, F2)
}


def view(log_end_offset: int, high_watermark: int = 0, now_ms: int = NOW) -> LogView:
    return LogView(
        log_end_offset=log_end_offset,
        high_watermark=high_watermark,
        now_ms=now_ms,
        brokers=BROKERS.get,
        local_broker_epoch=101,
    )


def advanced(core: PartitionCore, ready: Ready | None) -> Ready:
    assert ready is not None
    core.advance(ready)
    return ready


def test_make_leader_asks_to_persist_the_epoch_then_move_the_high_watermark() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    ready = core.make_leader(change(), view(log_end_offset=5))
    assert ready is not None
    assert ready.epoch_start == OffsetAndEpoch(5, 1)
    assert ready.state.role is PartitionRole.LEADER
    assert ready.high_watermark == 5  # one replica: the log end is committed
    assert ready.partition_changed
    assert core.state == PartitionState()  # nothing changes before the shell advances
    core.advance(ready)
    assert core.state is ready.state


def test_the_same_leader_epoch_again_persists_nothing() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    advanced(core, core.make_leader(change(), view(5)))
    again = core.make_leader(change(partition_epoch=4), view(5, high_watermark=5))
    assert again is not None
    assert again.epoch_start is None
    assert again.high_watermark is None
    assert not again.partition_changed


def test_a_stale_partition_epoch_is_ignored() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    advanced(core, core.make_leader(change(partition_epoch=5), view(0)))
    assert core.make_leader(change(leader_epoch=4, partition_epoch=4), view(0)) is None
    assert core.make_follower(change(leader=F2, leader_epoch=4, partition_epoch=4)) is None


def test_a_ready_built_on_another_state_is_refused() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    first = core.make_leader(change(), view(0))
    second = core.make_leader(change(leader_epoch=4, partition_epoch=4), view(0))
    advanced(core, first)
    with pytest.raises(AssertionError, match="another state"):
        core.advance(second)  # type: ignore[arg-type]


def test_following_a_new_epoch_changes_the_partition_and_the_same_epoch_does_not() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    moved = advanced(core, core.make_follower(change(leader=F2, replicas=(LOCAL, F2))))
    assert moved.partition_changed and moved.epoch_start is None
    same = advanced(core, core.make_follower(change(leader=F2, partition_epoch=4)))
    assert not same.partition_changed


def test_a_caught_up_follower_is_proposed_for_the_isr() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    leading = change(replicas=(LOCAL, F2), isr=(LOCAL,))
    advanced(core, core.make_leader(leading, view(4)))
    ready = core.on_follower_fetch(
        F2,
        fetch_offset=4,
        log_start_offset=0,
        leader_end_offset=4,
        broker_epoch=102,
        view=view(4, high_watermark=4),
    )
    assert ready.alter_partition is not None
    assert ready.alter_partition.kind is IsrState.PENDING_EXPAND
    assert ready.alter_partition.new_isr_ids == (LOCAL, F2)
    assert ready.state.pending_isr_change == ready.alter_partition


def test_a_fetch_from_an_older_broker_incarnation_is_refused() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    advanced(core, core.make_leader(change(replicas=(LOCAL, F2)), view(0)))
    with pytest.raises(PartitionError) as raised:
        core.on_follower_fetch(
            F2,
            fetch_offset=0,
            log_start_offset=0,
            leader_end_offset=0,
            broker_epoch=1,
            view=view(0),
        )
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_a_lagging_follower_is_proposed_out_and_a_retry_resends_the_same_change() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    advanced(core, core.make_leader(change(replicas=(LOCAL, F2)), view(4)))
    assert core.maybe_shrink_isr(view(4, now_ms=NOW + LAG_MS)).alter_partition is None
    shrink = advanced(core, core.maybe_shrink_isr(view(4, now_ms=NOW + LAG_MS + 1)))
    sent = shrink.alter_partition
    assert sent is not None and sent.new_isr_ids == (LOCAL,)
    assert shrink.high_watermark is None
    ready, outcome = core.on_alter_partition_result(
        sent, AlterPartitionResult(error=Errors.REQUEST_TIMED_OUT), view(4)
    )
    assert outcome is AlterPartitionOutcome.RETRY
    assert ready.alter_partition == sent
    assert not ready.changes_state


def test_a_committed_shrink_lets_the_high_watermark_move() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    advanced(core, core.make_leader(change(replicas=(LOCAL, F2)), view(4)))
    sent = advanced(core, core.maybe_shrink_isr(view(4, now_ms=NOW + LAG_MS + 1))).alter_partition
    assert sent is not None
    answer = AlterPartitionResult(
        error=Errors.NONE, leader_id=LOCAL, leader_epoch=1, isr=(LOCAL,), partition_epoch=4
    )
    ready, outcome = core.on_alter_partition_result(sent, answer, view(4))
    assert outcome is AlterPartitionOutcome.COMMITTED
    assert ready.state.isr == (LOCAL,)
    assert ready.high_watermark == 4


def test_appends_are_refused_before_the_log_is_touched() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    error = core.append_error(required_acks=1, min_insync_replicas=1)
    assert error is not None and error.error is Errors.NOT_LEADER_OR_FOLLOWER
    advanced(core, core.make_leader(change(replicas=(LOCAL, F2), isr=(LOCAL,)), view(0)))
    error = core.append_error(required_acks=-1, min_insync_replicas=2)
    assert error is not None and error.error is Errors.NOT_ENOUGH_REPLICAS
    assert core.append_error(required_acks=1, min_insync_replicas=2) is None
    assert core.append_error(required_acks=0, min_insync_replicas=2) is None
    # min.insync.replicas 1, or capped at the replication factor (2) but the ISR has 1.
    assert core.append_error(required_acks=-1, min_insync_replicas=1) is None
    capped = core.append_error(required_acks=-1, min_insync_replicas=3)
    assert capped is not None and "min.isr requirement of 2" in capped.message


def test_an_illegal_transition_names_both_roles() -> None:
    with pytest.raises(AssertionError, match="NONE -> NONE"):
        check_transition(TP, PartitionState(), PartitionState())


# ------------------------------------------------------------------ reads (KIP-320)

HISTORY = (EpochEntry(0, 0), EpochEntry(2, 5))  # epoch 0 at 0, epoch 2 at 5; log end 8


@pytest.mark.parametrize(
    ("last_fetched_epoch", "fetch_offset", "expected"),
    [
        (-1, 3, None),  # no epoch sent: nothing to check
        (2, 8, None),  # the current epoch, at the log end
        (0, 5, None),  # epoch 0 ended at 5: the follower is exactly there
        (0, 6, OffsetAndEpoch(5, 0)),  # ... past it: diverged
        (1, 6, OffsetAndEpoch(5, 0)),  # an epoch this leader never had: the one before it
    ],
)
def test_diverging_epoch(
    last_fetched_epoch: int, fetch_offset: int, expected: OffsetAndEpoch | None
) -> None:
    found = diverging_epoch(
        TP,
        HISTORY,
        last_fetched_epoch=last_fetched_epoch,
        fetch_offset=fetch_offset,
        log_start_offset=0,
        log_end_offset=8,
    )
    assert found == expected


@pytest.mark.parametrize(
    ("entries", "fetch_offset", "log_start_offset"),
    [((), 0, 0), (HISTORY, 2, 3)],  # no history to answer from; below the log start
)
def test_an_unanswerable_last_fetched_epoch_is_out_of_range(
    entries: tuple[EpochEntry, ...], fetch_offset: int, log_start_offset: int
) -> None:
    with pytest.raises(PartitionError) as raised:
        diverging_epoch(
            TP,
            entries,
            last_fetched_epoch=0,
            fetch_offset=fetch_offset,
            log_start_offset=log_start_offset,
            log_end_offset=8,
        )
    assert raised.value.error is Errors.OFFSET_OUT_OF_RANGE


def test_a_fetch_from_a_broker_that_is_not_a_replica() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    advanced(core, core.make_leader(change(replicas=(LOCAL, F2)), view(0)))
    assert core.fetch_error(F2, current_leader_epoch=1) is None
    assert core.fetch_error(-1, current_leader_epoch=-1) is None  # a consumer
    unknown = core.fetch_error(7, current_leader_epoch=-1)
    assert unknown is not None and unknown.error is Errors.NOT_LEADER_OR_FOLLOWER
    reassigned = core.fetch_error(7, current_leader_epoch=1)
    assert reassigned is not None and reassigned.error is Errors.UNKNOWN_LEADER_EPOCH
    fenced = core.fetch_error(F2, current_leader_epoch=0)
    assert fenced is not None and fenced.error is Errors.FENCED_LEADER_EPOCH
    # KIP-320 both ways, and no epoch at all, for a replica too.
    newer = core.fetch_error(F2, current_leader_epoch=2)
    assert newer is not None and newer.error is Errors.UNKNOWN_LEADER_EPOCH
    assert core.fetch_error(F2, current_leader_epoch=-1) is None


def test_a_fetch_from_a_follower_of_this_broker_is_refused() -> None:
    core = PartitionCore(TP, LOCAL, LAG_MS)
    advanced(core, core.make_follower(change(leader=F2, replicas=(LOCAL, F2))))
    for replica_id, epoch in ((F2, 1), (-1, -1), (-1, 1)):
        refused = core.fetch_error(replica_id, current_leader_epoch=epoch)
        assert refused is not None and refused.error is Errors.NOT_LEADER_OR_FOLLOWER
