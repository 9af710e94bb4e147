"""Admin APIs: CreateTopics, DeleteTopics and CreatePartitions are forwarded to the controller
(``ControllerClient``, KIP-590 forwarding); DescribeCluster is answered by
``describe_cluster.py``; the config APIs are in ``configs.py``.

Forwarded requests go out one topic (or resource) per controller call, concurrently, and each
answer keeps its own Kafka error code and message: the controller's error names map back to
codes (``ControllerError.code``), so a client sees TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
POLICY_VIOLATION, REQUEST_TIMED_OUT, NOT_CONTROLLER, ... exactly as from Kafka. A topic named
twice in one request is INVALID_REQUEST ("Duplicate topic name", Kafka's ControllerApis);
DeleteTopics v6 may name topics by id, resolved through this broker's image (UNKNOWN_TOPIC_ID).
CreateTopics v5+ returns the new topic's configs, read back from the controller; if that read
fails the topic is still created and ``topic_config_error_code`` says why.

Authorization comes first, with the client's principal: the controller sees the broker's own
identity, so these checks are the only ones the client meets. CreateTopics needs CREATE on the
cluster or the topic (and DESCRIBE_CONFIGS on it for the v5+ configs), DeleteTopics DELETE,
CreatePartitions ALTER; a refusal is TOPIC_AUTHORIZATION_FAILED for that entry only, and
nothing is forwarded for it.

Requests reach the handlers as typed values (``admin_requests.py``) and the handlers answer
with typed results (``admin_responses.py``), turned into kafka-python's response objects once,
at a request's version, as each handler returns.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs

from pykraft.broker.config_describe import DYNAMIC_DEFAULT_BROKER_CONFIG
from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.admin_requests import (
    CreatePartitionsRequestData,
    CreatePartitionsTopic,
    CreateTopicsRequestData,
    DeleteTopicsRequestData,
    create_partitions_request,
    create_topics_request,
    delete_topics_request,
    describe_cluster_request,
)
from pykraft.broker.handlers.admin_responses import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    ConfigEntry,
    CreatedTopicResult,
    DeletedTopicResult,
    PartitionsResult,
    create_partitions_response,
    create_topics_response,
    delete_topics_response,
)
from pykraft.broker.handlers.describe_cluster import cluster_operations, describe_cluster
from pykraft.broker.handlers.services import (
    BrokerServices,
    topic_id_string,
    topic_uuid,
)
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.topics import CreatableTopic
from pykraft.metadata.auth.acl import CLUSTER_NAME, AclOperation, ResourceType
from pykraft.metadata.broker_config_defs import broker_value_in
from pykraft.metadata.config_defs import TOPIC_CONFIG_SYNONYMS
from pykraft.metadata.records import ConfigResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID

Request = TypeVar("Request")


def admin_handlers(services: BrokerServices) -> dict[ApiKey, ApiHandler]:
    def adapt(
        read: Callable[[Any], Request],
        handle: Callable[[BrokerServices, Request, RequestContext | None], Awaitable[Any]],
    ) -> ApiHandler:
        """kafka-python's request object is read by ``read`` before ``handle`` sees it."""

        async def call(request: RequestContext, message: Any) -> Any:
            return await handle(services, read(message), request)

        return kafka_python_handler(call)

    async def describe_cluster_here(request: RequestContext, message: Any) -> Any:
        described = describe_cluster(
            services, describe_cluster_request(message), request.listener_name
        )
        if message.include_cluster_authorized_operations:
            described.authorized_operations = cluster_operations(services, request)
        return described

    return {
        ApiKey.CREATE_TOPICS: adapt(create_topics_request, create_topics),
        ApiKey.DELETE_TOPICS: adapt(delete_topics_request, delete_topics),
        ApiKey.CREATE_PARTITIONS: adapt(create_partitions_request, create_partitions),
        ApiKey.DESCRIBE_CLUSTER: kafka_python_handler(describe_cluster_here),
    }


def _duplicates(names: list[str]) -> set[str]:
    return {name for name, count in Counter(names).items() if count > 1}


# ------------------------------------------------------------------ CreateTopics


def _allowed(
    services: BrokerServices,
    context: RequestContext | None,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """Checked before anything is forwarded: the controller sees the broker's identity, not
    the client's, so a refusal here is the only one the client's principal meets."""
    if context is None:
        return True
    return services.authorizer.authorize(context, operation, resource_type, name)


_DENIED = "Authorization failed."


async def create_topics(
    services: BrokerServices,
    request: CreateTopicsRequestData,
    context: RequestContext | None = None,
) -> Any:
    """CREATE on the cluster, or on each topic (else TOPIC_AUTHORIZATION_FAILED),
    ``handleCreateTopicsRequest``."""
    duplicates = _duplicates([topic.name for topic in request.topics])
    on_cluster = _allowed(
        services, context, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME
    )

    async def one(topic: CreatableTopic) -> CreatedTopicResult:
        if topic.name in duplicates:
            return CreatedTopicResult(
                name=topic.name, error=Errors.INVALID_REQUEST, message="Duplicate topic name."
            )
        if not on_cluster and not _allowed(
            services, context, AclOperation.CREATE, ResourceType.TOPIC, topic.name
        ):
            return CreatedTopicResult(
                name=topic.name, error=Errors.TOPIC_AUTHORIZATION_FAILED, message=_DENIED
            )
        try:
            created = await services.controller.create_topic(
                topic, validate_only=request.validate_only
            )
        except ControllerError as error:
            return CreatedTopicResult(name=topic.name, error=error.code, message=error.message)
        result = CreatedTopicResult(
            name=topic.name,
            error=Errors.NONE,
            topic_id=topic_uuid(created.topic_id) if created.topic_id else None,
            num_partitions=created.num_partitions,
            replication_factor=created.replication_factor,
        )
        if request.version >= 5 and not request.validate_only:
            if not _allowed(
                services, context, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name
            ):
                # handleCreateTopicsRequest: configs only with DESCRIBE_CONFIGS on the topic.
                refused = Errors.TOPIC_AUTHORIZATION_FAILED
                return attrs.evolve(result, topic_config_error=refused)
            requested = frozenset(config.name for config in topic.configs)
            return await _read_back_configs(services, result, requested)
        return result

    results = await asyncio.gather(*(one(topic) for topic in request.topics))
    return create_topics_response(request.version, results)


async def _read_back_configs(
    services: BrokerServices, result: CreatedTopicResult, requested: frozenset[str]
) -> CreatedTopicResult:
    """The new topic's configs from the controller, each with its source: the ones the request
    set are the topic's, the ones the cluster-wide default gives are that default's."""
    try:
        configs = await services.controller.describe_configs("topic", result.name)
    except ControllerError as error:
        return attrs.evolve(result, topic_config_error=error.code)
    cluster_default = services.metadata().configs.config(ConfigResourceType.BROKER, "")

    def source(key: str) -> int:
        if key in requested:
            return DYNAMIC_TOPIC_CONFIG
        synonym = TOPIC_CONFIG_SYNONYMS.get(key)
        if synonym is not None and broker_value_in(cluster_default, synonym) is not None:
            return DYNAMIC_DEFAULT_BROKER_CONFIG
        return DEFAULT_CONFIG

    return attrs.evolve(
        result,
        configs=tuple(
            ConfigEntry(name=key, value=value, source=source(key))
            for key, value in sorted(configs.items())
        ),
    )


# ------------------------------------------------------------------ DeleteTopics


async def delete_topics(
    services: BrokerServices,
    request: DeleteTopicsRequestData,
    context: RequestContext | None = None,
) -> Any:
    """DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (``handleDeleteTopicsRequest``)."""
    image = services.metadata()
    resolved: list[tuple[str | None, uuid.UUID | None, Errors]] = []
    for name, topic_id in request.topics:
        if name is None and topic_id not in (None, ZERO_UUID):
            topic = image.topics.by_id.get(topic_id_string(topic_id))
            error = Errors.NONE if topic is not None else Errors.UNKNOWN_TOPIC_ID
            resolved.append((None if topic is None else topic.name, topic_id, error))
        else:
            resolved.append((name, topic_id, Errors.NONE))
    duplicates = _duplicates([name for name, _, _ in resolved if name is not None])

    async def one(
        name: str | None, topic_id: uuid.UUID | None, error: Errors
    ) -> DeletedTopicResult:
        if name is None or error is not Errors.NONE:
            return DeletedTopicResult(
                name=name,
                topic_id=topic_id,
                error=Errors.UNKNOWN_TOPIC_ID,
                message="The topic id is unknown.",
            )
        if name in duplicates:
            return DeletedTopicResult(
                name=name,
                topic_id=topic_id,
                error=Errors.INVALID_REQUEST,
                message="Duplicate topic name.",
            )
        if not _allowed(services, context, AclOperation.DELETE, ResourceType.TOPIC, name):
            return DeletedTopicResult(
                name=name, topic_id=topic_id, error=Errors.TOPIC_AUTHORIZATION_FAILED
            )
        try:
            deleted = await services.controller.delete_topic(name)
        except ControllerError as failure:
            return DeletedTopicResult(
                name=name, topic_id=topic_id, error=failure.code, message=failure.message
            )
        deleted_id = topic_uuid(deleted.topic_id) if deleted.topic_id else topic_id
        return DeletedTopicResult(name=name, topic_id=deleted_id, error=Errors.NONE)

    results = await asyncio.gather(*(one(*item) for item in resolved))
    return delete_topics_response(request.version, results)


# ------------------------------------------------------------------ CreatePartitions


async def create_partitions(
    services: BrokerServices,
    request: CreatePartitionsRequestData,
    context: RequestContext | None = None,
) -> Any:
    """ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED (``handleCreatePartitionsRequest``)."""
    duplicates = _duplicates([topic.name for topic in request.topics])

    async def one(topic: CreatePartitionsTopic) -> PartitionsResult:
        if topic.name in duplicates:
            return PartitionsResult(
                name=topic.name, error=Errors.INVALID_REQUEST, message="Duplicate topic name."
            )
        if not _allowed(services, context, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            return PartitionsResult(
                name=topic.name, error=Errors.TOPIC_AUTHORIZATION_FAILED, message=_DENIED
            )
        try:
            await services.controller.create_partitions(
                topic.name, topic.count, topic.assignments, validate_only=request.validate_only
            )
        except ControllerError as error:
            return PartitionsResult(name=topic.name, error=error.code, message=error.message)
        return PartitionsResult(name=topic.name, error=Errors.NONE)

    results = await asyncio.gather(*(one(topic) for topic in request.topics))
    return create_partitions_response(request.version, results)
