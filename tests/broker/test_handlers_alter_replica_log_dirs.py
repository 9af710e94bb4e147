"""AlterReplicaLogDirs and the log-dir mover on a real LogManager with two dirs (Kafka's
``KafkaApis.handleAlterReplicaLogDirsRequest`` / ``ReplicaManager.alterReplicaLogDirs``;
cases after ``AlterReplicaLogDirsRequestTest.testAlterReplicaLogDirsRequest`` and
``testAlterReplicaLogDirsRequestErrorCode``, and ``ReplicaManagerTest``'s future-replica
swaps for a leader and a follower)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
)

from pykraft.broker.handlers.alter_replica_log_dirs import (
    alter_replica_log_dirs,
    alter_replica_log_dirs_handler,
)
from pykraft.broker.handlers.log_dirs import describe_log_dirs
from pykraft.broker.log_dir_mover import LogDirMover
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition, is_future_dir
from tests.broker.handler_support import pets_and_birds
from tests.broker.replica_harness import (
    LOCAL,
    OTHER,
    PETS0,
    PETS_ID,
    Cluster,
    batch,
    call,
    encode,
    partition_record,
    services,
)
from tests.broker.test_authorization import acl, authorizer, context

BIRDS0 = TopicPartition("birds", 0)
_Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
_Topic = _Dir.AlterReplicaLogDirTopic


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Two log dirs; pets-0 and pets-1 led here, birds-0 followed; three records on pets-0."""
    harness = Cluster(tmp_path, log_dirs=[tmp_path / "a", tmp_path / "b"])
    try:
        harness.start(*pets_and_birds(pets0_leader_epoch=4))
        harness.produce(PETS0, batch(b"a", b"b"))
        harness.produce(PETS0, batch(b"c"))
        yield harness
    finally:
        harness.close()


def other_dir(cluster: Cluster, tp: TopicPartition) -> str:
    current = cluster.log_manager.log_dir_of(tp)
    (other,) = [d for d in cluster.log_manager.log_dirs if d != current]
    return str(other.absolute())


def alter(cluster: Cluster, moves: dict[str, dict[str, list[int]]], version: int = 2) -> Any:
    request = AlterReplicaLogDirsRequest(
        version=version,
        dirs=[
            _Dir(path=path, topics=[_Topic(name=t, partitions=ps) for t, ps in topics.items()])
            for path, topics in moves.items()
        ],
    )
    body = call(
        alter_replica_log_dirs_handler(services(cluster)),
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        version,
        encode(request, version),
    )
    assert body is not None
    return AlterReplicaLogDirsResponse.decode(body, version=version)


def errors(response: Any) -> dict[tuple[str, int], int]:
    return {
        (topic.topic_name, p.partition_index): p.error_code
        for topic in response.results
        for p in topic.partitions
    }


def read_all(cluster: Cluster, tp: TopicPartition) -> bytes:
    log = cluster.log_manager.get_log(tp)
    assert log is not None
    return log.read(log.log_start_offset, 1 << 30, log.log_end_offset).read_bytes()


def move_until_done(cluster: Cluster) -> int:
    mover = LogDirMover(cluster.replica_manager, cluster.clock.wall_clock_ms, step_max_bytes=1)
    steps = 0
    while cluster.log_manager.future_logs.logs:
        assert mover.step_all()
        steps += 1
        assert steps < 1000
    return steps


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_leader_moves_and_keeps_serving(cluster: Cluster, version: int) -> None:
    destination = other_dir(cluster, PETS0)
    before = read_all(cluster, PETS0)
    answer = alter(cluster, {destination: {"pets": [0]}}, version)
    assert errors(answer) == {("pets", 0): Errors.NONE}
    assert [n for n in Path(destination).iterdir() if is_future_dir(n.name)]
    cluster.produce(PETS0, batch(b"d"))  # produce goes on while the copy runs
    assert move_until_done(cluster) >= 2
    assert str(cluster.log_manager.log_dir_of(PETS0).absolute()) == destination  # type: ignore[union-attr]
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition.log is cluster.log_manager.get_log(PETS0)
    assert read_all(cluster, PETS0).startswith(before)
    cluster.produce(PETS0, batch(b"e"))  # and after the swap, into the moved log
    assert partition.log_end_offset == 5
    assert (Path(destination) / "pets-0").is_dir()
    assert not any(n.name.startswith("pets-0") for n in Path(other_dir(cluster, PETS0)).iterdir())


def test_a_follower_moves(cluster: Cluster) -> None:
    destination = other_dir(cluster, BIRDS0)
    assert errors(alter(cluster, {destination: {"birds": [0]}})) == {("birds", 0): Errors.NONE}
    move_until_done(cluster)
    assert str(cluster.log_manager.log_dir_of(BIRDS0).absolute()) == destination  # type: ignore[union-attr]


def test_describe_log_dirs_shows_the_future_replica_while_it_copies(cluster: Cluster) -> None:
    destination = other_dir(cluster, PETS0)
    alter(cluster, {destination: {"pets": [0]}})
    request = DescribeLogDirsRequest(version=4, topics=None)
    by_dir = {r.log_dir: r for r in describe_log_dirs(services(cluster), request).results}
    futures = [
        (t.name, p.partition_index, p.offset_lag)
        for t in by_dir[destination].topics
        for p in t.partitions
        if p.is_future_key
    ]
    assert futures == [("pets", 0, 3)]  # nothing copied yet: three records behind


def test_a_replica_not_hosted_yet_is_created_in_the_asked_dir(cluster: Cluster) -> None:
    # ReplicaManager.alterReplicaLogDirs: maybeUpdatePreferredLogDir, then REPLICA_NOT_AVAILABLE.
    pets2 = TopicPartition("pets", 2)
    emptiest_first = cluster.log_manager.log_dirs
    counts = {d: 0 for d in emptiest_first}
    for tp in cluster.log_manager.logs:
        counts[cluster.log_manager.log_dir_of(tp)] += 1  # type: ignore[index]
    fuller = str(max(emptiest_first, key=lambda d: counts[d]).absolute())
    assert errors(alter(cluster, {fuller: {"pets": [2]}})) == {
        ("pets", 2): Errors.REPLICA_NOT_AVAILABLE
    }
    cluster.publish(partition_record(PETS_ID, 2, (LOCAL, OTHER), leader_epoch=1))
    assert str(cluster.log_manager.log_dir_of(pets2).absolute()) == fuller  # type: ignore[union-attr]


def test_the_current_dir_is_a_no_op(cluster: Cluster) -> None:
    current = str(cluster.log_manager.log_dir_of(PETS0).absolute())  # type: ignore[union-attr]
    assert errors(alter(cluster, {current: {"pets": [0]}})) == {("pets", 0): Errors.NONE}
    assert cluster.log_manager.future_logs.logs == {}


def test_error_codes(cluster: Cluster, tmp_path: Path) -> None:
    # AlterReplicaLogDirsRequestTest.testAlterReplicaLogDirsRequestErrorCode
    destination = other_dir(cluster, PETS0)
    answer = alter(
        cluster,
        {
            str(tmp_path / "nowhere"): {"pets": [0]},
            destination: {"pets": [9], "unknown": [0]},
        },
    )
    assert errors(answer) == {
        ("pets", 0): Errors.LOG_DIR_NOT_FOUND,
        ("pets", 9): Errors.REPLICA_NOT_AVAILABLE,
        ("unknown", 0): Errors.REPLICA_NOT_AVAILABLE,
    }
    offline = Path(destination)
    cluster.log_manager.handle_log_dir_failure(offline, "disk gone")
    assert errors(alter(cluster, {destination: {"pets": [0]}})) == {
        ("pets", 0): Errors.KAFKA_STORAGE_ERROR
    }
    assert cluster.log_manager.future_logs.logs == {}


def test_a_new_destination_cancels_the_move_under_way(cluster: Cluster) -> None:
    destination = other_dir(cluster, PETS0)
    current = str(cluster.log_manager.log_dir_of(PETS0).absolute())  # type: ignore[union-attr]
    alter(cluster, {destination: {"pets": [0]}})
    assert PETS0 in cluster.log_manager.future_logs.logs
    assert errors(alter(cluster, {current: {"pets": [0]}})) == {("pets", 0): Errors.NONE}
    assert cluster.log_manager.future_logs.logs == {}
    assert not [n for n in Path(destination).iterdir() if is_future_dir(n.name)]


def test_without_alter_on_the_cluster_every_partition_is_refused(cluster: Cluster) -> None:
    destination = other_dir(cluster, PETS0)
    request = AlterReplicaLogDirsRequest(
        version=2, dirs=[_Dir(path=destination, topics=[_Topic(name="pets", partitions=[0, 1])])]
    )
    refused = services(cluster, authorizer=authorizer(acl(AclOperation.DESCRIBE)))
    answer = alter_replica_log_dirs(refused, request, context(ApiKey.ALTER_REPLICA_LOG_DIRS, 2))
    assert errors(answer) == {
        ("pets", 0): Errors.CLUSTER_AUTHORIZATION_FAILED,
        ("pets", 1): Errors.CLUSTER_AUTHORIZATION_FAILED,
    }
    assert cluster.log_manager.future_logs.logs == {}
    allowed = services(
        cluster,
        authorizer=authorizer(acl(AclOperation.ALTER, "kafka-cluster", ResourceType.CLUSTER)),
    )
    answer = alter_replica_log_dirs(allowed, request, context(ApiKey.ALTER_REPLICA_LOG_DIRS, 2))
    assert set(errors(answer).values()) == {Errors.NONE}


def test_an_io_error_in_the_destination_fails_that_dir_and_the_replica_keeps_serving(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka: an IOException in the alter-dir thread goes to the LogDirFailureChannel.
    destination = other_dir(cluster, PETS0)
    alter(cluster, {destination: {"pets": [0]}})
    future = cluster.log_manager.future_logs.get(PETS0)
    assert future is not None

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk gone")

    monkeypatch.setattr(future.log, "append_as_follower", broken)
    mover = LogDirMover(cluster.replica_manager, cluster.clock.wall_clock_ms)
    assert not mover.step_all()
    assert Path(destination) in cluster.log_manager.offline_dirs
    assert cluster.log_manager.future_logs.logs == {}
    assert cluster.produce(PETS0, batch(b"d")).error == Errors.NONE
    assert str(cluster.log_manager.log_dir_of(PETS0).absolute()) != destination  # type: ignore[union-attr]
