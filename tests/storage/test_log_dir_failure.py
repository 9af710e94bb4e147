"""One damaged partition or one failing log dir never takes the broker's other logs down
(issue 9; Kafka's ``LogDirFailureChannel`` / ``LogManager.handleLogDirFailure``).

As root, permission bits do not make a file unreadable, so "cannot be loaded" is a segment
whose ``.log`` is a directory (opening it fails with EISDIR, an ``OSError`` like EIO would).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import KafkaStorageError, LogManager
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.recovery import CLEAN_SHUTDOWN_FILE
from pykraft.storage.topic_partition import TopicPartition

CONFIG = LogConfig(segment_bytes=1024)
ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)


def append(log: PartitionLog, count: int) -> None:
    for n in range(count):
        data = build_batch([SimpleRecord(value=b"x" * 100, timestamp=1000 + n)])
        log.append_as_leader(bytearray(data), leader_epoch=0, now_ms=0)


def two_partitions_one_unloadable(log_dir: Path) -> Path:
    """orders-0 and orders-1 with 5 records each, cleanly shut down; then orders-1's segment
    is made unopenable. Returns that segment's path."""
    manager = LogManager.open([log_dir], CONFIG, 0)
    for tp in (ORDERS_0, ORDERS_1):
        append(manager.get_or_create_log(tp, now_ms=0), 5)
    manager.shutdown()
    segment = log_dir / "orders-1" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()
    return segment


def fail_fsyncs_in(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """From now on every fsync of a file below ``directory`` fails with EIO."""
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if str(directory) in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_an_unloadable_partition_is_offline_and_the_others_load(tmp_path: Path) -> None:
    segment = two_partitions_one_unloadable(tmp_path)
    manager = LogManager.open([tmp_path], CONFIG, 0)
    assert list(manager.logs) == [ORDERS_0]
    assert manager.get_log(ORDERS_0) is not None
    assert manager.get_log(ORDERS_0).log_end_offset == 5  # type: ignore[union-attr]
    assert list(manager.offline_partitions) == [ORDERS_1]
    assert "IsADirectoryError" in manager.offline_partitions[ORDERS_1]
    assert manager.offline_dirs == {}
    with pytest.raises(KafkaStorageError, match="offline"):
        manager.get_or_create_log(ORDERS_1, now_ms=0)  # never recreated over the damage
    assert segment.is_dir()


def test_a_failing_log_dir_goes_offline_and_the_other_dir_serves(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager.open(dirs, CONFIG, 0)
    failed: list[tuple[Path, list[TopicPartition]]] = []
    manager.on_log_dir_failure = lambda log_dir, tps: failed.append((log_dir, list(tps)))
    on_a = manager.get_or_create_log(ORDERS_0, now_ms=0)
    on_b = manager.get_or_create_log(ORDERS_1, now_ms=0)
    assert manager.log_dir_of(ORDERS_0) == dirs[0]
    assert manager.handle_log_dir_failure(dirs[0], "EIO") == [ORDERS_0]
    assert manager.handle_log_dir_failure(dirs[0], "again") == []  # once
    assert failed == [(dirs[0], [ORDERS_0])]
    assert manager.offline_dirs == {dirs[0]: "EIO"}
    assert list(manager.logs) == [ORDERS_1]
    with pytest.raises(OSError):
        append(on_a, 1)  # its files were released
    append(on_b, 3)
    new = manager.get_or_create_log(TopicPartition("audit", 0), now_ms=0)
    assert new.directory.parent == dirs[1]  # new partitions only on online dirs
    manager.shutdown()
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    assert (dirs[1] / CLEAN_SHUTDOWN_FILE).exists()


def test_an_io_error_in_periodic_work_takes_only_that_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager.open(dirs, CONFIG, 0)
    append(manager.get_or_create_log(ORDERS_0, now_ms=0), 30)  # rolls: a flush is pending
    append(manager.get_or_create_log(ORDERS_1, now_ms=0), 1)
    fail_fsyncs_in(monkeypatch, dirs[0])
    manager.maybe_run_periodic(now_ms=1)
    assert list(manager.offline_dirs) == [dirs[0]]
    assert list(manager.logs) == [ORDERS_1]


def test_every_dir_offline_refuses_new_partitions(tmp_path: Path) -> None:
    manager = LogManager.open([tmp_path], CONFIG, 0)
    manager.handle_log_dir_failure(tmp_path, "ENOSPC")
    with pytest.raises(KafkaStorageError, match="every log dir"):
        manager.get_or_create_log(ORDERS_0, now_ms=0)


def test_an_unreadable_log_dir_at_start_up_is_offline(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"")
    manager = LogManager.open([not_a_dir, tmp_path / "b"], CONFIG, 0)
    assert list(manager.offline_dirs) == [not_a_dir]
    assert manager.get_or_create_log(ORDERS_0, now_ms=0).directory.parent == tmp_path / "b"


def test_a_partition_that_cannot_be_created_fails_its_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager.open(dirs, CONFIG, 0)

    def no_room(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(os, "posix_fallocate", no_room)
        with pytest.raises(KafkaStorageError, match="cannot create orders-0"):
            manager.get_or_create_log(ORDERS_0, now_ms=0)
    assert list(manager.offline_dirs) == [dirs[0]]
    assert manager.get_or_create_log(ORDERS_1, now_ms=0).directory.parent == dirs[1]


def test_an_unloadable_partition_can_still_be_deleted(tmp_path: Path) -> None:
    two_partitions_one_unloadable(tmp_path)
    manager = LogManager.open([tmp_path], CONFIG, 0)
    assert manager.delete_log(ORDERS_1)  # its topic was deleted while it was unreadable
    assert manager.offline_partitions == {}
    assert not (tmp_path / "orders-1").exists()
    assert manager.get_or_create_log(ORDERS_1, now_ms=0).log_end_offset == 0


def test_an_io_error_closing_a_log_on_a_recovery_thread_leaves_that_dir_unmarked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Closing runs on num.recovery.threads.per.data.dir threads; the failure is handled on the
    # caller's thread, after every close returned, and before any marker is written.
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager.open(dirs, CONFIG, 0)
    failed: list[Path] = []
    manager.on_log_dir_failure = lambda log_dir, _tps: failed.append(log_dir)
    for partition in range(8):
        append(manager.get_or_create_log(TopicPartition("orders", partition), now_ms=0), 2)
    fail_fsyncs_in(monkeypatch, dirs[0])
    manager.shutdown()
    assert failed == [dirs[0]]
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    assert (dirs[1] / CLEAN_SHUTDOWN_FILE).exists()
