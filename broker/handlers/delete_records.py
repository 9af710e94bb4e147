"""DeleteRecords (v0-v2) — Kafka's ``KafkaApis.handleDeleteRecordsRequest``.

Per partition: a topic the principal may not DELETE is TOPIC_AUTHORIZATION_FAILED, one the
metadata does not know is UNKNOWN_TOPIC_OR_PARTITION (both with low watermark -1); the rest go
to ``ReplicaManager.start_delete_records`` (``broker.delete_records``): the leader's log start
offset moves to ``offset`` (-1: the high watermark) and the answer waits, up to ``timeout_ms``,
until every live replica's log start offset has followed — the partition's low watermark, which
the answer carries. A partition named twice is deleted once, at the offset named last (Kafka
collects them into a map). The answer lists the topics in request order.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.replica.delete_records_waiters import DeleteRecordsResult
from pykraft.storage.topic_partition import TopicPartition

_Response: Any = response_class(ApiKey.DELETE_RECORDS)
_TopicResult: Any = _Response.DeleteRecordsTopicResult
_PartitionResult: Any = _TopicResult.DeleteRecordsPartitionResult


def delete_records_handler(services: BrokerServices) -> ApiHandler:
    async def handle(context: RequestContext, request: Any) -> Any:
        return await delete_records(services, request, context)

    return kafka_python_handler(handle)


async def delete_records(
    services: BrokerServices, request: Any, context: RequestContext | None = None
) -> Any:
    """DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (``handleDeleteRecordsRequest``)."""
    names = [topic.name for topic in request.topics]
    allowed = (
        frozenset(names)
        if context is None
        else services.authorizer.authorized(context, AclOperation.DELETE, ResourceType.TOPIC, names)
    )
    image = services.metadata()
    refused: dict[TopicPartition, DeleteRecordsResult] = {}
    offsets: dict[TopicPartition, int] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            topic_partition = TopicPartition(topic.name, partition.partition_index)
            if topic.name not in allowed:
                refused[topic_partition] = DeleteRecordsResult(
                    error=Errors.TOPIC_AUTHORIZATION_FAILED
                )
            elif not image.topics.contains(topic.name, partition.partition_index):
                refused[topic_partition] = DeleteRecordsResult(
                    error=Errors.UNKNOWN_TOPIC_OR_PARTITION
                )
            else:
                offsets[topic_partition] = partition.offset
    results = {**refused, **await _delete(services, offsets, request.timeout_ms)}
    return _response(request, results)


async def _delete(
    services: BrokerServices, offsets: dict[TopicPartition, int], timeout_ms: int
) -> dict[TopicPartition, DeleteRecordsResult]:
    if not offsets:
        return {}
    manager = services.replica_manager
    future: asyncio.Future[dict[TopicPartition, DeleteRecordsResult]] = (
        asyncio.get_running_loop().create_future()
    )

    def done(results: dict[TopicPartition, DeleteRecordsResult]) -> None:
        if not future.done():
            future.set_result(results)

    waiter_id = manager.start_delete_records(offsets, timeout_ms=timeout_ms, response_callback=done)
    try:
        return await future
    finally:
        if waiter_id is not None:
            manager.delayed_delete_records.forget(waiter_id)  # a no-op once answered


def _response(request: Any, results: dict[TopicPartition, DeleteRecordsResult]) -> Any:
    """One pass over the request (Kafka's ``groupBy``): a topic named in several entries is
    answered once, its partitions in first-named order."""
    indexes: dict[str, dict[int, None]] = {}
    for topic in request.topics:
        named = indexes.setdefault(topic.name, {})
        for partition in topic.partitions:
            named[partition.partition_index] = None
    topics = [
        _TopicResult(
            name=name,
            partitions=[
                _PartitionResult(
                    partition_index=index,
                    low_watermark=results[TopicPartition(name, index)].low_watermark,
                    error_code=results[TopicPartition(name, index)].error,
                )
                for index in partition_indexes
            ],
        )
        for name, partition_indexes in indexes.items()
    ]
    return _Response(version=request.version, throttle_time_ms=0, topics=topics)
