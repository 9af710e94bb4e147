"""Idempotent producer state, reproducing Kafka's ProducerStateManagerTest and the producer cases
of UnifiedLogTest.

Sources: storage/src/test/java/org/apache/kafka/storage/internals/log/ProducerStateManagerTest.java
and core/src/test/scala/unit/kafka/log/UnifiedLogTest.scala. Each case names its Kafka test.
"""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from pykraft.storage.aborted_txn import CompletedTxn
from pykraft.storage.producer_append import AppendCheck, AppendCheckKind, apply_batch, check_append
from pykraft.storage.producer_entry import BatchMetadata, ProducerStateEntry
from pykraft.storage.producer_snapshot import (
    CorruptSnapshotError,
    decode_snapshot,
    encode_snapshot,
    snapshot_file,
)
from pykraft.storage.producer_state import ProducerStateManager
from pykraft.storage.producer_state_file import ProducerStateFileManager
from pykraft.storage.record_batch import BatchHeader, parse_header
from pykraft.storage.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_control_batch,
)
from pykraft.storage.txn_markers import EndTransactionMarker

ABORT = ControlRecordType.ABORT
ABORT_MARKER = EndTransactionMarker(ABORT, coordinator_epoch=0)

NEW = AppendCheckKind.NEW
DUP = AppendCheckKind.DUPLICATE
OOO = AppendCheckKind.OUT_OF_ORDER_SEQUENCE
FENCED = AppendCheckKind.INVALID_PRODUCER_EPOCH
INT32_MAX = 2**31 - 1
PID = 1


def header(
    pid: int = PID,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    *,
    transactional: bool = False,
    control: bool = False,
) -> BatchHeader:
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    return BatchHeader(
        base_offset=0, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
        attributes=attributes, last_offset_delta=count - 1, base_timestamp=0, max_timestamp=0,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, records_count=count,
    )  # fmt: skip


# A script step: (origin, epoch, seq, first_offset, count[, flags]). "client" steps are checked
# and appended only when NEW (like a leader); "replica" steps are appended unchecked (like a
# follower, Kafka's REPLICATION origin); "marker" steps append an end-transaction control batch.
Step = tuple[str, int, int, int, int] | tuple[str, int, int, int, int, str]


def run(steps: list[Step], pid: int = PID) -> tuple[list[AppendCheck], ProducerStateEntry | None]:
    entry: ProducerStateEntry | None = None
    results: list[AppendCheck] = []
    for step in steps:
        origin, epoch, seq, offset, count = step[:5]
        flags = step[5] if len(step) == 6 else ""
        h = header(pid, epoch, seq, count, transactional="txn" in flags, control=origin == "marker")
        marker = None
        if origin == "marker":
            control_type = ControlRecordType.COMMIT if "commit" in flags else ABORT
            marker = EndTransactionMarker(control_type, coordinator_epoch=0)
        if origin in ("client", "marker"):
            result = check_append(entry, h, from_client=origin == "client", marker=marker)
            results.append(result)
            if not result.is_new:
                continue
        entry = apply_batch(entry, h, offset, offset + count - 1, timestamp=offset, marker=marker)
    return results, entry


def check(steps: list[Step], expected: list[AppendCheckKind]) -> ProducerStateEntry | None:
    results, entry = run(steps)
    assert [r.kind for r in results] == expected, results
    return entry


def test_sequence_and_epoch_rules() -> None:
    # testBasicIdMapping (the retry of seq 1 is a DUPLICATE: UnifiedLog checks duplicates first)
    check(
        [("client", 0, 0, 0, 1), ("client", 0, 1, 1, 1), ("client", 0, 1, 2, 1),
         ("client", 0, 5, 2, 1), ("client", 1, 0, 3, 1), ("client", 0, 0, 4, 1)],
        [NEW, NEW, DUP, OOO, NEW, FENCED],
    )  # fmt: skip
    # UnifiedLogTest.testNonSequentialAppend
    check([("client", 0, 0, 0, 1), ("client", 0, 2, 1, 1)], [NEW, OOO])
    # UnifiedLogTest.testOldProducerEpoch
    check([("client", 1, 0, 0, 1), ("client", 0, 0, 1, 1)], [NEW, FENCED])
    # testProducerSequenceWrapAround: Int32.MAX is followed by 0
    entry = check([("replica", 15, INT32_MAX, 735, 1), ("client", 15, 0, 1235, 1)], [NEW])
    assert entry and (entry.first_sequence, entry.last_sequence) == (INT32_MAX, 0)
    # testProducerSequenceInvalidWrapAround
    check([("replica", 15, INT32_MAX, 735, 1), ("client", 15, 1, 1235, 1)], [OOO])
    # testAcceptAppendWithSequenceGapsOnReplica: clients are checked, replicas are not
    entry = check([("client", 0, 0, 0, 1), ("client", 0, 3, 1, 1), ("replica", 0, 3, 1, 1)],
                  [NEW, OOO])  # fmt: skip
    assert entry and entry.last_sequence == 3
    # testRejectNonZeroSequenceForDirectEpochBump: a new epoch must start at sequence 0
    bumped = [("client", 0, 0, 0, 1), ("client", 0, 1, 1, 1), ("client", 0, 2, 2, 1)]
    results, _ = run([*bumped, ("client", 1, 5, 3, 1)])
    assert results[-1].kind is OOO
    for fragment in ["1 (request epoch)", "5 (seq. number)", "0 (current producer epoch)"]:
        assert fragment in results[-1].message
    check([*bumped, ("client", 1, 0, 3, 1)], [NEW, NEW, NEW, NEW])
    # testRemoveExpiredPidsOnReload / KIP-360: an unknown producer may start at any sequence
    check([("client", 0, 2, 2, 1)], [NEW])
    check([("client", 3, 17, 0, 1)], [NEW])


def test_duplicate_detection() -> None:
    # UnifiedLogTest.testDuplicateAppends
    singles: list[Step] = [("client", 0, seq, seq, 1) for seq in range(6)]
    multi: Step = ("client", 0, 6, 6, 3)  # sequences 6..8 at offsets 6..8
    results, entry = run([*singles, multi, multi])
    assert results[-1] == AppendCheck(DUP, 6, 8, results[-1].message)  # original offsets
    assert "already written at offset 6" in results[-1].message
    assert entry is not None
    # a partial duplicate of the tail is out of order, not a duplicate
    assert check_append(entry, header(seq=7, count=2)).kind is OOO
    # the batch 4th from the tail is still among the last five: a duplicate
    assert check_append(entry, header(seq=2)) == AppendCheck(DUP, 2, 2, "sequences 2..2 of "
                                                             "producer 1 were already written "
                                                             "at offset 2")  # fmt: skip
    # older batches are forgotten: out of order
    assert check_append(entry, header(seq=1)).kind is OOO
    assert [b.first_sequence for b in entry.batches] == [2, 3, 4, 5, 6]
    # a duplicate needs the same epoch
    assert check_append(entry, header(epoch=1, seq=6, count=3)).kind is OOO


def test_batches_without_producer_id_are_always_new() -> None:
    plain = header(pid=-1, epoch=-1, seq=-1)
    assert check_append(None, plain).kind is NEW
    manager = ProducerStateFileManager(Path("/nonexistent"))
    for offset in range(3):
        assert manager.check(plain).kind is NEW
        manager.update(plain, offset, offset, timestamp=0)
    assert manager.producers == {}
    assert manager.map_end_offset == 3


def test_control_batches() -> None:
    # testAppendTxnMarkerWithNoProducerState
    entry = check(
        [("marker", 2, -1, 27, 1), ("client", 0, 0, 28, 1), ("client", 2, 17, 28, 1),
         ("client", 2, 0, 28, 1)],
        [NEW, FENCED, OOO, NEW],
    )  # fmt: skip
    assert entry and (entry.producer_epoch, entry.last_sequence) == (2, 0)
    # testControlRecordBumpsProducerEpoch
    _, entry = run([("client", 0, 0, 0, 1), ("marker", 1, -1, 1, 1)])
    assert entry and (entry.producer_epoch, entry.batches) == (1, ())
    assert (entry.first_sequence, entry.last_sequence, entry.current_txn_first_offset) == (
        -1,
        -1,
        None,
    )
    # testOutOfSequenceAfterControlRecordEpochBump
    check(
        [("client", 0, 0, 0, 1, "txn"), ("client", 0, 1, 1, 1, "txn"), ("marker", 1, -1, 2, 1),
         ("client", 1, 2, 3, 1, "txn"), ("client", 2, 2, 3, 1, "txn"),
         ("client", 1, 0, 3, 1, "txn")],
        [NEW, NEW, NEW, OOO, OOO, NEW],
    )  # fmt: skip
    # testOldEpochForControlRecord
    check([("client", 5, 0, 99, 1, "txn"), ("marker", 3, -1, 100, 1)], [NEW, FENCED])
    # testProducerStateAfterFencingAbortMarker
    _, entry = run([("client", 0, 0, 0, 1, "txn"), ("marker", 1, -1, 1, 1)])
    assert entry and (entry.first_data_offset, entry.last_data_offset) == (-1, -1)
    # updateProducerTransactionState: markers keep the cached batches of the same epoch
    _, entry = run([("client", 0, 0, 9, 1), ("client", 0, 1, 16, 5, "txn")])
    assert entry and entry.current_txn_first_offset == 16
    commit = EndTransactionMarker(ControlRecordType.COMMIT, coordinator_epoch=15)
    entry = apply_batch(entry, header(control=True), 40, 40, 40, marker=commit)
    assert (entry.first_sequence, entry.last_sequence, entry.last_data_offset) == (0, 5, 20)
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (None, 15)


def test_follower_entries_take_batches_as_given() -> None:
    # testNoValidationOnFirstEntryWhenLoadingLog
    _, entry = run([("replica", 5, 16, 735, 1)])
    assert entry == ProducerStateEntry(PID, 5, (BatchMetadata(16, 16, 735, 735, 735),), -1, 735)
    # testProducerSequenceWithWrapAroundBatchRecord: 21 records from Int32.MAX - 10 wrap to 9
    _, entry = run([("replica", 15, INT32_MAX - 10, 2000, 21)])
    assert entry and (entry.first_sequence, entry.last_sequence) == (INT32_MAX - 10, 9)
    assert (entry.first_data_offset, entry.last_data_offset) == (2000, 2020)
    # UnifiedLogTest.testDuplicateAppendToFollower: a follower appends repeated sequences
    _, entry = run([("replica", 0, 0, 0, 2), ("replica", 0, 0, 2, 2)])
    assert entry and entry.last_data_offset == 3


def test_check_reads_real_batch_headers() -> None:
    records = [SimpleRecord(b"a"), SimpleRecord(b"b")]
    batch = build_batch(records, producer_id=7, producer_epoch=0, base_sequence=0)
    h = parse_header(batch)
    manager = ProducerStateFileManager(Path("/nonexistent"))
    assert manager.check(h).kind is NEW
    manager.update(h, 10, 11, timestamp=5)
    assert manager.check(h) == AppendCheck(DUP, 10, 11, manager.check(h).message)
    marker = parse_header(build_control_batch(
        ControlRecordType.ABORT, producer_id=7, producer_epoch=1, timestamp=6))  # fmt: skip
    assert manager.check(marker).kind is NEW
    manager.update(marker, 12, 12, timestamp=6, marker=EndTransactionMarker(ABORT, 3))
    entry = manager.last_entry(7)
    assert entry and (entry.producer_epoch, entry.coordinator_epoch, entry.batches) == (1, 3, ())


def test_check_does_not_mutate(tmp_path: Path) -> None:
    # testPrepareUpdateDoesNotMutate
    manager = ProducerStateFileManager(tmp_path)
    manager.check(header(seq=0, count=6))
    assert manager.last_entry(PID) is None
    manager.update(header(seq=0, count=6), 15, 20, timestamp=0)
    manager.check(header(seq=6, count=5))
    entry = manager.last_entry(PID)
    assert entry and (entry.last_sequence, entry.last_data_offset) == (5, 20)


def appended(manager: ProducerStateManager, pid: int, epoch: int, seq: int, offset: int,
             *, timestamp: int = 0, transactional: bool = False) -> None:  # fmt: skip
    h = header(pid, epoch, seq, transactional=transactional)
    assert manager.check(h).kind is NEW
    manager.update(h, offset, offset, timestamp)


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.iterdir())


def test_take_snapshot(tmp_path: Path) -> None:
    # testTakeSnapshot / testSkipSnapshotIfOffsetUnchanged
    manager = ProducerStateFileManager(tmp_path)
    appended(manager, PID, 0, 0, 0)
    appended(manager, PID, 0, 1, 1)
    manager.take_snapshot(2)
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000002.snapshot"]
    manager.take_snapshot(2)
    assert snapshot_offsets(tmp_path) == [2]
    assert manager.last_snapshot_offset == 2
    with pytest.raises(ValueError, match="below the map end offset 2"):
        manager.take_snapshot(1)


def test_delete_snapshots_below_and_truncate_fully(tmp_path: Path) -> None:
    # testDeleteSnapshotsBefore
    manager = ProducerStateFileManager(tmp_path)
    appended(manager, PID, 0, 0, 0)
    appended(manager, PID, 0, 1, 1)
    manager.take_snapshot(2)
    appended(manager, PID, 0, 2, 2)
    manager.take_snapshot(3)
    assert snapshot_offsets(tmp_path) == [2, 3]
    manager.delete_snapshots_below(3)
    assert snapshot_offsets(tmp_path) == [3]
    manager.delete_snapshots_below(4)
    assert snapshot_offsets(tmp_path) == []
    # testTruncateFullyAndStartAt
    manager.take_snapshot(3)
    manager.truncate_fully_and_start_at(0)
    assert (snapshot_offsets(tmp_path), dict(manager.producers)) == ([], {})
    appended(manager, PID, 0, 0, 0)
    manager.take_snapshot(1)
    assert snapshot_offsets(tmp_path) == [1]


def test_truncate_and_reload_removes_out_of_range_snapshots(tmp_path: Path) -> None:
    # testTruncateAndReloadRemovesOutOfRangeSnapshots
    manager = ProducerStateFileManager(tmp_path)
    for seq in range(5):
        appended(manager, PID, 0, seq, seq)
        manager.take_snapshot(seq + 1)
    assert manager.truncate_and_reload(1, 3) == 3
    assert (manager.oldest_snapshot_offset, manager.last_snapshot_offset) == (2, 3)
    entry = manager.last_entry(PID)
    assert entry and entry.last_sequence == 2


def test_recover_from_snapshot(tmp_path: Path) -> None:
    # testRecoverFromSnapshotUnfinishedTransaction: only the last batch is persisted
    manager = ProducerStateFileManager(tmp_path)
    appended(manager, PID, 0, 0, 0, transactional=True)
    appended(manager, PID, 0, 1, 1, transactional=True)
    manager.take_snapshot(2)
    recovered = ProducerStateFileManager(tmp_path)
    assert recovered.truncate_and_reload(0, 3) == 2  # replay offsets 2.. from the log
    entry = recovered.last_entry(PID)
    assert entry and (entry.first_data_offset, entry.first_sequence) == (1, 1)
    assert (entry.last_data_offset, entry.last_sequence, entry.current_txn_first_offset) == (
        1,
        1,
        0,
    )
    appended(recovered, PID, 0, 2, 2, transactional=True)
    assert recovered.load_problems == ()


def test_recover_from_snapshot_finished_and_empty_transactions(tmp_path: Path) -> None:
    # testRecoverFromSnapshotFinishedTransaction
    manager = ProducerStateFileManager(tmp_path)
    appended(manager, PID, 0, 0, 0, transactional=True)
    appended(manager, PID, 0, 1, 1, transactional=True)
    completed = manager.update(header(control=True), 2, 2, timestamp=77, marker=ABORT_MARKER)
    assert completed == CompletedTxn(PID, 0, 2, is_aborted=True)
    manager.complete_txn(completed)
    manager.take_snapshot(3)
    recovered = ProducerStateFileManager(tmp_path)
    recovered.load(3)
    entry = recovered.last_entry(PID)
    assert entry and (entry.last_sequence, entry.current_txn_first_offset) == (1, None)
    # testRecoverFromSnapshotEmptyTransaction
    manager.truncate_fully_and_start_at(0)
    # an empty transaction completes nothing
    assert manager.update(header(pid=9, control=True), 0, 0, 1234, marker=ABORT_MARKER) is None
    manager.take_snapshot(1)
    recovered.load(1)
    entry = recovered.last_entry(9)
    assert entry and (entry.last_timestamp, entry.current_txn_first_offset) == (1234, None)


def test_load_from_snapshot_retains_producers(tmp_path: Path) -> None:
    # testLoadFromSnapshotRetainsNonExpiredProducers
    manager = ProducerStateFileManager(tmp_path)
    appended(manager, 1, 0, 0, 0)
    appended(manager, 2, 0, 0, 1)
    manager.take_snapshot(2)
    manager.update_map_end_offset(5)  # force a reload
    assert manager.truncate_and_reload(1, 2) == 2
    assert {pid: e.last_data_offset for pid, e in manager.producers.items()} == {1: 0, 2: 1}


def test_load_without_snapshots_starts_at_log_start(tmp_path: Path) -> None:
    manager = ProducerStateFileManager(tmp_path / "missing-dir")
    assert manager.load(100, log_start_offset=40) == 40
    assert manager.producers == {}


@pytest.mark.parametrize(
    ("kafka_test", "corrupt", "reason"),
    [
        ("testLoadFromEmptySnapshotFile", lambda b: b"", "truncated: 0 bytes"),
        ("testLoadFromTruncatedSnapshotFile", lambda b: b[: len(b) // 2], "CRC mismatch"),
        ("testLoadFromCorruptSnapshotFile", lambda b: bytes(37) + b[37:], "unknown snapshot"),
        ("(flipped payload byte)", lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC mismatch"),
    ],
)
def test_load_skips_corrupt_snapshot(tmp_path: Path, kafka_test: str, corrupt, reason: str) -> None:
    manager = ProducerStateFileManager(tmp_path)
    appended(manager, PID, 0, 0, 0)
    manager.take_snapshot(1)
    appended(manager, PID, 0, 1, 1)
    manager.take_snapshot(2)
    latest = snapshot_file(tmp_path, 2)
    latest.write_bytes(corrupt(latest.read_bytes()))
    reloaded = ProducerStateFileManager(tmp_path)
    assert reloaded.load(20) == 1  # fell back to the earlier snapshot; replay from offset 1
    assert not latest.exists()
    entry = reloaded.last_entry(PID)
    assert entry and entry.last_data_offset == 0
    assert len(reloaded.load_problems) == 1
    assert reloaded.load_problems[0].startswith("00000000000000000002.snapshot: " + reason)


def test_snapshot_bytes_follow_kafkas_version_1_layout() -> None:
    entry = ProducerStateEntry(
        producer_id=11, producer_epoch=12, batches=(BatchMetadata(5, 9, 100, 104, 777),),
        coordinator_epoch=13, last_timestamp=777, current_txn_first_offset=None,
    )  # fmt: skip
    data = encode_snapshot([entry])
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 11, 12, 9, 104, 4, 777, 13, -1)
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert len(data) == 10 + 46


def test_read_write_snapshot_round_trip() -> None:
    # testReadWriteSnapshot: Kafka's BatchMetadata(lastSeq 1, lastOffset 2, offsetDelta 3), so
    # the first sequence wraps below zero to Int32.MAX - 1.
    entries = [
        ProducerStateEntry(1, 2, (BatchMetadata(INT32_MAX - 1, 1, -1, 2, -1),), 3, -1, 100),
        ProducerStateEntry(11, 12, (), 13, 123456, None),
    ]
    assert decode_snapshot(encode_snapshot(reversed(entries))) == entries


def test_decode_rejects_bad_snapshots() -> None:
    good = encode_snapshot([ProducerStateEntry(1, 0, (), -1, 0, None)])
    with pytest.raises(CorruptSnapshotError, match="unknown snapshot version 2"):
        decode_snapshot(struct.pack(">h", 2) + good[2:])
    body = struct.pack(">i", 2) + good[10:]  # claims two entries, holds one
    with pytest.raises(CorruptSnapshotError, match="2 entries need 102 bytes but the file has 56"):
        decode_snapshot(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)


def test_expiration(tmp_path: Path) -> None:
    manager = ProducerStateFileManager(tmp_path, producer_id_expiration_ms=1000)
    # testPidExpirationTimeout: after expiry the producer may continue at any sequence
    appended(manager, PID, 5, 0, 1, timestamp=0)
    manager.remove_expired_producers(now_ms=1001)
    assert manager.last_entry(PID) is None
    appended(manager, PID, 5, 1, 2, timestamp=1001)
    assert manager.map_end_offset == 3
    # testProducersWithOngoingTransactionsDontExpire
    appended(manager, 2, 5, 0, 99, timestamp=0, transactional=True)
    manager.remove_expired_producers(now_ms=10_000)
    assert manager.last_entry(2) is not None
    assert manager.last_entry(PID) is None
