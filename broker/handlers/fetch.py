"""Fetch (v4-v17; KafkaApis answers v0-v3 itself) — Kafka's ``KafkaApis.handleFetchRequest``
without fetch sessions.

Consumers (``replica_id`` -1) read up to the high watermark (``isolation_level`` 0,
READ_UNCOMMITTED) or the last stable offset (1, READ_COMMITTED), followers (their broker id, with
their broker epoch from v15's ReplicaState) up to the log end (``ReplicaManager.fetch_messages``,
which also waits for ``min_bytes`` / ``max_wait_ms``). Stored batches go out as the
``FileSlice``s the log returned — never read, never re-encoded — with each partition's high
watermark, last stable offset and log start offset. A READ_COMMITTED answer lists the aborted
transactions (producer id, first offset) overlapping the batches sent, an empty list when none
or nothing was read; other answers send null, as Kafka does (the consumer drops the aborted
transactions' records and every control batch itself).

Fetch sessions (KIP-227) are not kept: every fetch is a full fetch answered with session id 0,
which tells the client no session was created, so it keeps sending full fetches (Kafka does the
same when its session cache is full). A request naming a session (an incremental fetch) gets the
top-level FETCH_SESSION_ID_NOT_FOUND, after which clients fall back to a full fetch.
``forgotten_topics_data`` only matters inside a session and is ignored.

v13+ names topics by id; an id this broker does not know gets UNKNOWN_TOPIC_ID. Partitions that
failed with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carry the current leader (v12+) and
its endpoint (v16) so the client can retry without a Metadata round trip (KIP-951).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import attrs

from pykraft.broker.handlers.services import BrokerServices, current_leader, topic_id_string
from pykraft.broker.kafka_apis import ApiHandler, ResponseBody, request_throttle_ms
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import FetchParams, LogReadResult, PartitionFetch
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.common import UNKNOWN_LEADER, NodeEndpoint
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import (
    NO_DIVERGING_EPOCH,
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
    decode_fetch_request,
    encode_fetch_response,
)
from pykraft.protocol.wire import ZERO_UUID
from pykraft.storage.topic_partition import TopicPartition

FIRST_TOPIC_ID_VERSION = 13
# Kafka's FetchMetadata epochs: a full fetch opens (0) or needs no (-1) session.
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_LEADER_HINT_ERRORS = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH})

# A partition as the request named it: (topic name or "", topic id or None, partition).
_Key = tuple[str, uuid.UUID | None, int]


def fetch_handler(services: BrokerServices) -> ApiHandler:
    async def handle(request: RequestContext, body: memoryview) -> ResponseBody:
        version = request.header.api_version
        fetch = decode_fetch_request(body, version)
        if services.client_quotas is not None and fetch.replica_id < 0:
            fetch = _bounded_by_quota(fetch, services.client_quotas.max_fetch_bytes(request))
        response = await handle_fetch(
            services, fetch, version, request.listener_name, readable(services, request, fetch)
        )
        encoded = encode_fetch_response(response, version)
        if services.client_quotas is not None and fetch.replica_id < 0:
            # request_percentage, then consumer_byte_rate over the response's bytes; a
            # throttled fetch is answered empty (Kafka's FetchContext.getThrottledResponse)
            # and its bytes not counted.
            throttle_ms = services.client_quotas.record_fetch(
                request, encoded.length, request_throttle_ms(request)
            )
            if throttle_ms:
                throttled = FetchResponse((), throttle_time_ms=throttle_ms, session_id=0)
                return encode_fetch_response(throttled, version)
        return encoded

    return handle


def _bounded_by_quota(fetch: FetchRequest, quota_max_bytes: int | None) -> FetchRequest:
    """``KafkaApis.handleFetchRequest``: a consumer's max bytes (and so its min bytes) never
    exceed what its quota allows in one quota window; the first batch still goes out whole."""
    if quota_max_bytes is None or quota_max_bytes >= fetch.max_bytes:
        return fetch
    max_bytes = max(0, quota_max_bytes)
    return attrs.evolve(fetch, max_bytes=max_bytes, min_bytes=min(fetch.min_bytes, max_bytes))


def readable(
    services: BrokerServices, request: RequestContext, fetch: FetchRequest
) -> Callable[[str], bool]:
    """``KafkaApis.handleFetchRequest``: a follower's fetch needs CLUSTER_ACTION on the cluster
    (else every partition TOPIC_AUTHORIZATION_FAILED), a consumer's READ on each topic."""
    authorizer = services.authorizer
    if fetch.replica_id >= 0:
        follower = authorizer.authorize_cluster(request, AclOperation.CLUSTER_ACTION)
        return lambda _: follower
    allowed: dict[str, bool] = {}

    def check(topic: str) -> bool:
        if topic not in allowed:
            allowed[topic] = authorizer.authorize(
                request, AclOperation.READ, ResourceType.TOPIC, topic
            )
        return allowed[topic]

    return check


async def handle_fetch(
    services: BrokerServices,
    fetch: FetchRequest,
    api_version: int,
    listener_name: str,
    authorized: Callable[[str], bool] | None = None,
) -> FetchResponse:
    if fetch.session_id != 0 or fetch.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        return FetchResponse((), error_code=Errors.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    image = services.metadata()
    by_topic_id = api_version >= FIRST_TOPIC_ID_VERSION
    keys: list[_Key] = []
    fetches: list[PartitionFetch] = []
    unknown: set[_Key] = set()
    denied: set[_Key] = set()
    for topic in fetch.topics:
        name = _topic_name(image, topic.topic_id) if by_topic_id else topic.topic
        for partition in topic.partitions:
            key = (topic.topic, topic.topic_id if by_topic_id else None, partition.partition)
            keys.append(key)
            if name is None:
                unknown.add(key)
                continue
            if authorized is not None and not authorized(name):
                denied.add(key)
                continue
            fetches.append(
                PartitionFetch(
                    topic_partition=TopicPartition(name, partition.partition),
                    fetch_offset=partition.fetch_offset,
                    partition_max_bytes=partition.partition_max_bytes,
                    current_leader_epoch=partition.current_leader_epoch,
                    last_fetched_epoch=partition.last_fetched_epoch,
                    log_start_offset=partition.log_start_offset,
                )
            )
    params = FetchParams(
        replica_id=fetch.replica_id,
        replica_epoch=fetch.replica_state.replica_epoch,
        max_wait_ms=fetch.max_wait_ms,
        min_bytes=fetch.min_bytes,
        max_bytes=fetch.max_bytes,
        isolation_level=fetch.isolation_level,
        partitions=tuple(fetches),
    )
    read = await services.replica_manager.fetch_messages(params)
    stats = services.replica_manager.broker_topic_stats
    for result in read:  # KafkaApis: brokerTopicStats.updateBytesOut per partition answered
        stats.record_bytes_out(
            result.topic_partition.topic, result.size_in_bytes, follower=fetch.replica_id >= 0
        )
    results = iter(read)
    builder = _ResponseBuilder(services.metadata(), listener_name)
    for key in keys:
        if key in unknown:
            builder.add(key, PartitionData(key[2], error_code=Errors.UNKNOWN_TOPIC_ID))
        elif key in denied:
            builder.add(key, PartitionData(key[2], error_code=Errors.TOPIC_AUTHORIZATION_FAILED))
        else:
            builder.add(key, builder.partition_data(next(results)))
    return builder.response()


def _topic_name(image: MetadataImage, topic_id: uuid.UUID) -> str | None:
    topic = image.topics.by_id.get(topic_id_string(topic_id))
    return None if topic is None else topic.name


class _ResponseBuilder:
    """Groups partitions by topic in request order and collects KIP-951 endpoints."""

    def __init__(self, image: MetadataImage, listener_name: str) -> None:
        self._image = image
        self._listener_name = listener_name
        self._topics: dict[tuple[str, uuid.UUID | None], list[PartitionData]] = {}
        self._endpoints: dict[int, NodeEndpoint] = {}

    def add(self, key: _Key, data: PartitionData) -> None:
        self._topics.setdefault((key[0], key[1]), []).append(data)

    def partition_data(self, result: LogReadResult) -> PartitionData:
        leader = UNKNOWN_LEADER
        if result.error in _LEADER_HINT_ERRORS:
            leader, endpoint = current_leader(
                self._image, result.topic_partition, self._listener_name
            )
            if endpoint is not None:
                self._endpoints[endpoint.node_id] = endpoint
        diverging = NO_DIVERGING_EPOCH
        if result.diverging_epoch is not None:
            epoch = result.diverging_epoch
            diverging = EpochEndOffset(epoch.leader_epoch, epoch.offset)
        aborted = None
        if result.aborted_transactions is not None:
            aborted = tuple(
                AbortedTransaction(txn.producer_id, txn.first_offset)
                for txn in result.aborted_transactions
            )
        return PartitionData(
            result.topic_partition.partition,
            error_code=result.error,
            high_watermark=result.high_watermark,
            last_stable_offset=result.last_stable_offset,
            log_start_offset=result.log_start_offset,
            diverging_epoch=diverging,
            current_leader=leader,
            aborted_transactions=aborted if result.error is Errors.NONE else None,
            records=result.slices,
        )

    def response(self) -> FetchResponse:
        topics = tuple(
            FetchableTopicResponse(tuple(partitions), topic=name, topic_id=topic_id or ZERO_UUID)
            for (name, topic_id), partitions in self._topics.items()
        )
        endpoints = tuple(self._endpoints[node_id] for node_id in sorted(self._endpoints))
        return FetchResponse(topics, session_id=0, node_endpoints=endpoints)
