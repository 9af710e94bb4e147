"""broker/log_cleaner_metrics.py: Kafka's LogCleaner / LogCleanerManager gauges as the JMX
exporter names them, set by the cleaner task after each round."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pykraft.broker.log_cleaner import LogCleanerShell
from pykraft.broker.log_cleaner_metrics import LogCleanerMetrics
from pykraft.broker.metrics import BrokerMetrics
from pykraft.storage.cleaner import CleanerStats
from pykraft.storage.log_cleaner import CleanerConfig
from tests.broker.test_log_cleaner import T0, TP, filled_manager
from tests.fake_clock import FakeClock


def stats(bytes_read: int, bytes_written: int) -> CleanerStats:
    return CleanerStats(
        end_offset=10,
        bytes_read=bytes_read,
        bytes_written=bytes_written,
        records_read=10,
        records_kept=3,
        groups_swapped=1,
        groups_dropped=0,
    )


def test_a_round_sets_kafkas_gauges_with_kafkas_integer_rounding(tmp_path: Path) -> None:
    metrics = LogCleanerMetrics()
    metrics.record_round(
        max_dirty_ratio=0.678,
        uncleanable={tmp_path / "a": 2, tmp_path / "b": 0},
        cleaned=stats(bytes_read=3000, bytes_written=1000),
        clean_time_ms=2_999,
    )
    assert metrics.max_dirty_percent.value() == 67  # (100 * ratio).toInt
    assert metrics.cleaner_recopy_percent.value() == 33  # 100 * written / read, truncated
    assert metrics.max_clean_time_secs.value() == 2  # elapsedSecs.toInt
    assert metrics.uncleanable_partitions_count.value(str(tmp_path / "a")) == 2
    assert metrics.uncleanable_partitions_count.value(str(tmp_path / "b")) == 0
    # A round that cleaned nothing keeps the last cleaning's numbers (Kafka's lastStats).
    metrics.record_round(max_dirty_ratio=0.0, uncleanable={tmp_path / "a": 2})
    assert metrics.max_dirty_percent.value() == 0
    assert metrics.cleaner_recopy_percent.value() == 33
    # An empty cleaning reads nothing: Kafka divides by max(bytesRead, 1).
    metrics.record_round(max_dirty_ratio=0.0, uncleanable={}, cleaned=stats(0, 0))
    assert metrics.cleaner_recopy_percent.value() == 0


def test_the_broker_registry_exposes_the_cleaner_gauges() -> None:
    text = BrokerMetrics().registry.render()
    for name in (
        "kafka_log_logcleaner_max_clean_time_secs",
        "kafka_log_logcleaner_cleaner_recopy_percent",
        "kafka_log_logcleanermanager_max_dirty_percent",
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
    ):
        assert f"# TYPE {name} gauge" in text


def test_the_cleaner_task_sets_the_gauges_after_a_cleaning(tmp_path: Path) -> None:
    asyncio.run(cleaning_sets_gauges(tmp_path))


async def cleaning_sets_gauges(tmp_path: Path) -> None:
    logs = filled_manager(tmp_path)
    metrics = LogCleanerMetrics()
    shell = LogCleanerShell(CleanerConfig(backoff_ms=10), logs, FakeClock(T0), metrics)
    task = asyncio.ensure_future(shell.run())
    for _ in range(500):
        if shell.cleanings:
            break
        await asyncio.sleep(0.01)
    await shell.stop()
    await asyncio.wait_for(task, 5)
    assert shell.cleanings == 1
    last = shell.cleaner.last_stats
    assert last is not None and last.bytes_read > last.bytes_written > 0
    assert metrics.cleaner_recopy_percent.value() == int(100 * last.bytes_written / last.bytes_read)
    assert metrics.max_clean_time_secs.value() == 0  # the fake clock did not move
    assert metrics.uncleanable_partitions_count.value(str(tmp_path.absolute())) == 0
    assert logs.get_log(TP) is not None
