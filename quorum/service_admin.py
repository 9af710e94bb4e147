"""Admin routes of the controller's HTTP service: cluster, brokers, topics, configs, elections,
reassignments, feature levels.

Reads (GET) are answered by any controller from its own committed image (like Kafka's metadata
cache: possibly a few milliseconds behind the leader). Writes go to the active controller. Each
route reads and answers with the contract's codec (``metadata/api/topics.py`` and
``metadata/api/admin.py``, where the payloads are documented). Each is authorized by its door
(``auth_http.guard``); creating a topic once the body names it (``require_topic``), and the
topic listing shows only the topics the caller may DESCRIBE, as Kafka's Metadata does.
"""

from __future__ import annotations

from aiohttp import web

from pykraft.metadata.api import routes
from pykraft.metadata.api.admin import (
    BrokerDescription,
    ClusterDescription,
    ConfigsDescription,
    ControllerAddress,
    LegacyAlterConfigsRequest,
    alter_configs_request_from_json,
    brokers_to_json,
    cluster_to_json,
    config_name_from_path,
    config_resource_from_path,
    configs_to_json,
    elect_leaders_request_from_json,
    elect_leaders_response_to_json,
)
from pykraft.metadata.api.config_batch import (
    alter_configs_batch_from_json,
    alter_configs_results_to_json,
)
from pykraft.metadata.api.errors import ErrorBody
from pykraft.metadata.api.features import (
    update_features_request_from_json,
    update_features_response_to_json,
)
from pykraft.metadata.api.reassignments import (
    ListPartitionReassignmentsRequest,
    alter_reassignments_request_from_json,
    alter_reassignments_response_to_json,
    list_reassignments_response_to_json,
)
from pykraft.metadata.api.topics import (
    DeleteTopicsRequest,
    PartitionCount,
    PartitionDescription,
    TopicDescription,
    TopicListing,
    create_partitions_request_from_json,
    create_topic_request_from_json,
    created_topic_to_json,
    deleted_topic_to_json,
    partition_count_to_json,
    topic_description_to_json,
    topic_listings_to_json,
)
from pykraft.metadata.image import MetadataImage, TopicImage
from pykraft.metadata.records import ConfigResourceType
from pykraft.quorum.auth_http import require_topic, visible_topics
from pykraft.quorum.managers.configs import effective_topic_configs
from pykraft.quorum.managers.reassignment import list_partition_reassignments
from pykraft.quorum.service_http import (
    ErrorAnswer,
    add_routes,
    json_response,
    node_of,
    raise_for,
    read_body,
)


def _topic_or_404(image: MetadataImage, name: str) -> TopicImage:
    topic = image.topics.by_name.get(name)
    if topic is None:
        raise ErrorAnswer(
            404,
            ErrorBody(
                error="UNKNOWN_TOPIC_OR_PARTITION", message=f"Topic {name!r} does not exist."
            ),
        )
    return topic


def topic_description(image: MetadataImage, topic: TopicImage) -> TopicDescription:
    return TopicDescription(
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=tuple(
            PartitionDescription(
                partition=index,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                replicas=tuple(p.replicas),
                isr=tuple(p.isr),
                adding_replicas=tuple(p.adding_replicas),
                removing_replicas=tuple(p.removing_replicas),
                leader_recovery_state=int(p.leader_recovery_state),
                eligible_leader_replicas=p.elr,
                last_known_elr=p.last_known_elr,
            )
            for index, p in sorted(topic.partitions.items())
        ),
        configs=effective_topic_configs(image, topic.name),
    )


async def get_cluster(request: web.Request) -> web.Response:
    node = node_of(request)
    image = node.view.image
    return json_response(
        cluster_to_json(
            ClusterDescription(
                controller_id=node.leader_id(),
                controllers=tuple(
                    ControllerAddress(node_id=node_id, url=node.http_url(node_id))
                    for node_id in node.raft.voter_set.node_ids
                ),
                metadata_offset=image.offset,
                metadata_epoch=image.epoch,
                brokers=len(image.cluster.brokers),
                topics=len(image.topics.by_name),
                partitions=image.topics.partition_count(),
                features=dict(image.features.items()),
            )
        )
    )


async def list_brokers(request: web.Request) -> web.Response:
    brokers = node_of(request).view.image.cluster.brokers
    return json_response(
        brokers_to_json(
            tuple(
                BrokerDescription(
                    broker_id=b.id,
                    broker_epoch=b.epoch,
                    incarnation_id=b.incarnation_id,
                    endpoints=tuple(b.endpoints),
                    rack=b.rack,
                    fenced=b.fenced,
                    in_controlled_shutdown=b.in_controlled_shutdown,
                )
                for _, b in sorted(brokers.items())
            )
        )
    )


async def list_topics(request: web.Request) -> web.Response:
    topics = node_of(request).view.image.topics.by_name
    visible = visible_topics(request, topics)
    return json_response(
        topic_listings_to_json(
            tuple(
                TopicListing(name=t.name, topic_id=t.topic_id, partitions=len(t.partitions))
                for name, t in sorted(topics.items())
                if name in visible
            )
        )
    )


async def describe_topic(request: web.Request) -> web.Response:
    image = node_of(request).view.image
    topic = _topic_or_404(image, request.match_info["name"])
    return json_response(topic_description_to_json(topic_description(image, topic)))


async def create_topic(request: web.Request) -> web.Response:
    create = await read_body(request, create_topic_request_from_json)
    for topic in create.topics:
        require_topic(request, routes.CREATE_TOPIC.access, topic.name)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.create_topics(image, create, now_ms)
    )
    result = response.topics[0]
    raise_for(result.error)
    return json_response(created_topic_to_json(result), status=200 if create.validate_only else 201)


async def delete_topic(request: web.Request) -> web.Response:
    delete = DeleteTopicsRequest(names=(request.match_info["name"],))
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.delete_topics(image, delete, now_ms)
    )
    result = response.topics[0]
    raise_for(result.error)
    return json_response(deleted_topic_to_json(result))


async def create_partitions(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    create = await read_body(
        request, lambda fields: create_partitions_request_from_json(name, fields)
    )
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.create_partitions(image, create, now_ms)
    )
    raise_for(response.topics[0].error)
    return json_response(
        partition_count_to_json(PartitionCount(name=name, partitions=create.topics[0].count))
    )


async def elect_leaders(request: web.Request) -> web.Response:
    elect = await read_body(request, elect_leaders_request_from_json)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.elect_leaders(image, elect, now_ms)
    )
    raise_for(response.error)
    return json_response(elect_leaders_response_to_json(response))


async def update_features(request: web.Request) -> web.Response:
    update = await read_body(request, update_features_request_from_json)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.update_features(image, update, now_ms)
    )
    return json_response(update_features_response_to_json(response))


async def alter_partition_reassignments(request: web.Request) -> web.Response:
    alter = await read_body(request, alter_reassignments_request_from_json)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.alter_partition_reassignments(
            image, alter, now_ms
        )
    )
    raise_for(response.error)
    return json_response(alter_reassignments_response_to_json(response))


async def list_partition_reassignments_route(request: web.Request) -> web.Response:
    image = node_of(request).view.image
    listed = list_partition_reassignments(image, ListPartitionReassignmentsRequest())
    return json_response(list_reassignments_response_to_json(listed))


def _resource(request: web.Request) -> tuple[ConfigResourceType, str]:
    kind = config_resource_from_path(request.match_info["resource_type"])
    return kind, config_name_from_path(kind, request.match_info["resource_name"])


def _configs(image: MetadataImage, kind: ConfigResourceType, name: str) -> ConfigsDescription:
    if kind is ConfigResourceType.TOPIC:
        _topic_or_404(image, name)
        configs = effective_topic_configs(image, name)
    else:
        configs = dict(image.configs.config(kind.value, name).items())
    return ConfigsDescription(resource_type=kind.name.lower(), resource_name=name, configs=configs)


async def describe_configs(request: web.Request) -> web.Response:
    kind, name = _resource(request)
    return json_response(configs_to_json(_configs(node_of(request).view.image, kind, name)))


async def alter_configs(request: web.Request) -> web.Response:
    kind, name = _resource(request)
    alter = await read_body(
        request, lambda fields: alter_configs_request_from_json(kind, name, fields)
    )
    node = node_of(request)
    if isinstance(alter, LegacyAlterConfigsRequest):
        legacy = alter
        response = await node.write(
            lambda controller, image, now_ms: controller.legacy_alter_configs(image, legacy, now_ms)
        )
    else:
        incremental = alter
        response = await node.write(
            lambda controller, image, now_ms: controller.incremental_alter_configs(
                image, incremental, now_ms
            )
        )
    raise_for(response.results[0].error)
    return json_response(configs_to_json(_configs(node.view.image, kind, name)))


async def alter_configs_batch(request: web.Request) -> web.Response:
    """``POST /v1/configs``: one request's resources as one ControllerResult (one Raft entry);
    each resource's error is in the answer, not the status."""
    alter = await read_body(request, alter_configs_batch_from_json)
    node = node_of(request)
    if isinstance(alter, LegacyAlterConfigsRequest):
        legacy = alter
        response = await node.write(
            lambda controller, image, now_ms: controller.legacy_alter_configs(image, legacy, now_ms)
        )
    else:
        incremental = alter
        response = await node.write(
            lambda controller, image, now_ms: controller.incremental_alter_configs(
                image, incremental, now_ms
            )
        )
    return json_response(alter_configs_results_to_json(response))


def add_admin_routes(app: web.Application) -> None:
    add_routes(
        app,
        [
            (routes.CLUSTER, get_cluster),
            (routes.LIST_BROKERS, list_brokers),
            (routes.LIST_TOPICS, list_topics),
            (routes.CREATE_TOPIC, create_topic),
            (routes.DESCRIBE_TOPIC, describe_topic),
            (routes.DELETE_TOPIC, delete_topic),
            (routes.CREATE_PARTITIONS, create_partitions),
            (routes.ELECT_LEADERS, elect_leaders),
            (routes.ALTER_PARTITION_REASSIGNMENTS, alter_partition_reassignments),
            (routes.LIST_PARTITION_REASSIGNMENTS, list_partition_reassignments_route),
            (routes.DESCRIBE_CONFIGS, describe_configs),
            (routes.ALTER_CONFIGS, alter_configs),
            (routes.ALTER_CONFIGS_BATCH, alter_configs_batch),
            (routes.UPDATE_FEATURES, update_features),
        ],
    )
