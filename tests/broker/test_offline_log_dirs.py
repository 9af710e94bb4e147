"""What a broker tells the controller about a failed log dir (KIP-858), and what it does when
the controller answers by moving the leadership away.

The heartbeat reports the dir's ``directory.id`` and this broker's replicas on it (by topic
id); a heartbeat goes out at once. When the metadata then makes another broker the leader
(this one out of the ISR), the partition is not re-created on the healthy dir and nothing is
fetched for it: the replica comes back only with a restart on a healthy dir.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pykraft.broker.offline_log_dirs import NO_OFFLINE_LOG_DIRS, OfflineLogDirs
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.protocol.errors import Errors
from pykraft.storage import segment as segment_module
from pykraft.storage.directory_id import META_PROPERTIES
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from tests.broker.replica_harness import LOCAL, OTHER, PETS0, PETS_ID, batch
from tests.broker.test_replica_manager_storage import (  # noqa: F401 (cluster: fixture)
    TwoDirCluster,
    cluster,
)


def fail_dir_a(harness: TwoDirCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, data: memoryview, position: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(segment_module, "_write_fully", no_space)
        assert harness.produce(PETS0, batch(b"lost")).error is Errors.KAFKA_STORAGE_ERROR


def test_the_heartbeat_reports_the_failed_dir_and_its_replicas(
    cluster: TwoDirCluster,  # noqa: F811 - the fixture of test_replica_manager_storage
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offline_storage = cluster.replica_manager.offline_storage
    calls: list[str] = []
    offline_storage.on_directory_failure = lambda: calls.append("heartbeat now")
    cluster.start_pets_led_here()
    assert offline_storage.offline_log_dirs(cluster.image) == NO_OFFLINE_LOG_DIRS
    fail_dir_a(cluster, monkeypatch)
    dir_a = cluster.log_manager.directory_ids[cluster.log_dirs[0]]
    assert offline_storage.offline_log_dirs(cluster.image) == OfflineLogDirs(
        directory_ids=(dir_a,), replicas=((PETS_ID, 0),)
    )
    assert calls == ["heartbeat now"]
    assert cluster.halts == []  # dir b still serves pets-1


def test_a_leadership_moved_away_from_the_failed_dir_is_not_recreated(
    cluster: TwoDirCluster,  # noqa: F811 - the fixture of test_replica_manager_storage
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster.start_pets_led_here()
    fail_dir_a(cluster, monkeypatch)
    # What the controller writes on the heartbeat: OTHER leads, LOCAL leaves the ISR.
    cluster.publish(
        PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER, isr=(OTHER,))
    )
    assert cluster.replica_manager.get_partition(PETS0) is None
    assert PETS0 not in cluster.fetchers.assignments
    assert not (cluster.log_dirs[1] / "pets-0").exists()  # not re-created empty on dir b
    assert cluster.produce(PETS0, batch(b"x")).error is Errors.KAFKA_STORAGE_ERROR
    # Reported until a restart on a healthy dir, so a new active controller learns it too.
    assert cluster.replica_manager.offline_storage.offline_log_dirs(cluster.image).replicas == (
        (PETS_ID, 0),
    )
    assert LOCAL not in cluster.image.topics.by_id[PETS_ID].partitions[0].isr


def test_directory_ids_live_in_meta_properties(tmp_path: Path) -> None:
    # Kafka's meta.properties v1 carries directory.id; a dir that has none gets one written.
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / META_PROPERTIES).write_text("version=1\ncluster.id=c\nnode.id=1")
    manager = LogManager.open([tmp_path / "a", tmp_path / "b"], LogConfig(), now_ms=0)
    dir_a = manager.directory_ids[tmp_path / "a"]
    text = (tmp_path / "a" / META_PROPERTIES).read_text()
    assert text == f"version=1\ncluster.id=c\nnode.id=1\ndirectory.id={dir_a}\n"
    assert len(dir_a) == 22 and len(manager.directory_ids[tmp_path / "b"]) == 22
    assert not (tmp_path / "b" / META_PROPERTIES).exists()  # no file: an id for this process
    manager.shutdown()
    again = LogManager.open([tmp_path / "a", tmp_path / "b"], LogConfig(), now_ms=0)
    assert again.directory_ids[tmp_path / "a"] == dir_a  # stable across restarts
    assert again.directory_ids[tmp_path / "b"] != manager.directory_ids[tmp_path / "b"]
    again.shutdown()
