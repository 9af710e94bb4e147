"""LogManager: loading log dirs, checkpoints, the clean-shutdown marker, partition creation and
deletion, and periodic work on a caller-driven clock (Kafka's LogManagerTest behaviour)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, ItemsView
from pathlib import Path

import pytest

from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
)
from pykraft.storage.file_log_dir import FileLogDir
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogDirError, LogManager, LogManagerSettings
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.recovery import CLEAN_SHUTDOWN_FILE
from pykraft.storage.topic_partition import TopicPartition

CONFIG = LogConfig(segment_bytes=1024)
ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)
AUDIT_0 = TopicPartition("audit-log", 0)


def append(log: PartitionLog, count: int, timestamp: int = 1000) -> None:
    for n in range(count):
        data = build_batch([SimpleRecord(value=b"x" * 100, timestamp=timestamp + n)])
        log.append_as_leader(bytearray(data), leader_epoch=0, now_ms=0)


def open_manager(dirs: list[Path], now_ms: int = 0, **settings: int) -> LogManager:
    return LogManager.open(dirs, CONFIG, now_ms, settings=LogManagerSettings(**settings))


def test_new_partitions_go_to_the_emptiest_log_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = open_manager(dirs)
    for tp in (ORDERS_0, ORDERS_1, AUDIT_0):
        manager.get_or_create_log(tp, now_ms=0)
    assert (dirs[0] / "orders-0").is_dir()
    assert (dirs[1] / "orders-1").is_dir()
    assert (dirs[0] / "audit-log-0").is_dir()
    assert manager.get_or_create_log(ORDERS_0, now_ms=0) is manager.get_log(ORDERS_0)


def test_a_bad_topic_name_is_refused(tmp_path: Path) -> None:
    manager = open_manager([tmp_path])
    with pytest.raises(ValueError, match="topic"):
        manager.get_or_create_log(TopicPartition("bad/name", 0), now_ms=0)


def test_clean_shutdown_and_restart(tmp_path: Path) -> None:
    manager = open_manager([tmp_path])
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 30)
    log.update_high_watermark(25)
    log.delete_records(12)
    manager.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {ORDERS_0: 30}
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT) == {ORDERS_0: 25}
    assert read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {ORDERS_0: 12}
    manager.shutdown()  # a second stop (two signals) keeps the checkpoints it wrote
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {ORDERS_0: 30}
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT) == {ORDERS_0: 25}

    again = open_manager([tmp_path])
    assert again.had_clean_shutdown == {tmp_path: True}
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on is unclean
    reloaded = again.get_log(ORDERS_0)
    assert reloaded is not None
    assert (reloaded.log_start_offset, reloaded.high_watermark, reloaded.log_end_offset) == (
        12,
        25,
        30,
    )
    assert again.load_reports[ORDERS_0].recovered_segments == ()


def test_restart_after_a_crash_recovers_from_the_checkpointed_recovery_point(
    tmp_path: Path,
) -> None:
    manager = open_manager([tmp_path])
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 30)
    manager.maybe_run_periodic(now_ms=60_000)  # flushes rolled segments, checkpoints
    point = read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)[ORDERS_0]
    assert point == log.active_segment.base_offset
    log.close_handlers()  # the process dies

    again = open_manager([tmp_path])
    assert again.had_clean_shutdown == {tmp_path: False}
    report = again.load_reports[ORDERS_0]
    assert report.recovery_point == point
    assert report.recovered_segments == (point,)
    reloaded = again.get_log(ORDERS_0)
    assert reloaded is not None and reloaded.log_end_offset == 30


def test_periodic_work_follows_the_callers_clock(tmp_path: Path) -> None:
    manager = open_manager([tmp_path], now_ms=1_000)
    log = manager.get_or_create_log(ORDERS_0, now_ms=1_000)
    append(log, 3)
    log.update_high_watermark(3)
    assert manager.maybe_run_periodic(now_ms=1_000) == 61_000  # the recovery-point checkpoint
    assert manager.maybe_run_periodic(now_ms=60_999) == 61_000
    # High watermarks follow the replica layer's schedule (ReplicaManager.tick, as Kafka's
    # ReplicaManager runs highwatermark-checkpoint), never this one's:
    # tests/broker/test_replica_manager.py checks it.
    assert not (tmp_path / REPLICATION_CHECKPOINT).exists()
    manager.checkpoint_high_watermarks()
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT) == {ORDERS_0: 3}
    assert not (tmp_path / RECOVERY_POINT_CHECKPOINT).exists()
    manager.maybe_run_periodic(now_ms=61_000)
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {ORDERS_0: 0}


def test_retention_runs_on_its_interval(tmp_path: Path) -> None:
    manager = LogManager.open(
        [tmp_path], LogConfig(segment_bytes=1024, retention_ms=1_000), now_ms=0
    )
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 30, timestamp=0)
    log.update_high_watermark(30)
    segments = len(log.segments)
    manager.maybe_run_periodic(now_ms=299_999)
    assert len(log.segments) == segments
    manager.maybe_run_periodic(now_ms=300_000)
    assert len(log.segments) == 1
    assert log.log_start_offset == log.active_segment.base_offset


def test_flush_ms_flushes_on_schedule(tmp_path: Path) -> None:
    manager = LogManager.open(
        [tmp_path],
        LogConfig(flush_ms=1_000),
        now_ms=0,
        settings=LogManagerSettings(log_flush_scheduler_interval_ms=500),
    )
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 2)
    manager.maybe_run_periodic(now_ms=500)
    assert log.recovery_point == 0
    manager.maybe_run_periodic(now_ms=1_000)
    assert log.recovery_point == 2


def test_delete_log_renames_then_removes(tmp_path: Path) -> None:
    manager = open_manager([tmp_path])
    append(manager.get_or_create_log(ORDERS_0, now_ms=0), 2)
    manager.get_or_create_log(ORDERS_1, now_ms=0)
    assert manager.delete_log(ORDERS_0)
    assert not manager.delete_log(ORDERS_0)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["orders-1"]
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {ORDERS_1: 0}


def test_leftover_delete_dirs_are_removed_at_start_up(tmp_path: Path) -> None:
    leftover = tmp_path / "orders-0.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"")
    manager = open_manager([tmp_path])
    assert not leftover.exists()
    assert manager.logs == {}


def test_unparseable_directories_are_reported_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "no_partition_number").mkdir()
    manager = open_manager([tmp_path])
    assert manager.logs == {}
    assert any("no_partition_number" in problem for problem in manager.problems)


def test_a_malformed_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    manager = open_manager([tmp_path])
    append(manager.get_or_create_log(ORDERS_0, now_ms=0), 30)
    manager.shutdown()
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_text("0\n1\norders zero 5\n")
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    again = open_manager([tmp_path])
    assert any(RECOVERY_POINT_CHECKPOINT in problem for problem in again.problems)
    report = again.load_reports[ORDERS_0]
    assert report.recovered_segments[0] == 0  # from the very start


def test_the_same_partition_in_two_dirs_is_an_error(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for log_dir in dirs:
        (log_dir / "orders-0").mkdir(parents=True)
    with pytest.raises(LogDirError, match="duplicate"):
        open_manager(dirs)


def test_parallel_loading_gives_the_same_logs(tmp_path: Path) -> None:
    manager = open_manager([tmp_path])
    for partition in range(6):
        append(manager.get_or_create_log(TopicPartition("t", partition), now_ms=0), partition + 1)
    manager.shutdown()
    loaded = open_manager([tmp_path], num_recovery_threads_per_data_dir=3)
    assert {tp.partition: log.log_end_offset for tp, log in loaded.logs.items()} == {
        partition: partition + 1 for partition in range(6)
    }


def test_logs_recovered_after_a_crash_hold_one_descriptor_each(tmp_path: Path) -> None:
    # Issue 18: after kill -9, recovery rebuilt every active segment's time index through a
    # map, which kept a dup of its descriptor: 10,000 partitions held 20,000 and the broker
    # could not start (EMFILE, `ulimit -n` 20,000 here). Each small log now holds its .log only.
    manager = open_manager([tmp_path])
    for partition in range(20):
        append(manager.get_or_create_log(TopicPartition("t", partition), now_ms=0), 3)
    for log in manager.logs.values():
        log.close_handlers()  # the process dies
    before = len(os.listdir("/proc/self/fd"))
    again = open_manager([tmp_path])
    assert again.had_clean_shutdown == {tmp_path: False}
    assert all(report.recovered_segments == (0,) for report in again.load_reports.values())
    assert len(os.listdir("/proc/self/fd")) == before + 20
    assert {log.log_end_offset for log in again.logs.values()} == {3}


def test_shutdown_closes_logs_on_the_recovery_threads_before_the_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka's LogManager.shutdown closes each dir's logs on num.recovery.threads.per.data.dir
    # threads; the clean-shutdown marker vouches for every one of them, so it comes after all.
    manager = open_manager([tmp_path], num_recovery_threads_per_data_dir=3)
    for partition in range(12):
        append(manager.get_or_create_log(TopicPartition("t", partition), now_ms=0), 2)
    closed_on: set[str] = set()
    closes_left = [12]
    real_close = PartitionLog.close

    def close(log: PartitionLog) -> None:
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
        time.sleep(0.005)  # long enough that the pool's threads all take a turn
        real_close(log)
        closed_on.add(threading.current_thread().name)
        closes_left[0] -= 1

    monkeypatch.setattr(PartitionLog, "close", close)
    real_marker = FileLogDir.write_clean_shutdown_marker

    def marker(store: FileLogDir, broker_epoch: int) -> None:
        assert closes_left == [0]
        real_marker(store, broker_epoch)

    monkeypatch.setattr(FileLogDir, "write_clean_shutdown_marker", marker)
    manager.shutdown(broker_epoch=7)
    assert len(closed_on) == 3
    assert all(name.startswith("log-recovery") for name in closed_on)
    monkeypatch.undo()
    again = open_manager([tmp_path])
    assert again.had_clean_shutdown == {tmp_path: True}
    assert again.previous_broker_epoch() == 7
    assert {tp.partition: log.log_end_offset for tp, log in again.logs.items()} == {
        partition: 2 for partition in range(12)
    }
    assert all(log.load_report.recovered_segments == () for log in again.logs.values())


# ------------------------------------------------------------------ topic configs
# Kafka's LogManager.updateTopicConfig: the topic's open logs take the new config
# (UnifiedLog.updateConfig); logs created later open with it.

COMPACT = LogConfig.from_properties({"cleanup.policy": "compact"}, defaults=CONFIG)


def test_update_topic_config_reaches_every_open_log_of_the_topic_only(tmp_path: Path) -> None:
    manager = open_manager([tmp_path])
    for tp in (ORDERS_0, ORDERS_1, AUDIT_0):
        manager.get_or_create_log(tp, now_ms=0)
    assert manager.update_topic_config("orders", COMPACT) == [ORDERS_0, ORDERS_1]
    assert manager.logs[ORDERS_0].config == manager.logs[ORDERS_1].config == COMPACT
    assert manager.logs[AUDIT_0].config == CONFIG
    assert manager.update_topic_config("orders", COMPACT) == []  # nothing changed this time
    assert manager.get_or_create_log(TopicPartition("orders", 2), now_ms=0).config == COMPACT


def test_a_config_given_for_an_existing_log_replaces_the_one_it_loaded_with(
    tmp_path: Path,
) -> None:
    manager = open_manager([tmp_path])
    manager.get_or_create_log(ORDERS_0, now_ms=0, config=COMPACT)
    manager.shutdown()
    # Reopened without topic configs (the broker loads logs before it reads the metadata).
    reopened = open_manager([tmp_path])
    assert reopened.logs[ORDERS_0].config == CONFIG
    log = reopened.get_or_create_log(ORDERS_0, now_ms=0, config=COMPACT)
    assert log is reopened.get_log(ORDERS_0)
    assert log.config == COMPACT and log.config.compact and not log.config.delete
    assert reopened.config_for("orders") == COMPACT


def test_idle_producers_are_forgotten_on_their_interval_unless_in_a_transaction(
    tmp_path: Path,
) -> None:
    # Kafka's LogManager schedules removeExpiredProducers every
    # producer.id.expiration.check.interval.ms (10 minutes); an entry idle for
    # producer.id.expiration.ms (1 day) goes, one inside a transaction stays
    # (ProducerStateManagerTest.testProducerStateAfterExpiration-style).
    manager = open_manager([tmp_path], now_ms=0)
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    idle = build_batch([SimpleRecord(value=b"a", timestamp=0)], producer_id=7, producer_epoch=0)
    open_txn = build_batch(
        [SimpleRecord(value=b"b", timestamp=0)],
        producer_id=8,
        producer_epoch=0,
        is_transactional=True,
    )
    log.append_as_leader(bytearray(idle), leader_epoch=0, now_ms=0)
    log.append_as_leader(bytearray(open_txn), leader_epoch=0, now_ms=0)
    day_ms = 86_400_000
    manager.maybe_run_periodic(now_ms=day_ms - 1)  # not idle long enough yet
    assert set(log.producer_state.producers) == {7, 8}
    manager.maybe_run_periodic(now_ms=day_ms + 600_000)  # the next check after a day
    assert set(log.producer_state.producers) == {8}


def test_a_new_partition_costs_no_fsync_until_its_first_flush(
    tmp_path: Path, count_fsyncs: Callable[[], list[int]]
) -> None:
    # Creating and leading a partition used to be 3 fsyncs (log dir entry, epoch file and its
    # directory); they now wait for the log's first flush (KAFKA-3968's lazy directory flush,
    # the epoch entry synced before the recovery point moves).
    manager = open_manager([tmp_path / "d1"])
    synced = count_fsyncs()
    tp = TopicPartition("t", 0)
    log = manager.get_or_create_log(tp, 0)
    log.leader_epoch_cache.assign(3, 0)
    assert synced == []
    log.append_as_leader(
        bytearray(build_batch([SimpleRecord(value=b"v")])), leader_epoch=3, now_ms=0
    )
    assert synced == []
    log.flush()  # the log dir entry, the epoch file and its directory, the segment...
    assert len(synced) >= 3
    flushed = len(synced)
    log.append_as_leader(
        bytearray(build_batch([SimpleRecord(value=b"w")])), leader_epoch=3, now_ms=0
    )
    log.flush()
    assert len(synced) - flushed == 1  # ...once: later flushes sync the segment only
    manager.shutdown()


def test_new_logs_are_planned_on_the_least_full_dirs_opened_anywhere_then_adopted(
    tmp_path: Path,
) -> None:
    # broker.new_logs: plan and adopt on the event loop, open (the file work) in a thread.
    manager = open_manager([tmp_path / "d1", tmp_path / "d2"])
    held = manager.get_or_create_log(TopicPartition("held", 0), 0)
    wanted = [(TopicPartition("new", p), CONFIG) for p in range(3)]
    plan = manager.plan_new_logs([*wanted, (TopicPartition("held", 0), CONFIG)])
    assert [new.tp for new in plan] == [tp for tp, _ in wanted]  # the held one is skipped
    held_dir = manager.log_dir_of(TopicPartition("held", 0))
    assert [new.log_dir == held_dir for new in plan] == [False, True, False]
    logs = [manager.open_new_log(new, 0) for new in plan]
    assert TopicPartition("new", 0) not in manager.logs  # opened, not registered yet
    assert (plan[0].log_dir / "new-0").is_dir()
    assert manager.adopt_new_log(plan[0], logs[0], 0)
    assert manager.get_or_create_log(TopicPartition("new", 0), 0) is logs[0]
    assert not manager.adopt_new_log(plan[0], logs[0], 0)  # already registered
    manager.handle_log_dir_failure(plan[1].log_dir, "test: the dir failed meanwhile")
    assert not manager.adopt_new_log(plan[1], logs[1], 0)
    assert TopicPartition("new", 1) not in manager.logs
    assert held is not None
    logs[2].close_handlers()
    manager.shutdown()


def test_a_partition_with_a_preferred_log_dir_is_left_to_the_publication(tmp_path: Path) -> None:
    # AlterReplicaLogDirs named its dir before the replica existed here: get_or_create_log takes
    # that preference; planning it on the least-full dir would put it elsewhere and leave the
    # preference for a later incarnation.
    manager = open_manager([tmp_path / "d1", tmp_path / "d2"])
    placed = TopicPartition("placed", 0)
    manager.preferred_log_dirs[placed] = tmp_path / "d2"
    plan = manager.plan_new_logs([(placed, CONFIG), (TopicPartition("other", 0), CONFIG)])
    assert [new.tp for new in plan] == [TopicPartition("other", 0)]
    manager.get_or_create_log(placed, 0)
    assert manager.log_dir_of(placed) == tmp_path / "d2"
    assert placed not in manager.preferred_log_dirs
    manager.shutdown()


class _CountingWalks(dict[TopicPartition, PartitionLog]):
    """The manager's log table, counting the walks over it."""

    walks = 0

    def items(self) -> ItemsView[TopicPartition, PartitionLog]:  # type: ignore[override]
        self.walks += 1
        return super().items()


def test_handing_each_partition_its_topics_config_walks_the_logs_once_per_topic(
    tmp_path: Path,
) -> None:
    manager = open_manager([tmp_path])
    partitions = [TopicPartition("orders", p) for p in range(20)] + [AUDIT_0]
    for tp in partitions:
        manager.get_or_create_log(tp, now_ms=0)
    manager._logs = counting = _CountingWalks(manager._logs)
    # What the first image does on a restart: each partition's log, with its topic's config.
    for tp in partitions:
        manager.get_or_create_log(tp, now_ms=0, config=COMPACT)
    assert counting.walks == 2  # one per topic, not one per partition
    assert all(manager.logs[tp].config == COMPACT for tp in partitions)
