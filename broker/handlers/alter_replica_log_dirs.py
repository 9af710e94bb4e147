"""AlterReplicaLogDirs (v0-v2; v0 has v1's layout; KIP-113) — Kafka's
``KafkaApis.handleAlterReplicaLogDirsRequest`` over ``ReplicaManager.alterReplicaLogDirs``.

ALTER on the cluster, else every asked partition answers CLUSTER_AUTHORIZATION_FAILED (Kafka
answers each partition with the error; nothing moves). Otherwise each partition gets the answer
of ``broker.log_dir_mover.alter_replica_log_dir``: NONE once the move is under way (or is a
no-op), LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE or INVALID_TOPIC_EXCEPTION.
Results are grouped by topic in request order, a partition named twice answered once (the last
destination wins, as Kafka's map of partition to dir).
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.log_dir_mover import alter_replica_log_dir
from pykraft.broker.network import RequestContext
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

_Response: Any = response_class(ApiKey.ALTER_REPLICA_LOG_DIRS)
_TopicResult: Any = _Response.AlterReplicaLogDirTopicResult
_PartitionResult: Any = _TopicResult.AlterReplicaLogDirPartitionResult


def alter_replica_log_dirs_handler(services: BrokerServices) -> ApiHandler:
    async def handle(context: RequestContext, request: Any) -> Any:
        return alter_replica_log_dirs(services, request, context)

    return kafka_python_handler(handle)


def alter_replica_log_dirs(
    services: BrokerServices, request: Any, context: RequestContext | None = None
) -> Any:
    """Each partition's answer; CLUSTER_AUTHORIZATION_FAILED for all without ALTER."""
    wanted: dict[TopicPartition, str] = {}
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                wanted[TopicPartition(topic.name, index)] = log_dir.path
    allowed = context is None or services.authorizer.authorize(
        context, AclOperation.ALTER, ResourceType.CLUSTER
    )
    now_ms = services.wall_clock_ms()
    by_topic: dict[str, list[Any]] = {}
    for tp, destination in wanted.items():
        if allowed:
            error = alter_replica_log_dir(services.replica_manager, tp, destination, now_ms)
        else:
            error = Errors.CLUSTER_AUTHORIZATION_FAILED
        by_topic.setdefault(tp.topic, []).append(
            _PartitionResult(partition_index=tp.partition, error_code=error)
        )
    return _Response(
        version=request.version,
        throttle_time_ms=0,
        results=[
            _TopicResult(topic_name=name, partitions=parts) for name, parts in by_topic.items()
        ],
    )
