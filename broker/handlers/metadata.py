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
``AutoTopicCreationManager``, ``broker.handlers.auto_create``). An illegal name is
INVALID_TOPIC_EXCEPTION; fewer alive brokers than the replication factor is
INVALID_REPLICATION_FACTOR and creates nothing (``hasEnoughLiveBrokers``: an internal topic is
never created smaller while the cluster starts).

The answer is encoded by hand (``protocol.metadata_response``), a topic entry at a time, and the
handler keeps each topic's entry while its ``TopicImage`` and the brokers' ``ClusterImage`` stay
the same objects (``TopicEntries``): 10,000 partitions are answered in under a millisecond where
building and encoding them took 50 ms (an idle machine) to 0.5 s (a loaded one), during which
the broker answered nothing else.

Authorization (``handleTopicMetadataRequest``): asked for every topic, the principal sees only
those it may DESCRIBE; a topic it names but may not describe answers TOPIC_AUTHORIZATION_FAILED
(existing or not); auto-creation needs CREATE on the cluster or the topic, else
TOPIC_AUTHORIZATION_FAILED. KIP-430: ``include_cluster/topic_authorized_operations`` (v8+)
fill in the authorized-operations bitfields; otherwise they stay at Kafka's -2147483648.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import attrs

from pykraft.broker.handlers.auto_create import auto_create, may_auto_create, may_create
from pykraft.broker.handlers.find_coordinator import CoordinatorTopic
from pykraft.broker.handlers.services import (
    BrokerServices,
    alive_brokers,
    controller_id,
    topic_id_string,
    topic_uuid,
)
from pykraft.broker.kafka_apis import ApiHandler, request_throttle_ms
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import INTERNAL_TOPICS
from pykraft.metadata.auth.acl import CLUSTER_NAME, AclOperation, ResourceType
from pykraft.metadata.auth.authorizer import operations_bitfield
from pykraft.metadata.image import ClusterImage, MetadataImage, PartitionRegistration, TopicImage
from pykraft.protocol.apis import decode_request
from pykraft.protocol.errors import Errors
from pykraft.protocol.metadata_response import (
    AUTHORIZED_OPERATIONS_OMITTED,
    BrokerEntry,
    PartitionEntry,
    check_version,
    encode_partition,
    encode_response,
    encode_topic,
)
from pykraft.protocol.wire import ZERO_UUID

logger = logging.getLogger(__name__)
EMPTY: Mapping[str, CoordinatorTopic] = MappingProxyType({})

FIRST_TOPIC_ID_VERSION = 10
FIRST_LISTENER_NOT_FOUND_VERSION = 6
ZERO_ID = ZERO_UUID.bytes


def metadata_handler(
    services: BrokerServices, internal_topics: Sequence[CoordinatorTopic] = ()
) -> ApiHandler:
    """``internal_topics``: the coordinators' topics, auto-created as their coordinators want
    them (without them an internal topic is never auto-created here)."""
    internal = {topic.topic: topic for topic in internal_topics}
    entries = TopicEntries()

    async def handle(context: RequestContext, body: memoryview) -> bytes:
        header = context.header
        request = decode_request(header.api_key, header.api_version, body)
        return await handle_metadata(
            services,
            request,
            context.listener_name,
            context,
            internal_topics=internal,
            entries=entries,
            throttle_time_ms=lambda: request_throttle_ms(context),
        )

    return handle


class TopicEntries:
    """Each topic's encoded entry, kept while the topic and the brokers stay as they are.

    The metadata image is immutable and shares what a delta did not change: a topic's
    ``TopicImage`` is the same object until one of its partitions changes, and the cluster's
    brokers (fencing, endpoints: what makes a replica offline) the same ``ClusterImage``. So an
    entry is kept per version and listener under its topic's id, with the ``TopicImage`` it
    was encoded from, and every entry goes when the brokers change. Deleted topics' entries
    linger until ``DELETED_ENTRIES_MAX`` more than the image's topics, then all start again."""

    DELETED_ENTRIES_MAX = 64

    def __init__(self) -> None:
        self._cluster: ClusterImage | None = None
        self._by_version: dict[tuple[int, str], dict[str, _Kept]] = {}

    def __len__(self) -> int:
        """Entries kept, over every version and listener."""
        return sum(len(kept) for kept in self._by_version.values())

    def entry(
        self,
        image: MetadataImage,
        topic: TopicImage,
        version: int,
        listener: str,
        authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED,
    ) -> bytes:
        """The topic's entry; with ``authorized_operations`` (KIP-430, the asker's own) it is
        built from the kept partition entries and not kept."""
        if image.cluster is not self._cluster:
            self._cluster, self._by_version = image.cluster, {}
        kept = self._by_version.setdefault((version, listener), {})
        if len(kept) > len(image.topics.by_id) + self.DELETED_ENTRIES_MAX:
            kept.clear()
        found = kept.get(topic.topic_id)
        if found is None or found.topic is not topic:
            found = _encode_topic(image, topic, version, listener, found)
            kept[topic.topic_id] = found
        if authorized_operations == AUTHORIZED_OPERATIONS_OMITTED:
            return found.entry
        partitions = [entry for _, entry in found.partitions.values()]
        return _topic_entry(topic, version, partitions, authorized_operations)


class _Kept(NamedTuple):
    topic: TopicImage
    entry: bytes
    partitions: dict[int, tuple[PartitionRegistration, bytes]]


@attrs.define
class _Unknown:
    """A topic the image lacks, as asked for: its error may still change (auto-creation)."""

    name: str | None
    topic_id: bytes
    error_code: int
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


async def handle_metadata(
    services: BrokerServices,
    request: Any,
    listener_name: str,
    context: RequestContext | None = None,
    internal_topics: Mapping[str, CoordinatorTopic] = EMPTY,
    entries: TopicEntries | None = None,
    throttle_time_ms: Callable[[], int] = lambda: 0,
) -> bytes:
    """The encoded response; ``context`` (who asks) is what the topics are authorized
    against (None: no checks). ``throttle_time_ms`` is asked last (KIP-219: the request
    quota's throttle counts the handler's time)."""
    version = request.version
    check_version(version)
    invalid = _invalid_before_v12(request)
    if invalid is not None:
        return _error_response(request, invalid, throttle_time_ms())
    image = services.metadata()
    if entries is None:
        entries = TopicEntries()
    alive = alive_brokers(image, listener_name)
    all_topics = request.topics is None or (request.version == 0 and not request.topics)
    with_operations = context is not None and bool(
        getattr(request, "include_topic_authorized_operations", False)
    )
    topics: list[bytes | _Unknown] = []
    for index, found in enumerate(_requested_topics(image, request)):
        name = found.name
        if context is not None and name is not None and not _describable(services, context, name):
            if all_topics:
                continue  # filterByAuthorized: hidden, not refused
            by_id = request.topics[index].name is None
            topics.append(_unauthorized(version, name, _topic_id_of(found), by_id))
        elif not isinstance(found, TopicImage):
            error = (
                Errors.UNKNOWN_TOPIC_OR_PARTITION if name is not None else Errors.UNKNOWN_TOPIC_ID
            )
            unknown = _Unknown(name, _topic_id_of(found), error)
            if with_operations and name is not None:
                assert context is not None
                unknown.authorized_operations = _topic_operations(services, context, name)
            topics.append(unknown)
        else:
            operations = AUTHORIZED_OPERATIONS_OMITTED
            if with_operations:
                assert context is not None
                operations = _topic_operations(services, context, name)
            topics.append(entries.entry(image, found, version, listener_name, operations))
    missing = [
        t
        for t in topics
        if isinstance(t, _Unknown) and t.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    ]
    if missing and may_auto_create(services, request):
        # Asked by name (UNKNOWN_TOPIC_OR_PARTITION); CREATE on the cluster or the topic.
        named = [(t, t.name) for t in missing if t.name is not None]
        creatable = [(t, name) for t, name in named if may_create(services, context, name)]
        for topic in missing:
            topic.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
        errors = await asyncio.gather(
            *(
                auto_create(services, image, name, internal_topics.get(name))
                for _, name in creatable
            )
        )
        for (topic, _), outcome in zip(creatable, errors, strict=True):
            topic.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION if outcome is None else outcome
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if context is not None and getattr(request, "include_cluster_authorized_operations", False):
        # handleTopicMetadataRequest: none (0) without DESCRIBE on the cluster.
        authorizer = services.authorizer
        cluster_operations = 0
        if authorizer.authorize_cluster(context, AclOperation.DESCRIBE):
            cluster_operations = operations_bitfield(
                authorizer.authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME)
            )
    return encode_response(
        version,
        throttle_time_ms=throttle_time_ms(),
        brokers=[BrokerEntry(n.node_id, n.host, n.port, n.rack) for n in alive],
        cluster_id=services.cluster_id,
        controller_id=controller_id(services.broker_id, alive),
        topics=[
            t
            if isinstance(t, bytes)
            else encode_topic(
                version, t.error_code, t.name, t.topic_id, False, (), t.authorized_operations
            )
            for t in topics
        ],
        cluster_authorized_operations=cluster_operations,
    )


def _invalid_before_v12(request: Any) -> str | None:
    """Kafka's ``handleTopicMetadataRequest``: before v12 a topic is asked by name only."""
    if request.version >= 12 or not request.topics:
        return None
    for topic in request.topics:
        if topic.name is None:
            return f"Topic name can not be null for version {request.version}"
        if getattr(topic, "topic_id", None) not in (None, ZERO_UUID):
            return f"Topic IDs are not supported in requests for version {request.version}"
    return None


def _error_response(request: Any, reason: str, throttle_time_ms: int) -> bytes:
    """Kafka's ``MetadataRequest.getErrorResponse`` for an ``InvalidRequestException``: each
    topic asked for with INVALID_REQUEST (a null name as ""), no brokers, controller -1."""
    logger.info("Metadata v%d refused: %s", request.version, reason)
    return encode_response(
        request.version,
        throttle_time_ms=throttle_time_ms,
        brokers=[],
        cluster_id=None,
        controller_id=-1,
        topics=[
            encode_topic(
                request.version,
                Errors.INVALID_REQUEST,
                topic.name or "",
                _topic_id_of(topic),
                False,
                (),
            )
            for topic in request.topics
        ],
    )


def _topic_operations(services: BrokerServices, context: RequestContext, name: str) -> int:
    return operations_bitfield(
        services.authorizer.authorized_operations(context, ResourceType.TOPIC, name)
    )


def _topic_id_of(found: TopicImage | Any) -> bytes:
    """The 16 bytes of a topic's id, or of the id a request's entry asked for (zeros)."""
    if isinstance(found, TopicImage):
        return topic_uuid(found.topic_id).bytes
    topic_id: uuid.UUID | None = getattr(found, "topic_id", None)
    return ZERO_ID if topic_id is None else topic_id.bytes


def _describable(services: BrokerServices, context: RequestContext, name: str) -> bool:
    return services.authorizer.authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name)


def _unauthorized(version: int, name: str, topic_id: bytes, by_id: bool) -> bytes:
    """A topic the principal may not describe: TOPIC_AUTHORIZATION_FAILED, and nothing else
    about it (``handleTopicMetadataRequest``). Asked by name, existing or not, the name comes
    back and no id, so existence does not leak; asked by id, the id and no name."""
    return encode_topic(
        version,
        Errors.TOPIC_AUTHORIZATION_FAILED,
        None if by_id else name,
        topic_id if by_id else ZERO_ID,
        False,
        (),
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


def _encode_topic(
    image: MetadataImage, topic: TopicImage, version: int, listener: str, before: _Kept | None
) -> _Kept:
    """``topic``'s entry, re-using ``before``'s partition entries whose registration stayed:
    most changes of a topic are of one partition (a leader, an ISR, a log dir assigned:
    KIP-858)."""
    kept = before.partitions if before is not None else {}
    partitions = {}
    for index, registration in sorted(topic.partitions.items()):
        old = kept.get(index)
        if old is not None and old[0] is registration:
            partitions[index] = old
        else:
            entry = _partition(image, index, registration, version, listener)
            partitions[index] = (registration, encode_partition(version, entry))
    encoded = _topic_entry(topic, version, [entry for _, entry in partitions.values()])
    return _Kept(topic, encoded, partitions)


def _topic_entry(
    topic: TopicImage,
    version: int,
    partitions: Sequence[bytes],
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED,
) -> bytes:
    return encode_topic(
        version,
        Errors.NONE,
        topic.name,
        topic_uuid(topic.topic_id).bytes if version >= FIRST_TOPIC_ID_VERSION else ZERO_ID,
        topic.name in INTERNAL_TOPICS,
        partitions,
        authorized_operations,
    )


def _partition(
    image: MetadataImage,
    index: int,
    partition: PartitionRegistration,
    version: int,
    listener: str,
) -> PartitionEntry:
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
    return PartitionEntry(error, index, leader_id, partition.leader_epoch, replicas, isr, offline)


def _reachable(image: MetadataImage, broker_id: int, listener: str) -> bool:
    broker = image.cluster.broker(broker_id)
    return broker is not None and not broker.fenced and broker.endpoint(listener) is not None
