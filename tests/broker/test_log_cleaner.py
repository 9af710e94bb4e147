"""The broker's log cleaner task: ``log.cleaner.*`` parsing with Kafka's defaults, rounds on a
worker thread with the log's state read on the event loop, and a stop that aborts a cleaning."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from pykraft.broker.config import BrokerConfig
from pykraft.broker.config_listeners import BrokerConfigError
from pykraft.broker.log_cleaner import LogCleanerShell, cleaner_config_of
from pykraft.storage.log_cleaner import CleanerConfig
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock
from tests.storage.cleaner_support import CONFIG, append, rows

T0 = 1_000_000
TP = TopicPartition("compacted", 0)


def test_kafka_defaults() -> None:
    """KafkaConfig / CleanerConfig defaults."""
    config = cleaner_config_of({})
    assert config == CleanerConfig()
    assert (config.enable, config.num_threads, config.backoff_ms) == (True, 1, 15_000)
    assert config.dedupe_buffer_size == 134_217_728
    assert math.isinf(config.max_io_bytes_per_second)


def test_properties_are_parsed() -> None:
    config = cleaner_config_of(
        {
            "log.cleaner.enable": "false",
            "log.cleaner.backoff.ms": "250",
            "log.cleaner.io.max.bytes.per.second": "1048576.5",
            "log.cleaner.dedupe.buffer.size": "1000000",
        }
    )
    assert (config.enable, config.backoff_ms) == (False, 250)
    assert (config.max_io_bytes_per_second, config.dedupe_buffer_size) == (1_048_576.5, 1_000_000)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("log.cleaner.enable", "yes"),
        ("log.cleaner.backoff.ms", "-1"),
        ("log.cleaner.threads", "0"),
        ("log.cleaner.io.max.bytes.per.second", "fast"),
    ],
)
def test_bad_values_name_the_property(name: str, value: str) -> None:
    with pytest.raises(BrokerConfigError, match=name.replace(".", r"\.")):
        cleaner_config_of({name: value})


def filled_manager(log_dir: Path) -> LogManager:
    logs = LogManager.open([log_dir], LogConfig(), T0, topic_configs={"compacted": CONFIG})
    log = logs.get_or_create_log(TP, T0)
    for i in range(200):
        append(log, [(b"k%d" % (i % 5), b"v%d" % i)], T0)
    log.roll(T0)
    append(log, [(b"tail", b"t")], T0)
    log.update_high_watermark(log.log_end_offset)
    return logs


def test_the_task_cleans_then_stops(tmp_path: Path) -> None:
    asyncio.run(cleans_then_stops(tmp_path))


async def cleans_then_stops(tmp_path: Path) -> None:
    logs = filled_manager(tmp_path)
    shell = LogCleanerShell(CleanerConfig(backoff_ms=10), logs, FakeClock(T0))
    task = asyncio.ensure_future(shell.run())
    for _ in range(500):
        if shell.cleanings:
            break
        await asyncio.sleep(0.01)
    await shell.stop()
    await asyncio.wait_for(task, 5)
    log = logs.get_log(TP)
    assert log is not None and shell.cleanings == 1
    assert [key for _, key, _ in rows(log)] == [b"k0", b"k1", b"k2", b"k3", b"k4", b"tail"]


def test_stop_aborts_a_throttled_cleaning(tmp_path: Path) -> None:
    """A cleaning held back by log.cleaner.io.max.bytes.per.second ends at the stop, and the
    log is left as it was (the .cleaned file is removed)."""
    asyncio.run(stop_aborts_a_throttled_cleaning(tmp_path))


async def stop_aborts_a_throttled_cleaning(tmp_path: Path) -> None:
    logs = filled_manager(tmp_path)
    log = logs.get_log(TP)
    assert log is not None
    before = rows(log)
    clock = FakeClock(T0)
    shell = LogCleanerShell(CleanerConfig(max_io_bytes_per_second=1.0), logs, clock)
    clock.now_ms += 1_000  # the first batch read is past the check interval: a long sleep
    task = asyncio.ensure_future(shell.run())
    await asyncio.sleep(0.2)
    await asyncio.wait_for(shell.stop(), 5)
    await asyncio.wait_for(task, 5)
    assert shell.cleanings == 0 and rows(log) == before
    assert not list((tmp_path / TP.dir_name()).glob("*.cleaned"))


def test_broker_properties_reach_the_broker_config() -> None:
    """``log.cleaner.*`` in server.properties: the cleaner's own settings, and the topic
    defaults (``log.cleaner.min.cleanable.ratio`` → ``min.cleanable.dirty.ratio``)."""
    values = {
        "node.id": "1",
        "controller.quorum.bootstrap.servers": "127.0.0.1:19093",
        "log.cleaner.backoff.ms": "500",
        "log.cleaner.min.cleanable.ratio": "0.1",
        "log.cleaner.delete.retention.ms": "1000",
    }
    config = BrokerConfig.from_properties(values)
    assert config.log_cleaner.backoff_ms == 500
    assert config.log_config.min_cleanable_dirty_ratio == 0.1
    assert config.log_config.delete_retention_ms == 1000
    with pytest.raises(BrokerConfigError, match=r"log\.cleaner\.min\.cleanable\.ratio"):
        BrokerConfig.from_properties({**values, "log.cleaner.min.cleanable.ratio": "2"})
