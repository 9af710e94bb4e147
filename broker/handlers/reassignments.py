"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) v0, forwarded to the
controller (KIP-455; Kafka's ``ControllerApis.handleAlterPartitionReassignments`` /
``handleListPartitionReassignments``).

Both need a cluster permission, checked here with the client's principal (the controller sees
the broker): ALTER to alter, DESCRIBE to list. A refusal or a controller that cannot answer
fails the whole request the way Kafka's ``getErrorResponse`` does: AlterPartitionReassignments
puts the error at the top and on every partition asked, ListPartitionReassignments at the top.
The controller answers per partition otherwise (INVALID_REPLICA_ASSIGNMENT,
UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS, ``quorum/managers/reassignment.py``).
The listing comes back whole and is narrowed here to the topics and partitions asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pykraft.broker.handlers.forwarding import bound_handlers, forward_to_controller
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.api.reassignments import (
    AlterPartitionReassignmentsRequest,
    ListReassignmentsTopic,
    ReassignablePartition,
    ReassignableTopic,
    select_reassignments,
)
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class

_Alter: Any = response_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
_List: Any = response_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)

# (topic, [(partition index, its error)]): one topic of an AlterPartitionReassignments answer.
_TopicErrors = tuple[str, Iterable[tuple[int, ApiError]]]


def reassignment_handlers(services: BrokerServices) -> dict[ApiKey, ApiHandler]:
    return bound_handlers(
        services,
        {
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
        },
    )


def _alter_request(request: Any) -> AlterPartitionReassignmentsRequest:
    return AlterPartitionReassignmentsRequest(
        tuple(
            ReassignableTopic(
                topic.name,
                tuple(
                    ReassignablePartition(
                        p.partition_index, None if p.replicas is None else tuple(p.replicas)
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
    )


def _alter_response(request: Any, error: ApiError, topics: Iterable[_TopicErrors]) -> Any:
    topic_type = _Alter.ReassignableTopicResponse
    partition_type = topic_type.ReassignablePartitionResponse
    return _Alter(
        version=request.version,
        throttle_time_ms=0,
        error_code=error.code,
        error_message=error.message,
        responses=[
            topic_type(
                name=name,
                partitions=[
                    partition_type(
                        partition_index=index,
                        error_code=partition_error.code,
                        error_message=partition_error.message,
                    )
                    for index, partition_error in partitions
                ],
            )
            for name, partitions in topics
        ],
    )


async def alter_partition_reassignments(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    answer = await forward_to_controller(
        services,
        context,
        AclOperation.ALTER,
        lambda: services.controller.alter_partition_reassignments(_alter_request(request)),
    )
    if isinstance(answer, ApiError):
        # Kafka's ``AlterPartitionReassignmentsRequest.getErrorResponse``.
        return _alter_response(
            request,
            answer,
            (
                (topic.name, ((p.partition_index, answer) for p in topic.partitions))
                for topic in request.topics
            ),
        )
    return _alter_response(
        request,
        answer.error,
        (
            (topic.name, ((p.partition_index, p.error) for p in topic.partitions))
            for topic in answer.responses
        ),
    )


async def list_partition_reassignments(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    everything = await forward_to_controller(
        services, context, AclOperation.DESCRIBE, services.controller.list_partition_reassignments
    )
    if isinstance(everything, ApiError):
        return _List(
            version=request.version,
            throttle_time_ms=0,
            error_code=everything.code,
            error_message=everything.message,
            topics=[],
        )
    asked = (
        None
        if request.topics is None
        else tuple(
            ListReassignmentsTopic(t.name, tuple(t.partition_indexes)) for t in request.topics
        )
    )
    listed = select_reassignments(everything, asked)
    topic_type = _List.OngoingTopicReassignment
    partition_type = topic_type.OngoingPartitionReassignment
    return _List(
        version=request.version,
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        topics=[
            topic_type(
                name=topic.name,
                partitions=[
                    partition_type(
                        partition_index=p.partition_index,
                        replicas=list(p.replicas),
                        adding_replicas=list(p.adding_replicas),
                        removing_replicas=list(p.removing_replicas),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in listed.topics
        ],
    )
