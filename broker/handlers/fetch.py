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

Fetch sessions (KIP-227, ``replica.fetch_sessions``, Kafka's ``FetchManager.newContext``): a
full fetch with epoch 0 may open a session, answered with its id (0 when the cache of
``max.incremental.fetch.session.cache.slots`` has no room, and the client goes on with full
fetches); epoch -1 opens none. An incremental fetch names only what changed and what to
forget (``forgotten_topics_data``), is read over every partition of its session and answered
with the partitions that have records, a moved high watermark or log start offset, an error or
a diverging epoch; a session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR) is answered top-level with no partitions. A consumer fetch that
a quota throttles is answered empty with session id 0 and its session closed, since its
session already counts the answer as sent (Kafka keeps the session and defers the update; the
client's next fetch here is a full one).

v13+ names topics by id; an id this broker does not know gets UNKNOWN_TOPIC_ID. Partitions that
failed with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carry the current leader (v12+) and
its endpoint (v16) so the client can retry without a Metadata round trip (KIP-951).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

import attrs

from pykraft.broker.handlers.services import (
    BrokerServices,
    FetchKey,
    current_leader,
    topic_id_string,
)
from pykraft.broker.kafka_apis import ApiHandler, ResponseBody, request_throttle_ms
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import FetchParams, LogReadResult, PartitionFetch
from pykraft.fetcher.fetch_session import INVALID_SESSION_ID
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.common import UNKNOWN_LEADER, NodeEndpoint
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import (
    NO_DIVERGING_EPOCH,
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    PartitionData,
    decode_fetch_request,
    encode_fetch_response,
)
from pykraft.protocol.wire import ZERO_UUID
from pykraft.replica.fetch_sessions import (
    FullContext,
    IncrementalContext,
    PartitionOutcome,
    SessionError,
)
from pykraft.storage.topic_partition import TopicPartition

FIRST_TOPIC_ID_VERSION = 13
_LEADER_HINT_ERRORS = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH})

_Key = FetchKey


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
                services.fetch_sessions.remove(response.session_id)
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
    by_topic_id = api_version >= FIRST_TOPIC_ID_VERSION
    sessions = services.fetch_sessions
    now_ms = services.replica_manager.monotonic_ms()
    context = sessions.new_context(
        fetch.session_id,
        fetch.session_epoch,
        _requested(fetch, by_topic_id),
        _forgotten(fetch, by_topic_id),
        privileged=fetch.replica_id >= 0,
        uses_topic_ids=by_topic_id,
        now_ms=now_ms,
    )
    if isinstance(context, SessionError):
        return FetchResponse((), error_code=context.error, session_id=INVALID_SESSION_ID)
    image = services.metadata()
    keys: list[_Key] = []
    fetches: list[PartitionFetch] = []
    unknown: set[_Key] = set()
    denied: set[_Key] = set()
    for key, partition in context.partitions.items():
        keys.append(key)
        name = _topic_name(image, key[1]) if key[1] is not None else key[0]
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
    answers: dict[_Key, PartitionData] = {}
    outcomes: dict[_Key, PartitionOutcome] = {}
    for key in keys:
        if key in unknown:
            answers[key] = PartitionData(key[2], error_code=Errors.UNKNOWN_TOPIC_ID)
        elif key in denied:
            answers[key] = PartitionData(key[2], error_code=Errors.TOPIC_AUTHORIZATION_FAILED)
        else:
            result = next(results)
            answers[key] = builder.partition_data(result)
            outcomes[key] = _outcome(answers[key], result.size_in_bytes)
            continue
        outcomes[key] = _outcome(answers[key], 0)
    session_id = INVALID_SESSION_ID
    answered: Iterable[_Key] = keys
    if isinstance(context, FullContext):
        session_id = sessions.full_response(context, outcomes, now_ms)
    elif isinstance(context, IncrementalContext):
        session_id = context.session.id
        error, answered = sessions.incremental_response(context, outcomes)
        if error is not Errors.NONE:
            return FetchResponse((), error_code=error, session_id=session_id)
    for key in answered:
        builder.add(key, answers[key])
    return builder.response(session_id)


def _requested(fetch: FetchRequest, by_topic_id: bool) -> dict[_Key, FetchPartition]:
    """The request's partitions by key, in request order (the last of a repeated one)."""
    return {
        (topic.topic, topic.topic_id if by_topic_id else None, partition.partition): partition
        for topic in fetch.topics
        for partition in topic.partitions
    }


def _forgotten(fetch: FetchRequest, by_topic_id: bool) -> list[_Key]:
    return [
        (topic.topic, topic.topic_id if by_topic_id else None, partition)
        for topic in fetch.forgotten_topics_data
        for partition in topic.partitions
    ]


def _outcome(data: PartitionData, records_bytes: int) -> PartitionOutcome:
    """What a session compares to decide whether the partition is answered."""
    return PartitionOutcome(
        records_bytes=records_bytes,
        high_watermark=data.high_watermark,
        log_start_offset=data.log_start_offset,
        error=Errors(data.error_code),
        diverging_epoch=data.diverging_epoch != NO_DIVERGING_EPOCH,
        preferred_read_replica=data.preferred_read_replica >= 0,
    )


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

    def response(self, session_id: int) -> FetchResponse:
        topics = tuple(
            FetchableTopicResponse(tuple(partitions), topic=name, topic_id=topic_id or ZERO_UUID)
            for (name, topic_id), partitions in self._topics.items()
        )
        endpoints = tuple(self._endpoints[node_id] for node_id in sorted(self._endpoints))
        return FetchResponse(topics, session_id=session_id, node_endpoints=endpoints)
