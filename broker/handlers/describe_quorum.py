"""DescribeQuorum (v0-v2, KIP-595 / KIP-836 / KIP-853): the metadata quorum, from the active
controller.

Kafka 3.9's broker forwards DescribeQuorum to the controller (``KafkaApis``:
``forwardToControllerOrFail``); ``ControllerApis.handleDescribeQuorum`` checks DESCRIBE on the
cluster and ``KafkaRaftClient.handleDescribeQuorumRequest`` answers from the Raft leader's state.
Here the broker checks the client's principal itself (the controller sees only the broker), asks
the active controller (``GET /v1/quorum/describe``; ``quorum/describe_quorum.py`` says which
values pysyncobj lets it give and where it answers Kafka's -1), and answers:

* a refused principal: top-level CLUSTER_AUTHORIZATION_FAILED and no topics
  (``DescribeQuorumRequest.getErrorResponse``);
* anything but exactly one topic ``__cluster_metadata`` with exactly partition 0: every named
  partition UNKNOWN_TOPIC_OR_PARTITION (``hasValidTopicPartition``,
  ``getPartitionLevelErrorResponse``), nothing forwarded;
* a controller that cannot answer: its error at the top level (NOT_CONTROLLER while no leader
  is known, REQUEST_TIMED_OUT);
* otherwise the leader, its epoch, the high watermark, the voters and the observers (the
  brokers); v1+ with fetch and caught-up times, v2 with the voters' listeners (``nodes``) and
  directory ids (a voter added by AddRaftVoter has its own, KIP-853; static voters and brokers
  have none: Kafka's zero uuid, ``ReplicaKey.NO_DIRECTORY_ID``).
"""

from __future__ import annotations

import uuid
from typing import Any

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.services import BrokerServices, topic_uuid
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.api.quorum import DescribeQuorumResponse, ReplicaState
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0

_Response = response_class(ApiKey.DESCRIBE_QUORUM)
_Topic = _Response.TopicData
_Partition = _Topic.PartitionData
_Replica = _Partition.ReplicaState
_Node = _Response.Node
_Listener = _Node.Listener


def is_metadata_partition(message: Any) -> bool:
    """``KafkaRaftClient.hasValidTopicPartition``: one topic, the metadata log's, partition 0."""
    if len(message.topics) != 1:
        return False
    [topic] = message.topics
    return topic.topic_name == METADATA_TOPIC and [p.partition_index for p in topic.partitions] == [
        METADATA_PARTITION
    ]


def top_level_error(version: int, error: ApiError) -> Any:
    return _Response(
        version=version,
        error_code=error.code,
        error_message=error.message,
        topics=[],
        nodes=[],
    )


def partition_level_error(version: int, message: Any, error: Errors) -> Any:
    """``DescribeQuorumRequest.getPartitionLevelErrorResponse``."""
    return _Response(
        version=version,
        error_code=Errors.NONE.code,
        error_message=None,
        topics=[
            _Topic(
                topic_name=topic.topic_name,
                partitions=[
                    _Partition(
                        partition_index=p.partition_index,
                        error_code=error.code,
                        error_message=None,
                        leader_id=-1,
                        leader_epoch=-1,
                        high_watermark=-1,
                        current_voters=[],
                        observers=[],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in message.topics
        ],
        nodes=[],
    )


def _directory_id(text: str) -> uuid.UUID:
    try:
        return topic_uuid(text)
    except ValueError:
        return ZERO_UUID


def _replica(replica: ReplicaState) -> Any:
    return _Replica(
        replica_id=replica.replica_id,
        replica_directory_id=_directory_id(replica.replica_directory_id),
        log_end_offset=replica.log_end_offset,
        last_fetch_timestamp=replica.last_fetch_timestamp,
        last_caught_up_timestamp=replica.last_caught_up_timestamp,
    )


def encode_describe_quorum_response(version: int, quorum: DescribeQuorumResponse) -> Any:
    """``DescribeQuorumResponse.singletonResponse``."""
    return _Response(
        version=version,
        error_code=Errors.NONE.code,
        error_message=None,
        topics=[
            _Topic(
                topic_name=METADATA_TOPIC,
                partitions=[
                    _Partition(
                        partition_index=METADATA_PARTITION,
                        error_code=Errors.NONE.code,
                        error_message=None,
                        leader_id=quorum.leader_id,
                        leader_epoch=quorum.leader_epoch,
                        high_watermark=quorum.high_watermark,
                        current_voters=[_replica(r) for r in quorum.voters],
                        observers=[_replica(r) for r in quorum.observers],
                    )
                ],
            )
        ],
        nodes=[
            _Node(
                node_id=node.node_id,
                listeners=[
                    _Listener(name=listener.name, host=listener.host, port=listener.port)
                    for listener in node.listeners
                ],
            )
            for node in quorum.nodes
        ],
    )


async def describe_quorum(services: BrokerServices, context: RequestContext, message: Any) -> Any:
    version = message.version
    if not services.authorizer.authorize(context, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return top_level_error(version, ApiError.of(Errors.CLUSTER_AUTHORIZATION_FAILED))
    if not is_metadata_partition(message):
        return partition_level_error(version, message, Errors.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        quorum = await services.controller.describe_quorum()
    except ControllerError as error:
        return top_level_error(version, ApiError.of(error.code, error.message))
    return encode_describe_quorum_response(version, quorum)


def describe_quorum_handler(services: BrokerServices) -> ApiHandler:
    async def handle(context: RequestContext, message: Any) -> Any:
        return await describe_quorum(services, context, message)

    return kafka_python_handler(handle)
