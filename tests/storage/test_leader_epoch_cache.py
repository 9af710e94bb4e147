"""Leader-epoch cache rules, reproducing Kafka's LeaderEpochFileCacheTest case by case.

Source: Kafka's storage/src/test/java/org/apache/kafka/storage/internals/epoch/
LeaderEpochFileCacheTest.java.
Each row names the Kafka test it comes from. Ops run through the pure functions; the class is
tested separately for persistence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from pykraft.storage import leader_epoch_file
from pykraft.storage.checkpoints import CheckpointError, write_leader_epoch_checkpoint
from pykraft.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    Entries,
    EpochEntry,
    LeaderEpochCache,
    OffsetAndEpoch,
    assign_epoch,
    end_offset_for,
    epoch_entries_in_range,
    epoch_entry,
    epoch_for_offset,
    is_valid_history,
    next_epoch,
    previous_entry,
    previous_epoch,
    truncate_from_end,
    truncate_from_start,
)
from pykraft.storage.leader_epoch_file import LeaderEpochFileCache
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch

Op = tuple[str, int] | tuple[str, int, int]
E = EpochEntry
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
SIX_EIGHT_ELEVEN: list[Op] = [("assign", 2, 6), ("assign", 3, 8), ("assign", 4, 11)]


def run(ops: list[Op]) -> Entries:
    entries: Entries = ()
    for op in ops:
        if op[0] == "assign":
            entries = assign_epoch(entries, op[1], op[2])  # type: ignore[misc]
        elif op[0] == "truncate_from_end":
            entries = truncate_from_end(entries, op[1])
        elif op[0] == "truncate_from_start":
            entries = truncate_from_start(entries, op[1])
        else:
            raise AssertionError(f"unknown op {op}")
        assert is_valid_history(entries), (ops, entries)
    return entries


def check(ops: list[Op], expected: list[tuple[int, int]]) -> None:
    assert run(ops) == tuple(EpochEntry(e, o) for e, o in expected)


def check_end_offset(ops: list[Op], requested: int, leo: int, expected: tuple[int, int]) -> None:
    """``expected`` is Kafka's Map.entry(epoch, offset) order."""
    epoch, offset = expected
    assert end_offset_for(run(ops), requested, leo) == OffsetAndEpoch(offset, epoch)


def test_assign_and_truncate_cases() -> None:
    # shouldAddEpochAndMessageOffsetToCache
    check([("assign", 2, 10)], [(2, 10)])
    # shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned
    check([("assign", 2, 9), ("assign", 2, 10)], [(2, 9)])
    # shouldEnforceMonotonicallyIncreasingStartOffsets
    check([("assign", 2, 9), ("assign", 3, 9)], [(3, 9)])
    # shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned
    check([("assign", 2, 6), ("assign", 2, 10)], [(2, 6)])
    # shouldTruncateIfMatchingEpochButEarlierStartingOffset
    check(
        [("assign", 5, 11), ("assign", 6, 12), ("assign", 7, 13), ("assign", 7, 12)],
        [(5, 11), (7, 12)],
    )
    # shouldNotUpdateEpochAndStartOffsetIfItDidNotChange
    check([("assign", 2, 6), ("assign", 2, 7)], [(2, 6)])
    # shouldSupportEpochsThatDoNotStartFromZero
    check([("assign", 2, 6)], [(2, 6)])
    # shouldEnforceMonotonicallyIncreasingEpochs: a lower epoch replaces the newer entries.
    check([("assign", 1, 5), ("assign", 2, 6), ("assign", 1, 7)], [(1, 7)])
    # shouldEnforceOffsetsIncreaseMonotonically
    check([("assign", 2, 6), ("assign", 3, 5)], [(3, 5)])
    # shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes: (1, 0) replaces (0, 0).
    check([("assign", 0, 0), ("assign", 1, 0)], [(1, 0)])
    # shouldDropEntriesOnEpochBoundaryWhenRemovingLatestEntries
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_end", 8)], [(2, 6)])
    # shouldDropEntriesBetweenEpochBoundaryWhenRemovingNewest
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_end", 9)], [(2, 6), (3, 8)])
    # shouldNotResetEpochHistoryTailIfUndefinedPassed
    check(
        [*SIX_EIGHT_ELEVEN, ("truncate_from_end", UNDEFINED_EPOCH_OFFSET)],
        [(2, 6), (3, 8), (4, 11)],
    )
    # shouldPreserveResetOffsetOnClearEarliestIfOneExists
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_start", 8)], [(3, 8), (4, 11)])
    # shouldNotClearAnythingIfOffsetTooEarly
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_start", 1)], [(2, 6), (3, 8), (4, 11)])
    # shouldNotClearAnythingIfOffsetIsFirstOffset
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_start", 6)], [(2, 6), (3, 8), (4, 11)])
    # shouldRetainLatestEpochOnClearAllEarliest
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_start", 11)], [(4, 11)])
    # shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_start", 9)], [(3, 9), (4, 11)])
    # shouldUpdateOffsetBetweenFirstTwoEpochBoundariesOnClearEarliest
    check(
        [("assign", 0, 0), ("assign", 1, 7), ("assign", 2, 10), ("truncate_from_start", 5)],
        [(0, 5), (1, 7), (2, 10)],
    )
    # shouldRetainLatestEpochOnClearAllEarliestAndUpdateItsOffset
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_start", 15)], [(4, 15)])
    # shouldNotResetEpochHistoryHeadIfUndefinedPassed
    check(
        [*SIX_EIGHT_ELEVEN, ("truncate_from_start", UNDEFINED_EPOCH_OFFSET)],
        [(2, 6), (3, 8), (4, 11)],
    )
    # shouldClearEarliestOnEmptyCache / shouldClearLatestOnEmptyCache
    check([("truncate_from_start", 7)], [])
    check([("truncate_from_end", 7)], [])
    # shouldWriteCheckpointOnTruncation (the entries part; the file part is tested below)
    check([*SIX_EIGHT_ELEVEN, ("truncate_from_end", 11), ("truncate_from_start", 8)], [(3, 8)])


def test_end_offset_for_cases() -> None:
    # shouldAddEpochAndMessageOffsetToCache
    check_end_offset([("assign", 2, 10)], 2, 11, (2, 11))
    # shouldReturnLogEndOffsetIfLatestEpochRequested
    check_end_offset([("assign", 2, 11), ("assign", 2, 12)], 2, 14, (2, 14))
    # shouldReturnUndefinedOffsetIfUndefinedEpochRequested
    check_end_offset([("assign", 2, 11), ("assign", 3, 12)], UNDEFINED_EPOCH, 0, UNDEFINED)
    # shouldReturnUnsupportedIfNoEpochRecorded
    check_end_offset([], 0, 0, UNDEFINED)
    # shouldReturnUnsupportedIfNoEpochRecordedAndUndefinedEpochRequested
    check_end_offset([], UNDEFINED_EPOCH, 73, UNDEFINED)
    # shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch: the REQUESTED epoch comes back
    # with the first known start offset, not undefined.
    five_six_seven: list[Op] = [("assign", 5, 11), ("assign", 6, 12), ("assign", 7, 13)]
    check_end_offset(five_six_seven, 4, 0, (4, 11))
    # shouldTruncateIfMatchingEpochButEarlierStartingOffset
    check_end_offset([*five_six_seven, ("assign", 7, 12)], 5, 0, (5, 12))
    check_end_offset([*five_six_seven, ("assign", 7, 12)], 6, 0, (5, 12))
    # shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch
    ones_twos_threes: list[Op] = [
        ("assign", 1, 11),
        ("assign", 1, 12),
        ("assign", 2, 13),
        ("assign", 2, 14),
        ("assign", 3, 15),
        ("assign", 3, 16),
    ]
    check_end_offset(ones_twos_threes, 2, 17, (2, 15))
    # shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested
    zero_two_four: list[Op] = [("assign", 0, 10), ("assign", 2, 13), ("assign", 4, 17)]
    check_end_offset(zero_two_four, 1, 0, (0, 13))
    check_end_offset(zero_two_four, 2, 0, (2, 17))
    check_end_offset(zero_two_four, 3, 0, (2, 17))
    # shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked
    check_end_offset([("assign", 2, 100)], 3, 100, UNDEFINED)
    # shouldSupportEpochsThatDoNotStartFromZero
    check_end_offset([("assign", 2, 6)], 2, 7, (2, 7))
    # shouldEnforceMonotonicallyIncreasingEpochs
    lowered: list[Op] = [("assign", 1, 5), ("assign", 2, 6), ("assign", 1, 7)]
    check_end_offset(lowered, 1, 8, (1, 8))
    check_end_offset(lowered, 2, 8, UNDEFINED)
    # shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes
    leaders: list[Op] = [("assign", 0, 0), ("assign", 1, 0)]
    check_end_offset(leaders, 1, 0, (1, 0))
    check_end_offset(leaders, 0, 0, (0, 0))
    check_end_offset(leaders, 1, 5, (1, 5))
    check_end_offset(leaders, 0, 5, (0, 0))
    check_end_offset([*leaders, ("assign", 2, 5)], 2, 10, (2, 10))
    check_end_offset([*leaders, ("assign", 2, 5)], 1, 10, (1, 5))
    check_end_offset([*leaders, ("assign", 2, 5)], 0, 10, (0, 0))
    # shouldIncreaseAndTrackEpochsAsFollowerReceivesManyMessages
    follower: list[Op] = [
        ("assign", epoch, offset)
        for epoch in range(3)
        for offset in range(3 * epoch, 3 * epoch + 3)
    ]
    assert run(follower) == (E(0, 0), E(1, 3), E(2, 6))
    check_end_offset(follower, 2, 9, (2, 9))
    check_end_offset(follower, 0, 9, (0, 3))
    check_end_offset(follower, 1, 9, (1, 6))
    # shouldFetchEndOffsetOfEmptyCache
    check_end_offset([], 7, 0, UNDEFINED)


def test_lookup_cases() -> None:
    # testPreviousEpoch / testFindPreviousEpoch / testFindPreviousEntry
    assert previous_epoch((), 2) is None
    assert previous_epoch(run([("assign", 2, 10)]), 2) is None
    history = run([("assign", 2, 10), ("assign", 4, 15), ("assign", 10, 20)])
    assert previous_epoch(history, 4) == 2
    assert previous_epoch(history, 10) == 4
    assert previous_entry(history, 10) == E(4, 15)
    assert previous_entry(truncate_from_end(history, 18), 4) == E(2, 10)
    # testFindNextEpoch
    history = run([("assign", 0, 0), ("assign", 1, 100), ("assign", 2, 200)])
    assert [next_epoch(history, e) for e in (-1, 0, 1, 2, 100)] == [0, 1, 2, None, None]
    # testGetEpochEntry
    history = run([("assign", 2, 100), ("assign", 3, 500), ("assign", 5, 1000)])
    assert [epoch_entry(history, e) for e in (2, 3, 4, 5)] == [
        E(2, 100),
        E(3, 500),
        None,
        E(5, 1000),
    ]
    # shouldFetchEpochForGivenOffset
    history = run([("assign", 0, 10), ("assign", 1, 20), ("assign", 5, 30)])
    assert [epoch_for_offset(history, o) for o in (25, 20, 30, 50, 5)] == [1, 1, 5, 5, None]
    # epochEntriesInRange (used by Kafka's remote storage): [start, end)
    history = run(SIX_EIGHT_ELEVEN)
    assert epoch_entries_in_range(history, 7, 11) == (E(2, 7), E(3, 8))
    assert epoch_entries_in_range(history, -1, 100) == history


def test_invalid_entries_are_rejected() -> None:
    # Kafka: IllegalArgumentException "Received invalid partition leader epoch entry".
    for epoch, offset in [(-1, 0), (0, -1)]:
        with pytest.raises(ValueError, match="invalid partition leader epoch entry"):
            assign_epoch((), epoch, offset)


def test_assign_returns_same_tuple_when_nothing_changes() -> None:
    history = run([("assign", 2, 6)])
    assert assign_epoch(history, 2, 9) is history


def test_cache_persists_between_instances(tmp_path: Path) -> None:
    # shouldPersistEpochsBetweenInstances
    cache = LeaderEpochFileCache(tmp_path)
    assert cache.latest_epoch is None  # shouldFetchLatestEpochOfEmptyCache
    assert cache.assign(2, 6)
    assert not cache.assign(2, 7)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n2 6\n"
    assert LeaderEpochFileCache(tmp_path).entries == (E(2, 6),)


def test_assign_writes_without_fsync_and_flush_syncs_once(
    tmp_path: Path, count_fsyncs: Callable[[], list[int]]
) -> None:
    synced = count_fsyncs()
    cache = LeaderEpochFileCache(tmp_path)
    cache.assign(4, 10)
    assert synced == []  # becoming leader of 10,000 partitions is not 20,000 fsyncs
    assert LeaderEpochFileCache(tmp_path).entries == (E(4, 10),)  # yet on disk (renamed)
    cache.flush()
    assert len(synced) == 2  # the file, then its directory
    cache.flush()
    assert len(synced) == 2  # nothing new to sync
    cache.truncate_from_end(10)
    assert len(synced) == 4  # truncations stay synchronous


def test_cache_writes_checkpoint_on_truncation(tmp_path: Path) -> None:
    # shouldWriteCheckpointOnTruncation
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(path)
    for _, epoch, offset in SIX_EIGHT_ELEVEN:  # type: ignore[misc]
        cache.assign(epoch, offset)
    assert cache.previous_epoch == 3
    assert (cache.earliest_entry, cache.latest_entry) == (E(2, 6), E(4, 11))
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert path.read_text() == "0\n1\n3 8\n"
    assert cache.end_offset_for(3, 20) == OffsetAndEpoch(20, 3)
    assert cache.epoch_for_offset(9) == 3
    assert cache.epoch_entry(3) == E(3, 8)
    assert cache.previous_entry(3) is None
    assert cache.next_epoch(2) == 3
    # shouldClearAllEntries
    cache.clear()
    assert cache.entries == ()
    assert path.read_text() == "0\n0\n"


def test_cache_load_applies_assign_rules(tmp_path: Path) -> None:
    # Kafka's constructor replays checkpoint.read() through assign, so a non-monotonic file is
    # normalised on load exactly as the same assigns would be.
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n3\n1 5\n2 6\n1 7\n")
    assert LeaderEpochFileCache(path).entries == (E(1, 7),)


def test_cache_load_rejects_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n1 5\n-3 6\n")
    with pytest.raises(CheckpointError, match="invalid partition leader epoch entry") as caught:
        LeaderEpochFileCache(path)
    assert caught.value.line == 4
    path.write_text("0\n2\n1 5\n")
    with pytest.raises(CheckpointError, match="expected 2 entries"):
        LeaderEpochFileCache(path)


# ------------------------------------------------------------------ a restart's writes
# Kafka's LogLoader cuts the entries at or above the log end in memory and writes the file later
# (truncateFromEndAsyncFlush(nextOffset)); its LeaderEpochFileCache.assign writes nothing when
# the epoch is already the latest (isUpdateNeeded). An empty partition's only entry starts at its
# log end, so each restart cut it and its leader's assign put it back: two rewrites for nothing.


class RecordingCheckpoint:
    """An ``EpochCheckpoint`` in memory that records every write and sync."""

    def __init__(self, *entries: EpochEntry) -> None:
        self.stored: Entries = entries
        self.writes: list[tuple[Entries, bool]] = []
        self.syncs = 0

    def read(self) -> Entries:
        return self.stored

    def write(self, entries: Entries, *, durable: bool = True) -> None:
        self.stored = entries
        self.writes.append((entries, durable))

    def sync(self) -> None:
        self.syncs += 1


def test_a_restarted_leader_of_an_empty_partition_rewrites_no_checkpoint() -> None:
    checkpoint = RecordingCheckpoint(E(3, 0))
    cache = LeaderEpochCache(checkpoint)
    cache.truncate_loaded_from_end(0)  # the load: log end 0
    assert not cache.entries  # Kafka's history: the entry at the log end is cut
    assert cache.assign(3, 0)  # the image makes it leader in the same epoch
    assert cache.entries == (E(3, 0),)
    assert checkpoint.writes == []  # the file already holds exactly this
    cache.flush()  # still counts as unsynced (read at start-up): the first flush syncs it
    assert (checkpoint.writes, checkpoint.syncs) == ([], 1)


def test_a_cut_left_in_memory_is_written_with_fsync_before_the_log_changes() -> None:
    checkpoint = RecordingCheckpoint(E(0, 0), E(1, 5))
    cache = LeaderEpochCache(checkpoint)
    cache.truncate_loaded_from_end(5)
    cache.write_pending()  # an append follows
    assert checkpoint.writes == [((E(0, 0),), True)]
    cache.write_pending()
    assert len(checkpoint.writes) == 1  # nothing left to write

    checkpoint = RecordingCheckpoint(E(0, 0), E(1, 5))
    cache = LeaderEpochCache(checkpoint)
    cache.truncate_loaded_from_end(5)
    cache.flush()  # before the recovery point moves
    assert checkpoint.writes == [((E(0, 0),), True)]

    checkpoint = RecordingCheckpoint(E(0, 0), E(1, 5))
    cache = LeaderEpochCache(checkpoint)
    cache.truncate_loaded_from_end(5)
    cache.assign(2, 5)  # it only appends to the history, but drops (1, 5) from the file
    assert checkpoint.writes == [((E(0, 0), E(2, 5)), True)]
    cache.assign(3, 9)  # a plain addition again
    assert checkpoint.writes[-1] == ((E(0, 0), E(2, 5), E(3, 9)), False)


def test_reopening_an_empty_log_and_leading_it_in_the_same_epoch_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "orders-0"
    log = PartitionLog.open(directory, LogConfig())
    log.leader_epoch_cache.assign(7, log.log_end_offset)
    log.close()
    writes: list[list[tuple[int, int]]] = []

    def recording(path: Path, entries: Iterable[tuple[int, int]], *, durable: bool) -> None:
        writes.append(list(entries))
        write_leader_epoch_checkpoint(path, writes[-1], durable=durable)

    monkeypatch.setattr(leader_epoch_file, "write_leader_epoch_checkpoint", recording)
    log = PartitionLog.open(directory, LogConfig(), had_clean_shutdown=True)
    log.leader_epoch_cache.assign(7, log.log_end_offset)  # what becoming leader does
    assert writes == []  # was a synced rewrite at load and another at the assign
    log.append_as_leader(bytearray(build_batch([SimpleRecord(b"v")])), 7, now_ms=0)
    log.close()
    assert PartitionLog.open(directory, LogConfig()).leader_epoch_cache.entries == (E(7, 0),)


def test_a_sync_off_the_loop_counts_only_if_no_write_came_after_it() -> None:
    """``prepare_flush`` hands the fsync to the rolled flush's thread; an ``assign`` written
    meanwhile is a new unsynced write, which the next flush still syncs."""
    checkpoint = RecordingCheckpoint()
    cache = LeaderEpochCache(checkpoint)
    assert cache.prepare_flush() is None  # nothing written, nothing to sync
    cache.assign(1, 0)
    prepared = cache.prepare_flush()
    assert prepared is not None
    sync, token = prepared
    cache.assign(2, 5)  # written while the sync is on the thread
    sync()
    cache.synced(token)
    cache.flush()
    assert checkpoint.syncs == 2  # epoch 2's write was synced by the flush, not taken as synced
    prepared = cache.prepare_flush()
    assert prepared is None  # and is synced now
