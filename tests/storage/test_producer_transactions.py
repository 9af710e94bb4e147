"""Producer state's transactions: open and completed ones, the first unstable offset and the
LSO an aborted transaction is indexed with, and the marker checks.

Each case names the Kafka test it reproduces, from
storage/src/test/java/org/apache/kafka/storage/internals/log/ProducerStateManagerTest.java.
"""

from __future__ import annotations

from pathlib import Path

from pykraft.storage.aborted_txn import CompletedTxn
from pykraft.storage.memory_disk import MemorySnapshots
from pykraft.storage.producer_append import AppendCheckKind, check_append
from pykraft.storage.producer_entry import ProducerStateEntry
from pykraft.storage.producer_state import ProducerStateManager
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.records import ControlRecordType
from pykraft.storage.txn_markers import EndTransactionMarker

COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT
NEW = AppendCheckKind.NEW


def header(pid: int, epoch: int = 0, seq: int = -1, count: int = 1, *,
           transactional: bool = True, control: bool = False) -> BatchHeader:  # fmt: skip
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    return BatchHeader(
        base_offset=0, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
        attributes=attributes, last_offset_delta=count - 1, base_timestamp=0, max_timestamp=0,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, records_count=count,
    )  # fmt: skip


def manager() -> ProducerStateManager:
    return ProducerStateManager(Path("test-0"), snapshots=MemorySnapshots())


def begin(state: ProducerStateManager, pid: int, first: int, last: int | None = None) -> None:
    """A transactional batch of ``pid`` at ``first..last`` (Kafka's beginTransaction)."""
    last = first if last is None else last
    assert state.update(header(pid, count=last - first + 1), first, last, 0) is None


def end(
    state: ProducerStateManager,
    pid: int,
    offset: int,
    control_type: ControlRecordType = COMMIT,
    *,
    epoch: int = 0,
    coordinator_epoch: int = 0,
) -> CompletedTxn | None:
    marker = EndTransactionMarker(control_type, coordinator_epoch)
    return state.update(header(pid, epoch, control=True), offset, offset, 0, marker=marker)


def test_last_stable_offset_of_completed_transactions() -> None:
    # testLastStableOffsetCompletedTxn
    state = manager()
    start1, start2, start3 = 992342, 992342 + 25, 992342 + 57
    begin(state, 1, start1)
    begin(state, 2, start2)
    begin(state, 3, start3)
    last1 = start3 + 15
    completed1 = CompletedTxn(1, start1, last1, is_aborted=False)
    assert state.last_stable_offset(completed1) == start2
    state.complete_txn(completed1)
    state.on_high_watermark_updated(last1 + 1)
    assert state.first_unstable_offset() == start2
    last3 = last1 + 20
    completed3 = CompletedTxn(3, start3, last3, is_aborted=False)
    assert state.last_stable_offset(completed3) == start2
    state.complete_txn(completed3)
    state.on_high_watermark_updated(last3 + 1)
    assert state.first_unstable_offset() == start2
    last2 = last3 + 78
    completed2 = CompletedTxn(2, start2, last2, is_aborted=False)
    assert state.last_stable_offset(completed2) == last2 + 1
    state.complete_txn(completed2)
    state.on_high_watermark_updated(last2 + 1)
    assert state.first_unstable_offset() is None


def test_completed_transactions_stay_unstable_until_the_high_watermark_passes_them() -> None:
    # testSkipEmptyTransactions (its first half), and UnifiedLog's unreplicatedTxns
    state = manager()
    begin(state, 1, 16, 20)
    state.on_high_watermark_updated(21)
    assert state.first_unstable_offset() == 16
    completed = end(state, 1, 21)
    assert completed == CompletedTxn(1, 16, 21, is_aborted=False)
    state.complete_txn(completed)
    assert state.first_undecided_offset() is None
    assert state.first_unstable_offset() == 16  # decided, but its marker is not replicated
    state.on_high_watermark_updated(21)
    assert state.first_unstable_offset() == 16  # the marker at 21 is still not below it
    state.on_high_watermark_updated(22)
    assert state.first_unstable_offset() is None


def test_empty_transactions_complete_nothing() -> None:
    # testSkipEmptyTransactions: markers without data in between start or end no transaction
    state = manager()
    begin(state, 1, 16, 20)
    first = end(state, 1, 21)
    assert first == CompletedTxn(1, 16, 21, is_aborted=False)
    assert end(state, 1, 22) is None
    assert end(state, 1, 23, ABORT) is None
    begin(state, 1, 24, 27)
    second = end(state, 1, 28, ABORT)
    assert second == CompletedTxn(1, 24, 28, is_aborted=True)
    assert end(state, 1, 29, ABORT) is None
    begin(state, 1, 30, 31)
    assert dict(state.ongoing_txns) == {16: 1, 24: 1, 30: 1}
    state.complete_txn(first)
    state.complete_txn(second)
    state.on_high_watermark_updated(32)
    assert state.first_unstable_offset() == 30


def test_marker_checks() -> None:
    # testCoordinatorFencing
    entry = ProducerStateEntry(1, producer_epoch=0, coordinator_epoch=1)

    def check(epoch: int, coordinator_epoch: int) -> AppendCheckKind:
        marker = EndTransactionMarker(COMMIT, coordinator_epoch)
        control = header(1, epoch, control=True)
        return check_append(entry, control, from_client=False, marker=marker).kind

    assert check(0, 1) is NEW  # the current coordinator epoch
    assert check(0, 2) is NEW  # a newer coordinator
    assert check(0, 0) is AppendCheckKind.TRANSACTION_COORDINATOR_FENCED
    # testOldEpochForControlRecord: the producer epoch is checked first
    assert check(-1, 0) is AppendCheckKind.INVALID_PRODUCER_EPOCH
    assert check(1, 1) is NEW


def test_coordinator_fenced_after_reload() -> None:
    # testCoordinatorFencedAfterReload: the coordinator epoch survives a snapshot
    state = manager()
    begin(state, 1, 99)
    state.complete_txn(end(state, 1, 100, coordinator_epoch=1))  # type: ignore[arg-type]
    state.take_snapshot(101)
    recovered = ProducerStateManager(Path("test-0"), snapshots=state.snapshots)
    assert recovered.truncate_and_reload(0, 101) == 101
    marker = EndTransactionMarker(COMMIT, 0)
    check = check_append(recovered.last_entry(1), header(1, control=True), marker=marker)
    assert check.kind is AppendCheckKind.TRANSACTION_COORDINATOR_FENCED
    assert "0 (zombie), 1 (current)" in check.message


def test_non_transactional_append_with_ongoing_transaction() -> None:
    # testNonTransactionalAppendWithOngoingTransaction: INVALID_TXN_STATE, for any origin
    state = manager()
    assert state.update(header(1, seq=0), 0, 0, 0) is None
    entry = state.last_entry(1)
    plain = header(1, seq=1, transactional=False)
    assert check_append(entry, plain).kind is AppendCheckKind.INVALID_TXN_STATE
    assert check_append(entry, plain, from_client=False).kind is AppendCheckKind.INVALID_TXN_STATE
    # ... but the sequence is checked first, as maybeValidateDataBatch runs first
    gap = header(1, seq=5, transactional=False)
    assert check_append(entry, gap).kind is AppendCheckKind.OUT_OF_ORDER_SEQUENCE


def test_coordinator_appends_are_not_sequence_checked() -> None:
    # testSequenceNotValidatedForGroupMetadataRecords: a coordinator's transactional offset
    # commits carry no sequence; only the epoch is checked
    state = manager()
    assert state.update(header(1, seq=0), 0, 0, 0) is None
    entry = state.last_entry(1)
    no_sequence = header(1, seq=-1)
    assert check_append(entry, no_sequence).kind is AppendCheckKind.OUT_OF_ORDER_SEQUENCE
    assert check_append(entry, no_sequence, from_client=False).kind is NEW
    assert check_append(entry, header(1, epoch=-1), from_client=False).kind is (
        AppendCheckKind.INVALID_PRODUCER_EPOCH
    )


def test_append_empty_control_batch() -> None:
    # testAppendEmptyControlBatch: no marker, no transaction started or ended
    state = manager()
    control = header(23423, control=True)
    assert state.update(control, 15, 15, 0, marker=None) is None
    entry = state.last_entry(23423)
    assert entry is not None and entry.current_txn_first_offset is None
    assert state.first_unstable_offset() is None


def test_fencing_abort_marker_ends_the_transaction() -> None:
    # testProducerStateAfterFencingAbortMarker / testControlRecordBumpsProducerEpoch
    state = manager()
    begin(state, 1, 0)
    completed = end(state, 1, 1, ABORT, epoch=1)
    assert completed == CompletedTxn(1, 0, 1, is_aborted=True)
    entry = state.last_entry(1)
    assert entry and (entry.producer_epoch, entry.current_txn_first_offset) == (1, None)
    assert entry.batches == ()


def test_reload_reopens_open_transactions() -> None:
    # testRecoverFromSnapshotUnfinishedTransaction, for the ongoing set: the LSO holds after a
    # restart (Kafka loadProducerEntry)
    state = manager()
    begin(state, 7, 10, 12)
    begin(state, 3, 13)
    completed = end(state, 7, 14, ABORT)
    assert completed is not None
    state.complete_txn(completed)
    state.take_snapshot(15)
    recovered = ProducerStateManager(Path("test-0"), snapshots=state.snapshots)
    recovered.truncate_and_reload(0, 15)
    assert dict(recovered.ongoing_txns) == {13: 3}
    assert recovered.first_unstable_offset() == 13
    # load_as_of reads without deleting: the snapshot stays for the real load
    scratch = ProducerStateManager(Path("test-0"), snapshots=state.snapshots)
    assert scratch.load_as_of(14, 0) == 0 and scratch.first_unstable_offset() is None
    assert scratch.load_as_of(15, 0) == 15 and dict(scratch.ongoing_txns) == {13: 3}
    assert state.snapshots.offsets() == [15]


def test_truncation_and_log_start_forget_transactions() -> None:
    # testHasLateTransactionUpdatedAfterFullTruncation / onLogStartOffsetIncremented
    state = manager()
    begin(state, 1, 5)
    begin(state, 2, 6)
    completed = end(state, 1, 7)
    assert completed is not None
    state.complete_txn(completed)
    state.on_log_start_offset_incremented(8)  # the marker at 7 is gone with the log start
    assert state.first_unstable_offset() == 6
    state.truncate_fully_and_start_at(150)
    assert state.first_unstable_offset() is None and dict(state.ongoing_txns) == {}
