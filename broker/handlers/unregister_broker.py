"""UnregisterBroker (v0, KIP-631): remove a broker's registration, forwarded to the controller.

Kafka 3.9's broker forwards the request (``KafkaApis``: ``forwardToControllerOrFail``);
``ControllerApis.handleUnregisterBroker`` checks ALTER on the cluster and
``ReplicationControlManager.unregisterBroker`` removes the registration, moving leadership and
ISR membership away from the broker first. Here the broker checks the client's principal itself
(the controller sees only the broker) and calls ``DELETE /v1/brokers/{broker_id}``
(``quorum/managers/cluster.unregister_broker``). The answer is one error:

* a refused principal: CLUSTER_AUTHORIZATION_FAILED, nothing forwarded;
* an id with no registration: BROKER_ID_NOT_REGISTERED;
* a controller that cannot answer: its error (NOT_CONTROLLER, REQUEST_TIMED_OUT);
* otherwise NONE.

The error message stays null, as Kafka's ``handleUnregisterBroker`` sets only the code.
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

_Response = response_class(ApiKey.UNREGISTER_BROKER)


def unregister_broker_response(version: int, error: Errors) -> Any:
    return _Response(version=version, throttle_time_ms=0, error_code=error.code, error_message=None)


async def unregister_broker(services: BrokerServices, context: RequestContext, message: Any) -> Any:
    version = message.version
    if not services.authorizer.authorize_cluster(context, AclOperation.ALTER):
        return unregister_broker_response(version, Errors.CLUSTER_AUTHORIZATION_FAILED)
    try:
        await services.controller.unregister_broker(message.broker_id)
    except ControllerError as error:
        return unregister_broker_response(version, error.code)
    return unregister_broker_response(version, Errors.NONE)


def unregister_broker_handler(services: BrokerServices) -> ApiHandler:
    async def handle(context: RequestContext, message: Any) -> Any:
        return await unregister_broker(services, context, message)

    return kafka_python_handler(handle)
