"""DescribeQuorum (v0-v2) on the broker: forwarded to the controller for the metadata log only,
as KafkaRaftClient.handleDescribeQuorumRequest / hasValidTopicPartition and
ControllerApis.handleDescribeQuorum (DESCRIBE on the cluster) answer; KafkaRaftClientTest
.testDescribeQuorumWithInvalid* and DescribeQuorumRequestTest's error responses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from pykraft.broker.handlers import ControllerError, broker_handlers
from pykraft.broker.handlers.describe_quorum import describe_quorum_handler
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.api.quorum import DescribeQuorumResponse as Quorum
from pykraft.metadata.api.quorum import Listener, QuorumNode, ReplicaState
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import Cluster, InProcessController, call, encode, services
from tests.broker.test_authorization import acl, authorizer, dispatch

QUORUM = Quorum(
    leader_id=1,
    leader_epoch=4,
    high_watermark=120,
    voters=(
        ReplicaState(
            replica_id=1, log_end_offset=120, last_fetch_timestamp=5, last_caught_up_timestamp=5
        ),
        ReplicaState(replica_id=2, log_end_offset=120, last_caught_up_timestamp=5),
        ReplicaState(replica_id=3),
    ),
    observers=(ReplicaState(replica_id=10, log_end_offset=119),),
    nodes=(QuorumNode(node_id=1, listeners=(Listener(name="CONTROLLER", host="c1", port=9093),)),),
)


class QuorumController(InProcessController):
    def __init__(self, cluster: Cluster, failure: ControllerError | None = None) -> None:
        super().__init__(cluster)
        self.failure = failure

    async def describe_quorum(self) -> Quorum:
        self.calls.append(("describe_quorum", None))
        if self.failure is not None:
            raise self.failure
        return QUORUM


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path))


def request(version: int, topics: dict[str, list[int]] | None = None) -> Any:
    topics = {"__cluster_metadata": [0]} if topics is None else topics
    topic = DescribeQuorumRequest.TopicData
    return DescribeQuorumRequest(
        version=version,
        topics=[
            topic(
                topic_name=name,
                partitions=[topic.PartitionData(partition_index=i) for i in partitions],
            )
            for name, partitions in topics.items()
        ],
    )


def describe(cluster: Cluster, version: int, message: Any, controller: Any) -> Any:
    handler = describe_quorum_handler(services(cluster, controller=controller))
    body = call(handler, ApiKey.DESCRIBE_QUORUM, version, encode(message, version))
    assert body is not None
    return DescribeQuorumResponse.decode(body, version=version)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_metadata_partition_is_described_at_every_version(
    cluster: Cluster, version: int
) -> None:
    answer = describe(cluster, version, request(version), QuorumController(cluster))
    assert answer.error_code == Errors.NONE
    [topic] = answer.topics
    [partition] = topic.partitions
    assert (topic.topic_name, partition.partition_index, partition.error_code) == (
        "__cluster_metadata", 0, Errors.NONE,
    )  # fmt: skip
    assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (1, 4, 120)
    voters = [(v.replica_id, v.log_end_offset) for v in partition.current_voters]
    assert voters == [(1, 120), (2, 120), (3, -1)]
    assert [(o.replica_id, o.log_end_offset) for o in partition.observers] == [(10, 119)]
    if version >= 1:
        times = [
            (v.last_fetch_timestamp, v.last_caught_up_timestamp) for v in partition.current_voters
        ]
        assert times == [(5, 5), (-1, 5), (-1, -1)]
    if version >= 2:
        nodes = [
            (node.node_id, [(e.name, e.host, e.port) for e in node.listeners])
            for node in answer.nodes
        ]
        assert nodes == [(1, [("CONTROLLER", "c1", 9093)])]
        assert partition.current_voters[0].replica_directory_id in (None, ZERO_UUID)


@pytest.mark.parametrize(
    "topics",
    [
        {"__cluster_metadata": [1]},
        {"pets": [0]},
        {"__cluster_metadata": [0, 0]},
        {"__cluster_metadata": [0], "pets": [0]},
    ],
)
def test_anything_but_the_metadata_partition_is_unknown(
    cluster: Cluster, topics: dict[str, list[int]]
) -> None:
    controller = QuorumController(cluster)
    answer = describe(cluster, 2, request(2, topics), controller)
    assert answer.error_code == Errors.NONE
    errors = {
        (t.topic_name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions
    }
    assert errors == {
        (name, index): Errors.UNKNOWN_TOPIC_OR_PARTITION
        for name, indexes in topics.items()
        for index in indexes
    }
    assert controller.calls == []


@pytest.mark.parametrize("version", [0, 2])
def test_a_controller_failure_is_the_top_level_error(cluster: Cluster, version: int) -> None:
    failing = QuorumController(
        cluster, ControllerError("NOT_CONTROLLER", "No controller is active right now")
    )
    answer = describe(cluster, version, request(version), failing)
    assert (answer.error_code, answer.topics) == (Errors.NOT_CONTROLLER, [])
    if version >= 2:
        assert answer.error_message == "No controller is active right now"


def test_describe_on_the_cluster_is_required(cluster: Cluster) -> None:
    def apis(*bindings: Any) -> tuple[KafkaApis, QuorumController]:
        controller = QuorumController(cluster)
        kafka_apis = KafkaApis()
        kafka_apis.register_all(
            broker_handlers(
                services(cluster, controller=controller, authorizer=authorizer(*bindings))
            )
        )
        return kafka_apis, controller

    refused, controller = apis(
        acl(AclOperation.DESCRIBE_CONFIGS, "kafka-cluster", ResourceType.CLUSTER)
    )
    answer = DescribeQuorumResponse.decode(
        dispatch(refused, ApiKey.DESCRIBE_QUORUM, 2, request(2)), version=2
    )
    assert (answer.error_code, answer.topics) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])
    assert controller.calls == []
    allowed, _ = apis(acl(AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER))
    answer = DescribeQuorumResponse.decode(
        dispatch(allowed, ApiKey.DESCRIBE_QUORUM, 2, request(2)), version=2
    )
    assert answer.error_code == Errors.NONE
