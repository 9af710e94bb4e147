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

from typing import Any

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
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
from pykraft.protocol.errors import Errors

_Alter: Any = response_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
_List: Any = response_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)
_DENIED = "Cluster authorization failed."


def reassignment_handlers(services: BrokerServices) -> dict[ApiKey, ApiHandler]:
    async def alter(context: RequestContext, request: Any) -> Any:
        return await alter_partition_reassignments(services, context, request)

    async def list_(context: RequestContext, request: Any) -> Any:
        return await list_partition_reassignments(services, context, request)

    return {
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: kafka_python_handler(alter),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: kafka_python_handler(list_),
    }


def _refusal(
    services: BrokerServices, context: RequestContext, operation: AclOperation
) -> ApiError | None:
    if services.authorizer.authorize_cluster(context, operation):
        return None
    return ApiError(Errors.CLUSTER_AUTHORIZATION_FAILED, _DENIED)


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


def _alter_failed(request: Any, error: ApiError) -> Any:
    """Kafka's ``AlterPartitionReassignmentsRequest.getErrorResponse``."""
    topic_type = _Alter.ReassignableTopicResponse
    partition_type = topic_type.ReassignablePartitionResponse
    return _Alter(
        version=request.version,
        throttle_time_ms=0,
        error_code=error.code,
        error_message=error.message,
        responses=[
            topic_type(
                name=topic.name,
                partitions=[
                    partition_type(
                        partition_index=p.partition_index,
                        error_code=error.code,
                        error_message=error.message,
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


async def alter_partition_reassignments(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    refusal = _refusal(services, context, AclOperation.ALTER)
    if refusal is not None:
        return _alter_failed(request, refusal)
    try:
        answer = await services.controller.alter_partition_reassignments(_alter_request(request))
    except ControllerError as error:
        return _alter_failed(request, ApiError(error.code, error.message))
    topic_type = _Alter.ReassignableTopicResponse
    partition_type = topic_type.ReassignablePartitionResponse
    return _Alter(
        version=request.version,
        throttle_time_ms=0,
        error_code=answer.error.code,
        error_message=answer.error.message,
        responses=[
            topic_type(
                name=topic.name,
                partitions=[
                    partition_type(
                        partition_index=p.partition_index,
                        error_code=p.error.code,
                        error_message=p.error.message,
                    )
                    for p in topic.partitions
                ],
            )
            for topic in answer.responses
        ],
    )


async def list_partition_reassignments(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    refusal = _refusal(services, context, AclOperation.DESCRIBE)
    if refusal is None:
        try:
            everything = await services.controller.list_partition_reassignments()
        except ControllerError as error:
            refusal = ApiError(error.code, error.message)
    if refusal is not None:
        return _List(
            version=request.version,
            throttle_time_ms=0,
            error_code=refusal.code,
            error_message=refusal.message,
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
