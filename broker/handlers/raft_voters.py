"""AddRaftVoter / RemoveRaftVoter (v0, KIP-853): change the controller quorum's voters, forwarded
to the active controller.

Kafka 3.9's broker forwards both (``KafkaApis``: ``forwardToControllerOrFail``);
``ControllerApis.handleAddRaftVoter`` / ``handleRemoveRaftVoter`` check ALTER on the cluster and
``KafkaRaftClient.handleAddVoterRequest`` / ``handleRemoveVoterRequest`` decide. Here the broker
checks the client's principal itself (the controller sees only the broker) and calls
``POST /v1/quorum/voters/add`` or ``/remove`` (``quorum/service_voters.py``, the decisions in
``quorum/voter_changes.py``). The answer is one error and its message:

* a refused principal: CLUSTER_AUTHORIZATION_FAILED, nothing forwarded;
* the controller's refusal with Kafka's code and message (INCONSISTENT_CLUSTER_ID,
  DUPLICATE_VOTER, VOTER_NOT_FOUND, REQUEST_TIMED_OUT, INVALID_REQUEST, ...);
* a controller that cannot answer: its error (NOT_CONTROLLER, REQUEST_TIMED_OUT);
* otherwise NONE with a null message.
"""

from __future__ import annotations

import uuid
from typing import Any

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.forwarding import bound_handler
from pykraft.broker.handlers.services import BrokerServices, topic_id_string
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.voters import (
    MAX_TIMEOUT_MS,
    AddVoterRequest,
    RemoveVoterRequest,
    VoterListener,
)
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID

_AddResponse = response_class(ApiKey.ADD_RAFT_VOTER)
_RemoveResponse = response_class(ApiKey.REMOVE_RAFT_VOTER)


def _directory_id(value: uuid.UUID | None) -> str:
    """kafka-python decodes the zero uuid (``ReplicaKey.NO_DIRECTORY_ID``) as None."""
    return topic_id_string(value if value is not None else ZERO_UUID)


def _response(cls: Any, version: int, error: Errors, message: str | None = None) -> Any:
    return cls(
        version=version,
        throttle_time_ms=0,
        error_code=error.code,
        error_message=None if error is Errors.NONE else message,
    )


async def add_raft_voter(services: BrokerServices, context: RequestContext, message: Any) -> Any:
    version = message.version
    if not services.authorizer.authorize_cluster(context, AclOperation.ALTER):
        return _response(_AddResponse, version, Errors.CLUSTER_AUTHORIZATION_FAILED)
    request = AddVoterRequest(
        cluster_id=message.cluster_id,
        # Kafka waits as long as asked; the controller's contract bounds the wait.
        timeout_ms=min(max(0, message.timeout_ms), MAX_TIMEOUT_MS),
        voter_id=message.voter_id,
        voter_directory_id=_directory_id(message.voter_directory_id),
        listeners=tuple(
            VoterListener(name=item.name, host=item.host, port=item.port)
            for item in message.listeners
        ),
    )
    try:
        await services.controller.add_raft_voter(request)
    except ControllerError as error:
        return _response(_AddResponse, version, error.code, error.message)
    return _response(_AddResponse, version, Errors.NONE)


async def remove_raft_voter(services: BrokerServices, context: RequestContext, message: Any) -> Any:
    version = message.version
    if not services.authorizer.authorize_cluster(context, AclOperation.ALTER):
        return _response(_RemoveResponse, version, Errors.CLUSTER_AUTHORIZATION_FAILED)
    request = RemoveVoterRequest(
        cluster_id=message.cluster_id,
        voter_id=message.voter_id,
        voter_directory_id=_directory_id(message.voter_directory_id),
    )
    try:
        await services.controller.remove_raft_voter(request)
    except ControllerError as error:
        return _response(_RemoveResponse, version, error.code, error.message)
    return _response(_RemoveResponse, version, Errors.NONE)


def add_raft_voter_handler(services: BrokerServices) -> ApiHandler:
    return bound_handler(services, add_raft_voter)


def remove_raft_voter_handler(services: BrokerServices) -> ApiHandler:
    return bound_handler(services, remove_raft_voter)
