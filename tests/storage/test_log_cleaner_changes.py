"""The log manager tells the cleaner when a log changes under it: truncation (Kafka's
``LogManager.truncateTo``: ``abortAndPauseCleaning``, ``maybeTruncateCheckpoint``,
``resumeCleaning``), deletion (``asyncDelete``: ``abortCleaning``) and a move between log dirs
(``alterReplicaLogDirs`` pauses the partition's cleaning). A stale checkpoint would let the
cleaner skip a tombstone and bring a deleted key back (LogCleanerManagerTest
``testTruncateCheckpointToActiveSegment``-like cases)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pykraft.storage.checkpoints import read_offset_checkpoint
from pykraft.storage.cleaner_swap import SwapStep
from pykraft.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, LogCleaner
from pykraft.storage.log_manager import LogManager
from pykraft.storage.partition_log import PartitionLog
from tests.storage.cleaner_support import CONFIG, append, rows
from tests.storage.test_log_cleaner import COMPACTED, T0, manager


def _ten_then_tail(log: PartitionLog) -> None:
    append(log, [(b"K", b"old")], T0)  # 0
    for i in range(1, 10):
        append(log, [(b"f%d" % i, b"x")], T0)  # 1..9
    log.roll(T0)
    append(log, [(b"tail", b"t")], T0)  # 10
    log.update_high_watermark(log.log_end_offset)


def _roll_and_clean(log: PartitionLog, cleaner: LogCleaner, now_ms: int) -> None:
    append(log, [(b"h%d" % now_ms, b"z")], now_ms)
    log.roll(now_ms)
    append(log, [(b"t%d" % now_ms, b"t")], now_ms)
    log.update_high_watermark(log.log_end_offset)
    cleaner.clean_filthiest(now_ms)


def test_truncation_below_the_checkpoint_moves_it_back_and_the_tombstone_wins(
    tmp_path: Path,
) -> None:
    """An unclean leader election: this replica truncates below its checkpoint and takes the
    new leader's records, a tombstone for K among them. The checkpoint moves back to the
    active segment's base, so the re-appended section is cleaned again and the old K goes."""
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    _ten_then_tail(log)
    cleaner = LogCleaner(CleanerConfig(), logs)
    assert cleaner.clean_filthiest(T0) is not None
    assert cleaner.checkpoints == {COMPACTED: 10}
    log.truncate_to(5)
    assert cleaner.checkpoints == {COMPACTED: 0}, "back to the new active segment's base"
    assert read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {COMPACTED: 0}
    append(log, [(b"K", None)], T0)  # 5: K deleted
    for i in range(6, 14):
        append(log, [(b"g%d" % i, b"y")], T0)
    log.roll(T0)
    append(log, [(b"tail2", b"t")], T0)
    log.update_high_watermark(log.log_end_offset)
    for now_ms in (T0, T0 + 2 * CONFIG.delete_retention_ms, T0 + 4 * CONFIG.delete_retention_ms):
        _roll_and_clean(log, cleaner, now_ms)
    assert [row for row in rows(log) if row[1] == b"K"] == [], "the deleted key stays deleted"


def test_truncation_above_the_checkpoint_keeps_it(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    _ten_then_tail(log)
    append(log, [(b"more", b"m")], T0)  # 11
    cleaner = LogCleaner(CleanerConfig(), logs)
    assert cleaner.clean_filthiest(T0) is not None
    log.truncate_to(11)
    assert cleaner.checkpoints == {COMPACTED: 10}
    assert not cleaner.is_paused(COMPACTED), "resumed after the truncation"


def test_a_truncation_during_the_cleaning_leaves_no_stale_checkpoint(tmp_path: Path) -> None:
    """The truncation lands between the cleaning's last swap and its checkpoint update:
    the update is dropped (the cleaning started before the abort)."""
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    _ten_then_tail(log)
    cleaner = LogCleaner(CleanerConfig(), logs)
    real_commit = cleaner._commit

    def commit_after_truncation(*args: object) -> bool:
        log.truncate_to(3)
        return real_commit(*args)  # type: ignore[arg-type]

    cleaner._commit = commit_after_truncation  # type: ignore[method-assign,assignment]
    assert cleaner.clean_filthiest(T0) is None
    assert cleaner.checkpoints.get(COMPACTED, 0) == 0


def test_a_paused_partition_is_not_cleaned_until_resumed(tmp_path: Path) -> None:
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    _ten_then_tail(log)
    cleaner = LogCleaner(CleanerConfig(), logs)
    cleaner.abort_and_pause(COMPACTED)
    cleaner.abort_and_pause(COMPACTED)
    assert cleaner.clean_filthiest(T0) is None
    cleaner.resume(COMPACTED)
    assert cleaner.clean_filthiest(T0) is None, "paused twice, resumed once"
    cleaner.resume(COMPACTED)
    assert cleaner.clean_filthiest(T0) is not None


def test_a_partition_being_moved_is_not_cleaned(tmp_path: Path) -> None:
    """alterReplicaLogDirs: no cleaning while the future log exists; after the swap the
    checkpoint is written in the new log dir."""
    first, second = tmp_path / "a", tmp_path / "b"
    logs = LogManager.open([first, second], CONFIG, T0, topic_configs={"compacted": CONFIG})
    log = logs.get_or_create_log(COMPACTED, T0)
    _ten_then_tail(log)
    cleaner = LogCleaner(CleanerConfig(), logs)
    source_dir = logs.log_dir_of(COMPACTED)
    target = second if source_dir == first else first
    future = logs.create_future_log(COMPACTED, target, T0)
    assert cleaner.clean_filthiest(T0) is None
    future.append_as_follower(log.read(0, 10**7, log.log_end_offset).read_bytes(), T0)
    future.roll(T0)
    logs.replace_current_with_future_log(COMPACTED, T0)
    assert cleaner.clean_filthiest(T0) is not None
    assert read_offset_checkpoint(target / CLEANER_OFFSET_CHECKPOINT) == {
        COMPACTED: 11
    }  # its one segment, 0..10


def test_a_partition_deleted_and_created_again_starts_dirty(tmp_path: Path) -> None:
    """asyncDelete drops the checkpoint entry at once: a log created again under the name
    before the next round does not inherit the old first dirty offset."""
    logs = manager(tmp_path)
    _ten_then_tail(logs.get_or_create_log(COMPACTED, T0))
    cleaner = LogCleaner(CleanerConfig(), logs)
    assert cleaner.clean_filthiest(T0) is not None
    logs.delete_log(COMPACTED)
    assert cleaner.checkpoints == {}
    log = logs.get_or_create_log(COMPACTED, T0)
    _ten_then_tail(log)
    result = cleaner.clean_filthiest(T0)
    assert result is not None and cleaner.checkpoints == {COMPACTED: 10}


def _fail_at(step_name: str, error: Exception) -> Callable[[SwapStep], None]:
    def crash_point(step: SwapStep) -> None:
        if step.name == step_name:
            raise error

    return crash_point


def test_an_io_error_mid_swap_takes_the_log_dir_offline(tmp_path: Path) -> None:
    """Kafka LogCleaner.cleanLog: an IOException goes to LogDirFailureChannel
    (maybeAddOfflineLogDir), not markPartitionUncleanable: the half-done swap is repaired by
    the next load, so the in-memory log must not be served any longer."""
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    _ten_then_tail(log)
    cleaner = LogCleaner(CleanerConfig(), logs)
    cleaner._cleaner._crash_point = _fail_at("OLD_DELETED", OSError(5, "I/O error"))
    assert cleaner.clean_filthiest(T0) is None
    assert tmp_path in logs.offline_dirs
    assert cleaner.uncleanable == {}


def test_a_swap_dropped_before_it_begins_leaves_no_cleaned_files(tmp_path: Path) -> None:
    """A truncation between the writing and the swap: the .cleaned files go (no file or
    descriptor is left until the next restart)."""
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    _ten_then_tail(log)
    append(log, [(b"more", b"m")], T0)
    cleaner = LogCleaner(CleanerConfig(), logs)

    def truncate_before_swap(step: SwapStep) -> None:
        if step is SwapStep.CLEANED:
            log.truncate_to(11)

    cleaner._cleaner._crash_point = truncate_before_swap
    assert cleaner.clean_filthiest(T0) is None
    directory = tmp_path / COMPACTED.dir_name()
    assert not [p.name for p in directory.iterdir() if ".cleaned" in p.name]
    assert cleaner.checkpoints == {}
