"""Partition: leader state transitions, stale epochs, appends, reads and ListOffsets, on real
PartitionLogs (Kafka's PartitionTest behaviour, cited per test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from immutables import Map

from broker.partition import (
    FetchIsolation,
    LeaderAndIsr,
    Partition,
    PartitionError,
    PartitionRole,
    PartitionState,
    check_current_leader_epoch,
    error_for,
    high_watermark_candidate,
    is_stale,
)
from protocol.errors import Errors
from storage.leader_epoch_cache import EpochEntry, OffsetAndEpoch
from storage.log_config import LogConfig
from storage.log_validator import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StaleLeaderEpochError,
)
from storage.partition_log import OffsetAndTimestamp, PartitionLog
from storage.record_batch import CorruptRecordError
from storage.records import SimpleRecord, build_batch
from storage.topic_partition import TopicPartition

LOCAL = 1
TOPIC_ID = "ThIaNwRnSM2Nt9Mx1v0RvA"
TP = TopicPartition("pets", 0)


def batch(*values: bytes, timestamp: int = 1000, **fields: int) -> bytearray:
    records = [SimpleRecord(value=v, timestamp=timestamp + i) for i, v in enumerate(values)]
    return bytearray(build_batch(records, **fields))  # type: ignore[arg-type]


def change(
    leader: int = LOCAL,
    leader_epoch: int = 1,
    partition_epoch: int = 1,
    replicas: tuple[int, ...] = (LOCAL,),
    isr: tuple[int, ...] | None = None,
) -> LeaderAndIsr:
    return LeaderAndIsr(
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        replicas=replicas,
        isr=replicas if isr is None else isr,
    )


@pytest.fixture
def partition(tmp_path: Path) -> Partition:
    log = PartitionLog.open(tmp_path / TP.dir_name(), LogConfig(segment_bytes=4096))
    return Partition(TP, TOPIC_ID, log, LOCAL)


def append(partition: Partition, *values: bytes, acks: int = 1, min_isr: int = 1) -> int:
    info = partition.append_records_to_leader(
        batch(*values), required_acks=acks, min_insync_replicas=min_isr, now_ms=5000
    )
    return info.first_offset


def read(partition: Partition, offset: int, **kwargs: object) -> bytes:
    arguments: dict[str, object] = {
        "replica_id": -1,
        "fetch_offset": offset,
        "max_bytes": 1 << 20,
        "isolation": FetchIsolation.HIGH_WATERMARK,
        "min_one_batch": True,
    }
    arguments.update(kwargs)
    return partition.fetch_records(**arguments).fetched_data.read_bytes()  # type: ignore[arg-type]


# ------------------------------------------------------------------ the pure core


def test_a_lower_partition_epoch_is_stale_an_equal_one_is_not() -> None:
    # Kafka Partition.makeLeader/makeFollower: partitionEpoch < current -> skip.
    state = PartitionState(partition_epoch=5)
    assert is_stale(state, change(partition_epoch=4))
    assert not is_stale(state, change(partition_epoch=5))
    assert not is_stale(state, change(partition_epoch=6))


@pytest.mark.parametrize(
    ("local", "requested", "expected"),
    [
        (5, -1, Errors.NONE),  # no epoch in the request: no check
        (5, 5, Errors.NONE),
        (5, 4, Errors.FENCED_LEADER_EPOCH),  # the client is behind
        (5, 6, Errors.UNKNOWN_LEADER_EPOCH),  # this broker is behind
    ],
)
def test_check_current_leader_epoch(local: int, requested: int, expected: Errors) -> None:
    # Kafka Partition.checkCurrentLeaderEpoch (KIP-320).
    assert check_current_leader_epoch(local, requested) is expected


@pytest.mark.parametrize(
    ("isr", "followers", "expected"),
    [
        ((LOCAL,), {}, 10),  # RF=1: the leader's own log end
        ((LOCAL, 2), {2: 7}, 7),  # the slowest ISR member
        ((LOCAL, 2), {2: 12}, 10),  # never past the leader's log end
        ((LOCAL, 2), {}, None),  # an ISR follower not heard from yet holds it back
        ((LOCAL,), {2: 3}, 10),  # followers outside the ISR do not count
    ],
)
def test_high_watermark_candidate(
    isr: tuple[int, ...], followers: dict[int, int], expected: int | None
) -> None:
    state = PartitionState(
        role=PartitionRole.LEADER, isr=isr, follower_log_end_offsets=Map(followers)
    )
    assert high_watermark_candidate(state, LOCAL, 10) == expected


@pytest.mark.parametrize(
    ("exception", "expected"),
    [
        (CorruptRecordError("crc", "bad"), Errors.CORRUPT_MESSAGE),
        (CorruptRecordError("magic", "1 is not supported"), Errors.INVALID_RECORD),
        (RecordTooLargeError("big"), Errors.MESSAGE_TOO_LARGE),
        (RecordBatchTooLargeError("big"), Errors.RECORD_LIST_TOO_LARGE),
        (InvalidRecordError("bad"), Errors.INVALID_RECORD),
        (OutOfOrderSequenceError("gap"), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),
        (InvalidProducerEpochError("old"), Errors.INVALID_PRODUCER_EPOCH),
        (StaleLeaderEpochError("old"), Errors.NOT_LEADER_OR_FOLLOWER),
        (OffsetOutOfRangeError(9, 0, 3), Errors.OFFSET_OUT_OF_RANGE),
        (OSError("disk"), Errors.KAFKA_STORAGE_ERROR),
    ],
)
def test_storage_errors_map_to_kafka_codes(exception: Exception, expected: Errors) -> None:
    assert error_for(exception) is expected


# ------------------------------------------------------------------ transitions


def test_make_leader_records_the_epoch_at_the_log_end(partition: Partition) -> None:
    # Kafka Partition.makeLeader -> maybeAssignEpochStartOffset(leaderEpoch, logEndOffset).
    assert partition.make_leader(change(leader_epoch=3, partition_epoch=3))
    append(partition, b"a", b"b")
    assert partition.make_leader(change(leader_epoch=4, partition_epoch=4)) is False  # still
    assert partition.log.leader_epoch_cache.entries == (EpochEntry(3, 0), EpochEntry(4, 2))
    assert partition.state.leader_epoch == 4
    assert partition.state.leader_epoch_start_offset == 2


def test_an_isr_only_change_keeps_the_leader_epoch(partition: Partition) -> None:
    partition.make_leader(change(leader_epoch=1, partition_epoch=1, replicas=(LOCAL, 2)))
    append(partition, b"a")
    partition.make_leader(
        change(leader_epoch=1, partition_epoch=2, replicas=(LOCAL, 2), isr=(LOCAL,))
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
    assert partition.make_follower(change(leader=2, leader_epoch=3, partition_epoch=4)) is False
    assert partition.state == before
    assert partition.is_leader


def test_make_follower_stops_serving_and_reports_new_epochs(partition: Partition) -> None:
    partition.make_leader(change(leader_epoch=1, partition_epoch=1, replicas=(LOCAL, 2)))
    append(partition, b"a")
    # Kafka makeFollower returns isNewLeaderEpoch: the fetcher restarts on a new epoch.
    assert partition.make_follower(
        change(leader=2, leader_epoch=2, partition_epoch=2, replicas=(LOCAL, 2))
    )
    assert partition.role is PartitionRole.FOLLOWER
    assert partition.state.isr == ()  # followers keep no ISR
    assert (
        partition.make_follower(
            change(leader=2, leader_epoch=2, partition_epoch=3, replicas=(LOCAL, 2))
        )
        is False
    )
    with pytest.raises(PartitionError) as raised:
        append(partition, b"b")
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(PartitionError) as raised:
        read(partition, 0)
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_stop_takes_the_partition_offline(partition: Partition) -> None:
    partition.make_leader(change())
    partition.stop()
    assert partition.role is PartitionRole.NONE
    partition.stop()  # idempotent
    with pytest.raises(PartitionError) as raised:
        append(partition, b"a")
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_illegal_transition_names_both_roles(partition: Partition) -> None:
    with pytest.raises(AssertionError, match="NONE -> NONE"):
        partition._become(PartitionState())


# ------------------------------------------------------------------ append and read


def test_rf1_high_watermark_follows_every_append(partition: Partition) -> None:
    partition.make_leader(change())
    assert append(partition, b"a", b"b") == 0
    assert partition.high_watermark == partition.log_end_offset == 2
    assert append(partition, b"c") == 2
    assert partition.high_watermark == 3


def test_acks_all_needs_min_insync_replicas(partition: Partition) -> None:
    # Kafka Partition.appendRecordsToLeader: NotEnoughReplicasException when
    # |ISR| < min.insync.replicas and acks=-1; acks=1 is not affected.
    partition.make_leader(change(replicas=(LOCAL, 2), isr=(LOCAL,)))
    with pytest.raises(PartitionError) as raised:
        append(partition, b"a", acks=-1, min_isr=2)
    assert raised.value.error is Errors.NOT_ENOUGH_REPLICAS
    assert "min.isr requirement of 2" in raised.value.message
    assert partition.log_end_offset == 0
    assert append(partition, b"a", acks=1, min_isr=2) == 0
    assert append(partition, b"b", acks=-1, min_isr=1) == 1


def test_consumers_read_to_the_high_watermark_followers_to_the_log_end(
    partition: Partition,
) -> None:
    partition.make_leader(change(replicas=(LOCAL, 2)))
    first, second = batch(b"a"), batch(b"b")
    for data in (first, second):
        partition.append_records_to_leader(data, required_acks=1, min_insync_replicas=1, now_ms=0)
    # Follower 2 has not fetched: the high watermark stays at 0.
    assert partition.high_watermark == 0
    assert read(partition, 0) == b""
    follower_bytes = read(partition, 0, replica_id=2, isolation=FetchIsolation.LOG_END)
    assert follower_bytes == bytes(first) + bytes(second)  # stamped in place: offsets 0, 1
    # Its next fetch at offset 2 says it has everything: the high watermark moves.
    read(partition, 2, replica_id=2, isolation=FetchIsolation.LOG_END)
    assert partition.high_watermark == 2
    assert read(partition, 1) == bytes(second)


def test_fetch_from_a_broker_that_is_not_a_replica(partition: Partition) -> None:
    # Kafka Partition.followerReplicaOrThrow: NotLeaderOrFollowerException.
    partition.make_leader(change())
    with pytest.raises(PartitionError) as raised:
        read(partition, 0, replica_id=7, isolation=FetchIsolation.LOG_END)
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize(
    ("current_leader_epoch", "expected"),
    [(3, Errors.FENCED_LEADER_EPOCH), (5, Errors.UNKNOWN_LEADER_EPOCH)],
)
def test_fetch_checks_the_current_leader_epoch(
    partition: Partition, current_leader_epoch: int, expected: Errors
) -> None:
    partition.make_leader(change(leader_epoch=4, partition_epoch=4))
    with pytest.raises(PartitionError) as raised:
        read(partition, 0, current_leader_epoch=current_leader_epoch)
    assert raised.value.error is expected
    assert read(partition, 0, current_leader_epoch=4) == b""


def test_fetch_out_of_range(partition: Partition) -> None:
    partition.make_leader(change())
    append(partition, b"a")
    with pytest.raises(PartitionError) as raised:
        read(partition, 2)
    assert raised.value.error is Errors.OFFSET_OUT_OF_RANGE
    assert read(partition, 1) == b""  # the log end itself is in range


def test_diverging_epoch_instead_of_data(partition: Partition) -> None:
    # Kafka PartitionTest.testFetchRecordsDivergingEpoch-style: epoch 1 wrote offsets 0-1,
    # epoch 2 starts at 2. A follower that last fetched epoch 1 at offset 3 has diverged:
    # epoch 1 ended at 2.
    partition.make_leader(change(leader_epoch=1, partition_epoch=1, replicas=(LOCAL, 2)))
    append(partition, b"a", b"b")
    partition.make_leader(change(leader_epoch=2, partition_epoch=2, replicas=(LOCAL, 2)))
    append(partition, b"c")
    info = partition.fetch_records(
        replica_id=2,
        fetch_offset=3,
        max_bytes=1000,
        isolation=FetchIsolation.LOG_END,
        min_one_batch=True,
        last_fetched_epoch=1,
    )
    assert info.diverging_epoch == OffsetAndEpoch(2, 1)
    assert info.fetched_data.is_empty
    # Consistent history: offset 2 with epoch 1 reads normally.
    info = partition.fetch_records(
        replica_id=2,
        fetch_offset=2,
        max_bytes=1000,
        isolation=FetchIsolation.LOG_END,
        min_one_batch=True,
        last_fetched_epoch=1,
    )
    assert info.diverging_epoch is None
    assert not info.fetched_data.is_empty


def test_list_offsets(partition: Partition) -> None:
    partition.make_leader(change(leader_epoch=3, partition_epoch=3))
    partition.append_records_to_leader(
        batch(b"a", b"b", timestamp=100), required_acks=1, min_insync_replicas=1, now_ms=0
    )
    partition.append_records_to_leader(
        batch(b"c", timestamp=500), required_acks=1, min_insync_replicas=1, now_ms=0
    )

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
