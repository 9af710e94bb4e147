"""read_committed scans of logs written with transactions (pure planning and reading; no Spark).

The logs are written by storage's own append path (tests/export/txn_fixtures.py) and checked
against what the fixture wrote and against storage's own last stable offset
(``UnifiedLog.last_stable_offset``): the scan must agree with the broker without asking it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.export.export_topic_job import (
    ExportResult,
    available_offsets,
    held_back,
    print_result,
    readable,
)
from pykraft.export.isolation import IsolationLevel
from pykraft.export.log_dirs import LogScanError
from pykraft.export.log_scan import LogFilter, discover_partitions, plan_splits
from pykraft.export.manifest import ExportedRange, Manifest, begin_run, commit_run, plan_export
from pykraft.export.segment_reader import read_segment_rows
from pykraft.export.txn_scan import read_txn_state
from pykraft.storage.aborted_txn import TXN_INDEX_SUFFIX
from pykraft.storage.topic_partition import TopicPartition
from tests.export.txn_fixtures import TxnPartition, kafka_mixed_transactions

TP = TopicPartition("payments", 0)
COMMITTED, UNCOMMITTED = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED


@pytest.fixture
def partition(tmp_path: Path) -> TxnPartition:
    written = TxnPartition(tmp_path / "logs", TP)
    kafka_mixed_transactions(written)
    return written


def offsets(
    log_dir: Path,
    isolation_level: IsolationLevel = COMMITTED,
    *,
    ignore_high_watermark: bool = False,
    offset_ranges: dict[TopicPartition, tuple[int, int | None]] | None = None,
) -> list[int]:
    """The offsets a pykraft-log scan returns, read split by split as Spark's workers do."""
    splits = plan_splits(
        discover_partitions([log_dir], ignore_high_watermark=ignore_high_watermark),
        LogFilter(),
        ignore_high_watermark=ignore_high_watermark,
        offset_ranges=offset_ranges,
        isolation_level=isolation_level,
    )
    return [row.offset for split in splits for row in read_segment_rows(split)]


def test_read_committed_hides_aborted_records_and_stops_at_the_first_open_transaction(
    partition: TxnPartition,
) -> None:
    hw = partition.checkpoint()
    # FetcherTest.testReadCommittedWithCommittedAndAbortedTransactions's committed records
    # (commit1-1, commit1-2, commit2-1), then the plain records before producer 3's open
    # transaction at 16; the plain records at 19-20 wait behind it.
    assert offsets(partition.log_dir) == [2, 3, 9, 14, 15] == partition.committed_offsets(hw)
    state = read_txn_state(partition.directory, 0, hw)
    assert state.last_stable_offset == 16 == partition.log.last_stable_offset
    assert state.open_txns == ((16, 3), (21, 1))
    # read_uncommitted: every record below the high watermark, aborted and open ones too
    # (FetcherTest.testReturnAbortedTransactionsInUncommittedMode); never a marker.
    assert offsets(partition.log_dir, UNCOMMITTED) == partition.uncommitted_offsets(hw)
    assert set(partition.aborted_offsets()) <= set(offsets(partition.log_dir, UNCOMMITTED))
    # Producer 4's ABORT marker (13) is segments after its records (0-1): its .txnindex entry
    # lives with the marker, and the scan of offsets 0-1 still finds it.
    indexes = sorted(partition.directory.glob(f"*{TXN_INDEX_SUFFIX}"))
    assert indexes and int(indexes[-1].stem) > 1
    assert offsets(partition.log_dir, offset_ranges={TP: (0, 2)}) == []


def test_the_last_stable_offset_agrees_with_the_broker_at_every_high_watermark(
    partition: TxnPartition,
) -> None:
    # A transaction whose marker is at or above the high watermark is still open there
    # (ProducerStateManager's unreplicated transactions): the high watermark climbs one offset
    # at a time over markers, snapshots (one per segment roll) and the open transactions.
    for hw in range(partition.log_end_offset + 1):
        partition.checkpoint(hw)
        state = read_txn_state(partition.directory, 0, hw)
        assert state.last_stable_offset == partition.log.last_stable_offset, hw
        assert state.last_stable_offset == partition.last_stable_offset(hw), hw
        assert offsets(partition.log_dir) == partition.committed_offsets(hw), hw
        assert offsets(partition.log_dir, UNCOMMITTED) == partition.uncommitted_offsets(hw), hw


def test_no_snapshot_or_a_corrupt_one_replays_from_further_back(partition: TxnPartition) -> None:
    hw = partition.checkpoint()
    snapshots = sorted(partition.directory.glob("*.snapshot"))
    assert len(snapshots) > 2  # one per roll: the scan starts from the newest at or below hw
    expected = partition.committed_offsets(hw)
    newest = max(s for s in snapshots if int(s.stem) <= hw)
    newest.write_bytes(b"\x00\x01garbage")  # skipped, never deleted: export only reads
    assert offsets(partition.log_dir) == expected and newest.exists()
    for snapshot in snapshots:
        snapshot.unlink()
    assert read_txn_state(partition.directory, 0, hw).last_stable_offset == 16
    assert offsets(partition.log_dir) == expected


def test_the_replay_finds_aborts_whose_index_entries_are_missing(partition: TxnPartition) -> None:
    # A broker that crashed between writing a marker and its index entry, not yet recovered:
    # replayed from the log start (no snapshot), every ABORT marker is seen again.
    hw = partition.checkpoint()
    for path in [*partition.directory.glob("*.snapshot"), *partition.directory.glob("*.txnindex")]:
        path.unlink()
    state = read_txn_state(partition.directory, 0, hw)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in state.replayed_aborted] == [
        (2, 4, 7),
        (1, 8, 11),
        (4, 0, 13),
    ]
    assert offsets(partition.log_dir) == partition.committed_offsets(hw)


def test_a_torn_transaction_index_is_an_error_never_aborted_rows(partition: TxnPartition) -> None:
    partition.checkpoint()
    index = sorted(partition.directory.glob(f"*{TXN_INDEX_SUFFIX}"))[-1]
    index.write_bytes(index.read_bytes()[:20])
    with pytest.raises(LogScanError, match=f"transaction index {index}: 20 bytes"):
        offsets(partition.log_dir)
    # read_uncommitted does not need the index.
    assert offsets(partition.log_dir, UNCOMMITTED)


def test_an_entry_caught_mid_append_is_read_again(
    partition: TxnPartition, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A running broker appends an entry while the scan reads: the first read may see part of it.
    hw = partition.checkpoint()
    index = sorted(partition.directory.glob(f"*{TXN_INDEX_SUFFIX}"))[-1]
    whole, reads = index.read_bytes(), []
    read_bytes = Path.read_bytes

    def racing(path: Path) -> bytes:
        data = read_bytes(path)
        if path == index:
            reads.append(path)
            return data if len(reads) > 1 else data[:-10]
        return data

    monkeypatch.setattr(Path, "read_bytes", racing)
    assert offsets(partition.log_dir) == partition.committed_offsets(hw)
    assert len(reads) == 2 and index.read_bytes() == whole


def test_ignoring_the_high_watermark_takes_the_last_stable_offset_at_the_log_end(
    partition: TxnPartition,
) -> None:
    partition.checkpoint(5)
    end = partition.log_end_offset
    everything = offsets(partition.log_dir, ignore_high_watermark=True)
    assert everything == partition.committed_offsets(end)
    # A torn tail (a crash mid-append, not yet recovered) ends the log where it starts.
    last_segment = sorted(partition.directory.glob("*.log"))[-1]
    with last_segment.open("ab") as file:
        file.write(b"\x00" * 30)
    assert offsets(partition.log_dir, ignore_high_watermark=True) == everything


def test_a_hole_below_the_high_watermark_is_an_error(partition: TxnPartition) -> None:
    hw = partition.checkpoint()
    last_segment = sorted(partition.directory.glob("*.log"))[-1]
    data = last_segment.read_bytes()
    last_segment.write_bytes(data[: len(data) - 10])  # the last batch below hw is torn
    with pytest.raises(LogScanError, match=f"below the high watermark {hw}"):
        read_txn_state(partition.directory, 0, hw)


def test_export_runs_wait_for_open_transactions_and_never_skip_or_repeat(
    partition: TxnPartition,
) -> None:
    """Each run exports up to the last stable offset; the next starts exactly there."""
    manifest = Manifest(TP.topic, isolation_level=COMMITTED)
    exported: list[int] = []

    def run(run_id: int) -> tuple[ExportedRange, ...]:
        nonlocal manifest
        ends = available_offsets(str(partition.log_dir), TP.topic)
        plan = plan_export(manifest, readable(ends))
        for r in plan.ranges:
            exported.extend(
                offsets(partition.log_dir, offset_ranges={TP: (r.start_offset, r.end_offset)})
            )
        manifest = commit_run(begin_run(manifest, run_id, plan.ranges, 0), run_id)
        return held_back(ends)

    hw = partition.checkpoint()
    assert run(1) == (ExportedRange(0, 16, hw),)  # producer 3's transaction holds 16.. back
    assert exported == [2, 3, 9, 14, 15]
    partition.end(3, commit=True)  # 23: now producer 1's transaction (21) is the oldest open
    partition.plain()  # 24
    hw = partition.checkpoint()
    assert run(2) == (ExportedRange(0, 21, hw),)
    assert exported[5:] == [16, 17, 18, 19, 20]
    partition.end(1, commit=False)  # 25: producer 1's records 21-22 are never exported
    hw = partition.checkpoint()
    assert run(3) == ()
    assert exported[10:] == [24]
    assert exported == partition.committed_offsets(hw)
    assert not set(exported) & set(partition.aborted_offsets())
    assert [r.end_offset for run in manifest.runs for r in run.ranges] == [16, 21, hw]


def test_held_back_ranges_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    result = ExportResult(None, (), (), None, (ExportedRange(0, 16, 23),))
    print_result(result, "payments", Path("out"))
    assert capsys.readouterr().out.splitlines() == [
        "partition 0: offsets 16..22 wait for the transaction open at offset 16 (read_committed)",
        "payments: nothing new to export; out is up to date",
    ]
