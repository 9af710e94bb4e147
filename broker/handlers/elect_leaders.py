"""ElectLeaders (v0-v2, KIP-183 / KIP-460): PREFERRED or UNCLEAN leader elections, forwarded to
the active controller.

Kafka 3.9's KRaft broker forwards ElectLeaders to the controller (``KafkaApis``:
``maybeForwardToController``), whose ``ControllerApis.handleElectLeaders`` checks ALTER on the
cluster and runs ``ReplicationControlManager.electLeaders``. Here the broker checks the client's
principal itself (the controller sees only the broker) and forwards the request as it is; the
controller answers per partition (``quorum/managers/leadership.py``):

* ELECTION_NOT_NEEDED — the preferred replica already leads (PREFERRED), or there is a leader
  (UNCLEAN);
* PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE — no replica may lead: not in
  the ISR (PREFERRED), or not alive (UNCLEAN);
* UNKNOWN_TOPIC_OR_PARTITION — no such topic or partition.

A null ``topic_partitions`` means every partition of every topic, and then partitions needing no
election are left out of the answer. A request refused as a whole — CLUSTER_AUTHORIZATION_FAILED,
an unknown election type (INVALID_REQUEST), an unreachable controller — is answered as Kafka's
``ElectLeadersRequest.getErrorResponse``: the top-level error (v1+) and that error on every
requested partition (none when every partition was asked for). v0 has no election type (always
PREFERRED) and no top-level error code: the per-partition codes carry it.
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.handlers.forwarding import bound_handler, forward_to_controller
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.admin import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
    TopicPartitions,
)
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

_Response = response_class(ApiKey.ELECT_LEADERS)
_TopicResult = _Response.ReplicaElectionResult
_PartitionResult = _TopicResult.PartitionResult


def elect_leaders_request(message: Any) -> ElectLeadersRequest:
    """The wire request as the controller's contract (v0's missing election type: PREFERRED)."""
    topic_partitions = (
        None
        if message.topic_partitions is None
        else tuple(
            TopicPartitions(topic=t.topic, partitions=tuple(t.partitions))
            for t in message.topic_partitions
        )
    )
    election_type = message.election_type if message.version >= 1 else ElectionType.PREFERRED
    return ElectLeadersRequest(election_type=election_type, topic_partitions=topic_partitions)


def refused(request: ElectLeadersRequest, error: ApiError) -> ElectLeadersResponse:
    """``ElectLeadersRequest.getErrorResponse``: ``error`` at the top and on every partition."""
    return ElectLeadersResponse(
        error,
        tuple(
            ReplicaElectionResult(
                topic.topic,
                tuple(PartitionResult(partition, error) for partition in topic.partitions),
            )
            for topic in request.topic_partitions or ()
        ),
    )


def encode_elect_leaders_response(version: int, response: ElectLeadersResponse) -> Any:
    return _Response(
        version=version,
        throttle_time_ms=0,
        error_code=response.error.code,
        replica_election_results=[
            _TopicResult(
                topic=result.topic,
                partition_result=[
                    _PartitionResult(
                        partition_id=p.partition_id,
                        error_code=p.error.code,
                        # Kafka's ApiError.NONE has no message.
                        error_message=None if p.error.is_success() else p.error.message,
                    )
                    for p in result.partition_results
                ],
            )
            for result in response.results
        ],
    )


async def elect_leaders(
    services: BrokerServices, context: RequestContext, message: Any
) -> ElectLeadersResponse:
    request = elect_leaders_request(message)

    async def call() -> ElectLeadersResponse:
        # Checked once the cluster permission is, as ``ControllerApis.handleElectLeaders`` does.
        if request.election_type not in tuple(ElectionType):
            error = f"Unknown election type {request.election_type}"
            return refused(request, ApiError.of(Errors.INVALID_REQUEST, error))
        return await services.controller.elect_leaders(request)

    answer = await forward_to_controller(services, context, AclOperation.ALTER, call)
    return refused(request, answer) if isinstance(answer, ApiError) else answer


async def _elect_leaders_encoded(
    services: BrokerServices, context: RequestContext, message: Any
) -> Any:
    return encode_elect_leaders_response(
        message.version, await elect_leaders(services, context, message)
    )


def elect_leaders_handler(services: BrokerServices) -> ApiHandler:
    return bound_handler(services, _elect_leaders_encoded)
