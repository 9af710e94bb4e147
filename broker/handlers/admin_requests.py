"""The admin requests as small typed values, read once from kafka-python's objects.

The counterpart of ``group_requests.py`` for CreateTopics, DeleteTopics, CreatePartitions
and DescribeCluster: the handlers work on these values, not on kafka-python's
version-dependent objects. A CreateTopics entry is already the controller's ``CreatableTopic``.
Version rules applied here: DeleteTopics v6+ names each topic by name or by id, earlier versions
by name only; DescribeCluster v1 carries an endpoint type, v0 asks for brokers (KIP-919).
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from pykraft.metadata.api.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
)


@attrs.frozen(kw_only=True)
class CreateTopicsRequestData:
    version: int
    validate_only: bool
    topics: tuple[CreatableTopic, ...]


@attrs.frozen(kw_only=True)
class DeleteTopicsRequestData:
    version: int
    # (name, topic id) per topic: v6+ may give the id alone (name None); earlier, names only.
    topics: tuple[tuple[str | None, uuid.UUID | None], ...]


@attrs.frozen(kw_only=True)
class CreatePartitionsTopic:
    name: str
    count: int
    # One broker-id list per new partition, or None: the controller places them.
    assignments: tuple[tuple[int, ...], ...] | None


@attrs.frozen(kw_only=True)
class CreatePartitionsRequestData:
    version: int
    validate_only: bool
    topics: tuple[CreatePartitionsTopic, ...]


BROKER_ENDPOINT_TYPE = 1


@attrs.frozen(kw_only=True)
class DescribeClusterRequestData:
    version: int
    endpoint_type: int
    # KIP-430: answer the cluster's authorized operations.
    include_cluster_authorized_operations: bool = False


def create_topics_request(message: Any) -> CreateTopicsRequestData:
    return CreateTopicsRequestData(
        version=message.version,
        validate_only=bool(message.validate_only),
        topics=tuple(
            CreatableTopic(
                name=topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignments=tuple(
                    CreatableReplicaAssignment(a.partition_index, tuple(a.broker_ids))
                    for a in topic.assignments
                ),
                configs=tuple(
                    CreatableTopicConfig(config.name, config.value) for config in topic.configs
                ),
            )
            for topic in message.topics
        ),
    )


def create_partitions_request(message: Any) -> CreatePartitionsRequestData:
    return CreatePartitionsRequestData(
        version=message.version,
        validate_only=bool(message.validate_only),
        topics=tuple(
            CreatePartitionsTopic(
                name=topic.name,
                count=topic.count,
                assignments=None
                if topic.assignments is None
                else tuple(tuple(a.broker_ids) for a in topic.assignments),
            )
            for topic in message.topics
        ),
    )


def delete_topics_request(message: Any) -> DeleteTopicsRequestData:
    version = message.version
    if version >= 6:
        topics = tuple((t.name, t.topic_id) for t in message.topics)
    else:
        topics = tuple((name, None) for name in message.topic_names)
    return DeleteTopicsRequestData(version=version, topics=topics)


def describe_cluster_request(message: Any) -> DescribeClusterRequestData:
    version = message.version
    endpoint_type = message.endpoint_type if version >= 1 else BROKER_ENDPOINT_TYPE
    return DescribeClusterRequestData(
        version=version,
        endpoint_type=endpoint_type,
        include_cluster_authorized_operations=bool(message.include_cluster_authorized_operations),
    )
