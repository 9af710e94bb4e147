"""Broker RPCs of the controller's HTTP service (KIP-631 lifecycle, AlterPartition, KIP-730).

Payloads (snake_case JSON; errors as in quorum/service.py):

POST /v1/brokers/register
    {"broker_id": 1, "incarnation_id": "<Kafka uuid text>", "rack": null,
     "endpoints": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092,
                    "security_protocol": 0}],
     "features": [{"name": "metadata.version", "min_supported_version": 1,
                   "max_supported_version": 1}]}
    -> {"broker_id": 1, "broker_epoch": 17, "heartbeat_interval_ms": 2000,
        "session_timeout_ms": 9000}
POST /v1/brokers/heartbeat
    {"broker_id": 1, "broker_epoch": 17, "current_metadata_offset": 42,
     "want_fence": false, "want_shut_down": false,
     "offline_log_dirs": ["<directory id>"],                         (KIP-858; optional)
     "offline_replicas": [{"topic_id": "<topic id>", "partition": 0}]}  (optional)
    -> {"is_caught_up": true, "is_fenced": false, "in_controlled_shutdown": false,
        "should_shut_down": false}
DELETE /v1/brokers/{broker_id}        (UnregisterBroker) -> {"broker_id": 1}
POST /v1/alter-partition
    {"broker_id": 1, "broker_epoch": 17, "partitions": [{"topic_id": "...",
     "partition_index": 0, "leader_epoch": 3, "partition_epoch": 5,
     "new_isr": [{"broker_id": 1, "broker_epoch": 17}, 2], "leader_recovery_state": 0}]}
    -> {"partitions": [{"topic_id", "partition_index", "error": "NONE", "message": null,
        "leader_id", "leader_epoch", "isr", "partition_epoch", "leader_recovery_state"}]}
POST /v1/producer-ids   {"broker_id": 1, "broker_epoch": 17}
    -> {"producer_id_start": 0, "producer_id_len": 1000}
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from metadata.records import BrokerEndpoint, BrokerFeature
from quorum.controller import (
    AllocateProducerIdsRequest,
    AlterPartitionData,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerState,
    OfflineReplica,
    UnregisterBrokerRequest,
)
from quorum.node import ServiceError
from quorum.service_http import error_json, field, json_body, node_of, raise_for


def _endpoints(body: dict[str, Any]) -> tuple[BrokerEndpoint, ...]:
    endpoints = []
    for item in field(body, "endpoints", list):
        if not isinstance(item, dict):
            raise ServiceError(400, "INVALID_REQUEST", "Each endpoint must be a JSON object.")
        endpoints.append(BrokerEndpoint(
            name=field(item, "name", str), host=field(item, "host", str),
            port=field(item, "port", int),
            security_protocol=field(item, "security_protocol", int, 0)))
    return tuple(endpoints)


def _features(body: dict[str, Any]) -> tuple[BrokerFeature, ...]:
    features = []
    for item in field(body, "features", list, []):
        if not isinstance(item, dict):
            raise ServiceError(400, "INVALID_REQUEST", "Each feature must be a JSON object.")
        features.append(BrokerFeature(
            name=field(item, "name", str),
            min_supported_version=field(item, "min_supported_version", int),
            max_supported_version=field(item, "max_supported_version", int)))
    return tuple(features)


async def register_broker(request: web.Request) -> web.Response:
    body = await json_body(request)
    node = node_of(request)
    registration = BrokerRegistrationRequest(
        broker_id=field(body, "broker_id", int),
        incarnation_id=field(body, "incarnation_id", str),
        listeners=_endpoints(body),
        rack=field(body, "rack", str, None, nullable=True),
        features=_features(body))
    response = await node.write(lambda controller, image, now_ms:
                                controller.register_broker(image, registration, now_ms))
    raise_for(response.error)
    return web.json_response({
        "broker_id": registration.broker_id, "broker_epoch": response.broker_epoch,
        "heartbeat_interval_ms": node.config.broker_heartbeat_interval_ms,
        "session_timeout_ms": node.config.broker_session_timeout_ms})


async def broker_heartbeat(request: web.Request) -> web.Response:
    body = await json_body(request)
    heartbeat = BrokerHeartbeatRequest(
        broker_id=field(body, "broker_id", int),
        broker_epoch=field(body, "broker_epoch", int),
        current_metadata_offset=field(body, "current_metadata_offset", int, -1),
        want_fence=field(body, "want_fence", bool, False),
        want_shut_down=field(body, "want_shut_down", bool, False),
        offline_log_dirs=_offline_log_dirs(body),
        offline_replicas=tuple(_offline_replica(item)
                               for item in field(body, "offline_replicas", list, [])))
    response = await node_of(request).write(lambda controller, image, now_ms:
                                            controller.broker_heartbeat(image, heartbeat, now_ms))
    raise_for(response.error)
    return web.json_response({
        "is_caught_up": response.is_caught_up, "is_fenced": response.is_fenced,
        "in_controlled_shutdown": response.in_controlled_shutdown,
        "should_shut_down": response.should_shut_down})


def _offline_log_dirs(body: dict[str, Any]) -> tuple[str, ...]:
    directory_ids = field(body, "offline_log_dirs", list, [])
    if not all(isinstance(directory_id, str) for directory_id in directory_ids):
        raise ServiceError(400, "INVALID_REQUEST", "Each offline log dir is a directory id.")
    return tuple(directory_ids)


def _offline_replica(item: Any) -> OfflineReplica:
    if not isinstance(item, dict):
        raise ServiceError(400, "INVALID_REQUEST", "Each offline replica must be a JSON object.")
    return OfflineReplica(topic_id=field(item, "topic_id", str),
                          partition_id=field(item, "partition", int))


async def unregister_broker(request: web.Request) -> web.Response:
    raw = request.match_info["broker_id"]
    if not raw.isdigit():
        raise ServiceError(400, "INVALID_REQUEST", f"Broker id {raw!r} is not an integer.")
    unregister = UnregisterBrokerRequest(broker_id=int(raw))
    response = await node_of(request).write(lambda controller, image, now_ms:
                                            controller.unregister_broker(image, unregister,
                                                                         now_ms))
    raise_for(response.error)
    return web.json_response({"broker_id": unregister.broker_id})


def _isr_member(item: Any) -> BrokerState:
    if type(item) is int:
        return BrokerState(broker_id=item)
    if isinstance(item, dict):
        return BrokerState(broker_id=field(item, "broker_id", int),
                           broker_epoch=field(item, "broker_epoch", int, -1))
    raise ServiceError(400, "INVALID_REQUEST",
                       "Each new_isr member is a broker id or {broker_id, broker_epoch}.")


def _alter_partition_data(item: Any) -> AlterPartitionData:
    if not isinstance(item, dict):
        raise ServiceError(400, "INVALID_REQUEST", "Each partition must be a JSON object.")
    return AlterPartitionData(
        topic_id=field(item, "topic_id", str),
        partition_index=field(item, "partition_index", int),
        leader_epoch=field(item, "leader_epoch", int),
        partition_epoch=field(item, "partition_epoch", int),
        new_isr_with_epochs=tuple(_isr_member(m) for m in field(item, "new_isr", list)),
        leader_recovery_state=field(item, "leader_recovery_state", int, 0))


async def alter_partition(request: web.Request) -> web.Response:
    body = await json_body(request)
    alter = AlterPartitionRequest(
        broker_id=field(body, "broker_id", int), broker_epoch=field(body, "broker_epoch", int),
        partitions=tuple(_alter_partition_data(p) for p in field(body, "partitions", list)))
    response = await node_of(request).write(lambda controller, image, now_ms:
                                            controller.alter_partition(image, alter, now_ms))
    raise_for(response.error)
    return web.json_response({"partitions": [{
        "topic_id": p.topic_id, "partition_index": p.partition_index, **error_json(p.error),
        "leader_id": p.leader_id, "leader_epoch": p.leader_epoch, "isr": list(p.isr),
        "partition_epoch": p.partition_epoch, "leader_recovery_state": p.leader_recovery_state,
    } for p in response.partitions]})


async def allocate_producer_ids(request: web.Request) -> web.Response:
    body = await json_body(request)
    allocate = AllocateProducerIdsRequest(broker_id=field(body, "broker_id", int),
                                          broker_epoch=field(body, "broker_epoch", int))
    response = await node_of(request).write(lambda controller, image, now_ms:
                                            controller.allocate_producer_ids(image, allocate,
                                                                             now_ms))
    raise_for(response.error)
    return web.json_response({"producer_id_start": response.producer_id_start,
                              "producer_id_len": response.producer_id_len})


def add_broker_routes(app: web.Application) -> None:
    app.router.add_post("/v1/brokers/register", register_broker)
    app.router.add_post("/v1/brokers/heartbeat", broker_heartbeat)
    app.router.add_delete("/v1/brokers/{broker_id}", unregister_broker)
    app.router.add_post("/v1/alter-partition", alter_partition)
    app.router.add_post("/v1/producer-ids", allocate_producer_ids)
