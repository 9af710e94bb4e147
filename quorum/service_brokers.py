"""Broker RPCs of the controller's HTTP service (KIP-631 lifecycle, AlterPartition, KIP-730).

Each route reads its request and writes its answer with the contract's codec
(``metadata/api/brokers.py``, where the payloads are documented), asks the active controller
(``ControllerNode.write``), and refuses with the controller's Kafka error (``raise_for``).
Every route needs CLUSTER_ACTION (checked by its door, ``auth_http.guard``) and, once the body
names the broker, to come from that broker's principal (``require_broker``).
"""

from __future__ import annotations

import logging

from aiohttp import web

from pykraft.metadata.api import routes
from pykraft.metadata.api.brokers import (
    BrokerHeartbeatRequest,
    BrokerRegistrationReply,
    alter_partition_request_from_json,
    alter_partition_response_to_json,
    heartbeat_request_from_json,
    heartbeat_response_to_json,
    producer_ids_request_from_json,
    producer_ids_response_to_json,
    registration_reply_to_json,
    registration_request_from_json,
    unregister_answer_to_json,
    unregister_request_from_path,
)
from pykraft.quorum.auth_http import require_broker
from pykraft.quorum.node import ControllerNode
from pykraft.quorum.service_http import add_routes, json_response, node_of, raise_for, read_body

logger = logging.getLogger(__name__)


async def register_broker(request: web.Request) -> web.Response:
    registration = await read_body(request, registration_request_from_json)
    require_broker(request, registration.broker_id)
    node = node_of(request)
    response = await node.write(
        lambda controller, image, now_ms: controller.register_broker(image, registration, now_ms)
    )
    raise_for(response.error)
    return json_response(
        registration_reply_to_json(
            BrokerRegistrationReply(
                broker_id=registration.broker_id,
                broker_epoch=response.broker_epoch,
                heartbeat_interval_ms=node.config.broker_heartbeat_interval_ms,
                session_timeout_ms=node.config.broker_session_timeout_ms,
            )
        )
    )


async def broker_heartbeat(request: web.Request) -> web.Response:
    heartbeat = await read_body(request, heartbeat_request_from_json)
    require_broker(request, heartbeat.broker_id)
    node = node_of(request)
    # On arrival, not after the write (which may wait for the write lock and a Raft commit).
    received_ms = node.clock.monotonic_ms()
    watched = request.transport if node.is_leader() else None  # a standby: NOT_CONTROLLER
    if watched is not None:
        node.active_controller().broker_heartbeat_arrived(
            node.view.image, heartbeat.broker_id, heartbeat.broker_epoch, received_ms
        )
        # Its connection idles between heartbeats; closed then, the process died
        # (quorum/broker_channels.py).
        node.broker_channels.heartbeat_arrived(heartbeat.broker_id, heartbeat.broker_epoch, watched)
    try:
        return await _handle_heartbeat(node, heartbeat, received_ms)
    finally:
        if watched is not None:
            node.broker_channels.heartbeat_answered(heartbeat.broker_id, watched)


async def _handle_heartbeat(
    node: ControllerNode, heartbeat: BrokerHeartbeatRequest, received_ms: int
) -> web.Response:
    if heartbeat.counters_refused is not None:
        logger.warning(
            "broker %d: heartbeat counters dropped: %s",
            heartbeat.broker_id,
            heartbeat.counters_refused,
        )
    response = await node.write(
        lambda controller, image, now_ms: controller.broker_heartbeat(
            image, heartbeat, now_ms, received_ms
        )
    )
    raise_for(response.error)
    # After the write: an accepted heartbeat only, once (a write may run its operation again).
    node.broker_rates.handle_heartbeat(
        heartbeat.broker_id,
        heartbeat.broker_epoch,
        heartbeat.counters,
        received_ms,
        heartbeat.counters_sampled_ms,
    )
    return json_response(heartbeat_response_to_json(response))


async def unregister_broker(request: web.Request) -> web.Response:
    unregister = unregister_request_from_path(request.match_info["broker_id"])
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.unregister_broker(image, unregister, now_ms)
    )
    raise_for(response.error)
    return json_response(unregister_answer_to_json(unregister))


async def alter_partition(request: web.Request) -> web.Response:
    alter = await read_body(request, alter_partition_request_from_json)
    require_broker(request, alter.broker_id)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.alter_partition(image, alter, now_ms)
    )
    raise_for(response.error)
    return json_response(alter_partition_response_to_json(response))


async def allocate_producer_ids(request: web.Request) -> web.Response:
    allocate = await read_body(request, producer_ids_request_from_json)
    require_broker(request, allocate.broker_id)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.allocate_producer_ids(image, allocate, now_ms)
    )
    raise_for(response.error)
    return json_response(producer_ids_response_to_json(response))


def add_broker_routes(app: web.Application) -> None:
    add_routes(
        app,
        [
            (routes.REGISTER_BROKER, register_broker),
            (routes.BROKER_HEARTBEAT, broker_heartbeat),
            (routes.UNREGISTER_BROKER, unregister_broker),
            (routes.ALTER_PARTITION, alter_partition),
            (routes.ALLOCATE_PRODUCER_IDS, allocate_producer_ids),
        ],
    )
