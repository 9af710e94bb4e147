"""FindCoordinator (v0-v6; v4 batches keys, KIP-699): Kafka's ``KafkaApis.getCoordinator`` for
both coordinators a broker hosts.

A key's coordinator is the leader of one partition of the coordinator's internal topic — a
group's of ``__consumer_offsets`` (``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``),
a transactional id's of ``__transaction_state`` (``% transaction.state.log.num.partitions``) —
an alive broker reachable on the request's listener. While the topic does not exist the broker
asks the controller to create it with the coordinator's partitions, replication factor and
configs — only once that many brokers are alive (``hasEnoughLiveBrokers``), never smaller — and
answers COORDINATOR_NOT_AVAILABLE, which clients retry (Kafka's ``AutoTopicCreationManager``).
An unknown key type is INVALID_REQUEST. Share groups' key type 2 (KIP-932, v6+): Kafka 3.9 has
no share coordinator yet and answers COORDINATOR_NOT_AVAILABLE after checking CLUSTER_ACTION
(else CLUSTER_AUTHORIZATION_FAILED); before v6 it is INVALID_REQUEST, an unknown type.

Authorization (``KafkaApis.getCoordinator``): DESCRIBE on the group (else
GROUP_AUTHORIZATION_FAILED) or on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), key by key.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.group_requests import (
    FindCoordinatorRequestData,
    find_coordinator_request,
)
from pykraft.broker.handlers.group_responses import FoundCoordinator, find_coordinator_response
from pykraft.broker.handlers.services import BrokerServices, node_endpoint
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.topics import CreatableTopic, CreatableTopicConfig
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.errors import Errors

logger = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2  # CoordinatorType.SHARE (KIP-932)
FIRST_SHARE_VERSION = 6


@attrs.frozen(kw_only=True)
class CoordinatorTopic:
    """One coordinator's internal topic and how keys map onto it."""

    key_type: int
    topic: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    partition_for: Callable[[str], int]
    # DESCRIBE on this resource, or the error.
    resource_type: ResourceType
    refusal: Errors


def alive_broker_count(image: MetadataImage) -> int:
    """Kafka's ``MetadataCache.getAliveBrokers().size``: the registered, unfenced brokers."""
    return sum(1 for broker in image.cluster.brokers.values() if not broker.fenced)


def has_enough_live_brokers(image: MetadataImage, replication_factor: int) -> bool:
    """Kafka's ``AutoTopicCreationManager.hasEnoughLiveBrokers``: a topic is auto-created only
    once as many brokers are alive as its replication factor. Fewer is refused, never created
    smaller: an internal topic created while the cluster starts would keep that replication
    factor for good. Metadata answers INVALID_REPLICATION_FACTOR, FindCoordinator
    COORDINATOR_NOT_AVAILABLE; clients retry either."""
    return alive_broker_count(image) >= replication_factor


def creatable_internal_topic(wanted: CoordinatorTopic) -> CreatableTopic:
    """The coordinator's topic as the controller creates it (Kafka's
    ``AutoTopicCreationManager.creatableTopic`` for an internal topic): its configured
    partitions, replication factor and configs, unchanged."""
    return CreatableTopic(
        name=wanted.topic,
        num_partitions=wanted.partitions,
        replication_factor=wanted.replication_factor,
        configs=tuple(CreatableTopicConfig(k, v) for k, v in wanted.configs.items()),
    )


class InternalTopicCreator:
    """Asks the controller for one internal topic, one request at a time, in the background."""

    def __init__(self, services: BrokerServices, topic: CoordinatorTopic) -> None:
        self.services = services
        self.topic = topic
        self._task: asyncio.Task[None] | None = None

    def maybe_create(self, image: MetadataImage) -> bool:
        """Starts creating the topic unless a request is in flight; False when too few brokers
        are alive for its replication factor (nothing is asked)."""
        if not has_enough_live_brokers(image, self.topic.replication_factor):
            return False
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._create())
        return True

    async def _create(self) -> None:
        wanted = self.topic
        try:
            await self.services.controller.create_topic(
                creatable_internal_topic(wanted), validate_only=False
            )
            logger.info(
                "created %s (%d partitions, RF %d)",
                wanted.topic,
                wanted.partitions,
                wanted.replication_factor,
            )
        except ControllerError as error:
            if error.code is not Errors.TOPIC_ALREADY_EXISTS:
                logger.warning("cannot create %s: %s", wanted.topic, error)


def find_coordinator_handler(
    services: BrokerServices, topics: tuple[CoordinatorTopic, ...]
) -> ApiHandler:
    creators = {topic.key_type: InternalTopicCreator(services, topic) for topic in topics}

    async def find(context: RequestContext, message: Any) -> Any:
        return find_coordinator(services, creators, context, find_coordinator_request(message))

    return kafka_python_handler(find)


def find_coordinator(
    services: BrokerServices,
    creators: Mapping[int, InternalTopicCreator],
    context: RequestContext,
    request: FindCoordinatorRequestData,
) -> Any:
    if request.key_type == SHARE_KEY_TYPE and request.version >= FIRST_SHARE_VERSION:
        found = [_share_coordinator(services, context, key) for key in request.keys]
    else:
        found = [
            _coordinator_for(
                services, creators.get(request.key_type), context, key, request.key_type
            )
            for key in request.keys
        ]
    return find_coordinator_response(request.version, found)


def _share_coordinator(
    services: BrokerServices, context: RequestContext, key: str
) -> FoundCoordinator:
    """``getCoordinator`` for a share group: no share coordinator (KIP-932 is not built)."""
    if not services.authorizer.authorize_cluster(context, AclOperation.CLUSTER_ACTION):
        error = Errors.CLUSTER_AUTHORIZATION_FAILED
        return FoundCoordinator(key=key, error=error, message=error.name)
    message = "share groups are not served"
    return FoundCoordinator(key=key, error=Errors.COORDINATOR_NOT_AVAILABLE, message=message)


def _coordinator_for(
    services: BrokerServices,
    creator: InternalTopicCreator | None,
    context: RequestContext,
    key: str,
    key_type: int,
) -> FoundCoordinator:
    """Kafka's ``getCoordinator`` for one key."""
    if creator is None:
        message = f"Unknown coordinator type {key_type}"
        return FoundCoordinator(key=key, error=Errors.INVALID_REQUEST, message=message)
    wanted = creator.topic
    if not services.authorizer.authorize(context, AclOperation.DESCRIBE, wanted.resource_type, key):
        return FoundCoordinator(key=key, error=wanted.refusal, message=wanted.refusal.name)
    image = services.metadata()
    topic = image.topics.by_name.get(wanted.topic)
    if topic is None:
        if creator.maybe_create(image):
            message = f"{wanted.topic} is being created"
        else:
            message = (
                f"{wanted.topic} needs {wanted.replication_factor} alive brokers, "
                f"{alive_broker_count(image)} are; the cluster may still be starting up"
            )
        return FoundCoordinator(key=key, error=Errors.COORDINATOR_NOT_AVAILABLE, message=message)
    registration = topic.partitions.get(wanted.partition_for(key))
    leader = None
    if registration is not None and registration.has_leader():
        leader = image.cluster.broker(registration.leader)
    node = None
    if leader is not None and not leader.fenced:
        node = node_endpoint(leader, context.listener_name)
    if node is None:
        message = "The coordinator is not available."
        return FoundCoordinator(key=key, error=Errors.COORDINATOR_NOT_AVAILABLE, message=message)
    return FoundCoordinator(
        key=key,
        error=Errors.NONE,
        message=None,
        node_id=node.node_id,
        host=node.host,
        port=node.port,
    )
