"""DescribeLogDirs (v0-v4; v0 has v1's layout) — Kafka's
``KafkaApis.handleDescribeLogDirsRequest`` over ``ReplicaManager.describeLogDirs``.

Without DESCRIBE on the cluster the answer lists no dir and carries CLUSTER_AUTHORIZATION_FAILED
in its top-level error (v3+; older versions just get nothing). Otherwise every configured log
dir (``log.dirs``, by absolute path, once each) gets one result: an offline dir is
KAFKA_STORAGE_ERROR and nothing else; an online one lists, per topic, the asked partitions it
holds (all of them when ``topics`` is null) with their size in bytes, ``offset_lag`` (the high
watermark past the log end: 0 for a current replica) and ``is_future_key`` false; a replica
being moved here (AlterReplicaLogDirs, KIP-113) is listed in its destination too, with
``is_future_key`` true and ``offset_lag`` the current log end past the future one; topics none
of whose partitions were asked are left out, as Kafka does. v4 adds the volume's
``total_bytes`` and ``usable_bytes`` (Kafka's ``FileStore`` ``getTotalSpace`` /
``getUsableSpace``); a dir whose volume cannot be read answers UNKNOWN_SERVER_ERROR (Kafka's
``Errors.forException`` of the IOException).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.log_dir_copier import offset_lag
from pykraft.storage.log_manager import LogManager
from pykraft.storage.topic_partition import TopicPartition

_Response: Any = response_class(ApiKey.DESCRIBE_LOG_DIRS)
_Result: Any = _Response.DescribeLogDirsResult
_Topic: Any = _Result.DescribeLogDirsTopic
_Partition: Any = _Topic.DescribeLogDirsPartition

# A log dir's volume -> (total bytes, usable bytes); ``shutil.disk_usage`` by default.
DiskUsage = Callable[[Path], tuple[int, int]]

# Java's Long.MAX_VALUE: Kafka's adjustForLargeFileSystems answers it for a negative size.
_LONG_MAX = 2**63 - 1


def _volume(path: Path) -> tuple[int, int]:
    usage = shutil.disk_usage(path)
    return usage.total, usage.free


def describe_log_dirs_handler(
    services: BrokerServices, disk_usage: DiskUsage = _volume
) -> ApiHandler:
    async def handle(context: RequestContext, request: Any) -> Any:
        return describe_log_dirs(services, request, context, disk_usage)

    return kafka_python_handler(handle)


def describe_log_dirs(
    services: BrokerServices,
    request: Any,
    context: RequestContext | None = None,
    disk_usage: DiskUsage = _volume,
) -> Any:
    """DESCRIBE on the cluster, else no results and CLUSTER_AUTHORIZATION_FAILED."""
    if context is not None and not services.authorizer.authorize(
        context, AclOperation.DESCRIBE, ResourceType.CLUSTER
    ):
        return _Response(
            version=request.version,
            throttle_time_ms=0,
            error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
            results=[],
        )
    log_manager = services.replica_manager.log_manager
    if request.topics is None:
        asked = frozenset(log_manager.logs)
    else:
        asked = frozenset(
            TopicPartition(topic.topic, index)
            for topic in request.topics
            for index in topic.partitions
        )
    results = [
        _describe_dir(log_manager, log_dir, asked, disk_usage)
        for log_dir in dict.fromkeys(log_manager.log_dirs)
    ]
    return _Response(
        version=request.version, throttle_time_ms=0, error_code=Errors.NONE, results=results
    )


def _describe_dir(
    log_manager: LogManager,
    log_dir: Path,
    asked: frozenset[TopicPartition],
    disk_usage: DiskUsage,
) -> Any:
    """One dir's result (Kafka ``ReplicaManager.describeLogDirs`` for one ``logDir``)."""
    path = str(log_dir.absolute())
    if log_dir in log_manager.offline_dirs:
        return _Result(error_code=Errors.KAFKA_STORAGE_ERROR, log_dir=path, topics=[])
    try:
        total_bytes, usable_bytes = disk_usage(log_dir)
    except OSError:
        return _Result(error_code=Errors.UNKNOWN_SERVER_ERROR, log_dir=path, topics=[])
    by_topic: dict[str, list[Any]] = {}
    for topic_partition, log in sorted(log_manager.logs.items()):
        if topic_partition not in asked or log_manager.log_dir_of(topic_partition) != log_dir:
            continue
        by_topic.setdefault(topic_partition.topic, []).append(
            _Partition(
                partition_index=topic_partition.partition,
                partition_size=log.size_in_bytes,
                offset_lag=max(log.high_watermark - log.log_end_offset, 0),
                is_future_key=False,
            )
        )
    for topic_partition, future in sorted(log_manager.future_logs.logs.items()):
        current = log_manager.get_log(topic_partition)
        if topic_partition not in asked or future.log_dir != log_dir or current is None:
            continue
        by_topic.setdefault(topic_partition.topic, []).append(
            _Partition(
                partition_index=topic_partition.partition,
                partition_size=future.log.size_in_bytes,
                offset_lag=offset_lag(current, future.log),
                is_future_key=True,
            )
        )
    return _Result(
        error_code=Errors.NONE,
        log_dir=path,
        topics=[_Topic(name=name, partitions=parts) for name, parts in by_topic.items()],
        total_bytes=_LONG_MAX if total_bytes < 0 else total_bytes,
        usable_bytes=_LONG_MAX if usable_bytes < 0 else usable_bytes,
    )
