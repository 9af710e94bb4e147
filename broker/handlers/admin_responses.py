"""The admin APIs' responses, built from small typed results at a request's version.

The counterpart of ``admin_requests.py`` (as ``group_responses.py`` is of ``group_requests.py``):
the admin handlers decide with the typed values below, and only the functions here touch
kafka-python's response classes (which the listener encodes). Version rules of the answers live
here: CreateTopics v5+ carries each new topic's configs (Kafka's ``CreatableTopicConfigs``).
The config APIs' answers are in ``config_messages.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import attrs

from pykraft.broker.config_describe import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, ConfigEntry
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID

# The CreateTopics v5+ read-back uses DescribeConfigs' entries and source ids.
__all__ = ["DEFAULT_CONFIG", "DYNAMIC_TOPIC_CONFIG", "ConfigEntry"]

_CreateTopics: Any = response_class(ApiKey.CREATE_TOPICS)
_DeleteTopics: Any = response_class(ApiKey.DELETE_TOPICS)
_CreatePartitions: Any = response_class(ApiKey.CREATE_PARTITIONS)
_DescribeCluster: Any = response_class(ApiKey.DESCRIBE_CLUSTER)


@attrs.frozen(kw_only=True)
class CreatedTopicResult:
    """One topic's CreateTopics answer; ``configs`` None unless read back (v5+)."""

    name: str
    error: Errors
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[ConfigEntry, ...] | None = None
    # Why the configs could not be read back (the topic was still created).
    topic_config_error: Errors = Errors.NONE


@attrs.frozen(kw_only=True)
class DeletedTopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    error: Errors
    message: str | None = None


@attrs.frozen(kw_only=True)
class PartitionsResult:
    """One topic's CreatePartitions answer."""

    name: str
    error: Errors
    message: str | None = None


@attrs.frozen(kw_only=True)
class ClusterBroker:
    node_id: int
    host: str
    port: int
    rack: str | None


@attrs.frozen(kw_only=True)
class DescribeClusterResult:
    error: Errors
    message: str | None
    endpoint_type: int
    cluster_id: str
    controller_id: int
    brokers: tuple[ClusterBroker, ...] = ()


def create_topics_response(version: int, results: Sequence[CreatedTopicResult]) -> Any:
    topic_class = _CreateTopics.CreatableTopicResult
    config_class = topic_class.CreatableTopicConfigs
    return _CreateTopics(
        version=version,
        throttle_time_ms=0,
        topics=[
            topic_class(
                name=r.name,
                topic_id=r.topic_id or ZERO_UUID,
                error_code=r.error,
                error_message=r.message,
                topic_config_error_code=r.topic_config_error,
                num_partitions=r.num_partitions,
                replication_factor=r.replication_factor,
                configs=None
                if r.configs is None
                else [
                    config_class(
                        name=c.name,
                        value=c.value,
                        read_only=False,
                        is_sensitive=False,
                        config_source=c.source,
                    )
                    for c in r.configs
                ],
            )
            for r in results
        ],
    )


def delete_topics_response(version: int, results: Sequence[DeletedTopicResult]) -> Any:
    result_class = _DeleteTopics.DeletableTopicResult
    return _DeleteTopics(
        version=version,
        throttle_time_ms=0,
        responses=[
            result_class(
                name=r.name,
                topic_id=r.topic_id or ZERO_UUID,
                error_code=r.error,
                error_message=r.message,
            )
            for r in results
        ],
    )


def create_partitions_response(version: int, results: Sequence[PartitionsResult]) -> Any:
    result_class = _CreatePartitions.CreatePartitionsTopicResult
    return _CreatePartitions(
        version=version,
        throttle_time_ms=0,
        results=[
            result_class(name=r.name, error_code=r.error, error_message=r.message) for r in results
        ],
    )


def describe_cluster_response(version: int, result: DescribeClusterResult) -> Any:
    broker_class = _DescribeCluster.DescribeClusterBroker
    return _DescribeCluster(
        version=version,
        throttle_time_ms=0,
        error_code=result.error,
        error_message=result.message,
        endpoint_type=result.endpoint_type,
        cluster_id=result.cluster_id,
        controller_id=result.controller_id,
        brokers=[
            broker_class(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in result.brokers
        ],
    )
