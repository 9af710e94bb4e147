"""Topics created because a Metadata request named them (Kafka's ``AutoTopicCreationManager``).

``broker.handlers.metadata`` asks here for each topic a request names that the image lacks,
when ``auto.create.topics.enable`` is set (the default, as in Kafka) and the request allows it
(always before v4).
"""

from __future__ import annotations

import logging
from typing import Any

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.find_coordinator import (
    CoordinatorTopic,
    creatable_internal_topic,
    has_enough_live_brokers,
)
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import INTERNAL_TOPICS
from pykraft.metadata.api.topics import CreatableTopic
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import validate_topic_name

logger = logging.getLogger(__name__)

FIRST_AUTO_CREATE_FLAG_VERSION = 4
# Bound (STYLE.md §7) on topics awaiting the controller's auto-create answer at once.
MAX_AUTO_CREATES_IN_FLIGHT = 10_000


def may_create(services: BrokerServices, context: RequestContext | None, name: str | None) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic (``KafkaApis``)."""
    if context is None:
        return True
    assert name is not None
    authorizer = services.authorizer
    return authorizer.authorize_cluster(context, AclOperation.CREATE) or authorizer.authorize(
        context, AclOperation.CREATE, ResourceType.TOPIC, name
    )


def may_auto_create(services: BrokerServices, request: Any) -> bool:
    if not services.auto_create_topics_enable:
        return False
    if request.version < FIRST_AUTO_CREATE_FLAG_VERSION:
        return True
    return bool(request.allow_auto_topic_creation)


async def auto_create(
    services: BrokerServices,
    image: MetadataImage,
    name: str,
    internal: CoordinatorTopic | None,
) -> int | None:
    """Ask the controller for the topic; the error to answer for it, or None to leave it
    unknown.

    ``AutoTopicCreationManager.creatableTopic``: ``__consumer_offsets`` and
    ``__transaction_state`` with their coordinators' partitions, replication factor and
    configs; any other with ``num.partitions`` and ``default.replication.factor``. An internal
    topic whose coordinator this broker does not run is left unknown: its partition count is
    the coordinator's to choose. ``filterCreatableTopics``: fewer alive brokers than the
    replication factor is INVALID_REPLICATION_FACTOR, and nothing is asked."""
    if name in INTERNAL_TOPICS:
        if internal is None:
            return None
        new_topic = creatable_internal_topic(internal)
    else:
        try:
            validate_topic_name(name)
        except ValueError:
            return Errors.INVALID_TOPIC_EXCEPTION
        new_topic = CreatableTopic(
            name=name,
            num_partitions=services.num_partitions,
            replication_factor=services.default_replication_factor,
        )
    if not has_enough_live_brokers(image, new_topic.replication_factor):
        return Errors.INVALID_REPLICATION_FACTOR
    in_flight = services.auto_create_in_flight
    if name in in_flight or len(in_flight) >= MAX_AUTO_CREATES_IN_FLIGHT:
        # Asked for already: not again until the controller answered (Kafka's
        # filterCreatableTopics; a broker whose image lags would otherwise ask on every client's
        # Metadata: thousands of CreateTopics timing out in bench/scale.py). Kafka answers such a
        # topic UNKNOWN_TOPIC_OR_PARTITION, but it answers the first request at once, with
        # LEADER_NOT_AVAILABLE, where this handler awaits the controller: the topic is as far as
        # Kafka's first answer, and librdkafka fails a topic's queued records once it was reported
        # unknown for topic.metadata.propagation.max.ms (30 s), which a lagging image outlasts
        # (10,000 partitions on 3 brokers: 7,000 records failed).
        return Errors.LEADER_NOT_AVAILABLE
    in_flight.add(name)
    try:
        await services.controller.create_topic(new_topic, validate_only=False)
    except ControllerError as error:
        if error.code is not Errors.TOPIC_ALREADY_EXISTS:
            logger.info("auto-creating topic %s failed: %s", name, error)
            return error.code
    finally:
        in_flight.discard(name)
    return Errors.LEADER_NOT_AVAILABLE
