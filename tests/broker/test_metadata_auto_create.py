"""Auto-creating internal topics through Metadata (auto.create.topics.enable, on by default):
Kafka's AutoTopicCreationManager.creatableTopic creates ``__consumer_offsets`` with the group
coordinator's partitions, replication factor and configs, never with num.partitions — a
1-partition offsets topic would put every group on one coordinator and break the
``hash(group) % offsets.topic.num.partitions`` mapping. Mirrors AutoTopicCreationManagerTest
.testCreateOffsetTopic / testCreateTxnTopic / testCreateNonInternalTopic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.broker.handlers.find_coordinator import CoordinatorTopic
from pykraft.broker.handlers.metadata import metadata_handler
from pykraft.metadata.auth.acl import ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import Cluster, InProcessController, call, encode, services

OFFSETS = CoordinatorTopic(
    key_type=0,
    topic="__consumer_offsets",
    partitions=5,
    replication_factor=2,
    configs={"cleanup.policy": "compact", "min.insync.replicas": "2"},
    partition_for=lambda key: 0,
    resource_type=ResourceType.GROUP,
    refusal=Errors.GROUP_AUTHORIZATION_FAILED,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path))


def metadata(
    cluster: Cluster, topics: list[str], internal: tuple[CoordinatorTopic, ...], controller: Any
) -> Any:
    request = MetadataRequest(
        version=12,
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=True,
    )
    options = {"controller": controller, "auto_create_topics_enable": True, "num_partitions": 1}
    handler = metadata_handler(services(cluster, **options), internal)
    body = call(handler, ApiKey.METADATA, 12, encode(request, 12))
    assert body is not None
    return MetadataResponse.decode(body, version=12)


def test_the_offsets_topic_is_created_as_its_coordinator_wants_it(cluster: Cluster) -> None:
    controller = InProcessController(cluster)
    answer = metadata(cluster, ["__consumer_offsets", "plain"], (OFFSETS,), controller)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("__consumer_offsets", Errors.LEADER_NOT_AVAILABLE),
        ("plain", Errors.LEADER_NOT_AVAILABLE),
    ]
    created: dict[str, Any] = {topic.name: topic for _, topic in controller.calls}  # type: ignore[attr-defined]
    offsets = created["__consumer_offsets"]
    assert (offsets.num_partitions, offsets.replication_factor) == (5, 2)
    # The coordinator's configs as they are: Kafka lowers none of them.
    assert {c.name: c.value for c in offsets.configs} == {
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
    }
    assert (created["plain"].num_partitions, created["plain"].replication_factor) == (1, 1)
    assert len(cluster.image.topics.by_name["__consumer_offsets"].partitions) == 5


def test_an_internal_topic_without_its_coordinator_is_not_created(cluster: Cluster) -> None:
    controller = InProcessController(cluster)
    answer = metadata(cluster, ["__transaction_state"], (OFFSETS,), controller)
    assert answer.topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert controller.calls == []


@pytest.mark.parametrize("name", ["__consumer_offsets", "plain"])
def test_too_few_alive_brokers_is_invalid_replication_factor(cluster: Cluster, name: str) -> None:
    # AutoTopicCreationManager.filterCreatableTopics / hasEnoughLiveBrokers: two brokers are
    # alive, the replication factor is 3 -> INVALID_REPLICATION_FACTOR, nothing asked. An
    # offsets topic created at a smaller factor while the cluster starts would keep it.
    controller = InProcessController(cluster)
    request = MetadataRequest(
        version=12,
        topics=[MetadataRequest.MetadataRequestTopic(name=name)],
        allow_auto_topic_creation=True,
    )
    options = {
        "controller": controller,
        "auto_create_topics_enable": True,
        "num_partitions": 1,
        "default_replication_factor": 3,
    }
    wide = attrs.evolve(OFFSETS, replication_factor=3)
    handler = metadata_handler(services(cluster, **options), (wide,))
    body = call(handler, ApiKey.METADATA, 12, encode(request, 12))
    assert body is not None
    answer = MetadataResponse.decode(body, version=12)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        (name, Errors.INVALID_REPLICATION_FACTOR)
    ]
    assert controller.calls == []
