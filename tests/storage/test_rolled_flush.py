"""Rolled segments are flushed off the appending thread (Kafka's "flush-log" task on roll):
a roll fsyncs nothing where it happens, the flush that runs later syncs the rolled segment's
files, the producer snapshot taken at the roll and the directory, and the log manager runs it on
its flusher thread and moves the recovery point back on the loop — or takes the dir offline."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pykraft.storage.local_log import LocalLog
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.producer_snapshot import snapshot_file
from tests.storage.test_checkpoint_writer import WAIT_S, Loop
from tests.storage.test_log_manager import ORDERS_0, append, open_manager

CONFIG = LogConfig(segment_bytes=1024)


class Fsyncs:
    """Every ``os.fsync``: the thread it ran on and the file (device, inode) it synced."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, int]]] = []
        self.fail_on: Callable[[str], bool] = lambda thread: False

    def files(self, thread_prefix: str = "") -> set[tuple[int, int]]:
        return {file for thread, file in self.calls if thread.startswith(thread_prefix)}


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fsyncs]:
    seen, real = Fsyncs(), os.fsync

    def fsync(fd: int) -> None:
        thread = threading.current_thread().name
        stat = os.fstat(fd)
        seen.calls.append((thread, (stat.st_dev, stat.st_ino)))
        if seen.fail_on(thread):
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    yield seen


def file_of(path: Path) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def files_of(log: PartitionLog) -> LocalLog:
    assert isinstance(log.store, LocalLog)
    return log.store


def rolled_files(log: PartitionLog) -> set[tuple[int, int]]:
    """The files a flush of everything rolled must sync."""
    rolled = files_of(log).segments[:-1]
    assert rolled, "the test appends past a segment"
    paths = [path for segment in rolled for path in segment.file_paths() if path.exists()]
    snapshot = snapshot_file(log.directory, log.active_segment.base_offset)
    return {file_of(path) for path in [*paths, snapshot, log.directory]}


def test_a_roll_fsyncs_nothing_on_the_appending_thread(tmp_path: Path, fsyncs: Fsyncs) -> None:
    log = PartitionLog.open(tmp_path / "orders-0", CONFIG)
    append(log, 20)
    assert len(log.segments) > 1 and log.recovery_point == 0
    assert snapshot_file(log.directory, log.active_segment.base_offset).exists()
    assert fsyncs.calls == []  # Kafka: takeSnapshot(false), the fsyncs in "flush-log"


def test_the_rolled_flush_syncs_the_segments_the_snapshot_and_the_directory(
    tmp_path: Path, fsyncs: Fsyncs
) -> None:
    log = PartitionLog.open(tmp_path / "orders-0", CONFIG)
    append(log, 20)
    flush = log.prepare_rolled_flush()
    assert flush is not None
    fsyncs.calls.clear()  # the epoch history and the new directory's entry sync at prepare
    flush.run()
    assert rolled_files(log) <= fsyncs.files()
    assert file_of(files_of(log).active_segment.log_path) not in fsyncs.files()
    log.complete_rolled_flush(flush)
    assert log.recovery_point == log.active_segment.base_offset


def test_a_file_gone_before_the_flush_runs_needs_no_sync(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "orders-0", CONFIG)
    append(log, 20)
    flush = log.prepare_rolled_flush()
    assert flush is not None
    snapshot_file(log.directory, log.active_segment.base_offset).unlink()
    files_of(log).segments[0].time_index_path.unlink()
    flush.run()  # no FileNotFoundError: a deleted file has nothing to make durable
    log.complete_rolled_flush(flush)
    assert log.recovery_point == flush.target


def test_a_flush_on_the_loop_meanwhile_syncs_what_the_rolled_flush_has_not_yet(
    tmp_path: Path, fsyncs: Fsyncs
) -> None:
    """The directory's entry, the roll's snapshot and the epoch history count as synced only
    when the rolled flush completes: a flush before that syncs them itself."""
    manager = open_manager([tmp_path])
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 20)
    flush = log.prepare_rolled_flush()
    assert flush is not None
    log.flush()
    snapshot = snapshot_file(log.directory, files_of(log).active_segment.base_offset)
    epochs = log.directory / "leader-epoch-checkpoint"
    assert {file_of(tmp_path), file_of(snapshot), file_of(epochs)} <= fsyncs.files()
    manager.shutdown()


def test_a_rolled_flush_that_never_ran_leaves_the_snapshot_to_close(
    tmp_path: Path, fsyncs: Fsyncs
) -> None:
    log = PartitionLog.open(tmp_path / "orders-0", CONFIG)
    append(log, 20)
    snapshot = snapshot_file(log.directory, files_of(log).active_segment.base_offset)
    assert log.prepare_rolled_flush() is not None  # then dropped: a shutdown cancelled it
    fsyncs.calls.clear()
    log.close()
    assert file_of(snapshot) in fsyncs.files()


def flushing_manager(tmp_path: Path) -> tuple[LogManager, Loop, PartitionLog]:
    """A log manager flushing off its loop, with one log just rolled."""
    manager = open_manager([tmp_path])
    loop = Loop()
    manager.sync_off_loop(loop.call_soon)
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 20)
    return manager, loop, log


def wait_for_callbacks(loop: Loop) -> None:
    deadline = time.monotonic() + WAIT_S
    while not loop.callbacks:  # posted by the flusher thread
        assert time.monotonic() < deadline, "the flush did not finish"
        time.sleep(0.01)


def test_the_log_manager_flushes_rolled_segments_on_its_flusher_thread(
    tmp_path: Path, fsyncs: Fsyncs
) -> None:
    manager, loop, log = flushing_manager(tmp_path)
    manager.maybe_run_periodic(now_ms=0)
    wait_for_callbacks(loop)
    assert log.recovery_point == 0  # moved on the loop, not on the flusher
    # The first flush also syncs the new directory's entry in the log dir and the epoch
    # history: on the flusher too, ahead of the segments.
    epochs = log.directory / "leader-epoch-checkpoint"
    assert rolled_files(log) | {file_of(tmp_path), file_of(epochs)} <= fsyncs.files("log-flusher")
    assert fsyncs.files(threading.current_thread().name) == set()
    loop.run()
    assert log.recovery_point == log.active_segment.base_offset
    manager.shutdown()


def test_a_failed_rolled_flush_takes_the_dir_offline_on_the_loop(
    tmp_path: Path, fsyncs: Fsyncs
) -> None:
    manager, loop, log = flushing_manager(tmp_path)
    fsyncs.fail_on = lambda thread: thread.startswith("log-flusher")
    manager.maybe_run_periodic(now_ms=0)
    wait_for_callbacks(loop)
    assert manager.offline_dirs == {}
    loop.run()
    assert list(manager.offline_dirs) == [tmp_path]
    assert "Input/output error" in manager.offline_dirs[tmp_path]
    # Kafka's testRecoveryPointNotIncrementedOnProducerStateSnapshotFlushFailure
    assert log.recovery_point == 0
    manager.shutdown()


def test_a_flush_of_a_log_deleted_meanwhile_leaves_its_successor_alone(
    tmp_path: Path, fsyncs: Fsyncs
) -> None:
    """The deleted log's directory is gone under its flush (FileNotFoundError on the thread):
    that takes no dir offline, and the partition's new log keeps its own recovery point."""
    manager, loop, _ = flushing_manager(tmp_path)
    fsyncs.fail_on = lambda thread: thread.startswith("log-flusher")
    manager.maybe_run_periodic(now_ms=0)
    wait_for_callbacks(loop)
    manager.delete_log(ORDERS_0)
    successor = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(successor, 20)
    loop.run()  # the old log's failed flush
    assert manager.offline_dirs == {}
    assert successor.recovery_point == 0
    manager.shutdown()
