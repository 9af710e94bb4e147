"""ListOffsets v0 — Kafka's ``KafkaApis.handleListOffsetRequestV0``.

Per partition: a topic the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED; a
``timestamp`` below -2 (the newer special values, KIP-734/KIP-405) answers UNSUPPORTED_VERSION;
otherwise the leader (any replica for the debugging replica id -2) answers up to
``max_num_offsets`` offsets in ``old_style_offsets``, newest first, found by
``storage.legacy_offsets.legacy_offsets_before`` — a consumer (replica id -1) never past the
high watermark. Partition errors are Kafka's (UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR). Unlike v1+, a partition named twice is answered
twice (v0 has no duplicate check in Kafka), from one look at its log: work grows with the
distinct partitions and timestamps named, not with the entries (``_Lookup``).
"""

from __future__ import annotations

from typing import Any

import attrs

from pykraft.broker.handlers.services import BrokerServices, authorized_topics
from pykraft.broker.network import RequestContext
from pykraft.broker.partition import CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID, PartitionError
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.legacy_offsets import (
    MAX_LEGACY_OFFSETS,
    LegacyOffsetEntry,
    legacy_offset_entries,
    legacy_offsets_before,
)
from pykraft.storage.log_reader import EARLIEST_TIMESTAMP
from pykraft.storage.topic_partition import TopicPartition

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
    lookup = _Lookup(services, request.replica_id)
    topics = []
    for topic in request.topics:
        partitions = [
            lookup.answer(topic.name, partition)
            if topic.name in described
            else _answer(partition.partition_index, Errors.TOPIC_AUTHORIZATION_FAILED)
            for partition in topic.partitions
        ]
        topics.append(_TopicResponse(name=topic.name, partitions=partitions))
    return _Response(version=0, topics=topics)


class _Lookup:
    """One request's answers. v0 has no duplicate check, so one request may name a partition
    thousands of times: each partition's log is looked at once (its segments' times may stat
    files) and each ``(partition, timestamp, count)`` answered once."""

    def __init__(self, services: BrokerServices, replica_id: int) -> None:
        self._services = services
        self._replica_id = replica_id
        self._now_ms = services.wall_clock_ms()
        self._logs: dict[TopicPartition, _LogView | Errors] = {}
        self._answers: dict[tuple[TopicPartition, int, int], tuple[Errors, list[int]]] = {}

    def answer(self, topic: str, partition: Any) -> Any:
        index = partition.partition_index
        if partition.timestamp < EARLIEST_TIMESTAMP:
            # "For v0 requests, negative timestamps only support LATEST_TIMESTAMP (-1) and
            # EARLIEST_TIMESTAMP (-2)."
            return _answer(index, Errors.UNSUPPORTED_VERSION)
        if partition.max_num_offsets < 0:
            # Kafka allocates an array of that size and answers what the failure maps to.
            return _answer(index, Errors.UNKNOWN_SERVER_ERROR)
        topic_partition = TopicPartition(topic, index)
        count = min(partition.max_num_offsets, MAX_LEGACY_OFFSETS)
        key = (topic_partition, partition.timestamp, count)
        if key not in self._answers:
            self._answers[key] = self._offsets(topic_partition, partition.timestamp, count)
        error, offsets = self._answers[key]
        return _answer(index, error, offsets)

    def _offsets(
        self, topic_partition: TopicPartition, timestamp: int, count: int
    ) -> tuple[Errors, list[int]]:
        if topic_partition not in self._logs:
            self._logs[topic_partition] = self._log(topic_partition)
        log = self._logs[topic_partition]
        if isinstance(log, Errors):
            return log, []
        offsets = legacy_offsets_before(
            log.entries,
            high_watermark=log.high_watermark,
            timestamp=timestamp,
            max_num_offsets=count,
            is_from_consumer=self._replica_id == CONSUMER_REPLICA_ID,
        )
        return Errors.NONE, offsets

    def _log(self, topic_partition: TopicPartition) -> _LogView | Errors:
        try:
            hosted = self._services.replica_manager.partition_or_error(topic_partition)
            # Kafka's ``localLogWithEpochOrThrow``: the leader unless a debugging tool asks.
            hosted.fetch_offset_for_timestamp(
                EARLIEST_TIMESTAMP,
                isolation=None,
                current_leader_epoch=-1,
                fetch_only_from_leader=self._replica_id != DEBUGGING_REPLICA_ID,
            )
        except PartitionError as error:
            return error.error
        log = hosted.log
        segments = log.segments
        entries = legacy_offset_entries(
            [(segment.base_offset, segment.largest_timestamp_ms()) for segment in segments],
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            active_segment_empty=segments[-1].size == 0,
            now_ms=self._now_ms,
        )
        return _LogView(entries=entries, high_watermark=log.high_watermark)


@attrs.frozen(kw_only=True)
class _LogView:
    entries: tuple[LegacyOffsetEntry, ...]
    high_watermark: int


def _answer(partition_index: int, error: Errors, offsets: list[int] | None = None) -> Any:
    return _PartitionResponse(
        partition_index=partition_index, error_code=error, old_style_offsets=offsets or []
    )
