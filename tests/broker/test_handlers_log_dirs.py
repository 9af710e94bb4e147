"""The DescribeLogDirs handler (Kafka's ``KafkaApis.handleDescribeLogDirsRequest`` over
``ReplicaManager.describeLogDirs``; cases after ``DescribeLogDirsRequestTest``: two dirs, one
offline, sizes and lags of the hosted partitions, and the refusal without DESCRIBE on the
cluster)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from pykraft.broker.handlers.log_dirs import describe_log_dirs, describe_log_dirs_handler
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from tests.broker.handler_support import pets_and_birds
from tests.broker.replica_harness import PETS0, PETS1, Cluster, batch, call, encode, services
from tests.broker.test_authorization import ADMIN, acl, authorizer, context

_Topic = DescribeLogDirsRequest.DescribableLogDirTopic
VOLUME = (1_000_000, 250_000)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Two log dirs; pets-0 and pets-1 led here, birds-0 followed, two batches on pets-0."""
    harness = Cluster(tmp_path, log_dirs=[tmp_path / "a", tmp_path / "b"])
    try:
        harness.start(*pets_and_birds(pets0_leader_epoch=4))
        harness.produce(PETS0, batch(b"a", b"b"))
        harness.produce(PETS0, batch(b"c"))
        yield harness
    finally:
        harness.close()


def describe(cluster: Cluster, topics: list[Any] | None, version: int = 4) -> Any:
    request = DescribeLogDirsRequest(version=version, topics=topics)
    body = call(
        describe_log_dirs_handler(services(cluster), disk_usage=lambda path: VOLUME),
        ApiKey.DESCRIBE_LOG_DIRS,
        version,
        encode(request, version),
    )
    assert body is not None
    return DescribeLogDirsResponse.decode(body, version=version)


def hosted(result: Any) -> dict[tuple[str, int], tuple[int, int, bool]]:
    return {
        (topic.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
        for topic in result.topics
        for p in topic.partitions
    }


def placement(cluster: Cluster) -> dict[str, list[tuple[str, int]]]:
    """Each dir's absolute path -> the partitions the log manager put there."""
    manager = cluster.log_manager
    found: dict[str, list[tuple[str, int]]] = {str(d.absolute()): [] for d in manager.log_dirs}
    for tp in manager.logs:
        log_dir = manager.log_dir_of(tp)
        assert log_dir is not None
        found[str(log_dir.absolute())].append((tp.topic, tp.partition))
    return found


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_null_topics_describes_every_partition_in_every_dir(cluster: Cluster, version: int) -> None:
    response = describe(cluster, None, version)
    if version >= 3:  # the top-level error code
        assert response.error_code == Errors.NONE
    by_dir = {result.log_dir: result for result in response.results}
    assert set(by_dir) == set(placement(cluster))
    sizes = {tp: log.size_in_bytes for tp, log in cluster.log_manager.logs.items()}
    assert sizes[PETS0] > 0 and sizes[PETS1] == 0
    for log_dir, partitions in placement(cluster).items():
        result = by_dir[log_dir]
        assert result.error_code == Errors.NONE
        expected = {(t, p): (sizes[PETS0] if (t, p) == ("pets", 0) else 0, 0, False)
                    for t, p in partitions}  # fmt: skip
        assert hosted(result) == expected
        if version >= 4:
            assert (result.total_bytes, result.usable_bytes) == VOLUME


def test_only_the_asked_partitions_and_no_empty_topics(cluster: Cluster) -> None:
    response = describe(cluster, [_Topic(topic="pets", partitions=[0, 7])])
    described = {key for result in response.results for key in hosted(result)}
    assert described == {("pets", 0)}
    names = {topic.name for result in response.results for topic in result.topics}
    assert names == {"pets"}  # birds is hosted but not asked: left out


def test_an_offline_dir_is_a_storage_error_with_nothing_else(cluster: Cluster) -> None:
    offline = cluster.log_manager.log_dir_of(PETS0)
    assert offline is not None
    cluster.log_manager.handle_log_dir_failure(offline, "disk gone")
    by_dir = {result.log_dir: result for result in describe(cluster, None).results}
    broken = by_dir[str(offline.absolute())]
    assert (broken.error_code, broken.topics) == (Errors.KAFKA_STORAGE_ERROR, [])
    assert (broken.total_bytes, broken.usable_bytes) == (-1, -1)  # the schema's default
    assert all(r.error_code == Errors.NONE for d, r in by_dir.items() if r is not broken)


def test_a_volume_that_cannot_be_read_is_unknown_server_error(cluster: Cluster) -> None:
    def failing(path: Path) -> tuple[int, int]:
        raise OSError("statvfs failed")

    request = DescribeLogDirsRequest(version=4, topics=None)
    response = describe_log_dirs(services(cluster), request, None, failing)
    assert {r.error_code for r in response.results} == {Errors.UNKNOWN_SERVER_ERROR}


def test_without_describe_on_the_cluster_nothing_is_listed(cluster: Cluster) -> None:
    request = DescribeLogDirsRequest(version=4, topics=None)
    refused = services(cluster, authorizer=authorizer(acl(AclOperation.DESCRIBE)))
    answer = describe_log_dirs(refused, request, context(ApiKey.DESCRIBE_LOG_DIRS, 4))
    assert (answer.error_code, answer.results) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])
    allowed = services(
        cluster,
        authorizer=authorizer(acl(AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER)),
    )
    answer = describe_log_dirs(allowed, request, context(ApiKey.DESCRIBE_LOG_DIRS, 4))
    assert answer.error_code == Errors.NONE and len(answer.results) == 2
    admin = describe_log_dirs(refused, request, context(ApiKey.DESCRIBE_LOG_DIRS, 4, ADMIN))
    assert admin.error_code == Errors.NONE  # a super user
