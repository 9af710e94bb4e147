"""Moving a replica between log dirs (KIP-113) on ``MemoryLogDir``s: the future log, the copy
(Kafka's ``ReplicaAlterLogDirsThread``), the swap (``LogManager.replaceCurrentWithFutureLog``)
and restarts. Scenarios mirror Kafka's ``LogManagerTest.testReplaceCurrentWithFutureLog`` /
``testLoadFutureLog``-style checks and ``ReplicaAlterLogDirsThreadTest`` (truncation against the
current log, out-of-range restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.storage.future_logs import FutureLogError, future_dir_name
from pykraft.storage.log_dir_copier import CopyStep, copy_step, offset_lag
from pykraft.storage.log_manager import KafkaStorageError, LogManager
from pykraft.storage.memory_log_dir import MemoryLogDir
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition, is_future_dir
from tests.storage.test_log_manager import CONFIG, ORDERS_0, append

D1, D2 = Path("/sim/d1"), Path("/sim/d2")


def dirs() -> tuple[MemoryLogDir, MemoryLogDir]:
    return MemoryLogDir(D1, directory_id="dir-1"), MemoryLogDir(D2, directory_id="dir-2")


def open_on(*stores: MemoryLogDir) -> LogManager:
    return LogManager.open(list(stores), CONFIG, now_ms=0)


def values(log: PartitionLog) -> list[tuple[int, bytes]]:
    """(log start, the bytes of every batch), to compare two logs."""
    data = log.read(log.log_start_offset, 1 << 30, log.log_end_offset).read_bytes()
    return [(log.log_start_offset, data)]


def copy_until_caught_up(manager: LogManager, tp: TopicPartition, max_bytes: int = 1) -> int:
    current, future = manager.get_log(tp), manager.future_logs.get(tp)
    assert current is not None and future is not None
    steps = 0
    while copy_step(current, future.log, now_ms=0, max_bytes=max_bytes) is CopyStep.COPIED:
        steps += 1
        assert steps < 10_000
    return steps


def manager_with_orders_on_d1(count: int) -> tuple[LogManager, MemoryLogDir, MemoryLogDir]:
    d1, d2 = dirs()
    manager = open_on(d1, d2)
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    assert manager.log_dir_of(ORDERS_0) == D1  # the emptiest dir, first
    append(log, count)
    log.update_high_watermark(count)
    return manager, d1, d2


def test_a_caught_up_future_log_is_swapped_in_with_every_record() -> None:
    manager, d1, d2 = manager_with_orders_on_d1(20)
    before = values(manager.get_log(ORDERS_0))  # type: ignore[arg-type]
    future = manager.create_future_log(ORDERS_0, D2, now_ms=0)
    (name,) = d2.directory_names()
    assert is_future_dir(name) and name.startswith("orders-0.")
    assert future.log_end_offset == 0
    assert copy_until_caught_up(manager, ORDERS_0) == 19  # one batch a step
    assert offset_lag(manager.get_log(ORDERS_0), future) == 0  # type: ignore[arg-type]
    moved = manager.replace_current_with_future_log(ORDERS_0, now_ms=0)
    assert manager.get_log(ORDERS_0) is moved
    assert manager.log_dir_of(ORDERS_0) == D2
    assert values(moved) == before
    assert moved.high_watermark == 20
    assert moved.leader_epoch_cache.latest_epoch == 0
    assert d2.directory_names() == ["orders-0"]
    assert "orders-0" not in d1.directory_names()
    assert manager.future_logs.get(ORDERS_0) is None


def test_the_copy_keeps_up_with_appends_to_the_current_log() -> None:
    manager, _, _ = manager_with_orders_on_d1(5)
    current = manager.get_log(ORDERS_0)
    assert current is not None
    future = manager.create_future_log(ORDERS_0, D2, now_ms=0)
    for _ in range(10):
        assert copy_step(current, future, now_ms=0, max_bytes=1) is CopyStep.COPIED
        append(current, 2)
        assert offset_lag(current, future) > 0
    copy_until_caught_up(manager, ORDERS_0)
    assert future.log_end_offset == current.log_end_offset == 25
    before = values(current)
    moved = manager.replace_current_with_future_log(ORDERS_0, now_ms=0)
    assert values(moved) == before


def test_a_restart_mid_copy_loads_the_future_log_and_the_copy_resumes() -> None:
    manager, d1, d2 = manager_with_orders_on_d1(10)
    current = manager.get_log(ORDERS_0)
    assert current is not None
    future = manager.create_future_log(ORDERS_0, D2, now_ms=0)
    for _ in range(4):
        copy_step(current, future, now_ms=0, max_bytes=1)
    assert future.log_end_offset == 4
    manager.shutdown()
    again = open_on(d1, d2)
    resumed = again.future_logs.get(ORDERS_0)
    assert resumed is not None and resumed.log_dir == D2
    assert resumed.log.log_end_offset == 4
    assert again.log_dir_of(ORDERS_0) == D1
    copy_until_caught_up(again, ORDERS_0)
    before = values(again.get_log(ORDERS_0))  # type: ignore[arg-type]
    assert values(again.replace_current_with_future_log(ORDERS_0, now_ms=0)) == before
    again.shutdown()
    after_move = open_on(d1, d2)
    assert after_move.log_dir_of(ORDERS_0) == D2
    assert after_move.future_logs.get(ORDERS_0) is None
    assert values(after_move.get_log(ORDERS_0)) == before  # type: ignore[arg-type]


def test_a_crash_mid_copy_keeps_the_flushed_current_log_and_resumes() -> None:
    manager, d1, d2 = manager_with_orders_on_d1(6)
    current = manager.get_log(ORDERS_0)
    assert current is not None
    current.flush()
    future = manager.create_future_log(ORDERS_0, D2, now_ms=0)
    copy_step(current, future, now_ms=0, max_bytes=1)
    d1.crash()
    d2.crash()  # the future log's unflushed copy is lost: the copy starts again
    again = open_on(d1, d2)
    assert again.get_log(ORDERS_0).log_end_offset == 6  # type: ignore[union-attr]
    assert again.future_logs.get(ORDERS_0) is not None
    copy_until_caught_up(again, ORDERS_0)
    assert again.replace_current_with_future_log(ORDERS_0, now_ms=0).log_end_offset == 6


def test_a_truncated_current_log_truncates_the_future_log() -> None:
    # ReplicaAlterLogDirsThreadTest: the future log reconciles against the current log.
    manager, _, _ = manager_with_orders_on_d1(10)
    current = manager.get_log(ORDERS_0)
    assert current is not None
    future = manager.create_future_log(ORDERS_0, D2, now_ms=0)
    copy_until_caught_up(manager, ORDERS_0, max_bytes=1 << 20)
    assert future.log_end_offset == 10
    current.truncate_to(7)  # the replica became a follower and truncated
    # ... then took the new leader's record (epoch 1) at offset 7.
    batch = build_batch([SimpleRecord(value=b"new", timestamp=5)])
    current.append_as_leader(bytearray(batch), leader_epoch=1, now_ms=0)
    assert current.log_end_offset == 8
    assert copy_step(current, future, now_ms=0) is CopyStep.CAUGHT_UP
    assert values(future) == values(current)


def test_a_current_log_start_past_the_future_log_restarts_it() -> None:
    # ReplicaAlterLogDirsThreadTest: out of range -> truncateFullyAndStartAt(log start).
    manager, _, _ = manager_with_orders_on_d1(10)
    current = manager.get_log(ORDERS_0)
    assert current is not None
    future = manager.create_future_log(ORDERS_0, D2, now_ms=0)
    copy_step(current, future, now_ms=0, max_bytes=1)
    current.delete_records(8)
    current.delete_old_segments(now_ms=0)
    copy_until_caught_up(manager, ORDERS_0)
    assert future.log_start_offset == 8
    assert future.log_end_offset == 10
    moved = manager.replace_current_with_future_log(ORDERS_0, now_ms=0)
    assert moved.log_start_offset == 8


def test_a_cancelled_move_deletes_the_future_log() -> None:
    manager, _, d2 = manager_with_orders_on_d1(3)
    manager.create_future_log(ORDERS_0, D2, now_ms=0)
    assert manager.future_logs.drop(ORDERS_0)
    assert d2.directory_names() == []
    assert not manager.future_logs.drop(ORDERS_0)
    assert manager.log_dir_of(ORDERS_0) == D1


def test_deleting_the_partition_deletes_its_future_log_too() -> None:
    manager, d1, d2 = manager_with_orders_on_d1(3)
    manager.create_future_log(ORDERS_0, D2, now_ms=0)
    assert manager.delete_log(ORDERS_0)
    assert d1.directory_names() == [] and d2.directory_names() == []


def test_no_future_log_while_a_log_dir_is_offline() -> None:
    # LogManager.getOrCreateLog(isNew = false) refuses while any dir is offline.
    d1, d2 = dirs()
    d3 = MemoryLogDir(Path("/sim/d3"), directory_id="dir-3")
    manager = open_on(d1, d2, d3)
    manager.get_or_create_log(ORDERS_0, now_ms=0)
    manager.handle_log_dir_failure(Path("/sim/d3"), "disk gone")
    with pytest.raises(KafkaStorageError):
        manager.create_future_log(ORDERS_0, D2, now_ms=0)


def test_a_failed_destination_forgets_its_future_log() -> None:
    manager, _, _ = manager_with_orders_on_d1(3)
    manager.create_future_log(ORDERS_0, D2, now_ms=0)
    manager.handle_log_dir_failure(D2, "disk gone")
    assert manager.future_logs.get(ORDERS_0) is None
    assert manager.log_dir_of(ORDERS_0) == D1


def test_two_future_logs_of_one_partition_refuse_to_load() -> None:
    d1, d2 = dirs()
    for store in (d1, d2):
        PartitionLog.open(
            store.partition_store(future_dir_name(ORDERS_0, store.unique_id())), CONFIG
        )
    with pytest.raises(FutureLogError):
        open_on(d1, d2)


def test_a_preferred_dir_places_the_next_new_log_once() -> None:
    # Kafka's preferredLogDirs (maybeUpdatePreferredLogDir before the replica exists).
    d1, d2 = dirs()
    manager = open_on(d1, d2)
    manager.preferred_log_dirs[ORDERS_0] = D2
    manager.get_or_create_log(ORDERS_0, now_ms=0)
    assert manager.log_dir_of(ORDERS_0) == D2  # not the emptiest-first D1
    assert manager.preferred_log_dirs == {}
    manager.preferred_log_dirs[TopicPartition("orders", 1)] = D2
    manager.handle_log_dir_failure(D2, "disk gone")
    manager.get_or_create_log(TopicPartition("orders", 1), now_ms=0)
    assert manager.log_dir_of(TopicPartition("orders", 1)) == D1  # an offline preference


def test_future_dir_names_are_kafkas() -> None:
    assert future_dir_name(ORDERS_0, "ab12") == "orders-0.ab12-future"
    assert TopicPartition.parse_dir_name("orders-0.ab12-future") == ORDERS_0
    with pytest.raises(ValueError):
        future_dir_name(ORDERS_0, "a-b")
