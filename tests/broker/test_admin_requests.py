"""The admin requests read from kafka-python's objects into typed values."""

from __future__ import annotations

import uuid

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
)

from pykraft.broker.handlers.admin_requests import (
    CreatePartitionsRequestData,
    CreatePartitionsTopic,
    CreateTopicsRequestData,
    DeleteTopicsRequestData,
    DescribeClusterRequestData,
    create_partitions_request,
    create_topics_request,
    delete_topics_request,
    describe_cluster_request,
)
from pykraft.metadata.api.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
)

_New = CreateTopicsRequest.CreatableTopic


def test_create_topics_entries_are_the_controller_calls_new_topics() -> None:
    placed = _New(
        name="placed",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[_New.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])],
        configs=[_New.CreatableTopicConfig(name="cleanup.policy", value="compact")],
    )
    defaults = _New(
        name="plain", num_partitions=3, replication_factor=1, assignments=[], configs=[]
    )
    message = CreateTopicsRequest(
        version=5, topics=[placed, defaults], timeout_ms=5000, validate_only=True
    )
    assert create_topics_request(message) == CreateTopicsRequestData(
        version=5,
        validate_only=True,
        topics=(
            CreatableTopic(
                name="placed",
                assignments=(CreatableReplicaAssignment(0, (1, 2)),),
                configs=(CreatableTopicConfig("cleanup.policy", "compact"),),
            ),
            CreatableTopic(name="plain", num_partitions=3, replication_factor=1),
        ),
    )


def test_create_partitions_with_and_without_assignments() -> None:
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    assignment = topic.CreatePartitionsAssignment
    message = CreatePartitionsRequest(
        version=1,
        timeout_ms=5000,
        validate_only=False,
        topics=[
            topic(name="a", count=4, assignments=None),
            topic(name="b", count=3, assignments=[assignment(broker_ids=[2, 1])]),
        ],
    )
    assert create_partitions_request(message) == CreatePartitionsRequestData(
        version=1,
        validate_only=False,
        topics=(
            CreatePartitionsTopic(name="a", count=4, assignments=None),
            CreatePartitionsTopic(name="b", count=3, assignments=((2, 1),)),
        ),
    )


def test_delete_topics_by_name_before_v6_by_name_or_id_from_v6() -> None:
    old = DeleteTopicsRequest(version=5, timeout_ms=5000, topic_names=["a", "b"])
    assert delete_topics_request(old) == DeleteTopicsRequestData(
        version=5, topics=(("a", None), ("b", None))
    )
    topic_id = uuid.UUID(int=7)
    state = DeleteTopicsRequest.DeleteTopicState
    new = DeleteTopicsRequest(
        version=6,
        timeout_ms=5000,
        topics=[state(name=None, topic_id=topic_id), state(name="a", topic_id=uuid.UUID(int=0))],
    )
    assert delete_topics_request(new).topics == ((None, topic_id), ("a", uuid.UUID(int=0)))


def test_describe_cluster_v0_asks_for_brokers() -> None:
    v0 = DescribeClusterRequest(version=0, include_cluster_authorized_operations=False)
    assert describe_cluster_request(v0) == DescribeClusterRequestData(version=0, endpoint_type=1)
    v1 = DescribeClusterRequest(
        version=1, include_cluster_authorized_operations=False, endpoint_type=2
    )
    assert describe_cluster_request(v1).endpoint_type == 2
