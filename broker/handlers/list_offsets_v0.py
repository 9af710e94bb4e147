"""ListOffsets v0 — Kafka's ``KafkaApis.handleListOffsetRequestV0``.

Per partition: a topic the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED; a
``timestamp`` below -2 (the newer special values, KIP-734/KIP-405) answers UNSUPPORTED_VERSION;
otherwise the leader (any replica for the debugging replica id -2) answers up to
``max_num_offsets`` offsets in ``old_style_offsets``, newest first, found by
``storage.legacy_offsets.legacy_offsets_before`` — a consumer (replica id -1) never past the
high watermark. Partition errors are Kafka's (UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR). Unlike v1+, a partition named twice is answered
twice (v0 has no duplicate check in Kafka).
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.handlers.services import BrokerServices, authorized_topics
from pykraft.broker.network import RequestContext
from pykraft.broker.partition import DEBUGGING_REPLICA_ID, PartitionError
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.legacy_offsets import EARLIEST_TIMESTAMP, legacy_offsets_before
from pykraft.storage.topic_partition import TopicPartition

CONSUMER_REPLICA_ID = -1

_Response: Any = response_class(ApiKey.LIST_OFFSETS)
_TopicResponse: Any = _Response.ListOffsetsTopicResponse
_PartitionResponse: Any = _TopicResponse.ListOffsetsPartitionResponse


def list_offsets_v0(
    services: BrokerServices, request: Any, context: RequestContext | None = None
) -> Any:
    """The v0 answer; ``request`` is kafka-python's ListOffsetsRequest at v0."""
    assert request.version == 0, request.version
    described = authorized_topics(
        services, context, AclOperation.DESCRIBE, (t.name for t in request.topics)
    )
    topics = []
    for topic in request.topics:
        partitions = [
            _partition(services, request.replica_id, topic.name, partition)
            if topic.name in described
            else _answer(partition.partition_index, Errors.TOPIC_AUTHORIZATION_FAILED)
            for partition in topic.partitions
        ]
        topics.append(_TopicResponse(name=topic.name, partitions=partitions))
    return _Response(version=0, topics=topics)


def _partition(services: BrokerServices, replica_id: int, topic: str, partition: Any) -> Any:
    index = partition.partition_index
    if partition.timestamp < EARLIEST_TIMESTAMP:
        # "For v0 requests, negative timestamps only support LATEST_TIMESTAMP (-1) and
        # EARLIEST_TIMESTAMP (-2)."
        return _answer(index, Errors.UNSUPPORTED_VERSION)
    if partition.max_num_offsets < 0:
        # Kafka allocates an array of that size and answers what the failure maps to.
        return _answer(index, Errors.UNKNOWN_SERVER_ERROR)
    try:
        hosted = services.replica_manager.partition_or_error(TopicPartition(topic, index))
        # Kafka's ``localLogWithEpochOrThrow``: the leader unless a debugging tool asks.
        hosted.fetch_offset_for_timestamp(
            EARLIEST_TIMESTAMP,
            isolation=None,
            current_leader_epoch=-1,
            fetch_only_from_leader=replica_id != DEBUGGING_REPLICA_ID,
        )
    except PartitionError as error:
        return _answer(index, error.error)
    log = hosted.log
    offsets = legacy_offsets_before(
        log.segments,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        high_watermark=log.high_watermark,
        timestamp=partition.timestamp,
        max_num_offsets=partition.max_num_offsets,
        now_ms=services.wall_clock_ms(),
        is_from_consumer=replica_id == CONSUMER_REPLICA_ID,
    )
    return _answer(index, Errors.NONE, offsets)


def _answer(partition_index: int, error: Errors, offsets: list[int] | None = None) -> Any:
    return _PartitionResponse(
        partition_index=partition_index, error_code=error, old_style_offsets=offsets or []
    )
