"""A partition log's transactions: markers, the last stable offset, the aborted-transaction
index and its life cycle (Kafka's UnifiedLogTest, LogLoaderTest and LogSegmentTest cases on
transactions; each case names its source).

Every case runs on both segment stores, segment files and memory, except the three that only
one store can show (``ONLY_FILES``, ``ONLY_MEMORY``): those are generated for that store alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pykraft.storage.aborted_txn import TXN_INDEX_SUFFIX, AbortedTxn
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import (
    AppendOrigin,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=128, segment_index_bytes=4096)
EPOCH = 0
NOW_MS = 1_000
Opener = Callable[..., PartitionLog]
OPENER: dict[str, Opener] = {}


STORES = ["files", "memory"]
# A case's own parametrize of ``store`` replaces the fixture's params (indirect: still built by
# the fixture), so the case exists only for the store it is about.
ONLY_FILES = pytest.mark.parametrize("store", ["files"], indirect=True)
ONLY_MEMORY = pytest.mark.parametrize("store", ["memory"], indirect=True)


@pytest.fixture(autouse=True, params=STORES)
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    disks: dict[Path, MemoryDisk] = {}

    def in_memory(directory: Path, config: LogConfig, **kwargs: int | bool) -> PartitionLog:
        disk = disks.setdefault(directory, MemoryDisk(directory))
        return PartitionLog.open(disk, config, **kwargs)  # type: ignore[arg-type]

    OPENER["open"] = PartitionLog.open if request.param == "files" else in_memory
    yield str(request.param)


def open_log(tmp_path: Path, config: LogConfig = CONFIG, **kwargs: int | bool) -> PartitionLog:
    return OPENER["open"](tmp_path / "topic-0", config, **kwargs)


class Producer:
    """Kafka's LogTestUtils.appendTransactionalAsLeader: batches of ``count`` records with the
    producer's next sequences."""

    def __init__(self, log: PartitionLog, producer_id: int, epoch: int = EPOCH) -> None:
        self.log, self.producer_id, self.epoch, self.sequence = log, producer_id, epoch, 0

    def __call__(self, count: int) -> None:
        records = [SimpleRecord(value=b"v%d" % i, timestamp=NOW_MS) for i in range(count)]
        data = build_batch(
            records,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            is_transactional=True,
        )
        self.log.append_as_leader(bytearray(data), EPOCH, NOW_MS)
        self.sequence += count


def plain(log: PartitionLog, count: int) -> None:
    """LogTestUtils.appendNonTransactionalAsLeader."""
    records = [SimpleRecord(value=b"p", timestamp=NOW_MS)] * count
    log.append_as_leader(bytearray(build_batch(records)), EPOCH, NOW_MS)


def end_txn(
    log: PartitionLog,
    producer_id: int,
    *,
    commit: bool,
    epoch: int = EPOCH,
    coordinator_epoch: int = 0,
    origin: AppendOrigin = AppendOrigin.COORDINATOR,
) -> None:
    """LogTestUtils.appendEndTxnMarkerAsLeader."""
    marker = TxnMarker(
        producer_id=producer_id,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        commit=commit,
        partitions=(TopicPartition("topic", 0),),
    )
    log.append_as_leader(marker.control_batch(NOW_MS), EPOCH, NOW_MS, origin=origin)


def unstable(log: PartitionLog) -> tuple[int | None, int]:
    """The first unstable and the last stable offset."""
    return log.first_unstable_offset, log.last_stable_offset


def all_aborted(log: PartitionLog) -> list[AbortedTxn]:
    """LogTestUtils.allAbortedTransactions."""
    return [entry for segment in log.segments for entry in segment.aborted_txns]


def mixed_transactions(log: PartitionLog) -> None:
    """UnifiedLogTest.testTransactionIndexUpdated's appends (next offset in comments)."""
    pid1, pid2, pid3, pid4 = (Producer(log, pid) for pid in (1, 2, 3, 4))
    pid1(5)  # 5
    plain(log, 3)  # 8
    pid2(2)  # 10
    pid1(4)  # 14
    pid3(3)  # 17
    plain(log, 2)  # 19
    pid1(10)  # 29
    end_txn(log, 1, commit=False)  # 30
    pid2(6)  # 36
    pid4(3)  # 39
    plain(log, 10)  # 49
    pid3(9)  # 58
    end_txn(log, 3, commit=True)  # 59
    pid4(8)  # 67
    pid2(7)  # 74
    end_txn(log, 2, commit=False)  # 75
    plain(log, 10)  # 85
    pid4(4)  # 89
    end_txn(log, 4, commit=True)  # 90


EXPECTED_ABORTED = [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]


def test_transaction_index_updated(tmp_path: Path) -> None:
    # UnifiedLogTest.testTransactionIndexUpdated
    log = open_log(tmp_path)
    mixed_transactions(log)
    assert all_aborted(log) == EXPECTED_ABORTED
    assert len(log.segments) > 1  # the index entries live with their markers' segments
    assert log.first_unstable_offset == 0
    # ... and the first unstable offset follows the high watermark past each marker
    log.update_high_watermark(30)
    assert unstable(log) == (8, 8)
    log.update_high_watermark(75)
    assert unstable(log) == (36, 36)
    log.update_high_watermark(log.log_end_offset)
    assert unstable(log) == (None, 90)


def test_collect_aborted_transactions_overlapping_a_fetch(tmp_path: Path) -> None:
    # LocalLog.read with includeAbortedTxns: from the segment holding the fetch offset on
    log = open_log(tmp_path)
    mixed_transactions(log)
    assert log.collect_aborted_transactions(0, 90) == EXPECTED_ABORTED
    assert log.collect_aborted_transactions(0, 8) == EXPECTED_ABORTED[:1]
    assert log.collect_aborted_transactions(30, 90) == EXPECTED_ABORTED[1:]
    assert log.collect_aborted_transactions(75, 90) == []
    assert log.collect_aborted_transactions(29, 30) == EXPECTED_ABORTED  # both overlap 29
    assert [s.base_offset for s in log.segments] == [0, 39]
    assert log.collect_aborted_transactions(40, 41) == EXPECTED_ABORTED[1:]


def test_last_stable_offset_bounds_consumers(tmp_path: Path) -> None:
    # UnifiedLogTest.testFetchUpToLastStableOffset: an open transaction holds the LSO, a
    # committed one releases it once the high watermark passes its marker
    log = open_log(tmp_path)
    pid1 = Producer(log, 1)
    plain(log, 2)
    pid1(3)  # 2..4
    plain(log, 2)  # 5..6
    log.update_high_watermark(log.log_end_offset)
    assert (log.high_watermark, log.last_stable_offset) == (7, 2)
    end_txn(log, 1, commit=True)  # marker at 7
    assert log.last_stable_offset == 2  # the marker is not below the high watermark yet
    log.update_high_watermark(7)
    assert log.last_stable_offset == 2
    log.update_high_watermark(8)
    assert log.last_stable_offset == 8
    read = log.read(0, 10**6, upper_bound=log.last_stable_offset)
    assert read.next_offset == 8


def test_zombie_coordinator_fenced(tmp_path: Path) -> None:
    # UnifiedLogTest.testZombieCoordinatorFenced
    log = open_log(tmp_path)
    append = Producer(log, 1)
    append(10)
    end_txn(log, 1, commit=False, coordinator_epoch=1)
    append(5)
    end_txn(log, 1, commit=True, coordinator_epoch=2)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError, match="1 \\(zombie\\), 2"):
        end_txn(log, 1, commit=False, coordinator_epoch=1)
    assert log.log_end_offset == end


def test_zombie_coordinator_fenced_empty_transaction(tmp_path: Path) -> None:
    # UnifiedLogTest.testZombieCoordinatorFencedEmptyTransaction
    log = open_log(tmp_path)
    Producer(log, 1)(10)
    end_txn(log, 1, commit=False, coordinator_epoch=2)
    end_txn(log, 1, commit=False, coordinator_epoch=2)  # an empty transaction: same epoch
    with pytest.raises(TransactionCoordinatorFencedError):
        end_txn(log, 1, commit=False, coordinator_epoch=1)


def test_end_txn_with_fenced_producer_epoch(tmp_path: Path) -> None:
    # UnifiedLogTest.testEndTxnWithFencedProducerEpoch
    log = open_log(tmp_path)
    end_txn(log, 1, commit=False, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        end_txn(log, 1, commit=False, epoch=0)
    # a follower takes what the leader wrote (Kafka's REPLICATION origin: no checks)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(log.read(0, 10**6, log.log_end_offset).read_bytes())
    assert follower.log_end_offset == 1


def test_markers_come_from_coordinators_only(tmp_path: Path) -> None:
    # LogValidator: "Clients are not allowed to write control records"
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecordError, match="control batches"):
        end_txn(log, 1, commit=True, origin=AppendOrigin.CLIENT)
    assert log.log_end_offset == 0


def test_non_transactional_write_inside_a_transaction(tmp_path: Path) -> None:
    # ProducerStateManagerTest.testNonTransactionalAppendWithOngoingTransaction, via the log
    log = open_log(tmp_path)
    Producer(log, 1)(2)
    plain_idempotent = build_batch([SimpleRecord(b"x")], producer_id=1, producer_epoch=EPOCH,
                                   base_sequence=2)  # fmt: skip
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(bytearray(plain_idempotent), EPOCH, NOW_MS)
    assert log.log_end_offset == 2


def test_last_stable_offset_does_not_go_below_the_log_start(tmp_path: Path) -> None:
    # UnifiedLogTest.testLastStableOffsetDoesNotExceedLogStartOffsetMidSegment and
    # ...AfterSegmentDeletion
    log = open_log(tmp_path)
    append = Producer(log, 1)
    append(5)
    plain(log, 3)
    assert log.log_end_offset == 8
    log.roll(NOW_MS)
    append(5)
    assert log.first_unstable_offset == 0
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(5)
    assert unstable(log) == (5, 5)
    log.delete_records(8)
    log.delete_old_segments(NOW_MS)  # the first segment goes at the retention check
    assert len(log.segments) == 1
    assert unstable(log) == (8, 8)


def test_transaction_index_updated_through_replication(tmp_path: Path) -> None:
    # UnifiedLogTest.testTransactionIndexUpdatedThroughReplication
    leader = open_log(tmp_path / "leader")
    mixed_transactions(leader)
    follower = open_log(tmp_path / "follower")
    data = leader.read(0, 10**6, leader.log_end_offset).read_bytes()
    follower.append_as_follower(data)
    assert all_aborted(follower) == EXPECTED_ABORTED
    follower.update_high_watermark(75)
    assert follower.last_stable_offset == 36


def test_truncation_removes_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    # LogSegment.truncateTo -> TransactionIndex.truncateTo; UnifiedLog.truncateTo rebuilds
    # producer state, so a transaction whose marker went is open again
    log = open_log(tmp_path)
    mixed_transactions(log)
    log.update_high_watermark(log.log_end_offset)
    assert log.truncate_to(74)  # the abort of pid 2 (at 74) goes
    assert all_aborted(log) == EXPECTED_ABORTED[:1]
    assert log.first_unstable_offset == 8 and log.last_stable_offset == 8
    assert log.truncate_to(29)
    assert all_aborted(log) == []


def test_retention_deletes_indexes_with_their_segments(tmp_path: Path, store: str) -> None:
    log = open_log(tmp_path)
    mixed_transactions(log)
    log.update_high_watermark(log.log_end_offset)
    first, active = log.segments
    index_file = tmp_path / "topic-0" / f"{first.base_offset:020d}{TXN_INDEX_SUFFIX}"
    assert store == "memory" or index_file.exists()
    log.delete_records(active.base_offset)
    log.delete_old_segments(NOW_MS)  # the first segment goes, with pid 1's abort
    assert [s.base_offset for s in log.segments] == [active.base_offset]
    assert not index_file.exists()
    assert all_aborted(log) == EXPECTED_ABORTED[1:]
    assert log.collect_aborted_transactions(log.log_start_offset, 90) == EXPECTED_ABORTED[1:]


# ------------------------------------------------------------------ reopening and recovery


def test_clean_restart_keeps_open_transactions_and_the_index(tmp_path: Path) -> None:
    # ProducerStateManagerTest.testRecoverFromSnapshotUnfinishedTransaction, through the log
    log = open_log(tmp_path)
    mixed_transactions(log)
    Producer(log, 5)(2)  # open at 90
    log.close()
    reopened = open_log(tmp_path, recovery_point=92, had_clean_shutdown=True)
    reopened.update_high_watermark(92)
    assert reopened.first_unstable_offset == 90 and reopened.last_stable_offset == 90
    assert all_aborted(reopened) == EXPECTED_ABORTED


def test_full_transaction_index_recovery(tmp_path: Path, store: str) -> None:
    # LogLoaderTest.testFullTransactionIndexRecovery: without the indexes, an unclean start
    # rebuilds them from the batches
    log = open_log(tmp_path)
    mixed_transactions(log)
    log.close_handlers()
    if store == "files":
        for path in (tmp_path / "topic-0").glob(f"*{TXN_INDEX_SUFFIX}"):
            path.unlink()
    reopened = open_log(tmp_path, recovery_point=0, had_clean_shutdown=False)
    assert all_aborted(reopened) == EXPECTED_ABORTED
    assert reopened.load_report.recovered_segments  # they were recovered, hence rebuilt


def test_recover_transaction_index_of_a_transaction_begun_in_an_earlier_segment(
    tmp_path: Path,
) -> None:
    # LogSegmentTest.testRecoverTransactionIndex: only the last segment is recovered; the
    # transaction of pid 2 began before it, as the snapshot at its base offset says
    log = open_log(tmp_path)
    pid1, pid2 = Producer(log, 1), Producer(log, 2)
    pid2(2)  # 0..1
    log.roll(NOW_MS)  # snapshot at 2: pid 2 open since 0
    pid1(2)  # 2..3
    plain(log, 2)  # 4..5
    end_txn(log, 2, commit=False)  # 6: the LSO is pid 1's first offset
    end_txn(log, 1, commit=True)  # 7
    assert all_aborted(log) == [AbortedTxn(2, 0, 6, 2)]
    log.close_handlers()
    reopened = open_log(tmp_path, recovery_point=2, had_clean_shutdown=False)
    assert reopened.load_report.recovered_segments == (2,)
    assert all_aborted(reopened) == [AbortedTxn(2, 0, 6, 2)]


@ONLY_FILES  # bytes at rest do not tear in memory
def test_damaged_index_is_rebuilt_after_a_clean_shutdown(tmp_path: Path) -> None:
    # TransactionIndex.sanityCheck fails -> the segment is recovered (Kafka LogLoader)
    log = open_log(tmp_path)
    mixed_transactions(log)
    holder = next(s.base_offset for s in log.segments if s.aborted_txns)
    log.close()
    index_file = tmp_path / "topic-0" / f"{holder:020d}{TXN_INDEX_SUFFIX}"
    with index_file.open("ab") as file:
        file.write(b"\x00\x00\x00")  # a torn entry
    reopened = open_log(tmp_path, recovery_point=90, had_clean_shutdown=True)
    assert [base for base, _ in reopened.load_report.rebuilt_indexes] == [holder]
    assert all_aborted(reopened) == EXPECTED_ABORTED
    assert index_file.stat().st_size % 34 == 0


@ONLY_FILES  # a memory disk has no files
def test_stray_transaction_index_files_are_removed(tmp_path: Path) -> None:
    open_log(tmp_path).close()
    stray = tmp_path / "topic-0" / f"{500:020d}{TXN_INDEX_SUFFIX}"
    stray.write_bytes(AbortedTxn(1, 500, 510, 511).encode())
    reopened = open_log(tmp_path, had_clean_shutdown=True)
    assert stray.name in reopened.load_report.removed_files and not stray.exists()


@ONLY_MEMORY  # the memory disk's crash rule
def test_a_crash_loses_no_flushed_index_entry(tmp_path: Path) -> None:
    # The simulation's crash rule: after a power loss only flushed bytes remain; recovery
    # rebuilds the indexes of what survived
    disk = MemoryDisk(tmp_path / "topic-0")
    log = PartitionLog.open(disk, CONFIG)
    mixed_transactions(log)
    log.flush(30)  # up to and including pid 1's abort
    recovery_point = log.recovery_point
    log.close_handlers()
    disk.crash()
    reopened = PartitionLog.open(
        disk, CONFIG, recovery_point=recovery_point, had_clean_shutdown=False
    )
    assert reopened.log_end_offset == 39  # the unflushed second segment is gone
    assert all_aborted(reopened) == EXPECTED_ABORTED[:1]
    reopened.update_high_watermark(39)
    assert reopened.last_stable_offset == 8  # pid 2's transaction is open again


def test_a_leaders_producer_state_is_what_replaying_its_batches_makes(tmp_path: Path) -> None:
    """A leader folds each idempotent batch into producer state with the entry its append check
    worked out (``check_producers``), not by applying the batch again; a follower applies the
    same batches one by one. Both end with the same producers and transactions — including an
    append carrying two batches of one producer, checked against each other."""
    leader = open_log(tmp_path)
    mixed_transactions(leader)
    records = [SimpleRecord(value=b"i", timestamp=NOW_MS)]
    two = b"".join(
        build_batch(records, producer_id=9, producer_epoch=EPOCH, base_sequence=sequence)
        for sequence in (0, 1)
    )
    leader.append_as_leader(bytearray(two), EPOCH, NOW_MS)
    Producer(leader, 5)(2)  # left open
    follower = OPENER["open"](tmp_path / "topic-1", CONFIG)
    follower.append_as_follower(leader.read(0, 10**7, leader.log_end_offset).read_bytes(), NOW_MS)
    assert leader.producer_state.producers[9].last_sequence == 1
    assert dict(leader.producer_state.producers) == dict(follower.producer_state.producers)
    assert dict(leader.producer_state.ongoing_txns) == dict(follower.producer_state.ongoing_txns)
    assert unstable(leader) == unstable(follower)
    leader.close()
    follower.close()
