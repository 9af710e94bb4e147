"""DescribeTopicPartitions (v0, KIP-966): topics and their partitions from the broker's metadata
image, a page at a time — Kafka's ``DescribeTopicPartitionsRequestHandler`` over
``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse``.

Which topics: those named, or every topic for an empty list; in both cases only names at or
after the cursor's topic, in name order. A cursor whose topic is not among the named ones is an
invalid request: every named topic answers INVALID_REQUEST and nothing else
(``DescribeTopicPartitionsRequest.getErrorResponse``).

Authorization: DESCRIBE on each topic. Named topics the principal may not describe answer
TOPIC_AUTHORIZATION_FAILED (zero id, no partitions), after the described ones, whether they
exist or not; asked for every topic, they are left out.

Paging: at most ``min(max.request.partition.size.limit (2000), response_partition_limit)``
partitions. The cursor's topic starts at the cursor's partition (when the principal may describe
it), every other topic at 0. A topic cut short by the limit comes back with the partitions that
fit and ``next_cursor`` = (that topic, its first partition left out); a limit reached exactly at
a topic's end puts ``next_cursor`` at (the next topic, 0) — "if a partition is pointed in the
NextTopicPartition, it does not mean this topic exists". A named topic that does not exist
answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name); asked for
every topic there are none.

Each partition: the leader when it is registered with this listener (else -1, fenced or not, as
``getAliveEndpoint``), leader epoch, replicas and ISR unfiltered, offline replicas (not
registered, fenced, or without this listener), and KIP-966's eligible leader replicas and last
known ELR from the image (``KRaftMetadataCache.getPartitionMetadataForDescribeTopicResponse``):
empty ones are empty lists (``Replicas.toList``), not null. Each described topic carries its
KIP-430 authorized operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pykraft.broker.handlers.services import BrokerServices, topic_uuid
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import INTERNAL_TOPICS
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.auth.authorizer import operations_bitfield
from pykraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID
from pykraft.storage.topic_partition import validate_topic_name

# KafkaConfig's max.request.partition.size.limit (KIP-966), default 2000.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
NO_LEADER_ID = -1

_Response: Any = response_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
_Topic: Any = _Response.DescribeTopicPartitionsResponseTopic
_Partition: Any = _Topic.DescribeTopicPartitionsResponsePartition
_Cursor: Any = _Response.Cursor


def _offline(image: MetadataImage, broker_id: int, listener: str) -> bool:
    """``isReplicaOffline``: not registered, fenced, or without this listener."""
    broker = image.cluster.broker(broker_id)
    return broker is None or broker.fenced or broker.endpoint(listener) is None


def _leader_id(image: MetadataImage, leader: int, listener: str) -> int:
    """``getAliveEndpoint``: a registered leader with this listener (fenced or not)."""
    broker = image.cluster.broker(leader)
    return leader if broker is not None and broker.endpoint(listener) is not None else NO_LEADER_ID


def _partition(
    image: MetadataImage, index: int, partition: PartitionRegistration, listener: str
) -> Any:
    return _Partition(
        error_code=Errors.NONE.code,
        partition_index=index,
        leader_id=_leader_id(image, partition.leader, listener),
        leader_epoch=partition.leader_epoch,
        replica_nodes=list(partition.replicas),
        isr_nodes=list(partition.isr),
        eligible_leader_replicas=list(partition.elr),
        last_known_elr=list(partition.last_known_elr),
        offline_replicas=[r for r in partition.replicas if _offline(image, r, listener)],
    )


def _page_of(
    image: MetadataImage, topic: TopicImage, listener: str, start: int, limit: int
) -> tuple[list[Any], int | None]:
    """``getPartitionMetadataForDescribeTopicResponse``: up to ``limit`` partitions from
    ``start``, and the first index left out (None: the topic's end was reached)."""
    count = len(topic.partitions)
    upper = min(count, start + limit)
    partitions = [
        _partition(image, index, registration, listener)
        for index in range(start, upper)
        if (registration := topic.partitions.get(index)) is not None
    ]
    return partitions, (upper if upper < count else None)


def _missing(name: str) -> Any:
    try:
        validate_topic_name(name)
        error = Errors.UNKNOWN_TOPIC_OR_PARTITION
    except ValueError:
        error = Errors.INVALID_TOPIC_EXCEPTION
    return _Topic(
        error_code=error.code,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[],
    )


def describe_page(
    image: MetadataImage,
    names: Sequence[str],
    listener: str,
    cursor: tuple[str, int] | None,
    limit: int,
    *,
    report_missing: bool,
) -> tuple[list[Any], Any]:
    """The topics of one page (``names`` in order) and the next cursor (None: no more)."""
    topics: list[Any] = []
    remaining = limit
    for name in names:
        if remaining <= 0:
            return topics, _Cursor(topic_name=name, partition_index=0)
        topic = image.topics.by_name.get(name)
        if topic is None:
            if report_missing:
                topics.append(_missing(name))
            continue
        start = cursor[1] if cursor is not None and cursor[0] == name else 0
        partitions, next_index = _page_of(image, topic, listener, start, remaining)
        topics.append(
            _Topic(
                error_code=Errors.NONE.code,
                name=name,
                topic_id=topic_uuid(topic.topic_id),
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions,
            )
        )
        if next_index is not None:
            return topics, _Cursor(topic_name=name, partition_index=next_index)
        remaining -= len(partitions)
    return topics, None


def invalid_request(message: Any) -> Any:
    """``DescribeTopicPartitionsRequest.getErrorResponse`` for INVALID_REQUEST."""
    return _Response(
        version=message.version,
        throttle_time_ms=0,
        topics=[
            _Topic(
                error_code=Errors.INVALID_REQUEST.code,
                name=topic.name,
                topic_id=ZERO_UUID,
                is_internal=False,
                partitions=[],
            )
            for topic in message.topics
        ],
        next_cursor=None,
    )


def describe_topic_partitions(
    services: BrokerServices, context: RequestContext, message: Any
) -> Any:
    image = services.metadata()
    authorizer = services.authorizer
    cursor_topic = message.cursor.topic_name if message.cursor is not None else ""
    fetch_all = not message.topics
    requested: Iterable[str] = (
        image.topics.by_name.keys() if fetch_all else [t.name for t in message.topics]
    )
    names = {name for name in requested if name >= cursor_topic}
    if message.cursor is not None and not fetch_all and cursor_topic not in names:
        return invalid_request(message)

    def describable(name: str) -> bool:
        return authorizer.authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    authorized = [name for name in sorted(names) if describable(name)]
    refused = [] if fetch_all else [name for name in sorted(names) if name not in authorized]
    cursor = None
    if message.cursor is not None and describable(cursor_topic):
        cursor = (cursor_topic, message.cursor.partition_index)
    limit = min(MAX_REQUEST_PARTITION_SIZE_LIMIT, message.response_partition_limit)
    topics, next_cursor = describe_page(
        image, authorized, context.listener_name, cursor, limit, report_missing=not fetch_all
    )
    for topic in topics:
        topic.topic_authorized_operations = operations_bitfield(
            authorizer.authorized_operations(context, ResourceType.TOPIC, topic.name)
        )
    topics += [
        _Topic(
            error_code=Errors.TOPIC_AUTHORIZATION_FAILED.code,
            name=name,
            topic_id=ZERO_UUID,
            is_internal=False,
            partitions=[],
        )
        for name in refused
    ]
    return _Response(
        version=message.version, throttle_time_ms=0, topics=topics, next_cursor=next_cursor
    )


def describe_topic_partitions_handler(services: BrokerServices) -> ApiHandler:
    async def handle(context: RequestContext, message: Any) -> Any:
        return describe_topic_partitions(services, context, message)

    return kafka_python_handler(handle)
