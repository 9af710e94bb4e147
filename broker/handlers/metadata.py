"""Metadata (v0-v12) from the broker's metadata image — Kafka's ``handleTopicMetadataRequest``
over ``KRaftMetadataCache``.

Brokers: the unfenced brokers with an endpoint on the listener the request came in on, with
their rack. ``controller_id``: see ``services.controller_id`` (this broker when alive). Topics:
all of them for a null list (v0: an empty list), else those named — by name, or by topic id
(v10+; an unknown id is UNKNOWN_TOPIC_ID). Partitions, by index: leader and leader epoch,
replicas, ISR, and offline replicas (not registered, fenced, or without this listener). A
partition without a reachable leader answers leader -1 with LEADER_NOT_AVAILABLE (a leader with
no endpoint on this listener: LISTENER_NOT_FOUND from v6). v0 clients get only live replicas and
REPLICA_NOT_AVAILABLE when some are missing (``errorUnavailableEndpoints``).

An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, unless ``auto.create.topics.enable`` is set (the
default, as in Kafka) and the request allows it (always before v4): the broker then asks the
controller to create it with ``num.partitions`` and ``default.replication.factor`` and answers
LEADER_NOT_AVAILABLE, so the client retries until the leader is known (Kafka's
``AutoTopicCreationManager``). An illegal name is INVALID_TOPIC_EXCEPTION; fewer alive brokers
than the replication factor is INVALID_REPLICATION_FACTOR and creates nothing
(``hasEnoughLiveBrokers``: an internal topic is never created smaller while the cluster starts).

Authorization (``handleTopicMetadataRequest``): asked for every topic, the principal sees only
those it may DESCRIBE; a topic it names but may not describe answers TOPIC_AUTHORIZATION_FAILED
(existing or not); auto-creation needs CREATE on the cluster or the topic, else
TOPIC_AUTHORIZATION_FAILED. KIP-430: ``include_cluster/topic_authorized_operations`` (v8+)
fill in the authorized-operations bitfields; otherwise they stay at Kafka's -2147483648.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.find_coordinator import (
    CoordinatorTopic,
    creatable_internal_topic,
    has_enough_live_brokers,
)
from pykraft.broker.handlers.services import (
    BrokerServices,
    alive_brokers,
    controller_id,
    topic_id_string,
    topic_uuid,
)
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import INTERNAL_TOPICS
from pykraft.metadata.api.topics import CreatableTopic
from pykraft.metadata.auth.acl import CLUSTER_NAME, AclOperation, ResourceType
from pykraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID
from pykraft.storage.topic_partition import validate_topic_name

logger = logging.getLogger(__name__)
EMPTY: Mapping[str, CoordinatorTopic] = MappingProxyType({})

FIRST_TOPIC_ID_VERSION = 10
FIRST_LISTENER_NOT_FOUND_VERSION = 6
FIRST_AUTO_CREATE_FLAG_VERSION = 4
# Bound (STYLE.md §7) on topics awaiting the controller's auto-create answer at once.
MAX_AUTO_CREATES_IN_FLIGHT = 10_000

_Response: Any = response_class(ApiKey.METADATA)
_Broker: Any = _Response.MetadataResponseBroker
_Topic: Any = _Response.MetadataResponseTopic
_Partition: Any = _Topic.MetadataResponsePartition


def metadata_handler(
    services: BrokerServices, internal_topics: Sequence[CoordinatorTopic] = ()
) -> ApiHandler:
    """``internal_topics``: the coordinators' topics, auto-created as their coordinators want
    them (without them an internal topic is never auto-created here)."""
    internal = {topic.topic: topic for topic in internal_topics}

    async def handle(request: RequestContext, message: Any) -> Any:
        return await handle_metadata(
            services, message, request.listener_name, request, internal_topics=internal
        )

    return kafka_python_handler(handle)


async def handle_metadata(
    services: BrokerServices,
    request: Any,
    listener_name: str,
    context: RequestContext | None = None,
    internal_topics: Mapping[str, CoordinatorTopic] = EMPTY,
) -> Any:
    """``context`` (who asks) is what the topics are authorized against; None: no checks."""
    version = request.version
    image = services.metadata()
    alive = alive_brokers(image, listener_name)
    all_topics = request.topics is None or (request.version == 0 and not request.topics)
    topics = []
    for index, entry in enumerate(_requested_topics(image, request)):
        topic = _topic(image, entry, version, listener_name)
        if context is not None and topic.name is not None:
            if not _describable(services, context, topic.name):
                if all_topics:
                    continue  # filterByAuthorized: hidden, not refused
                topic = _unauthorized(topic, by_id=request.topics[index].name is None)
            elif getattr(request, "include_topic_authorized_operations", False):
                topic.authorized_operations = services.authorizer.authorized_operations(
                    context, ResourceType.TOPIC, topic.name
                )
        topics.append(topic)
    missing = [t for t in topics if t.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION]
    if missing and _may_auto_create(services, request):
        creatable = [t for t in missing if _may_create(services, context, t.name)]
        for topic in missing:
            if topic not in creatable:
                topic.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
        await asyncio.gather(
            *(
                _auto_create(services, image, topic, internal_topics.get(topic.name))
                for topic in creatable
            )
        )
    response = _Response(
        version=version,
        throttle_time_ms=0,
        brokers=[_Broker(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack) for n in alive],
        cluster_id=services.cluster_id,
        controller_id=controller_id(services.broker_id, alive),
        topics=topics,
    )
    if context is not None and getattr(request, "include_cluster_authorized_operations", False):
        # handleTopicMetadataRequest: none (0) without DESCRIBE on the cluster.
        authorizer = services.authorizer
        response.authorized_operations = (
            authorizer.authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME)
            if authorizer.authorize_cluster(context, AclOperation.DESCRIBE)
            else set()
        )
    return response


def _describable(services: BrokerServices, context: RequestContext, name: str) -> bool:
    return services.authorizer.authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name)


def _may_create(services: BrokerServices, context: RequestContext | None, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic (``KafkaApis``)."""
    if context is None:
        return True
    authorizer = services.authorizer
    return authorizer.authorize_cluster(context, AclOperation.CREATE) or authorizer.authorize(
        context, AclOperation.CREATE, ResourceType.TOPIC, name
    )


def _unauthorized(topic: Any, by_id: bool) -> Any:
    """A topic the principal may not describe: TOPIC_AUTHORIZATION_FAILED, and nothing else
    about it (``handleTopicMetadataRequest``). Asked by name, existing or not, the name comes
    back and no id, so existence does not leak; asked by id, the id and no name."""
    return _Topic(
        error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
        name=None if by_id else topic.name,
        topic_id=topic.topic_id if by_id else ZERO_UUID,
        is_internal=False,
        partitions=[],
    )


def _requested_topics(image: MetadataImage, request: Any) -> list[TopicImage | Any]:
    """Topic images to describe, or the request's entry itself when the topic is unknown."""
    if request.topics is None or (request.version == 0 and not request.topics):
        return [topic for _, topic in sorted(image.topics.by_name.items())]
    found: list[TopicImage | Any] = []
    for entry in request.topics:
        topic = None
        if entry.name is not None:
            topic = image.topics.by_name.get(entry.name)
        elif getattr(entry, "topic_id", None) not in (None, ZERO_UUID):
            topic = image.topics.by_id.get(topic_id_string(entry.topic_id))
        found.append(entry if topic is None else topic)
    return found


def _topic(image: MetadataImage, topic: TopicImage | Any, version: int, listener: str) -> Any:
    if not isinstance(topic, TopicImage):
        error = (
            Errors.UNKNOWN_TOPIC_OR_PARTITION
            if topic.name is not None
            else (Errors.UNKNOWN_TOPIC_ID)
        )
        return _Topic(
            error_code=error,
            name=topic.name,
            topic_id=getattr(topic, "topic_id", ZERO_UUID),
            is_internal=False,
            partitions=[],
        )
    return _Topic(
        error_code=Errors.NONE,
        name=topic.name,
        topic_id=topic_uuid(topic.topic_id) if version >= FIRST_TOPIC_ID_VERSION else ZERO_UUID,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=[
            _partition(image, index, registration, version, listener)
            for index, registration in sorted(topic.partitions.items())
        ],
    )


def _partition(
    image: MetadataImage,
    index: int,
    partition: PartitionRegistration,
    version: int,
    listener: str,
) -> Any:
    """Kafka ``KRaftMetadataCache.partitionMetadata``."""
    offline = [r for r in partition.replicas if not _reachable(image, r, listener)]
    replicas, isr = list(partition.replicas), list(partition.isr)
    if version == 0:
        replicas = [r for r in replicas if r not in offline]
        isr = [r for r in isr if r not in offline]
    error = Errors.NONE
    leader = image.cluster.broker(partition.leader) if partition.has_leader() else None
    leader_id = partition.leader
    if leader is None:
        error, leader_id = Errors.LEADER_NOT_AVAILABLE, -1
    elif leader.endpoint(listener) is None:
        error = (
            Errors.LISTENER_NOT_FOUND
            if version >= FIRST_LISTENER_NOT_FOUND_VERSION
            else (Errors.LEADER_NOT_AVAILABLE)
        )
        leader_id = -1
    elif len(replicas) < len(partition.replicas) or len(isr) < len(partition.isr):
        error = Errors.REPLICA_NOT_AVAILABLE
    return _Partition(
        error_code=error,
        partition_index=index,
        leader_id=leader_id,
        leader_epoch=partition.leader_epoch,
        replica_nodes=replicas,
        isr_nodes=isr,
        offline_replicas=offline,
    )


def _reachable(image: MetadataImage, broker_id: int, listener: str) -> bool:
    broker = image.cluster.broker(broker_id)
    return broker is not None and not broker.fenced and broker.endpoint(listener) is not None


def _may_auto_create(services: BrokerServices, request: Any) -> bool:
    if not services.auto_create_topics_enable:
        return False
    if request.version < FIRST_AUTO_CREATE_FLAG_VERSION:
        return True
    return bool(request.allow_auto_topic_creation)


async def _auto_create(
    services: BrokerServices, image: MetadataImage, topic: Any, internal: CoordinatorTopic | None
) -> None:
    """Ask the controller for the topic; rewrites ``topic.error_code`` with the outcome.

    ``AutoTopicCreationManager.creatableTopic``: ``__consumer_offsets`` and
    ``__transaction_state`` with their coordinators' partitions, replication factor and
    configs; any other with ``num.partitions`` and ``default.replication.factor``. An internal
    topic whose coordinator this broker does not run is left unknown: its partition count is
    the coordinator's to choose. ``filterCreatableTopics``: fewer alive brokers than the
    replication factor is INVALID_REPLICATION_FACTOR, and nothing is asked."""
    if topic.name in INTERNAL_TOPICS:
        if internal is None:
            return
        new_topic = creatable_internal_topic(internal)
    else:
        try:
            validate_topic_name(topic.name)
        except ValueError:
            topic.error_code = Errors.INVALID_TOPIC_EXCEPTION
            return
        new_topic = CreatableTopic(
            name=topic.name,
            num_partitions=services.num_partitions,
            replication_factor=services.default_replication_factor,
        )
    if not has_enough_live_brokers(image, new_topic.replication_factor):
        topic.error_code = Errors.INVALID_REPLICATION_FACTOR
        return
    in_flight = services.auto_create_in_flight
    if topic.name in in_flight or len(in_flight) >= MAX_AUTO_CREATES_IN_FLIGHT:
        # Asked for already: not again until the controller answered (Kafka's
        # filterCreatableTopics; a broker whose image lags would otherwise ask on every client's
        # Metadata: thousands of CreateTopics timing out in bench/scale.py). Kafka answers such a
        # topic UNKNOWN_TOPIC_OR_PARTITION, but it answers the first request at once, with
        # LEADER_NOT_AVAILABLE, where this handler awaits the controller: the topic is as far as
        # Kafka's first answer, and librdkafka fails a topic's queued records once it was reported
        # unknown for topic.metadata.propagation.max.ms (30 s), which a lagging image outlasts
        # (10,000 partitions on 3 brokers: 7,000 records failed).
        topic.error_code = Errors.LEADER_NOT_AVAILABLE
        return
    in_flight.add(topic.name)
    try:
        await services.controller.create_topic(new_topic, validate_only=False)
    except ControllerError as error:
        if error.code is not Errors.TOPIC_ALREADY_EXISTS:
            logger.info("auto-creating topic %s failed: %s", topic.name, error)
            topic.error_code = error.code
            return
    finally:
        in_flight.discard(topic.name)
    topic.error_code = Errors.LEADER_NOT_AVAILABLE
