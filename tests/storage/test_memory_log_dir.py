"""The shipped LogManager on in-memory log dirs (the simulation's): the same decisions and the
same checkpoints as on files, and MemoryDisk's crash rule — a power loss keeps the flushed bytes,
the checkpoints and the marker, so recovery starts at the checkpointed recovery point."""

from __future__ import annotations

from pathlib import Path

from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
)
from pykraft.storage.file_log_dir import FileLogDir
from pykraft.storage.log_dir_store import STRAY_DIR_SUFFIX, LogDirStore
from pykraft.storage.log_manager import LogManager
from pykraft.storage.memory_log_dir import MemoryLogDir
from pykraft.storage.topic_partition import delete_dir_name
from tests.storage.test_log_manager import CONFIG, ORDERS_0, ORDERS_1, append

CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT)


def memory_dir() -> MemoryLogDir:
    return MemoryLogDir(Path("/sim/broker-0"), directory_id="dir-0")


def open_on(store: LogDirStore) -> LogManager:
    return LogManager.open([store], CONFIG, now_ms=0)


def exercise(manager: LogManager) -> None:
    """Two partitions, one flushed, one deleted-records, one deleted; then a clean shutdown."""
    orders = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(orders, 30)
    orders.update_high_watermark(25)
    orders.flush()
    orders.delete_records(5)
    doomed = manager.get_or_create_log(ORDERS_1, now_ms=0)
    append(doomed, 3)
    manager.checkpoint_all()
    assert manager.delete_log(ORDERS_1)
    manager.shutdown()


def test_memory_and_file_log_dirs_end_with_the_same_checkpoints(tmp_path: Path) -> None:
    files, memory = FileLogDir(tmp_path), memory_dir()
    for store in (files, memory):
        exercise(open_on(store))
        assert store.has_clean_shutdown_marker()
    for name in CHECKPOINTS:
        assert memory.read_checkpoint(name) == files.read_checkpoint(name)
    assert memory.read_checkpoint(REPLICATION_CHECKPOINT) == {ORDERS_0: 25}
    assert memory.read_checkpoint(LOG_START_OFFSET_CHECKPOINT) == {ORDERS_0: 5}
    assert memory.directory_names() == files.directory_names() == ["orders-0"]


def test_a_clean_restart_recovers_nothing_and_removes_the_marker() -> None:
    store = memory_dir()
    exercise(open_on(store))
    manager = open_on(store)
    assert manager.had_clean_shutdown == {store.path: True}
    assert not store.has_clean_shutdown_marker()  # a crash from now on is unclean
    log = manager.get_log(ORDERS_0)
    assert log is not None
    assert (log.log_end_offset, log.high_watermark, log.log_start_offset) == (30, 25, 5)
    assert manager.load_reports[ORDERS_0].recovered_segments == ()
    assert manager.directory_ids == {store.path: "dir-0"}


def test_power_loss_recovers_from_the_checkpointed_recovery_point() -> None:
    store = memory_dir()
    manager = open_on(store)
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 20)  # ~170-byte batches: several 1 KiB segments
    log.flush()
    manager.checkpoint_recovery_points()
    append(log, 5)
    log.flush()  # durable, but the checkpoint still says 20
    append(log, 3)
    assert log.recovery_point == 25 and len(store.disks["orders-0"].segments) > 3
    log.close_handlers()  # the process dies: nothing more is written
    store.crash()

    reopened = open_on(store).get_log(ORDERS_0)
    assert reopened is not None
    assert reopened.log_end_offset == 25  # the unflushed batches are gone
    report = reopened.load_report
    assert not report.had_clean_shutdown and report.recovery_point == 20
    # Only the segments holding offsets from the checkpointed recovery point on are
    # re-validated, not every one.
    segments = store.disks["orders-0"].segments
    assert report.recovered_segments == tuple(
        segment.base_offset for segment in segments if segment.next_offset > 20
    )
    assert 0 < len(report.recovered_segments) < len(segments)


def test_without_a_recovery_point_checkpoint_every_segment_is_recovered() -> None:
    store = memory_dir()
    log = open_on(store).get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 20)
    log.flush()
    log.close_handlers()
    store.crash()
    report = open_on(store).load_reports[ORDERS_0]
    bases = tuple(segment.base_offset for segment in store.disks["orders-0"].segments)
    assert len(bases) > 2 and report.recovered_segments == bases


def test_a_deleted_partition_is_gone_after_a_crash_and_restart() -> None:
    store = memory_dir()
    manager = open_on(store)
    append(manager.get_or_create_log(ORDERS_1, now_ms=0), 2)
    manager.checkpoint_all()
    assert manager.delete_log(ORDERS_1)
    assert store.directory_names() == []
    assert store.read_checkpoint(REPLICATION_CHECKPOINT) == {}
    store.crash()
    assert open_on(store).logs == {}


def test_start_up_finishes_an_interrupted_deletion_and_skips_stray_dirs() -> None:
    store = memory_dir()
    manager = open_on(store)
    for tp in (ORDERS_0, ORDERS_1):
        append(manager.get_or_create_log(tp, now_ms=0), 2)
    manager.shutdown()
    # A crash between the rename and the removal of a deletion; an operator's stray copy.
    store.rename("orders-1", delete_dir_name(ORDERS_1, store.unique_id()))
    store.rename("orders-0", f"orders-0.{store.unique_id()}{STRAY_DIR_SUFFIX}")
    store.partition_store("orders-0")  # re-created empty, as after set_aside_offline_partition
    manager = open_on(store)
    assert list(manager.logs) == [ORDERS_0] and manager.offline_partitions == {}
    assert [name.endswith(STRAY_DIR_SUFFIX) for name in store.directory_names()] == [False, True]
