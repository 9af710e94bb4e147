"""Admin handlers: CreateTopics, DeleteTopics, CreatePartitions and DescribeConfigs forwarded to
an in-process controller running the real QuorumController (so errors and messages are the
controller's), DescribeCluster from the image. kafka-python encodes and decodes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
)

from pykraft.broker.config_describe import DYNAMIC_DEFAULT_BROKER_CONFIG
from pykraft.broker.handlers import ControllerError
from pykraft.broker.handlers.admin import admin_handlers
from pykraft.broker.handlers.admin_responses import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG
from pykraft.broker.handlers.services import topic_uuid
from pykraft.metadata.api.topics import CreatableTopic, CreatableTopicResult
from pykraft.metadata.records import ConfigRecord, ConfigResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import (
    CLUSTER_ID,
    LOCAL,
    OTHER,
    PETS_ID,
    Cluster,
    InProcessController,
    call,
    encode,
    pets_led_here,
    services,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(
        Cluster(tmp_path),
        *pets_led_here(),
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="pets",
            name="retention.ms",
            value="60000",
        ),
    )


def admin(
    cluster: Cluster,
    api_key: ApiKey,
    version: int,
    request: Any,
    response_cls: Any,
    controller: Any = None,
) -> Any:
    overrides = {} if controller is None else {"controller": controller}
    handler = admin_handlers(services(cluster, **overrides))[api_key]
    body = call(handler, api_key, version, encode(request, version))
    assert body is not None
    return response_cls.decode(body, version=version)


# ------------------------------------------------------------------ CreateTopics

_New = CreateTopicsRequest.CreatableTopic


def create_topics(
    cluster: Cluster,
    version: int,
    *topics: Any,
    validate_only: bool = False,
    controller: Any = None,
) -> Any:
    request = CreateTopicsRequest(
        version=version, topics=list(topics), timeout_ms=5000, validate_only=validate_only
    )
    return admin(cluster, ApiKey.CREATE_TOPICS, version, request, CreateTopicsResponse, controller)


def new_topic(
    name: str,
    partitions: int = 3,
    replication_factor: int = 1,
    configs: Mapping[str, str] | None = None,
) -> Any:
    return _New(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        assignments=[],
        configs=[_New.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_at_every_version(cluster: Cluster, version: int) -> None:
    response = create_topics(cluster, version, new_topic("fresh", configs={"retention.ms": "1"}))
    [result] = response.topics
    assert (result.name, result.error_code) == ("fresh", Errors.NONE)
    created = cluster.image.topics.by_name["fresh"]
    assert len(created.partitions) == 3
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        sources = {c.name: (c.value, c.config_source) for c in result.configs}
        assert sources["retention.ms"] == ("1", DYNAMIC_TOPIC_CONFIG)
        assert sources["cleanup.policy"] == ("delete", DEFAULT_CONFIG)
    if version >= 7:
        assert result.topic_id == topic_uuid(created.topic_id)
    # This broker now hosts the partitions the controller placed on it.
    hosted = [
        p
        for p in range(3)
        if cluster.replica_manager.get_partition(TopicPartition("fresh", p)) is not None
    ]
    assert hosted


def test_create_topics_reads_back_the_cluster_default_as_its_source(cluster: Cluster) -> None:
    # CreatableTopicConfigs: a value from the cluster-wide dynamic default says so.
    cluster.publish(
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name="",
            name="message.max.bytes",
            value="2000",
        )
    )
    [result] = create_topics(cluster, 7, new_topic("sized")).topics
    sources = {c.name: (c.value, c.config_source) for c in result.configs}
    assert sources["max.message.bytes"] == ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert sources["retention.ms"] == ("604800000", DEFAULT_CONFIG)


def test_create_topics_errors_come_from_the_controller(cluster: Cluster) -> None:
    response = create_topics(
        cluster,
        7,
        new_topic("pets"),
        new_topic("zero", partitions=0),
        new_topic("wide", replication_factor=5),
        new_topic("twice"),
        new_topic("twice"),
    )
    results = {(t.name, t.error_code) for t in response.topics}
    assert results == {
        ("pets", Errors.TOPIC_ALREADY_EXISTS),
        ("zero", Errors.INVALID_PARTITIONS),
        ("wide", Errors.INVALID_REPLICATION_FACTOR),
        ("twice", Errors.INVALID_REQUEST),  # Kafka: "Duplicate topic name."
    }
    assert all(t.error_message for t in response.topics)
    failed = next(t for t in response.topics if t.name == "pets")
    assert (failed.num_partitions, failed.replication_factor) == (-1, -1)
    assert "twice" not in cluster.image.topics.by_name


def test_create_topics_validate_only_creates_nothing(cluster: Cluster) -> None:
    response = create_topics(cluster, 7, new_topic("fresh"), validate_only=True)
    assert response.topics[0].error_code == Errors.NONE
    assert "fresh" not in cluster.image.topics.by_name


class UnreachableController:
    """A ControllerClient whose every call fails the way an unreachable quorum does."""

    def __init__(self, error: str) -> None:
        self.error = error

    async def create_topic(
        self, topic: CreatableTopic, *, validate_only: bool
    ) -> CreatableTopicResult:
        raise ControllerError(self.error, "no controller answered")

    async def delete_topic(self, name: str) -> Any:
        raise ControllerError(self.error, "no controller answered")

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool,
    ) -> None:
        raise ControllerError(self.error, "no controller answered")

    async def describe_configs(self, resource_type: str, resource_name: str) -> Mapping[str, str]:
        raise ControllerError(self.error, "no controller answered")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("REQUEST_TIMED_OUT", Errors.REQUEST_TIMED_OUT),
        ("NOT_CONTROLLER", Errors.NOT_CONTROLLER),
        ("SOMETHING_ELSE", Errors.UNKNOWN_SERVER_ERROR),
    ],
)
def test_controller_failures_map_to_kafka_codes(
    cluster: Cluster, name: str, expected: Errors
) -> None:
    controller = UnreachableController(name)
    response = create_topics(cluster, 7, new_topic("fresh"), controller=controller)
    assert (response.topics[0].error_code, response.topics[0].error_message) == (
        expected,
        "no controller answered",
    )


def test_a_failed_config_read_back_still_reports_the_topic(cluster: Cluster) -> None:
    class NoConfigs(InProcessController):
        async def describe_configs(
            self, resource_type: str, resource_name: str
        ) -> Mapping[str, str]:
            raise ControllerError("REQUEST_TIMED_OUT", "configs unavailable")

    response = create_topics(cluster, 7, new_topic("fresh"), controller=NoConfigs(cluster))
    [result] = response.topics
    assert result.error_code == Errors.NONE
    assert result.topic_config_error_code == Errors.REQUEST_TIMED_OUT
    assert "fresh" in cluster.image.topics.by_name


# ------------------------------------------------------------------ DeleteTopics


def delete_topics(cluster: Cluster, version: int, *topics: Any) -> Any:
    if version >= 6:
        request = DeleteTopicsRequest(
            version=version,
            timeout_ms=5000,
            topics=[
                DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=t)
                if not isinstance(t, str)
                else DeleteTopicsRequest.DeleteTopicState(name=t)
                for t in topics
            ],
        )
    else:
        request = DeleteTopicsRequest(version=version, timeout_ms=5000, topic_names=list(topics))
    response = admin(cluster, ApiKey.DELETE_TOPICS, version, request, DeleteTopicsResponse)
    return [(r.name, r.error_code) for r in response.responses], response


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_at_every_version(cluster: Cluster, version: int) -> None:
    results, response = delete_topics(cluster, version, "pets", "nope")
    assert results == [("pets", Errors.NONE), ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    if version >= 6:
        assert response.responses[0].topic_id == topic_uuid(PETS_ID)
    assert "pets" not in cluster.image.topics.by_name
    assert cluster.replica_manager.get_partition(TopicPartition("pets", 0)) is None
    assert not (cluster.log_dir / "pets-0").exists()


def test_delete_topics_by_id(cluster: Cluster) -> None:
    unknown = topic_uuid("0hHJ3X5ZQ-CFfQ5xgpj90w")
    results, _ = delete_topics(cluster, 6, topic_uuid(PETS_ID), unknown)
    assert results == [("pets", Errors.NONE), (None, Errors.UNKNOWN_TOPIC_ID)]


def test_delete_the_same_topic_twice_in_one_request(cluster: Cluster) -> None:
    results, _ = delete_topics(cluster, 5, "pets", "pets")
    assert results == [("pets", Errors.INVALID_REQUEST), ("pets", Errors.INVALID_REQUEST)]
    assert "pets" in cluster.image.topics.by_name


# ------------------------------------------------------------------ CreatePartitions


def create_partitions(
    cluster: Cluster, version: int, counts: dict[str, int], validate_only: bool = False
) -> list[tuple[str, int]]:
    request = CreatePartitionsRequest(
        version=version,
        timeout_ms=5000,
        validate_only=validate_only,
        topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=n, count=c, assignments=None)
            for n, c in counts.items()
        ],
    )
    response = admin(cluster, ApiKey.CREATE_PARTITIONS, version, request, CreatePartitionsResponse)
    return [(r.name, r.error_code) for r in response.results]


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_at_every_version(cluster: Cluster, version: int) -> None:
    assert create_partitions(cluster, version, {"pets": 3, "nope": 2}) == [
        ("pets", Errors.NONE),
        ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert len(cluster.image.topics.by_name["pets"].partitions) == 3


def test_create_partitions_errors_and_validate_only(cluster: Cluster) -> None:
    assert create_partitions(cluster, 3, {"pets": 1}) == [("pets", Errors.INVALID_PARTITIONS)]
    assert create_partitions(cluster, 3, {"pets": 4}, validate_only=True) == [("pets", Errors.NONE)]
    assert len(cluster.image.topics.by_name["pets"].partitions) == 1


# ------------------------------------------------------------------ DescribeCluster


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(cluster: Cluster, version: int) -> None:
    request = DescribeClusterRequest(version=version, include_cluster_authorized_operations=False)
    response = admin(cluster, ApiKey.DESCRIBE_CLUSTER, version, request, DescribeClusterResponse)
    assert (response.error_code, response.cluster_id, response.controller_id) == (
        Errors.NONE,
        CLUSTER_ID,
        LOCAL,
    )
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (LOCAL, "broker1.local", 9091, None),
        (OTHER, "broker2.local", 9092, "rack-b"),
    ]


def test_describe_cluster_for_controllers_is_unsupported_on_a_broker(cluster: Cluster) -> None:
    request = DescribeClusterRequest(
        version=1, include_cluster_authorized_operations=False, endpoint_type=2
    )
    response = admin(cluster, ApiKey.DESCRIBE_CLUSTER, 1, request, DescribeClusterResponse)
    assert response.error_code == Errors.UNSUPPORTED_ENDPOINT_TYPE
    assert "CONTROLLER" in response.error_message
