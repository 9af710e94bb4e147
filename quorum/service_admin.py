"""Admin routes of the controller's HTTP service: cluster, brokers, topics, configs, elections.

Reads (GET) are answered by any controller from its own committed image (like Kafka's metadata
cache: possibly a few milliseconds behind the leader). Writes go to the active controller.

Payloads (snake_case JSON; errors as in quorum/service.py):

GET  /v1/cluster      -> {"controller_id", "controllers": [{node_id, url}], "metadata_offset",
                          "brokers": n, "topics": n, "partitions": n, "features": {...}}
GET  /v1/brokers      -> {"brokers": [{broker_id, broker_epoch, incarnation_id, endpoints, rack,
                          fenced, in_controlled_shutdown}]}
GET  /v1/topics       -> {"topics": [{name, topic_id, partitions}]}
POST /v1/topics       {"name": "pets", "partitions": 3, "replication_factor": 1,
                       "assignments": {"0": [1, 2]}, "configs": {"cleanup.policy": "delete"},
                       "validate_only": false}
                      -> 201 {name, topic_id, partitions, replication_factor}
GET  /v1/topics/{name} -> {name, topic_id, partitions: [{partition, leader, leader_epoch,
                          partition_epoch, replicas, isr, adding_replicas, removing_replicas,
                          leader_recovery_state}], configs: {...}}
DELETE /v1/topics/{name} -> {name, topic_id}
POST /v1/topics/{name}/partitions {"count": 6, "assignments": [[1], [2], [1]]}
                      -> {name, partitions}
POST /v1/elections    {"election_type": "preferred" | "unclean",
                       "partitions": [{"topic": "pets", "partitions": [0, 1]}] | null}
                      -> {"results": [{topic, partitions: [{partition, error, message}]}]}
GET  /v1/configs/{topic|broker}/{name} -> {resource_type, resource_name, configs}
PUT  /v1/configs/{topic|broker}/{name} {"set": {"k": "v"}, "delete": ["k2"],
                       "validate_only": false} -> same as GET, after the change
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from metadata.image import MetadataImage, TopicImage
from metadata.records import ConfigResourceType
from quorum.controller import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectionType,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    TopicPartitions,
)
from quorum.managers.configs import effective_topic_configs
from quorum.node import ServiceError
from quorum.service_http import error_json, field, json_body, node_of, raise_for

_RESOURCE_TYPES = {"topic": ConfigResourceType.TOPIC, "broker": ConfigResourceType.BROKER}


def _topic_or_404(image: MetadataImage, name: str) -> TopicImage:
    topic = image.topics.by_name.get(name)
    if topic is None:
        raise ServiceError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"Topic {name!r} does not exist.")
    return topic


def topic_json(topic: TopicImage) -> dict[str, Any]:
    return {"name": topic.name, "topic_id": topic.topic_id, "partitions": [{
        "partition": index, "leader": p.leader, "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch, "replicas": list(p.replicas), "isr": list(p.isr),
        "adding_replicas": list(p.adding_replicas), "removing_replicas": list(p.removing_replicas),
        "leader_recovery_state": int(p.leader_recovery_state),
    } for index, p in sorted(topic.partitions.items())]}


async def get_cluster(request: web.Request) -> web.Response:
    node = node_of(request)
    image = node.view.image
    return web.json_response({
        "controller_id": node.leader_id(),
        "controllers": [{"node_id": node_id, "url": node.config.http_url(node_id)}
                        for node_id in sorted(node.config.voters)],
        "metadata_offset": image.offset, "metadata_epoch": image.epoch,
        "brokers": len(image.cluster.brokers), "topics": len(image.topics.by_name),
        "partitions": image.topics.partition_count(),
        "features": dict(image.features.items()),
    })


async def list_brokers(request: web.Request) -> web.Response:
    brokers = node_of(request).view.image.cluster.brokers
    return web.json_response({"brokers": [{
        "broker_id": b.id, "broker_epoch": b.epoch, "incarnation_id": b.incarnation_id,
        "endpoints": [{"name": e.name, "host": e.host, "port": e.port,
                       "security_protocol": e.security_protocol} for e in b.endpoints],
        "rack": b.rack, "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
    } for _, b in sorted(brokers.items())]})


async def list_topics(request: web.Request) -> web.Response:
    topics = node_of(request).view.image.topics.by_name
    return web.json_response({"topics": [
        {"name": t.name, "topic_id": t.topic_id, "partitions": len(t.partitions)}
        for _, t in sorted(topics.items())]})


async def describe_topic(request: web.Request) -> web.Response:
    image = node_of(request).view.image
    topic = _topic_or_404(image, request.match_info["name"])
    return web.json_response({**topic_json(topic),
                              "configs": effective_topic_configs(image, topic.name)})


def _assignments(body: dict[str, Any]) -> tuple[CreatableReplicaAssignment, ...]:
    raw = field(body, "assignments", dict, {})
    assignments = []
    for key, replicas in sorted(raw.items()):
        if not key.isdigit() or not isinstance(replicas, list) or \
                not all(type(r) is int for r in replicas):
            raise ServiceError(400, "INVALID_REQUEST",
                               "assignments maps a partition number to a list of broker ids.")
        assignments.append(CreatableReplicaAssignment(int(key), tuple(replicas)))
    return tuple(assignments)


def _string_map(body: dict[str, Any], name: str) -> dict[str, str | None]:
    raw = field(body, name, dict, {})
    if not all(isinstance(v, str) or v is None for v in raw.values()):
        raise ServiceError(400, "INVALID_REQUEST", f"{name} values must be strings.")
    return dict(raw)


async def create_topic(request: web.Request) -> web.Response:
    body = await json_body(request)
    topic = CreatableTopic(
        name=field(body, "name", str),
        num_partitions=field(body, "partitions", int, -1),
        replication_factor=field(body, "replication_factor", int, -1),
        assignments=_assignments(body),
        configs=tuple(CreatableTopicConfig(k, v) for k, v in _string_map(body, "configs").items()))
    create = CreateTopicsRequest(topics=(topic,),
                                 validate_only=field(body, "validate_only", bool, False))
    response = await node_of(request).write(lambda controller, image, now_ms:
                                            controller.create_topics(image, create, now_ms))
    result = response.topics[0]
    raise_for(result.error)
    return web.json_response({"name": result.name, "topic_id": result.topic_id,
                              "partitions": result.num_partitions,
                              "replication_factor": result.replication_factor},
                             status=200 if create.validate_only else 201)


async def delete_topic(request: web.Request) -> web.Response:
    delete = DeleteTopicsRequest(names=(request.match_info["name"],))
    response = await node_of(request).write(lambda controller, image, now_ms:
                                            controller.delete_topics(image, delete, now_ms))
    result = response.topics[0]
    raise_for(result.error)
    return web.json_response({"name": result.name, "topic_id": result.topic_id})


async def create_partitions(request: web.Request) -> web.Response:
    body = await json_body(request)
    raw_assignments = field(body, "assignments", list, None, nullable=True)
    assignments = None
    if raw_assignments is not None:
        if not all(isinstance(a, list) and all(type(b) is int for b in a)
                   for a in raw_assignments):
            raise ServiceError(400, "INVALID_REQUEST",
                               "assignments is a list of broker-id lists, one per new partition.")
        assignments = tuple(tuple(a) for a in raw_assignments)
    topic = CreatePartitionsTopic(name=request.match_info["name"],
                                  count=field(body, "count", int), assignments=assignments)
    create = CreatePartitionsRequest(topics=(topic,),
                                     validate_only=field(body, "validate_only", bool, False))
    response = await node_of(request).write(lambda controller, image, now_ms:
                                            controller.create_partitions(image, create, now_ms))
    raise_for(response.topics[0].error)
    return web.json_response({"name": topic.name, "partitions": topic.count})


def _election_partitions(body: dict[str, Any]) -> tuple[TopicPartitions, ...] | None:
    raw = field(body, "partitions", list, None, nullable=True)
    if raw is None:
        return None
    result = []
    for item in raw:
        if not isinstance(item, dict):
            raise ServiceError(400, "INVALID_REQUEST", "partitions holds {topic, partitions}.")
        numbers = field(item, "partitions", list)
        if not all(type(n) is int for n in numbers):
            raise ServiceError(400, "INVALID_REQUEST", "partition numbers must be integers.")
        result.append(TopicPartitions(topic=field(item, "topic", str), partitions=tuple(numbers)))
    return tuple(result)


async def elect_leaders(request: web.Request) -> web.Response:
    body = await json_body(request)
    kind = field(body, "election_type", str, "preferred").upper()
    if kind not in ElectionType.__members__:
        raise ServiceError(400, "INVALID_REQUEST",
                           "election_type must be 'preferred' or 'unclean'.")
    elect = ElectLeadersRequest(election_type=ElectionType[kind].value,
                                topic_partitions=_election_partitions(body))
    response = await node_of(request).write(lambda controller, image, now_ms:
                                            controller.elect_leaders(image, elect, now_ms))
    raise_for(response.error)
    return web.json_response({"results": [{
        "topic": r.topic,
        "partitions": [{"partition": p.partition_id, **error_json(p.error)}
                       for p in r.partition_results],
    } for r in response.results]})


def _resource(request: web.Request) -> tuple[ConfigResourceType, str]:
    kind = request.match_info["resource_type"].lower()
    if kind not in _RESOURCE_TYPES:
        raise ServiceError(400, "INVALID_REQUEST", "The resource type is 'topic' or 'broker'.")
    return _RESOURCE_TYPES[kind], request.match_info["resource_name"]


def _configs_json(image: MetadataImage, kind: ConfigResourceType, name: str) -> dict[str, Any]:
    if kind is ConfigResourceType.TOPIC:
        _topic_or_404(image, name)
        configs = effective_topic_configs(image, name)
    else:
        configs = dict(image.configs.config(kind.value, name).items())
    return {"resource_type": kind.name.lower(), "resource_name": name, "configs": configs}


async def describe_configs(request: web.Request) -> web.Response:
    kind, name = _resource(request)
    return web.json_response(_configs_json(node_of(request).view.image, kind, name))


async def alter_configs(request: web.Request) -> web.Response:
    kind, name = _resource(request)
    body = await json_body(request)
    changes = [AlterableConfig(k, AlterConfigOp.SET, v)
               for k, v in _string_map(body, "set").items()]
    deletions = field(body, "delete", list, [])
    if not all(isinstance(k, str) for k in deletions):
        raise ServiceError(400, "INVALID_REQUEST", "delete is a list of config names.")
    changes += [AlterableConfig(k, AlterConfigOp.DELETE) for k in deletions]
    alter = IncrementalAlterConfigsRequest(
        resources=(AlterConfigsResource(kind.value, name, tuple(changes)),),
        validate_only=field(body, "validate_only", bool, False))
    node = node_of(request)
    response = await node.write(lambda controller, image, now_ms:
                                controller.incremental_alter_configs(image, alter, now_ms))
    raise_for(response.results[0].error)
    return web.json_response(_configs_json(node.view.image, kind, name))


def add_admin_routes(app: web.Application) -> None:
    app.router.add_get("/v1/cluster", get_cluster)
    app.router.add_get("/v1/brokers", list_brokers)
    app.router.add_get("/v1/topics", list_topics)
    app.router.add_post("/v1/topics", create_topic)
    app.router.add_get("/v1/topics/{name}", describe_topic)
    app.router.add_delete("/v1/topics/{name}", delete_topic)
    app.router.add_post("/v1/topics/{name}/partitions", create_partitions)
    app.router.add_post("/v1/elections", elect_leaders)
    app.router.add_get("/v1/configs/{resource_type}/{resource_name}", describe_configs)
    app.router.add_put("/v1/configs/{resource_type}/{resource_name}", alter_configs)
