"""ReplicaManager when storage fails (issue 9; Kafka's ``ReplicaManager.handleLogDirFailure``):
an I/O error on append answers KAFKA_STORAGE_ERROR and takes that log dir offline — its
partitions answer KAFKA_STORAGE_ERROR from then on, partitions on other dirs keep serving, and
the broker is asked to halt once no dir is left. A partition that could not be loaded is never
recreated over its damage while led here; followed from another leader, it is set aside and
re-fetched."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from pykraft.broker.partition import PartitionRole
from pykraft.metadata.records import TopicRecord
from pykraft.protocol.errors import Errors
from pykraft.storage import leader_epoch_file as leader_epoch_file_module
from pykraft.storage import segment as segment_module
from pykraft.storage.checkpoints import write_leader_epoch_checkpoint
from pykraft.storage.recovery import CLEAN_SHUTDOWN_FILE
from tests.broker.replica_harness import (
    LOCAL,
    OTHER,
    PETS0,
    PETS1,
    PETS_ID,
    Cluster,
    at,
    batch,
    broker,
    partition_record,
)


class TwoDirCluster(Cluster):
    """The harness's broker with two log dirs: pets-0 lands on ``a``, pets-1 on ``b``."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path, log_dirs=[tmp_path / "a", tmp_path / "b"])
        self.halts: list[str] = []
        offline_storage = self.replica_manager.offline_storage
        offline_storage.on_all_log_dirs_offline = lambda: self.halts.append("halt")

    def start_pets_led_here(self) -> None:
        self.start(
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 0, (LOCAL,), leader=LOCAL),
            partition_record(PETS_ID, 1, (LOCAL,), leader=LOCAL),
        )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[TwoDirCluster]:
    harness = TwoDirCluster(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


def failing_write(fd: int, data: memoryview, position: int) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_failed_append_answers_storage_error_and_takes_its_dir_offline(
    cluster: TwoDirCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.start_pets_led_here()
    assert cluster.log_manager.log_dir_of(PETS0) == cluster.log_dirs[0]
    assert cluster.produce(PETS0, batch(b"kept")).error is Errors.NONE
    with monkeypatch.context() as patch:
        patch.setattr(segment_module, "_write_fully", failing_write)
        failed = cluster.produce(PETS0, batch(b"lost"))
    assert failed.error is Errors.KAFKA_STORAGE_ERROR
    assert list(cluster.log_manager.offline_dirs) == [cluster.log_dirs[0]]
    assert cluster.replica_manager.get_partition(PETS0) is None
    # From now on the partition is offline (Kafka's HostedPartition.Offline) ...
    assert cluster.produce(PETS0, batch(b"later")).error is Errors.KAFKA_STORAGE_ERROR
    [read] = cluster.fetch(at(PETS0, 0))
    assert read.error is Errors.KAFKA_STORAGE_ERROR
    # ... and the other dir serves on.
    assert cluster.produce(PETS1, batch(b"other dir")).error is Errors.NONE
    [other] = cluster.fetch(at(PETS1, 0))
    assert (other.error, other.log_end_offset) == (Errors.NONE, 1)
    assert cluster.halts == []
    with monkeypatch.context() as patch:
        patch.setattr(segment_module, "_write_fully", failing_write)
        assert cluster.produce(PETS1, batch(b"lost")).error is Errors.KAFKA_STORAGE_ERROR
    assert cluster.halts == ["halt"]  # every dir is offline: Kafka halts the broker


def test_a_failed_leader_epoch_write_takes_its_dir_offline_and_the_others_lead_on(
    cluster: TwoDirCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Persist, then apply (issue 10): a new leader epoch that cannot be written leaves the
    partition unled and its dir offline (Kafka's applyLocalLeadersDelta skips it on a
    KafkaStorageException); the metadata change applies to every other partition."""
    cluster.start_pets_led_here()

    def failing_on_dir_a(
        path: Path, entries: Iterable[tuple[int, int]], *, durable: bool = True
    ) -> None:
        if cluster.log_dirs[0] in path.parents:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        write_leader_epoch_checkpoint(path, entries, durable=durable)

    with monkeypatch.context() as patch:
        patch.setattr(leader_epoch_file_module, "write_leader_epoch_checkpoint", failing_on_dir_a)
        cluster.publish(
            partition_record(PETS_ID, 0, (LOCAL,), leader=LOCAL, leader_epoch=1, partition_epoch=1),
            partition_record(PETS_ID, 1, (LOCAL,), leader=LOCAL, leader_epoch=1, partition_epoch=1),
        )
    assert list(cluster.log_manager.offline_dirs) == [cluster.log_dirs[0]]
    assert cluster.replica_manager.get_partition(PETS0) is None
    assert cluster.produce(PETS0, batch(b"x")).error is Errors.KAFKA_STORAGE_ERROR
    pets1 = cluster.replica_manager.get_partition(PETS1)
    assert pets1 is not None and pets1.is_leader and pets1.leader_epoch == 1
    assert pets1.log.leader_epoch_cache.latest_epoch == 1
    assert cluster.produce(PETS1, batch(b"y")).error is Errors.NONE
    assert cluster.halts == []


def damage_and_reopen(tmp_path: Path) -> TwoDirCluster:
    """pets-1 (on dir b) written, cleanly shut down, then made unloadable."""
    first = TwoDirCluster(tmp_path)
    first.start_pets_led_here()
    assert first.produce(PETS1, batch(b"old")).error is Errors.NONE
    first.close()
    segment = tmp_path / "b" / "pets-1" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()
    assert (tmp_path / "b" / CLEAN_SHUTDOWN_FILE).exists()
    return TwoDirCluster(tmp_path)


def test_an_unloadable_partition_led_here_stays_offline(tmp_path: Path) -> None:
    cluster = damage_and_reopen(tmp_path)
    try:
        cluster.start_pets_led_here()
        assert cluster.replica_manager.get_partition(PETS1) is None
        assert cluster.produce(PETS1, batch(b"x")).error is Errors.KAFKA_STORAGE_ERROR
        assert (tmp_path / "b" / "pets-1" / "00000000000000000000.log").is_dir()  # untouched
        assert cluster.produce(PETS0, batch(b"y")).error is Errors.NONE
        assert cluster.log_manager.offline_dirs == {}
    finally:
        cluster.close()


def test_an_unloadable_partition_followed_here_is_set_aside_and_refetched(
    tmp_path: Path,
) -> None:
    cluster = damage_and_reopen(tmp_path)
    try:
        cluster.start(
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 0, (LOCAL,), leader=LOCAL),
            partition_record(PETS_ID, 1, (OTHER, LOCAL), leader=OTHER, leader_epoch=2),
        )
        partition = cluster.replica_manager.get_partition(PETS1)
        assert partition is not None and partition.role is PartitionRole.FOLLOWER
        assert partition.log_end_offset == 0
        assert cluster.fetchers.assignments[PETS1].init_offset == 0
        assert PETS1 not in cluster.log_manager.offline_partitions
        [stray] = [p.name for p in (tmp_path / "b").iterdir() if p.name.endswith("-stray")]
        assert stray.startswith("pets-1.")
        assert (tmp_path / "b" / stray / "00000000000000000000.log").is_dir()  # kept to inspect
    finally:
        cluster.close()


def test_a_corrupt_stored_batch_answers_storage_error_and_the_dir_stays_online(
    cluster: TwoDirCluster,
) -> None:
    cluster.start_pets_led_here()
    for n in range(3):
        assert cluster.produce(PETS0, batch(b"v%d" % n)).error is Errors.NONE
    log = cluster.log_manager.get_log(PETS0)
    assert log is not None
    log.flush()
    location = log.local_log.active_segment.translate_offset(1)
    assert location is not None
    with log.local_log.active_segment.log_path.open("r+b") as file:  # a bit flips on disk
        file.seek(location.position + location.header.size_in_bytes - 2)
        file.write(b"\xff")
    [read] = cluster.fetch(at(PETS0, 0))
    assert (read.error, b"".join(p.read_bytes() for p in read.slices).count(b"v0")) == (
        Errors.NONE,
        1,
    )
    [bad] = cluster.fetch(at(PETS0, 1))
    assert bad.error is Errors.KAFKA_STORAGE_ERROR  # a disk fault, never served
    assert cluster.log_manager.offline_dirs == {}  # the disk answers: only the data is bad
    assert log.corruptions.count == 2


def test_an_unloadable_partition_of_a_deleted_topic_is_deleted_as_stray(tmp_path: Path) -> None:
    cluster = damage_and_reopen(tmp_path)
    try:
        cluster.publish(broker(LOCAL), broker(OTHER))  # pets was deleted while we were down
        assert cluster.replica_manager.delete_stray_logs(cluster.image) == [PETS0, PETS1]
        assert cluster.log_manager.offline_partitions == {}
        assert not (tmp_path / "b" / "pets-1").exists()
    finally:
        cluster.close()
