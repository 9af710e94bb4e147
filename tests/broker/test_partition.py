"""Partition: leader/follower transitions, stale epochs, appends, reads, ListOffsets and
OffsetsForLeaderEpoch on real PartitionLogs (Kafka's PartitionTest behaviour, cited per test).
ISR and high-watermark behaviour is in test_partition_isr.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker.partition import (
    EpochEndOffset,
    FetchIsolation,
    Partition,
    PartitionError,
    PartitionRole,
    PartitionState,
)
from pykraft.protocol.errors import Errors
from pykraft.replica import partition_core
from pykraft.storage.leader_epoch_cache import EpochEntry, OffsetAndEpoch
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.partition_log import OffsetAndTimestamp
from pykraft.storage.txn_markers import TxnMarker
from tests.broker.partition_fixtures import F2, LOCAL, TP, Env, batch, change


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    harness = Env(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def partition(env: Env) -> Partition:
    return env.partition


# ------------------------------------------------------------------ transitions


def test_make_leader_records_the_epoch_at_the_log_end(env: Env, partition: Partition) -> None:
    # Kafka Partition.makeLeader -> assignEpochStartOffset(leaderEpoch, logEndOffset).
    assert partition.make_leader(change(leader_epoch=3, partition_epoch=3))
    env.append(b"a", b"b")
    assert partition.make_leader(change(leader_epoch=4, partition_epoch=4)) is False  # still
    assert partition.log.leader_epoch_cache.entries == (EpochEntry(3, 0), EpochEntry(4, 2))
    assert partition.state.leader_epoch == 4
    assert partition.state.leader_epoch_start_offset == 2


def test_an_isr_only_change_keeps_the_leader_epoch(env: Env, partition: Partition) -> None:
    partition.make_leader(change(leader_epoch=1, partition_epoch=1, replicas=(LOCAL, F2)))
    env.append(b"a")
    partition.make_leader(
        change(leader_epoch=1, partition_epoch=2, replicas=(LOCAL, F2), isr=(LOCAL,))
    )
    assert partition.log.leader_epoch_cache.entries == (EpochEntry(1, 0),)
    assert partition.state.isr == (LOCAL,)
    assert partition.state.partition_epoch == 2


def test_stale_leader_change_is_ignored(partition: Partition) -> None:
    # Kafka: "Skipped the become-leader state change ... already at a newer partition epoch".
    partition.make_leader(change(leader_epoch=2, partition_epoch=5))
    before = partition.state
    assert partition.make_leader(change(leader_epoch=3, partition_epoch=4)) is False
    assert partition.state == before
    assert partition.log.leader_epoch_cache.latest_epoch == 2


def test_stale_follower_change_is_ignored(partition: Partition) -> None:
    partition.make_leader(change(leader_epoch=2, partition_epoch=5))
    before = partition.state
    assert partition.make_follower(change(leader=F2, leader_epoch=3, partition_epoch=4)) is False
    assert partition.state == before
    assert partition.is_leader


def test_make_follower_stops_serving_and_reports_new_epochs(env: Env, partition: Partition) -> None:
    # Kafka testMakeFollowerWithNoLeaderIdChange / testReplicaFetchToFollower.
    partition.make_leader(change(leader_epoch=1, partition_epoch=1, replicas=(LOCAL, F2)))
    env.append(b"a")
    # makeFollower returns isNewLeaderEpoch: the fetcher restarts on a new epoch.
    assert partition.make_follower(
        change(leader=F2, leader_epoch=2, partition_epoch=2, replicas=(LOCAL, F2))
    )
    assert partition.role is PartitionRole.FOLLOWER
    assert partition.state.isr == () and len(partition.state.followers) == 0
    assert (
        partition.make_follower(
            change(leader=F2, leader_epoch=2, partition_epoch=3, replicas=(LOCAL, F2))
        )
        is False
    )
    with pytest.raises(PartitionError) as raised:
        env.append(b"b")
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER
    for epoch, expected in [
        (-1, Errors.NOT_LEADER_OR_FOLLOWER),
        (2, Errors.NOT_LEADER_OR_FOLLOWER),
        (3, Errors.UNKNOWN_LEADER_EPOCH),
        (1, Errors.FENCED_LEADER_EPOCH),
    ]:
        with pytest.raises(PartitionError) as raised:
            env.fetch_follower(F2, 0, current_leader_epoch=epoch)
        assert raised.value.error is expected


def test_stop_takes_the_partition_offline(env: Env, partition: Partition) -> None:
    partition.make_leader(change())
    partition.stop()
    assert partition.role is PartitionRole.NONE
    partition.stop()  # idempotent
    with pytest.raises(PartitionError) as raised:
        env.append(b"a")
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_an_illegal_transition_writes_no_leader_epoch(
    partition: Partition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The core checks the transition before the shell persists the new epoch (issue 10)."""
    monkeypatch.setattr(partition_core, "leader_state", lambda *args: PartitionState())
    with pytest.raises(AssertionError, match="NONE -> NONE"):
        partition.make_leader(change(leader_epoch=3, partition_epoch=3))
    assert partition.log.leader_epoch_cache.entries == ()
    assert partition.state == PartitionState()


def test_a_failed_leader_epoch_write_leaves_the_partition_as_it_was(
    env: Env, partition: Partition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Persist before apply: a new leader whose epoch is not on disk does not lead, and the
    same metadata applies cleanly once the disk recovers."""
    env.seed(2, leader_epoch=0)

    def refuse(epoch: int, start_offset: int) -> bool:
        raise OSError("No space left on device")

    monkeypatch.setattr(partition.log.leader_epoch_cache, "assign", refuse)
    with pytest.raises(OSError):
        partition.make_leader(change(leader_epoch=3, partition_epoch=3))
    assert partition.role is PartitionRole.NONE
    assert partition.leader_epoch == -1
    assert env.high_watermark_moves == []
    monkeypatch.undo()
    assert partition.make_leader(change(leader_epoch=3, partition_epoch=3))
    assert partition.log.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(3, 2))
    assert env.high_watermark_moves == [(0, 2)]


# ------------------------------------------------------------------ append and read


def test_rf1_high_watermark_follows_every_append(env: Env, partition: Partition) -> None:
    partition.make_leader(change())
    assert env.append(b"a", b"b") == 0
    assert partition.high_watermark == partition.log_end_offset == 2
    assert env.append(b"c") == 2
    assert partition.high_watermark == 3
    assert env.high_watermark_moves == [(0, 2), (2, 3)]


def test_the_last_stable_offset_moves_when_the_high_watermark_passes_a_marker(
    env: Env, partition: Partition
) -> None:
    # Kafka UnifiedLog.updateHighWatermark -> ProducerStateManager.onHighWatermarkUpdated: a
    # decided transaction stays unstable until its marker is replicated; READ_COMMITTED reads
    # and ListOffsets stop at the LSO meanwhile
    partition.make_leader(change(replicas=(LOCAL, F2)))
    txn = batch(b"t", producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    partition.append_records_to_leader(txn, required_acks=1, now_ms=env.now_ms)
    env.fetch_follower(F2, 1)
    assert (partition.high_watermark, partition.last_stable_offset) == (1, 0)
    assert env.last_stable_offset_moves == []
    commit = TxnMarker(producer_id=7, producer_epoch=0, coordinator_epoch=0, commit=True,
                             partitions=(TP,)).control_batch(env.now_ms)  # fmt: skip
    with pytest.raises(PartitionError) as refused:  # clients may not write markers
        partition.append_records_to_leader(commit, required_acks=1, now_ms=env.now_ms)
    assert refused.value.error is Errors.INVALID_RECORD
    partition.append_records_to_leader(
        commit, required_acks=1, now_ms=env.now_ms, origin=AppendOrigin.COORDINATOR
    )
    assert env.consumer_read(0, isolation=FetchIsolation.TXN_COMMITTED) == b""
    env.fetch_follower(F2, 2)  # the follower has the marker: the high watermark passes it
    assert (partition.high_watermark, partition.last_stable_offset) == (2, 2)
    assert env.last_stable_offset_moves == [(0, 2)]
    info = partition.fetch_records(
        replica_id=-1, fetch_offset=0, max_bytes=1 << 20,
        isolation=FetchIsolation.TXN_COMMITTED, min_one_batch=True,
    )  # fmt: skip
    assert info.last_stable_offset == 2 and info.fetched_data.aborted_transactions == ()
    assert info.fetched_data.next_offset == 2
    latest = partition.fetch_offset_for_timestamp(
        -1, isolation=FetchIsolation.TXN_COMMITTED, current_leader_epoch=-1,
        fetch_only_from_leader=True,
    )  # fmt: skip
    assert latest is not None and latest.offset == 2


def test_acks_all_needs_min_insync_replicas(env: Env, partition: Partition) -> None:
    # Kafka Partition.appendRecordsToLeader: NotEnoughReplicasException when
    # |ISR| < min.insync.replicas and acks=-1; acks=1 is not affected.
    env.min_isr = 2
    partition.make_leader(change(replicas=(LOCAL, F2), isr=(LOCAL,)))
    with pytest.raises(PartitionError) as raised:
        env.append(b"a", acks=-1)
    assert raised.value.error is Errors.NOT_ENOUGH_REPLICAS
    assert "min.isr requirement of 2" in raised.value.message
    assert partition.log_end_offset == 0
    assert env.append(b"a", acks=1) == 0
    env.min_isr = 1
    assert env.append(b"b", acks=-1) == 1


def test_min_insync_replicas_is_capped_at_the_replication_factor(
    env: Env, partition: Partition
) -> None:
    # Kafka effectiveMinIsr: min(min.insync.replicas, replication factor).
    env.min_isr = 3
    partition.make_leader(change())
    assert env.append(b"a", acks=-1) == 0
    assert partition.high_watermark == 1


def test_consumers_read_to_the_high_watermark_followers_to_the_log_end(
    env: Env, partition: Partition
) -> None:
    partition.make_leader(change(replicas=(LOCAL, F2)))
    first, second = batch(b"a"), batch(b"b")
    for data in (first, second):
        partition.append_records_to_leader(data, required_acks=1, now_ms=0)
    # Follower 2 has not fetched: the high watermark stays at 0.
    assert partition.high_watermark == 0
    assert env.consumer_read(0) == b""
    follower_bytes = env.fetch_follower(F2, 0).fetched_data.read_bytes()
    assert follower_bytes == bytes(first) + bytes(second)  # stamped in place: offsets 0, 1
    # Its next fetch at offset 2 says it has everything: the high watermark moves.
    env.fetch_follower(F2, 2)
    assert partition.high_watermark == 2
    assert env.consumer_read(1) == bytes(second)


def test_fetch_from_an_unknown_replica(env: Env, partition: Partition) -> None:
    # Kafka testFetchFromUnrecognizedFollower: with a leader epoch the (replica, epoch) pair
    # may not be known yet -> UNKNOWN_LEADER_EPOCH (the follower retries); without one ->
    # NOT_LEADER_OR_FOLLOWER. Nothing is recorded for it.
    partition.make_leader(change(leader_epoch=8, partition_epoch=1, replicas=(LOCAL, F2)))
    with pytest.raises(PartitionError) as raised:
        env.fetch_follower(7, 0, current_leader_epoch=8)
    assert raised.value.error is Errors.UNKNOWN_LEADER_EPOCH
    with pytest.raises(PartitionError) as raised:
        env.fetch_follower(7, 0)
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER
    assert 7 not in partition.state.followers
    # Added to the replicas (a reassignment): now it may fetch.
    partition.make_leader(
        change(leader_epoch=8, partition_epoch=2, replicas=(LOCAL, F2, 7), isr=(LOCAL, F2))
    )
    assert env.fetch_follower(7, 0, current_leader_epoch=8).log_end_offset == 0
    assert partition.state.followers[7].log_end_offset == 0


@pytest.mark.parametrize(
    ("current_leader_epoch", "expected"),
    [(3, Errors.FENCED_LEADER_EPOCH), (5, Errors.UNKNOWN_LEADER_EPOCH)],
)
def test_fetch_checks_the_current_leader_epoch(
    env: Env, partition: Partition, current_leader_epoch: int, expected: Errors
) -> None:
    # Kafka testLeaderEpochValidationOnLeader.
    partition.make_leader(change(leader_epoch=4, partition_epoch=4))
    with pytest.raises(PartitionError) as raised:
        env.consumer_read(0, current_leader_epoch=current_leader_epoch)
    assert raised.value.error is expected
    assert env.consumer_read(0, current_leader_epoch=4) == b""


def test_fetch_out_of_range(env: Env, partition: Partition) -> None:
    partition.make_leader(change())
    env.append(b"a")
    with pytest.raises(PartitionError) as raised:
        env.consumer_read(2)
    assert raised.value.error is Errors.OFFSET_OUT_OF_RANGE
    assert env.consumer_read(1) == b""  # the log end itself is in range


def test_last_fetched_offset_validation(env: Env, partition: Partition) -> None:
    # Kafka PartitionTest.testLastFetchedOffsetValidation, same epochs and offsets.
    for epoch, count in [(0, 2), (3, 3), (3, 3), (4, 5), (7, 1), (9, 3)]:
        env.log.append_as_leader(batch(*[b"x"] * count), epoch, 0)
    assert env.log.log_end_offset == 17
    partition.make_leader(change(leader_epoch=10, partition_epoch=1, replicas=(LOCAL, F2)))

    def read(last_fetched_epoch: int, fetch_offset: int) -> OffsetAndEpoch | None:
        info = env.fetch_follower(
            F2, fetch_offset, current_leader_epoch=10, last_fetched_epoch=last_fetched_epoch
        )
        assert info.diverging_epoch is None or info.fetched_data.is_empty
        return info.diverging_epoch

    assert read(2, 5) == OffsetAndEpoch(2, 0)
    assert read(0, 4) == OffsetAndEpoch(2, 0)
    assert read(6, 6) == OffsetAndEpoch(13, 4)
    assert read(5, 9) == OffsetAndEpoch(13, 4)
    assert read(10, 18) == OffsetAndEpoch(17, 10)
    assert read(0, 2) is None
    assert read(7, 14) is None
    assert read(9, 17) is None
    assert read(10, 17) is None
    # Epochs larger than any known: OFFSET_OUT_OF_RANGE.
    with pytest.raises(PartitionError) as raised:
        read(11, 5)
    assert raised.value.error is Errors.OFFSET_OUT_OF_RANGE


def test_a_diverging_fetch_records_no_progress(env: Env, partition: Partition) -> None:
    # Kafka fetchRecords: updateFollowerFetchState only when there is no diverging epoch.
    partition.make_leader(change(leader_epoch=1, partition_epoch=1, replicas=(LOCAL, F2)))
    env.append(b"a", b"b")
    partition.make_leader(change(leader_epoch=2, partition_epoch=2, replicas=(LOCAL, F2)))
    env.append(b"c")
    info = env.fetch_follower(F2, 3, last_fetched_epoch=1)
    assert info.diverging_epoch == OffsetAndEpoch(2, 1)
    assert partition.state.followers[F2].log_end_offset == -1


def test_list_offsets(partition: Partition) -> None:
    partition.make_leader(change(leader_epoch=3, partition_epoch=3))
    partition.append_records_to_leader(batch(b"a", b"b", timestamp=100), required_acks=1, now_ms=0)
    partition.append_records_to_leader(batch(b"c", timestamp=500), required_acks=1, now_ms=0)

    def lookup(timestamp: int) -> OffsetAndTimestamp | None:
        return partition.fetch_offset_for_timestamp(
            timestamp,
            isolation=FetchIsolation.HIGH_WATERMARK,
            current_leader_epoch=-1,
            fetch_only_from_leader=True,
        )

    assert lookup(-1) == OffsetAndTimestamp(3, -1, 3)  # latest
    assert lookup(-2) == OffsetAndTimestamp(0, -1, 3)  # earliest
    assert lookup(101) == OffsetAndTimestamp(1, 101, 3)
    assert lookup(400) == OffsetAndTimestamp(2, 500, 3)
    assert lookup(501) is None  # nothing that late
    assert lookup(-3) == OffsetAndTimestamp(2, 500, 3)  # max timestamp (KIP-734)


# ------------------------------------------------------------------ OffsetsForLeaderEpoch


def test_make_leader_updates_the_epoch_cache_for_offsets_for_leader_epoch(env: Env) -> None:
    # Kafka testMakeLeaderUpdatesEpochCache: epochs 0 and 5 wrote 4 records; leader epoch 8
    # answers its own end as the log end.
    env.log.append_as_leader(batch(b"k1", b"k2"), 0, 0)
    env.log.append_as_leader(batch(b"k3", b"k4"), 5, 0)
    env.partition.make_leader(change(leader_epoch=8, partition_epoch=1))
    answer = env.partition.last_offset_for_leader_epoch(8, 8, fetch_only_from_leader=True)
    assert answer == EpochEndOffset(leader_epoch=8, end_offset=4)
    assert env.partition.last_offset_for_leader_epoch(
        -1, 3, fetch_only_from_leader=True
    ) == EpochEndOffset(leader_epoch=0, end_offset=2)
    # An epoch above every known one: undefined, no error (UnifiedLog.endOffsetForEpoch).
    assert (
        env.partition.last_offset_for_leader_epoch(-1, 9, fetch_only_from_leader=True)
        == EpochEndOffset()
    )


@pytest.mark.parametrize(
    ("is_leader", "current", "only_leader", "expected"),
    [
        # Kafka testOffsetForLeaderEpochValidationForLeader
        (True, -1, True, Errors.NONE),
        (True, 5, True, Errors.NONE),
        (True, 4, True, Errors.FENCED_LEADER_EPOCH),
        (True, 6, True, Errors.UNKNOWN_LEADER_EPOCH),
        # Kafka testOffsetForLeaderEpochValidationForFollower
        (False, -1, False, Errors.NONE),
        (False, 5, False, Errors.NONE),
        (False, 4, False, Errors.FENCED_LEADER_EPOCH),
        (False, 6, False, Errors.UNKNOWN_LEADER_EPOCH),
        (False, -1, True, Errors.NOT_LEADER_OR_FOLLOWER),
        (False, 5, True, Errors.NOT_LEADER_OR_FOLLOWER),
        (False, 4, True, Errors.FENCED_LEADER_EPOCH),
        (False, 6, True, Errors.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_offsets_for_leader_epoch_validation(
    partition: Partition, is_leader: bool, current: int, only_leader: bool, expected: Errors
) -> None:
    leader = LOCAL if is_leader else F2
    if is_leader:
        partition.make_leader(change(leader=leader, leader_epoch=5, replicas=(LOCAL, F2)))
    else:
        partition.make_follower(change(leader=leader, leader_epoch=5, replicas=(LOCAL, F2)))
    answer = partition.last_offset_for_leader_epoch(current, 0, fetch_only_from_leader=only_leader)
    assert answer.error is expected
