"""OffsetsForLeaderEpoch (v0-v4) — Kafka's ``KafkaApis.handleOffsetForLeaderEpochRequest``.

For each partition, the end offset of the largest leader epoch at or below the requested one,
from the leader's leader-epoch cache (``LeaderEpochFileCache.endOffsetFor``): followers use it to
find where their log diverged (KIP-101/KIP-279, the path before Fetch v12's DivergingEpoch), and
consumers to validate their position after a leader change (KIP-320).

As in Kafka's ``ReplicaManager.lastOffsetForLeaderEpoch``, only the leader answers (whoever
asks): per partition FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a ``current_leader_epoch``
older / newer than the leader's, NOT_LEADER_OR_FOLLOWER on a broker that is not the leader or
does not host a partition the metadata knows, UNKNOWN_TOPIC_OR_PARTITION otherwise. An epoch
the cache cannot place (above every cached epoch, or an empty cache) answers leader epoch -1 and
end offset -1 with no error. Partitions are answered in request order, topics grouped as asked.
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

_Response: Any = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
_TopicResult: Any = _Response.OffsetForLeaderTopicResult
_EpochEndOffset: Any = _TopicResult.EpochEndOffset


def offsets_for_leader_epoch_handler(services: BrokerServices) -> ApiHandler:
    async def handle(request: RequestContext, message: Any) -> Any:
        return offsets_for_leader_epoch(services, message, request)

    return kafka_python_handler(handle)


def offsets_for_leader_epoch(
    services: BrokerServices, request: Any, context: RequestContext | None = None
) -> Any:
    """``handleOffsetForLeaderEpochRequest``: a follower (replica_id >= 0, v3+) needs
    CLUSTER_ACTION, else every partition is TOPIC_AUTHORIZATION_FAILED; a client needs DESCRIBE
    on each topic."""
    authorizer = services.authorizer
    names = [topic.topic for topic in request.topics]
    described: frozenset[str]
    if context is None:
        described = frozenset(names)
    elif getattr(request, "replica_id", -1) >= 0:
        follower = authorizer.authorize_cluster(context, AclOperation.CLUSTER_ACTION)
        described = frozenset(names) if follower else frozenset()
    else:
        described = authorizer.authorized(context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            if topic.topic not in described:
                partitions.append(
                    _EpochEndOffset(
                        error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                        partition=partition.partition,
                        leader_epoch=-1,
                        end_offset=-1,
                    )
                )
                continue
            answer = services.replica_manager.last_offset_for_leader_epoch(
                TopicPartition(topic.topic, partition.partition),
                partition.current_leader_epoch,
                partition.leader_epoch,
            )
            partitions.append(
                _EpochEndOffset(
                    error_code=answer.error,
                    partition=partition.partition,
                    leader_epoch=answer.leader_epoch,
                    end_offset=answer.end_offset,
                )
            )
        topics.append(_TopicResult(topic=topic.topic, partitions=partitions))
    return _Response(version=request.version, throttle_time_ms=0, topics=topics)
