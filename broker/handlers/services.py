"""What every handler reads: the broker's id, its metadata image, its ReplicaManager, its clock.

``BrokerServices`` is built once by the composition root and handed to each handler factory.
Helpers here answer the questions several handlers share: which brokers a client on a given
listener can reach (Kafka's ``getAliveBrokerNodes``), which id to name as controller, and who
leads a partition (KIP-951's ``CurrentLeader`` / ``NodeEndpoints`` hints).
"""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping

import attrs

from pykraft.broker.authorization import ALLOW_EVERYTHING, RequestAuthorizer
from pykraft.broker.controller_api import ControllerClient
from pykraft.broker.network import RequestContext
from pykraft.broker.quotas_shell import ClientQuotas
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.image import BrokerRegistration, MetadataImage
from pykraft.metadata.records import kafka_string_to_uuid, uuid_to_kafka_string
from pykraft.protocol.common import UNKNOWN_LEADER, LeaderIdAndEpoch, NodeEndpoint
from pykraft.protocol.fetch import FetchPartition
from pykraft.replica.fetch_sessions import FetchSessionCache
from pykraft.storage.topic_partition import TopicPartition


def random_session_id() -> int:
    """Kafka's ``FetchSessionCache.newSessionId``: ``nextInt(1, Int.MaxValue)``."""
    return random.randint(1, 2**31 - 2)


# A Fetch request's partition as it names it: (topic name or "", topic id or None, partition).
FetchKey = tuple[str, uuid.UUID | None, int]


@attrs.frozen(kw_only=True)
class BrokerServices:
    broker_id: int
    # meta.properties' cluster.id, as the broker was formatted with it.
    cluster_id: str
    replica_manager: ReplicaManager
    # The broker's current metadata image (the metadata loader's latest publish).
    metadata: Callable[[], MetadataImage]
    controller: ControllerClient
    # Kafka's ``time.milliseconds()``: record timestamps and segment ages are wall time.
    wall_clock_ms: Callable[[], int]
    # auto.create.topics.enable and the defaults it creates topics with.
    auto_create_topics_enable: bool = False
    num_partitions: int = 1
    default_replication_factor: int = 1
    # Who may do what (broker.authorization); allows everything unless an authorizer is set.
    authorizer: RequestAuthorizer = ALLOW_EVERYTHING
    # server.properties as written: DescribeConfigs' STATIC_BROKER_CONFIG values.
    static_broker_configs: Mapping[str, str] = attrs.field(factory=dict)
    # KIP-546 client quotas (Produce and consumer Fetch byte rates); None enforces none.
    client_quotas: ClientQuotas | None = None
    # delegation.token.secret.key: None disables delegation tokens (KIP-48).
    delegation_token_secret_key: str | None = attrs.field(default=None, repr=False)
    # Topics this broker asked the controller to auto-create and awaits: another Metadata
    # request naming one does not ask again (Kafka's AutoTopicCreationManager inflightTopics);
    # at most MAX_AUTO_CREATES_IN_FLIGHT (broker/handlers/auto_create.py).
    auto_create_in_flight: set[str] = attrs.field(factory=set)
    # KIP-227 incremental fetch sessions (broker.handlers.fetch), keyed as a request names
    # its partitions; max.incremental.fetch.session.cache.slots.
    fetch_sessions: FetchSessionCache[FetchKey, FetchPartition] = attrs.field(
        factory=lambda: FetchSessionCache(random_session_id)
    )


def authorized_topics(
    services: BrokerServices,
    context: RequestContext | None,
    operation: AclOperation,
    names: Iterable[str],
) -> Collection[str]:
    """The topics the client may act on (Kafka's ``AuthHelper.filterByAuthorized``); every one
    when no client asks (``context`` None: the broker's own callers)."""
    if context is None:
        return set(names)
    return services.authorizer.authorized(context, operation, ResourceType.TOPIC, names)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A Kafka uuid string (metadata) as the wire's 16 bytes."""
    return uuid.UUID(bytes=kafka_string_to_uuid(topic_id))


@functools.lru_cache(maxsize=4096)
def topic_id_string(value: uuid.UUID) -> str:
    """The image's key of a request's topic id; cached, as each fetch names its topics by id
    (bounded: ids a client makes up only push others out)."""
    return uuid_to_kafka_string(value.bytes)


def node_endpoint(broker: BrokerRegistration, listener_name: str) -> NodeEndpoint | None:
    endpoint = broker.endpoint(listener_name)
    if endpoint is None:
        return None
    return NodeEndpoint(broker.id, endpoint.host, endpoint.port, broker.rack)


def alive_brokers(image: MetadataImage, listener_name: str) -> list[NodeEndpoint]:
    """Unfenced brokers reachable on ``listener_name``, by id (``getAliveBrokerNodes``)."""
    nodes = []
    for _, broker in sorted(image.cluster.brokers.items()):
        node = None if broker.fenced else node_endpoint(broker, listener_name)
        if node is not None:
            nodes.append(node)
    return nodes


def controller_id(broker_id: int, alive: list[NodeEndpoint]) -> int:
    """The id Metadata and DescribeCluster name as controller.

    Clients send admin requests there; any broker forwards them to the active controller, whose
    own id is not a broker a client can reach. Kafka (KRaft) names a random alive broker; we
    name this broker when it is alive (deterministic, and the client is already connected
    here), else the lowest alive broker id, else -1.
    """
    ids = [node.node_id for node in alive]
    if broker_id in ids:
        return broker_id
    return ids[0] if ids else -1


def current_leader(
    image: MetadataImage, topic_partition: TopicPartition, listener_name: str
) -> tuple[LeaderIdAndEpoch, NodeEndpoint | None]:
    """Who leads ``topic_partition`` per the image, and how to reach it (KIP-951)."""
    topic = image.topics.by_name.get(topic_partition.topic)
    registration = None if topic is None else topic.partitions.get(topic_partition.partition)
    if registration is None or not registration.has_leader():
        return UNKNOWN_LEADER, None
    hint = LeaderIdAndEpoch(registration.leader, registration.leader_epoch)
    broker = image.cluster.broker(registration.leader)
    return hint, None if broker is None else node_endpoint(broker, listener_name)
