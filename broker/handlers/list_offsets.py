"""ListOffsets (v1-v9) — Kafka's ``KafkaApis.handleListOffsetRequestV1AndAbove``; v0 is
``list_offsets_v0.py``.

Per partition: ``timestamp`` -2 (earliest) answers the log start offset, -1 (latest) the last
offset a consumer may read (the last stable offset for READ_COMMITTED, the high watermark for
READ_UNCOMMITTED, the log end for a replica: Kafka's ``lastFetchableOffset``), -3 the first offset
holding the largest timestamp (KIP-734), -4 the earliest local offset (= earliest: no tiered
storage), -5 the last tiered offset (KIP-1005; with no tiered storage Kafka answers offset -1,
timestamp -1, leader epoch -1 once the leader checks pass), and a real timestamp the first
offset whose record timestamp is at or after it, found through the time index. No such offset
answers offset -1 and timestamp -1 with no error. A special timestamp the request's version
predates (-3 before v7, -4 before v8, -5 before v9, any other negative one) answers
UNSUPPORTED_VERSION (``timestampMinSupportedVersion``).

``replica_id`` -1 is a consumer: only the leader answers, within its ``isolation_level``;
-2 (a debugging tool) may ask any replica and sees up to the log end. Errors per partition:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
(``current_leader_epoch``, v4+), OFFSET_NOT_AVAILABLE (a new leader whose high watermark has not
reached its epoch start), INVALID_REQUEST for a partition named twice, CORRUPT_MESSAGE when the
batch a timestamp lookup must read is damaged or inflates past its bound (Kafka answers
``Errors.forException`` of what reading it threw; the bound is pykraft's, issue 9).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pykraft.broker.handlers.list_offsets_v0 import list_offsets_v0
from pykraft.broker.handlers.services import BrokerServices, authorized_topics
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.broker.partition import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    FetchIsolation,
    PartitionError,
)
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.replica.partition_state import error_for
from pykraft.storage.log_reader import EARLIEST_TIMESTAMP
from pykraft.storage.log_validator import CorruptLogError
from pykraft.storage.topic_partition import TopicPartition

LATEST_TIERED_TIMESTAMP = -5
# KafkaApis' timestampMinSupportedVersion: each special timestamp from the version that added it.
_TIMESTAMP_MIN_VERSION = {-2: 1, -1: 1, -3: 7, -4: 8, LATEST_TIERED_TIMESTAMP: 9}

_Response: Any = response_class(ApiKey.LIST_OFFSETS)
_TopicResponse: Any = _Response.ListOffsetsTopicResponse
_PartitionResponse: Any = _TopicResponse.ListOffsetsPartitionResponse


def list_offsets_handler(services: BrokerServices) -> ApiHandler:
    async def handle(request: RequestContext, message: Any) -> Any:
        if message.version == 0:
            return list_offsets_v0(services, message, request)
        return list_offsets(services, message, request)

    return kafka_python_handler(handle)


def list_offsets(
    services: BrokerServices, request: Any, context: RequestContext | None = None
) -> Any:
    """DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED (``handleListOffsetRequest``)."""
    is_consumer = request.replica_id == CONSUMER_REPLICA_ID
    isolation = FetchIsolation.of(-1, request.isolation_level) if is_consumer else None
    named = Counter(
        TopicPartition(topic.name, p.partition_index)
        for topic in request.topics
        for p in topic.partitions
    )
    described = authorized_topics(
        services, context, AclOperation.DESCRIBE, (t.name for t in request.topics)
    )
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            topic_partition = TopicPartition(topic.name, partition.partition_index)
            if topic.name not in described:
                error = Errors.TOPIC_AUTHORIZATION_FAILED
                partitions.append(_error(partition.partition_index, error))
                continue
            if named[topic_partition] > 1:
                partitions.append(_error(partition.partition_index, Errors.INVALID_REQUEST))
                continue
            if partition.timestamp < 0 and request.version < _TIMESTAMP_MIN_VERSION.get(
                partition.timestamp, 1 << 15
            ):
                partitions.append(_error(partition.partition_index, Errors.UNSUPPORTED_VERSION))
                continue
            partitions.append(
                _lookup(services, topic_partition, partition, isolation, request.replica_id)
            )
        topics.append(_TopicResponse(name=topic.name, partitions=partitions))
    return _Response(version=request.version, throttle_time_ms=0, topics=topics)


def _lookup(
    services: BrokerServices,
    topic_partition: TopicPartition,
    partition: Any,
    isolation: FetchIsolation | None,
    replica_id: int,
) -> Any:
    # No tiered storage: the last tiered offset is "none" once the leader checks pass
    # (UnifiedLog.fetchOffsetByTimestamp without remote storage).
    tiered = partition.timestamp == LATEST_TIERED_TIMESTAMP
    try:
        found = services.replica_manager.fetch_offset_for_timestamp(
            topic_partition,
            EARLIEST_TIMESTAMP if tiered else partition.timestamp,
            isolation=isolation,
            current_leader_epoch=partition.current_leader_epoch,
            fetch_only_from_leader=replica_id != DEBUGGING_REPLICA_ID,
        )
    except PartitionError as error:
        return _error(partition.partition_index, error.error)
    except CorruptLogError as error:
        return _error(partition.partition_index, error_for(error))
    if found is None or tiered:
        return _error(partition.partition_index, Errors.NONE)
    return _PartitionResponse(
        partition_index=partition.partition_index,
        error_code=Errors.NONE,
        timestamp=found.timestamp,
        offset=found.offset,
        leader_epoch=-1 if found.leader_epoch is None else found.leader_epoch,
    )


def _error(partition_index: int, error: Errors) -> Any:
    """Kafka's ``buildErrorResponse``: unknown timestamp, offset and epoch."""
    return _PartitionResponse(
        partition_index=partition_index,
        error_code=error,
        timestamp=-1,
        offset=-1,
        leader_epoch=-1,
    )
