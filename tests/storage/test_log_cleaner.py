"""The cleaner's manager over a real ``LogManager``: Kafka's LogCleanerManagerTest and
LogCleanerIntegrationTest cases (each names its source), the ``cleaner-offset-checkpoint`` file,
and the I/O throttle (Kafka's ThrottlerTest)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pykraft.storage.checkpoints import read_offset_checkpoint
from pykraft.storage.cleaner_throttle import UNLIMITED, Throttler
from pykraft.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, LogCleaner
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition
from tests.storage.cleaner_support import CONFIG, append, rows

T0 = 1_000_000
COMPACTED = TopicPartition("compacted", 0)
PLAIN = TopicPartition("plain", 0)


def manager(log_dir: Path) -> LogManager:
    return LogManager.open(
        [log_dir], LogConfig(segment_bytes=1024), T0, topic_configs={"compacted": CONFIG}
    )


def fill(log: PartitionLog, updates: int = 60) -> None:
    for i in range(updates):
        append(log, [(b"k%d" % (i % 3), b"v%d" % i)], T0)
    log.roll(T0)
    append(log, [(b"tail", b"t")], T0)
    log.update_high_watermark(log.log_end_offset)


def test_only_compacted_logs_are_cleaned_and_the_checkpoint_is_written(tmp_path: Path) -> None:
    """LogCleanerIntegrationTest.cleanerTest: the compacted log shrinks to its latest values,
    a delete-policy log is left alone, the checkpoint holds the cleaned end offset."""
    logs = manager(tmp_path)
    compacted = logs.get_or_create_log(COMPACTED, T0)
    plain = logs.get_or_create_log(PLAIN, T0)
    fill(compacted)
    fill(plain)
    cleaner = LogCleaner(CleanerConfig(), logs)
    result = cleaner.clean_filthiest(T0)
    assert result is not None and result.topic_partition == COMPACTED
    assert [key for _, key, _ in rows(compacted)] == [b"k0", b"k1", b"k2", b"tail"]
    assert len(rows(plain)) == 61
    checkpoint = read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert checkpoint == {COMPACTED: result.stats.end_offset} == cleaner.checkpoints
    assert cleaner.clean_filthiest(T0) is None, "nothing dirty is left"


def test_checkpoint_survives_a_restart(tmp_path: Path) -> None:
    """LogCleanerManagerTest: the first dirty offset comes from cleaner-offset-checkpoint."""
    logs = manager(tmp_path)
    fill(logs.get_or_create_log(COMPACTED, T0))
    first = LogCleaner(CleanerConfig(), logs).clean_filthiest(T0)
    assert first is not None
    logs.shutdown()
    again = manager(tmp_path)
    assert LogCleaner(CleanerConfig(), again).checkpoints == {COMPACTED: first.stats.end_offset}


def test_checkpoint_below_the_log_start_is_reset(tmp_path: Path) -> None:
    """LogCleanerManagerTest.testCleanableOffsetsForShortTime... / cleanableOffsets: a
    checkpoint below the log start is rewritten to the log start."""
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    fill(log)
    log.delete_records(10)
    (tmp_path / CLEANER_OFFSET_CHECKPOINT).write_text("0\n1\ncompacted 0 3\n")
    cleaner = LogCleaner(CleanerConfig(), logs)
    assert cleaner.checkpoints == {COMPACTED: 3}
    cleaner.clean_filthiest(T0)
    assert cleaner.checkpoints[COMPACTED] > 10


def test_a_corrupt_log_is_marked_uncleanable(tmp_path: Path) -> None:
    """LogCleaner: a cleaning that fails marks the partition uncleanable; others go on."""
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    fill(log)
    first = log.local_log.segments[0]
    with open(first.log_path, "r+b") as file:
        file.seek(first.size - 3)
        file.write(b"\x00\x00\x00")  # breaks the last batch's CRC
    cleaner = LogCleaner(CleanerConfig(), logs)
    assert cleaner.clean_filthiest(T0) is None
    assert COMPACTED in cleaner.uncleanable
    assert cleaner.clean_filthiest(T0) is None


@pytest.mark.parametrize(
    ("rate", "moves", "sleeps"),
    [
        # 1,000 B/s: 500 bytes over 400 ms is 1,250 B/s; 100 ms more makes it 1,000 B/s.
        (1_000, [(500, 400)], [100]),
        (1_000, [(100, 100), (200, 400)], [0, 0]),  # 300 bytes in 400 ms: under the rate
        (1_000, [(500, 200)], [0]),  # within the 300 ms check interval: no decision yet
        (UNLIMITED, [(10**9, 400)], [0]),
    ],
)
def test_throttler(rate: float, moves: list[tuple[int, int]], sleeps: list[int]) -> None:
    """Kafka's ThrottlerTest: sleep just long enough to bring the interval to the rate."""
    throttler = Throttler(rate, now_ms=0)
    assert [throttler.maybe_throttle(size, at) for size, at in moves] == sleeps


def test_a_log_deleted_under_the_cleaning_is_dropped(tmp_path: Path) -> None:
    """LogCleanerManager.abortCleaning: deleting a partition stops its cleaning; the deleted
    log is neither swapped into nor marked uncleanable."""
    logs = manager(tmp_path)
    fill(logs.get_or_create_log(COMPACTED, T0))

    def delete_once(moved_bytes: int) -> None:
        if logs.get_log(COMPACTED) is not None:
            logs.delete_log(COMPACTED)

    cleaner = LogCleaner(CleanerConfig(), logs, check_done=delete_once)
    assert cleaner.clean_filthiest(T0) is None
    assert cleaner.uncleanable == {}
    assert not (tmp_path / COMPACTED.dir_name()).exists()


def test_a_truncation_under_the_cleaning_drops_it(tmp_path: Path) -> None:
    """LogCleanerManager.abortAndPauseCleaning on truncation (a follower diverged): the
    cleaning is dropped, the partition stays cleanable, and the next round cleans it."""
    logs = manager(tmp_path)
    log = logs.get_or_create_log(COMPACTED, T0)
    fill(log)
    cut = log.local_log.segments[1].base_offset

    def truncate_once(moved_bytes: int) -> None:
        if log.log_end_offset > cut:
            log.truncate_to(cut)

    cleaner = LogCleaner(CleanerConfig(), logs, check_done=truncate_once)
    assert cleaner.clean_filthiest(T0) is None
    assert cleaner.uncleanable == {}
    assert [offset for offset, _, _ in rows(log)] == list(range(cut))
    log.roll(T0)
    append(log, [(b"tail", b"t")], T0)
    log.update_high_watermark(log.log_end_offset)
    assert LogCleaner(CleanerConfig(), logs).clean_filthiest(T0) is not None


def test_a_deleted_partition_leaves_the_checkpoint(tmp_path: Path) -> None:
    """LogCleanerManager.updateCheckpoints(partitionToRemove): a deleted partition's entry
    goes, so a topic created again under its name starts dirty from its log start."""
    logs = manager(tmp_path)
    fill(logs.get_or_create_log(COMPACTED, T0))
    cleaner = LogCleaner(CleanerConfig(), logs)
    assert cleaner.clean_filthiest(T0) is not None
    logs.delete_log(COMPACTED)
    assert cleaner.clean_filthiest(T0) is None
    assert cleaner.checkpoints == {}
    assert read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {}


def test_the_dirtiest_ratio_is_kept_for_max_dirty_percent_cleanable_or_not(tmp_path: Path) -> None:
    """LogCleanerManager.dirtiestLogCleanableRatio: the highest dirty ratio among compacted logs
    holding bytes, at each grabFilthiestCompactedLog, even when under min.cleanable.dirty.ratio;
    delete-policy logs do not count."""
    config = attrs.evolve(CONFIG, min_cleanable_dirty_ratio=0.9)
    logs = LogManager.open(
        [tmp_path], LogConfig(segment_bytes=1024), T0, topic_configs={"compacted": config}
    )
    log = logs.get_or_create_log(COMPACTED, T0)
    fill(logs.get_or_create_log(PLAIN, T0))
    cleaner = LogCleaner(CleanerConfig(), logs)
    assert cleaner.clean_filthiest(T0) is None and cleaner.max_dirty_ratio == 0.0  # no bytes
    fill(log)
    assert cleaner.clean_filthiest(T0) is not None
    assert cleaner.max_dirty_ratio == 1.0  # nothing was clean before the first cleaning
    assert cleaner.last_stats is not None and cleaner.last_stats.records_kept == 3
    append(log, [(b"k0", b"again")], T0)
    log.roll(T0)
    append(log, [(b"tail", b"t2")], T0)
    log.update_high_watermark(log.log_end_offset)
    assert cleaner.clean_filthiest(T0) is None  # the new dirty bytes are under the ratio
    assert 0.0 < cleaner.max_dirty_ratio < 0.9


def test_uncleanable_partitions_are_counted_per_log_dir(tmp_path: Path) -> None:
    """LogCleanerManager's uncleanable-partitions-count gauge per logDirectory, 0 included."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = LogManager.open(
        dirs, LogConfig(segment_bytes=1024), T0, topic_configs={"compacted": CONFIG}
    )
    log = logs.get_or_create_log(COMPACTED, T0)
    fill(log)
    cleaner = LogCleaner(CleanerConfig(), logs)
    home = logs.log_dir_of(COMPACTED)
    assert cleaner.uncleanable_partitions_count() == {dirs[0]: 0, dirs[1]: 0}
    first = log.local_log.segments[0]
    with open(first.log_path, "r+b") as file:
        file.seek(first.size - 3)
        file.write(b"\x00\x00\x00")  # breaks the last batch's CRC
    assert cleaner.clean_filthiest(T0) is None
    assert home is not None
    assert cleaner.uncleanable_partitions_count() == {
        home: 1,
        next(d for d in dirs if d != home): 0,
    }
