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
a quota throttles is answered empty (``FetchAnswer.throttled``): an incremental one with its
session id, the session kept and not updated, so the next fetch is answered what this one
would have been; a full one with session id 0 and no session opened.

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
    FetchContext,
    FetchSessionCache,
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
        quotas = services.client_quotas if fetch.replica_id < 0 else None
        if quotas is not None:
            fetch = _bounded_by_quota(fetch, quotas.max_fetch_bytes(request))
        answer = await read_fetch(
            services, fetch, version, request.listener_name, readable(services, request, fetch)
        )
        if quotas is not None:
            # request_percentage, then consumer_byte_rate over the bytes the answer would have
            # (Kafka's FetchContext.getResponseSize, which leaves the session as it is); a
            # throttled fetch is answered empty (getThrottledResponse) and its bytes not counted.
            size = encode_fetch_response(answer.response(update_session=False), version).length
            throttle_ms = quotas.record_fetch(request, size, request_throttle_ms(request))
            if throttle_ms:
                return encode_fetch_response(answer.throttled(throttle_ms), version)
        return encode_fetch_response(answer.response(), version)

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
    answer = await read_fetch(services, fetch, api_version, listener_name, authorized)
    return answer.response()


async def read_fetch(
    services: BrokerServices,
    fetch: FetchRequest,
    api_version: int,
    listener_name: str,
    authorized: Callable[[str], bool] | None = None,
) -> FetchAnswer:
    """Read the fetch's partitions (``FetchManager.newContext``, then the replica manager);
    the returned answer updates the session only when it is sent."""
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
        return FetchAnswer(sessions, context, now_ms)
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
    answer = FetchAnswer(sessions, context, now_ms, builder)
    for key in keys:
        # ``unknown and``: a key hashes its topic id, a uuid.UUID, in Python; mostly both empty.
        if unknown and key in unknown:
            data = PartitionData(key[2], error_code=Errors.UNKNOWN_TOPIC_ID)
            size = 0
        elif denied and key in denied:
            data = PartitionData(key[2], error_code=Errors.TOPIC_AUTHORIZATION_FAILED)
            size = 0
        else:
            result = next(results)
            data, size = builder.partition_data(result), result.size_in_bytes
        answer.answers[key] = data
        answer.outcomes[key] = _outcome(data, size)
    return answer


class FetchAnswer:
    """A fetch read, each partition's answer known, its session not yet updated.

    ``response`` updates the session and answers (``updateAndGenerateResponseData``);
    ``response(update_session=False)`` is the same answer leaving the session as it is
    (``getResponseSize`` weighs it against a quota); ``throttled`` answers empty and leaves the
    session as it is (``getThrottledResponse``), so an incremental session lives on and its
    next fetch is answered what this one would have been (Kafka's ``FetchSession.scala``,
    ``KafkaApis.handleFetchRequest``)."""

    def __init__(
        self,
        sessions: FetchSessionCache[_Key, FetchPartition],
        context: FetchContext[_Key, FetchPartition],
        now_ms: int,
        builder: _ResponseBuilder | None = None,
    ) -> None:
        self._sessions = sessions
        self._context = context
        self._now_ms = now_ms
        self._builder = builder
        self.answers: dict[_Key, PartitionData] = {}
        self.outcomes: dict[_Key, PartitionOutcome] = {}

    def response(self, update_session: bool = True) -> FetchResponse:
        context = self._context
        if isinstance(context, SessionError):
            return FetchResponse((), error_code=context.error, session_id=INVALID_SESSION_ID)
        session_id = INVALID_SESSION_ID
        answered: Iterable[_Key] = self.answers
        if isinstance(context, FullContext):
            if update_session:
                session_id = self._sessions.full_response(context, self.outcomes, self._now_ms)
        elif isinstance(context, IncrementalContext):
            session_id = context.session.id
            error, answered = self._sessions.incremental_response(
                context, self.outcomes, update_session
            )
            if error is not Errors.NONE:
                return FetchResponse((), error_code=error, session_id=session_id)
        assert self._builder is not None
        return self._builder.response(session_id, [(key, self.answers[key]) for key in answered])

    def throttled(self, throttle_ms: int) -> FetchResponse:
        context = self._context
        error, session_id = Errors.NONE, INVALID_SESSION_ID
        if isinstance(context, SessionError):
            error = context.error
        elif isinstance(context, IncrementalContext):
            session_id = context.session.id
            if context.session.epoch != context.expected_epoch:
                error = Errors.INVALID_FETCH_SESSION_EPOCH
        return FetchResponse(
            (), throttle_time_ms=throttle_ms, error_code=error, session_id=session_id
        )


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
        self._endpoints: dict[int, NodeEndpoint] = {}

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

    def response(
        self, session_id: int, answered: Iterable[tuple[_Key, PartitionData]]
    ) -> FetchResponse:
        by_topic: dict[tuple[str, uuid.UUID | None], list[PartitionData]] = {}
        for key, data in answered:
            by_topic.setdefault((key[0], key[1]), []).append(data)
        topics = tuple(
            FetchableTopicResponse(tuple(partitions), topic=name, topic_id=topic_id or ZERO_UUID)
            for (name, topic_id), partitions in by_topic.items()
        )
        endpoints = tuple(self._endpoints[node_id] for node_id in sorted(self._endpoints))
        return FetchResponse(topics, session_id=session_id, node_endpoints=endpoints)
