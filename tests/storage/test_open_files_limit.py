"""A broker out of descriptors (EMFILE) says so: the error names it, the log dir goes offline
(Kafka: an IOException in ``LogManager.getOrCreateLog`` fails the dir), nothing stalls."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import KafkaStorageError, LogManager
from pykraft.storage.topic_partition import TopicPartition


def test_a_partition_that_finds_no_descriptor_fails_with_too_many_open_files(
    tmp_path: Path,
) -> None:
    manager = LogManager.open([tmp_path], LogConfig(), 0)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 40, limits[1]))
    try:
        with pytest.raises(KafkaStorageError, match="Too many open files"):
            for partition in range(100):  # at least one descriptor each (the .log)
                manager.get_or_create_log(TopicPartition("orders", partition), now_ms=0)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
    (reason,) = manager.offline_dirs.values()
    assert "Too many open files" in reason
    assert manager.offline_partitions  # the dir's partitions went offline with it, and say why
    assert all("Too many open files" in r for r in manager.offline_partitions.values())
