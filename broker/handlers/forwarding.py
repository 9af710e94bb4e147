"""What the handlers that forward a Kafka admin API to the active controller share.

Kafka 3.9's KRaft broker forwards these APIs (``KafkaApis.maybeForwardToController``) and the
controller authorizes them (``ControllerApis``: ``authHelper.authorizeClusterOperation``). Here
the controller sees only the broker, so the broker checks the client's principal on the cluster
before it forwards: ``forward_to_controller`` answers CLUSTER_AUTHORIZATION_FAILED, or the
controller's answer, or the controller's error (a refusal or an unreachable controller) as an
``ApiError``; each handler then shapes the error as its API's ``getErrorResponse`` does.
``bound_handler(s)`` register handlers that take the ``BrokerServices``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors

T = TypeVar("T")

# A handler of kafka-python's request object that needs the broker's services.
ServicesHandler = Callable[[BrokerServices, RequestContext, Any], Awaitable[Any]]

# Kafka's ``ClusterAuthorizationException`` message.
CLUSTER_DENIED = ApiError(Errors.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


def bound_handler(services: BrokerServices, handle: ServicesHandler) -> ApiHandler:
    """``handle`` with ``services`` bound, as ``KafkaApis`` registers it."""

    async def call(context: RequestContext, message: Any) -> Any:
        return await handle(services, context, message)

    return kafka_python_handler(call)


def bound_handlers(
    services: BrokerServices, handlers: Mapping[ApiKey, ServicesHandler]
) -> dict[ApiKey, ApiHandler]:
    return {api_key: bound_handler(services, handle) for api_key, handle in handlers.items()}


async def forward_to_controller(
    services: BrokerServices,
    context: RequestContext,
    operation: AclOperation,
    call: Callable[[], Awaitable[T]],
) -> T | ApiError:
    """``operation`` on the cluster for the client's principal, then ``call()`` (the
    controller's answer); or why not: CLUSTER_AUTHORIZATION_FAILED (nothing is forwarded) or
    the ``ControllerError`` it raised."""
    if not services.authorizer.authorize_cluster(context, operation):
        return CLUSTER_DENIED
    try:
        return await call()
    except ControllerError as error:
        return ApiError(error.code, error.message)
