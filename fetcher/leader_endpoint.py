"""A follower's Kafka-protocol client to one partition leader (Kafka's ``RemoteLeaderEndPoint``).

Theory of operation
-------------------
A replica fetcher talks to its leader through a ``LeaderEndpoint``: Fetch, OffsetsForLeaderEpoch
and ListOffsets (earliest and latest) for the partitions it replicates. The fetcher only sees
``fetcher.responses``' values (``PartitionData``, ``LeaderEpochEndOffset``, ``LeaderOffsets``);
every byte is encoded and decoded here (``fetcher.leader_codecs``: kafka-python's classes
generated from Kafka's JSON schemas, and the hand-written ``protocol.fetch_client`` for Fetch,
whose answers' records stay slices of the frame) with ``protocol``'s request/response headers.

``KafkaLeaderEndpoint`` sends one request at a time on one ``fetcher.broker_connection``
connection (Kafka's ``BlockingSend``), whose ApiVersions answer ``leader_codecs.negotiate`` turns
into the versions a follower uses. Any failure raises ``LeaderEndpointError`` (the connection's
``BrokerConnectionError``); the fetcher backs the partitions off, and the connection reconnects
with back-off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

import attrs

from pykraft.fetcher.broker_connection import (
    BrokerConnection,
    BrokerConnectionError,
    ConnectionSettings,
)
from pykraft.fetcher.fetch_session import FetchSessionHandler
from pykraft.fetcher.leader_codecs import (
    FetchTarget,
    LeaderFeatures,
    ReplicaFetch,
    decode_fetch_answer,
    decode_list_offsets_response,
    decode_offset_for_leader_epoch_response,
    encode_fetch_request,
    encode_list_offsets_request,
    encode_offset_for_leader_epoch_request,
    fetch_version_for,
    negotiate,
)
from pykraft.fetcher.responses import LeaderOffsets
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import PartitionData
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

__all__ = [
    "FetchTarget",
    "KafkaLeaderEndpoint",
    "LeaderEndpoint",
    "LeaderEndpointError",
    "LeaderFeatures",
    "ReplicaFetch",
]

# ListOffsets timestamps (ListOffsetsRequest.EARLIEST_TIMESTAMP / LATEST_TIMESTAMP).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
# A leader request fails as its connection does: the fetcher catches this one name.
LeaderEndpointError = BrokerConnectionError
# Fetch v7 brought sessions (KIP-227); these top-level errors only reset the session.
FIRST_SESSION_VERSION = 7
_SESSION_ERRORS = frozenset({
    Errors.FETCH_SESSION_ID_NOT_FOUND,
    Errors.INVALID_FETCH_SESSION_EPOCH,
    Errors.FETCH_SESSION_TOPIC_ID_ERROR,
})  # fmt: skip


class LeaderEndpoint(Protocol):
    """What a replica fetcher needs from its leader (Kafka's ``LeaderEndPoint``)."""

    @property
    def leader_id(self) -> int: ...

    async def features(self) -> LeaderFeatures:
        """The negotiated versions; connects (and negotiates) when not connected."""
        ...

    async def fetch(self, request: ReplicaFetch) -> dict[TopicPartition, PartitionData]:
        """One Fetch; partitions the leader left out of its answer are missing."""
        ...

    async def fetch_epoch_end_offsets(
        self, requests: Mapping[TopicPartition, LeaderEpochRequest]
    ) -> dict[TopicPartition, LeaderEpochEndOffset]:
        """OffsetsForLeaderEpoch; every requested partition gets an answer."""
        ...

    async def fetch_leader_offsets(
        self, topic_partition: TopicPartition, current_leader_epoch: int
    ) -> LeaderOffsets:
        """The leader's log start and log end offsets (ListOffsets earliest and latest)."""
        ...

    async def close(self) -> None: ...


@attrs.frozen
class EndpointSettings:
    replica_id: int
    connection: ConnectionSettings


class KafkaLeaderEndpoint:
    """``LeaderEndpoint`` over one connection to broker ``leader_id`` at ``host:port``."""

    def __init__(
        self,
        leader_id: int,
        host: str,
        port: int,
        settings: EndpointSettings,
        *,
        broker_epoch: Callable[[], int] = lambda: -1,
        monotonic_ms: Callable[[], int],
    ) -> None:
        self.settings = settings
        self._broker_epoch = broker_epoch
        # KIP-227: this leader's fetch session, as the follower sees it.
        self.fetch_session = FetchSessionHandler()
        self.connection = BrokerConnection(
            leader_id,
            host,
            port,
            settings.connection,
            negotiate,
            monotonic_ms=monotonic_ms,
            name="leader",
        )

    def __repr__(self) -> str:
        return f"KafkaLeaderEndpoint({self.connection})"

    @property
    def leader_id(self) -> int:
        return self.connection.node_id

    @property
    def host(self) -> str:
        return self.connection.host

    @property
    def port(self) -> int:
        return self.connection.port

    @property
    def connected(self) -> bool:
        return self.connection.connected

    # ------------------------------------------------------------------ the four requests

    async def features(self) -> LeaderFeatures:
        return await self.connection.versions()

    async def fetch(self, request: ReplicaFetch) -> dict[TopicPartition, PartitionData]:
        """Kafka's ``RemoteLeaderEndPoint.fetch`` through this leader's fetch session: an
        answer the session refuses (a session error) is an empty one, and the next fetch is
        full; any other top-level error fails the request."""
        session = self.fetch_session

        def build(features: LeaderFeatures) -> tuple[int, bytes]:
            version = fetch_version_for(request, features)
            asked = session.build(request.targets) if version >= FIRST_SESSION_VERSION else None
            replica_id = self.settings.replica_id
            body = encode_fetch_request(request, version, replica_id, self._broker_epoch(), asked)
            return version, body

        try:
            version, body = await self.connection.exchange(ApiKey.FETCH, build)
            answer = self.connection.decoded(lambda: decode_fetch_answer(body, version, request))
        except LeaderEndpointError:
            session.handle_error()
            raise
        if version < FIRST_SESSION_VERSION:
            return answer.partitions
        if answer.error_code not in _SESSION_ERRORS and answer.error_code != Errors.NONE:
            session.handle_error()
            raise LeaderEndpointError(f"{self}: Fetch answered top-level error {answer.error_code}")
        if not session.handle_response(Errors(answer.error_code), answer.session_id):
            logger.info(
                "%s: fetch session error %s; the next fetch is full", self, answer.error_code
            )
            return {}
        return answer.partitions

    async def fetch_epoch_end_offsets(
        self, requests: Mapping[TopicPartition, LeaderEpochRequest]
    ) -> dict[TopicPartition, LeaderEpochEndOffset]:
        def build(features: LeaderFeatures) -> tuple[int, bytes]:
            version = features.offset_for_leader_epoch_version
            if version is None:
                raise LeaderEndpointError(f"{self} does not serve OffsetForLeaderEpoch v2+")
            replica_id = self.settings.replica_id
            return version, encode_offset_for_leader_epoch_request(requests, version, replica_id)

        version, body = await self.connection.exchange(ApiKey.OFFSET_FOR_LEADER_EPOCH, build)
        return self.connection.decoded(
            lambda: decode_offset_for_leader_epoch_response(body, version, requests)
        )

    async def fetch_leader_offsets(
        self, topic_partition: TopicPartition, current_leader_epoch: int
    ) -> LeaderOffsets:
        """Latest first, then earliest, as Kafka's ``fetchOffsetAndTruncate`` asks them."""
        end = await self._list_offset(topic_partition, current_leader_epoch, LATEST_TIMESTAMP)
        if end[0] != Errors.NONE:
            return LeaderOffsets(end[0])
        start = await self._list_offset(topic_partition, current_leader_epoch, EARLIEST_TIMESTAMP)
        if start[0] != Errors.NONE:
            return LeaderOffsets(start[0])
        return LeaderOffsets(Errors.NONE, log_start_offset=start[1], log_end_offset=end[1])

    async def _list_offset(
        self, topic_partition: TopicPartition, current_leader_epoch: int, timestamp: int
    ) -> tuple[int, int]:
        def build(features: LeaderFeatures) -> tuple[int, bytes]:
            version = features.list_offsets_version
            body = encode_list_offsets_request(
                topic_partition,
                current_leader_epoch,
                timestamp,
                version,
                self.settings.replica_id,
            )
            return version, body

        version, body = await self.connection.exchange(ApiKey.LIST_OFFSETS, build)
        return self.connection.decoded(
            lambda: decode_list_offsets_response(body, version, topic_partition)
        )

    async def close(self) -> None:
        await self.connection.close()
