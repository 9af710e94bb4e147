"""AlterPartitionReassignments / ListPartitionReassignments v0 through ``KafkaApis.dispatch``
over the real controller core (``InProcessController``): Kafka's
``ControllerApisTest.testAlterPartitionReassignments*`` shapes — per-partition errors, the
cluster ALTER / DESCRIBE checks with ``getErrorResponse``'s error on every partition, and the
listing narrowed to what was asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.auth.acl import AclBinding, AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class
from pykraft.protocol.errors import Errors
from tests.broker.handler_support import apis_over, pets_and_birds, started_cluster
from tests.broker.replica_harness import LOCAL, OTHER, Cluster, InProcessController
from tests.broker.test_authorization import ADMIN, CAROL, acl, authorizer, dispatch

_Alter: Any = request_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
_List: Any = request_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_and_birds(0))


def apis_with(cluster: Cluster, *bindings: AclBinding) -> tuple[KafkaApis, InProcessController]:
    controller = InProcessController(cluster)
    return apis_over(cluster, controller, authorizer(*bindings)), controller


def alter(apis: KafkaApis, principal: Any, *targets: tuple[str, int, list[int] | None]) -> Any:
    topics: dict[str, list[Any]] = {}
    for name, index, replicas in targets:
        topics.setdefault(name, []).append(
            _Alter.ReassignableTopic.ReassignablePartition(partition_index=index, replicas=replicas)
        )
    request = _Alter(
        version=0,
        timeout_ms=60000,
        topics=[_Alter.ReassignableTopic(name=n, partitions=p) for n, p in topics.items()],
    )
    body = dispatch(apis, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, request, principal)
    return decode_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)


def listing(apis: KafkaApis, principal: Any, topics: list[tuple[str, list[int]]] | None) -> Any:
    wire = (
        None
        if topics is None
        else [
            _List.ListPartitionReassignmentsTopics(name=n, partition_indexes=p) for n, p in topics
        ]
    )
    request = _List(version=0, timeout_ms=60000, topics=wire)
    body = dispatch(apis, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, request, principal)
    return decode_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, body)


def errors(answer: Any) -> list[tuple[str, int, int]]:
    return [
        (t.name, p.partition_index, p.error_code) for t in answer.responses for p in t.partitions
    ]


def test_alter_answers_per_partition_and_list_shows_the_move(cluster: Cluster) -> None:
    apis, controller = apis_with(cluster)
    # pets-0 (LOCAL) moves to OTHER, which must catch up first; pets-1 (LOCAL, OTHER, both in
    # sync) shrinks to OTHER at once; pets-9 does not exist; broker 7 is not registered.
    answer = alter(
        apis,
        ADMIN,
        ("pets", 0, [OTHER]),
        ("pets", 1, [OTHER]),
        ("pets", 9, [LOCAL]),
        ("birds", 0, [OTHER, LOCAL, 7]),
    )
    assert answer.error_code == 0
    assert errors(answer) == [
        ("pets", 0, Errors.NONE),
        ("pets", 1, Errors.NONE),
        ("pets", 9, Errors.UNKNOWN_TOPIC_OR_PARTITION),
        ("birds", 0, Errors.INVALID_REPLICA_ASSIGNMENT),
    ]
    pets = cluster.image.topics.by_name["pets"].partitions
    assert (pets[1].replicas, pets[1].isr) == ((OTHER,), (OTHER,))
    everything = listing(apis, ADMIN, None)
    assert everything.error_code == 0
    (topic,) = everything.topics
    (moving,) = topic.partitions
    assert (topic.name, moving.partition_index) == ("pets", 0)
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == (
        [OTHER, LOCAL],
        [OTHER],
        [LOCAL],
    )
    assert listing(apis, ADMIN, [("pets", [1]), ("nope", [0])]).topics == []
    assert len(listing(apis, ADMIN, [("pets", [1, 0])]).topics) == 1
    # Cancel it: back to (LOCAL); a second cancel finds nothing to cancel.
    assert errors(alter(apis, ADMIN, ("pets", 0, None))) == [("pets", 0, Errors.NONE)]
    assert cluster.image.topics.by_name["pets"].partitions[0].replicas == (LOCAL,)
    assert errors(alter(apis, ADMIN, ("pets", 0, None))) == [
        ("pets", 0, Errors.NO_REASSIGNMENT_IN_PROGRESS)
    ]
    assert listing(apis, ADMIN, None).topics == []
    assert [call for call, _ in controller.calls].count("alter_partition_reassignments") == 3


def test_alter_without_cluster_alter_fails_every_partition_and_forwards_nothing(
    cluster: Cluster,
) -> None:
    apis, controller = apis_with(
        cluster, acl(AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER)
    )
    answer = alter(apis, CAROL, ("pets", 0, [OTHER]), ("pets", 1, None))
    assert answer.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert errors(answer) == [
        ("pets", 0, Errors.CLUSTER_AUTHORIZATION_FAILED),
        ("pets", 1, Errors.CLUSTER_AUTHORIZATION_FAILED),
    ]
    assert controller.calls == []
    # DESCRIBE on the cluster is what listing needs.
    assert listing(apis, CAROL, None).error_code == 0


def test_list_without_cluster_describe(cluster: Cluster) -> None:
    apis, controller = apis_with(cluster)
    answer = listing(apis, CAROL, None)
    assert (answer.error_code, answer.topics) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])
    assert controller.calls == []
