"""A follower's Kafka-protocol client to one partition leader (Kafka's ``RemoteLeaderEndPoint``).

Theory of operation
-------------------
A replica fetcher talks to its leader through a ``LeaderEndpoint``: Fetch, OffsetsForLeaderEpoch
and ListOffsets (earliest and latest) for the partitions it replicates. The fetcher only sees
``fetcher.responses``' values (``PartitionData``, ``LeaderEpochEndOffset``, ``LeaderOffsets``);
every byte is encoded and decoded here, with kafka-python's classes generated from Kafka's JSON
schemas (``protocol.apis``; the client side of Fetch is not in the broker's hand-written hot path)
and ``protocol``'s request/response headers.

``KafkaLeaderEndpoint`` owns one TCP connection (asyncio streams) and sends one request at a
time on it, which is all a fetcher needs (Kafka's ``BlockingSend``). The connection opens lazily:
connect, then ApiVersions (v3, falling back to v0 as KIP-511 allows) to pick, per API, the
highest version both sides speak (``negotiate``). Any failure — refused connection, a request
outlasting ``replica.socket.timeout.ms``, an oversized or malformed frame, a correlation id that
does not match — closes the connection and raises ``LeaderEndpointError``; the fetcher backs the
partitions off, and the next request reconnects no sooner than an exponential reconnect back-off
(``reconnect.backoff.ms`` 50 doubling to ``reconnect.backoff.max.ms`` 1000). A request
cancelled mid-flight (the fetcher shutting down) also closes the connection: its answer would
otherwise arrive as the answer to the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
from collections.abc import Callable, Mapping
from typing import NoReturn, Protocol, TypeVar

import attrs
from kafka.protocol.metadata import ApiVersionsRequest

from pykraft.fetcher.leader_codecs import (
    FetchTarget,
    LeaderFeatures,
    ReplicaFetch,
    decode_api_versions_response,
    decode_fetch_response,
    decode_list_offsets_response,
    decode_offset_for_leader_epoch_response,
    encode_fetch_request,
    encode_list_offsets_request,
    encode_offset_for_leader_epoch_request,
    fetch_version_for,
)
from pykraft.fetcher.responses import LeaderOffsets
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class
from pykraft.protocol.errors import Errors, FrameError, ProtocolError
from pykraft.protocol.fetch import PartitionData
from pykraft.protocol.framing import (
    DEFAULT_SOCKET_REQUEST_MAX_BYTES,
    SIZE_PREFIX_BYTES,
    encode_frame,
)
from pykraft.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    request_header_version,
    response_header_version,
)
from pykraft.protocol.sasl_client import SaslClient, SaslClientCredentials, SaslClientError
from pykraft.protocol.wire import INT32
from pykraft.storage.topic_partition import TopicPartition

__all__ = [
    "FetchTarget",
    "KafkaLeaderEndpoint",
    "LeaderEndpoint",
    "LeaderEndpointError",
    "LeaderFeatures",
    "ReplicaFetch",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

# replica.socket.timeout.ms default: how long one request may take, connect included.
REPLICA_SOCKET_TIMEOUT_MS_DEFAULT = 30_000
# reconnect.backoff.ms / reconnect.backoff.max.ms defaults (Kafka's NetworkClient).
RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000
# The largest response frame accepted; Kafka's own bound on a frame (socket.request.max.bytes).
MAX_RESPONSE_BYTES_DEFAULT = DEFAULT_SOCKET_REQUEST_MAX_BYTES
API_VERSIONS_VERSION = 3
# ListOffsets timestamps (ListOffsetsRequest.EARLIEST_TIMESTAMP / LATEST_TIMESTAMP).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
# What can go wrong on the wire; anything else is a bug and propagates.
_CONNECTION_ERRORS = (
    OSError, EOFError, asyncio.TimeoutError, ProtocolError, ValueError, SaslClientError
)  # fmt: skip
# SaslHandshake v1 then SaslAuthenticate v2 (KIP-152, KIP-368), as Kafka's clients send them.
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
# PLAIN needs one token, SCRAM two; a leader asking for more is not following the mechanism.
SASL_ROUNDS_MAX = 4
SCRAM_NONCE_BYTES = 18


class LeaderEndpointError(Exception):
    """A request to the leader failed as a whole (connection, timeout, bad response)."""


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
class ClientSecurity:
    """How this broker connects to the inter-broker listener (``inter.broker.listener.name``):
    TLS with the listener's trust store (and key store: the client certificate), and/or SASL
    with ``sasl.mechanism.inter.broker.protocol`` and the broker's own credentials."""

    ssl_context: ssl.SSLContext | None = None
    sasl: SaslClientCredentials | None = None


@attrs.frozen
class EndpointSettings:
    replica_id: int
    client_id: str
    socket_timeout_ms: int = REPLICA_SOCKET_TIMEOUT_MS_DEFAULT
    max_response_bytes: int = MAX_RESPONSE_BYTES_DEFAULT
    security: ClientSecurity = attrs.field(factory=ClientSecurity)


class KafkaLeaderEndpoint:
    """``LeaderEndpoint`` over one asyncio TCP connection to ``host:port``."""

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
        self._leader_id = leader_id
        self.host = host
        self.port = port
        self.settings = settings
        self._broker_epoch = broker_epoch
        self._monotonic_ms = monotonic_ms  # reconnect backoff
        self._lock = asyncio.Lock()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._features: LeaderFeatures | None = None
        self._correlation_id = 0
        # Invariant: _failures counts consecutive failed connections/requests (0 when healthy).
        self._failures = 0
        self._reconnect_at_ms = 0

    def __repr__(self) -> str:
        return f"KafkaLeaderEndpoint(broker {self._leader_id} at {self.host}:{self.port})"

    @property
    def leader_id(self) -> int:
        return self._leader_id

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._features is not None

    # ------------------------------------------------------------------ the four requests

    async def features(self) -> LeaderFeatures:
        async with self._lock:
            return await self._connect_if_needed()

    async def fetch(self, request: ReplicaFetch) -> dict[TopicPartition, PartitionData]:
        def build(features: LeaderFeatures) -> tuple[int, bytes]:
            version = fetch_version_for(request, features)
            replica_id = self.settings.replica_id
            return version, encode_fetch_request(request, version, replica_id, self._broker_epoch())

        version, body = await self._exchange(ApiKey.FETCH, build)
        return self._decoded(lambda: decode_fetch_response(body, version, request))

    async def fetch_epoch_end_offsets(
        self, requests: Mapping[TopicPartition, LeaderEpochRequest]
    ) -> dict[TopicPartition, LeaderEpochEndOffset]:
        def build(features: LeaderFeatures) -> tuple[int, bytes]:
            version = features.offset_for_leader_epoch_version
            if version is None:
                raise LeaderEndpointError(f"{self} does not serve OffsetForLeaderEpoch v2+")
            replica_id = self.settings.replica_id
            return version, encode_offset_for_leader_epoch_request(requests, version, replica_id)

        version, body = await self._exchange(ApiKey.OFFSET_FOR_LEADER_EPOCH, build)
        return self._decoded(
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

        version, body = await self._exchange(ApiKey.LIST_OFFSETS, build)
        return self._decoded(lambda: decode_list_offsets_response(body, version, topic_partition))

    async def close(self) -> None:
        writer = self._close_connection()
        if writer is not None:
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    # ------------------------------------------------------------------ connection

    async def _exchange(
        self, api_key: ApiKey, build: Callable[[LeaderFeatures], tuple[int, bytes]]
    ) -> tuple[int, memoryview]:
        """Send one request built for the negotiated versions; return (version, body)."""
        async with self._lock:
            features = await self._connect_if_needed()
            version, body = build(features)
            return version, await self._send_or_fail(api_key, version, body)

    async def _connect_if_needed(self) -> LeaderFeatures:
        if self._features is not None and self._writer is not None:
            return self._features
        now_ms = self._monotonic_ms()
        if now_ms < self._reconnect_at_ms:
            raise LeaderEndpointError(
                f"{self}: reconnecting in {self._reconnect_at_ms - now_ms} ms after "
                f"{self._failures} failure(s)"
            )
        timeout_s = self.settings.socket_timeout_ms / 1000
        security = self.settings.security
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=security.ssl_context,
                    server_hostname=self.host if security.ssl_context else None,
                ),
                timeout_s,
            )
        except BaseException as error:
            self._fail(error, "connect")
        features = await self._negotiate()
        if security.sasl is not None:
            await self._authenticate(security.sasl)
        self._features = features
        logger.info("%s: connected, %s", self, self._features)
        return self._features

    async def _negotiate(self) -> LeaderFeatures:
        """ApiVersions v3; a leader that does not know v3 answers UNSUPPORTED_VERSION in v0,
        and the request is repeated at v0 (KIP-511)."""
        for version in (API_VERSIONS_VERSION, 0):
            request = ApiVersionsRequest(
                version=version, client_software_name="pykraft", client_software_version="1.0"
            )
            encoded = bytes(request.encode(version=version))
            body = await self._send_or_fail(ApiKey.API_VERSIONS, version, encoded)
            try:
                error, features = decode_api_versions_response(body, version)
            except _CONNECTION_ERRORS as problem:
                self._fail(problem, "ApiVersions")
            if error == Errors.NONE and features is not None:
                self._failures = 0
                return features
            if error != Errors.UNSUPPORTED_VERSION:
                break
        self._fail(LeaderEndpointError(f"ApiVersions answered error {error}"), "connect")

    async def _authenticate(self, credentials: SaslClientCredentials) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism completes (Kafka's
        ``SaslClientAuthenticator``); any refusal fails the connection."""
        handshake = request_class(ApiKey.SASL_HANDSHAKE)(
            version=SASL_HANDSHAKE_VERSION, mechanism=credentials.mechanism
        )
        body = await self._send_or_fail(
            ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, bytes(handshake.encode(version=1))
        )
        answer = self._decoded(
            lambda: decode_response(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, body)
        )
        if answer.error_code != Errors.NONE:
            self._fail(
                LeaderEndpointError(
                    f"SaslHandshake {credentials.mechanism}: error "
                    f"{Errors(answer.error_code).name}, enabled mechanisms {answer.mechanisms}"
                ),
                "SASL",
            )
        client = SaslClient(credentials, secrets.token_urlsafe(SCRAM_NONCE_BYTES))
        token = self._sasl_token(client, None)
        for _ in range(SASL_ROUNDS_MAX):
            if token is None:
                return
            token = self._sasl_token(client, await self._sasl_round_trip(token))
        self._fail(LeaderEndpointError(f"more than {SASL_ROUNDS_MAX} SASL rounds"), "SASL")

    def _sasl_token(self, client: SaslClient, challenge: bytes | None) -> bytes | None:
        try:
            return client.next_token(challenge)
        except SaslClientError as error:
            self._fail(error, "SASL")

    async def _sasl_round_trip(self, token: bytes) -> bytes:
        version = SASL_AUTHENTICATE_VERSION
        request = request_class(ApiKey.SASL_AUTHENTICATE)(version=version, auth_bytes=token)
        body = await self._send_or_fail(
            ApiKey.SASL_AUTHENTICATE, version, bytes(request.encode(version=version))
        )
        answer = self._decoded(lambda: decode_response(ApiKey.SASL_AUTHENTICATE, version, body))
        if answer.error_code != Errors.NONE:
            self._fail(
                LeaderEndpointError(
                    f"SaslAuthenticate: {Errors(answer.error_code).name}: {answer.error_message}"
                ),
                "SASL",
            )
        return bytes(answer.auth_bytes)

    async def _send_or_fail(self, api_key: ApiKey, version: int, body: bytes) -> memoryview:
        timeout_s = self.settings.socket_timeout_ms / 1000
        try:
            return await asyncio.wait_for(self._round_trip(api_key, version, body), timeout_s)
        except BaseException as error:
            self._fail(error, f"{api_key.name} v{version}")

    async def _round_trip(self, api_key: ApiKey, version: int, body: bytes) -> memoryview:
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None, "round trip without a connection"
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        header = RequestHeader(
            api_key,
            version,
            correlation_id,
            self.settings.client_id,
            request_header_version(api_key, version),
        )
        writer.write(encode_frame(encode_request_header(header) + body))
        await writer.drain()
        size: int = INT32.unpack(await reader.readexactly(SIZE_PREFIX_BYTES))[0]
        if not 0 <= size <= self.settings.max_response_bytes:
            raise FrameError(size, self.settings.max_response_bytes)
        frame = await reader.readexactly(size)
        answered, start = parse_response_header(frame, response_header_version(api_key, version))
        if answered != correlation_id:
            raise LeaderEndpointError(
                f"response correlation id {answered} does not match request {correlation_id}"
            )
        return memoryview(frame)[start:]

    def _fail(self, error: BaseException, during: str) -> NoReturn:
        """Close the connection, schedule the reconnect, and raise: a ``LeaderEndpointError``
        for what the network can do, the error itself for cancellation or a bug."""
        self._close_connection()
        if not isinstance(error, (*_CONNECTION_ERRORS, LeaderEndpointError)):
            raise error
        self._failures += 1
        backoff_ms = min(RECONNECT_BACKOFF_MAX_MS, RECONNECT_BACKOFF_MS << (self._failures - 1))
        self._reconnect_at_ms = self._monotonic_ms() + backoff_ms
        message = str(error) or type(error).__name__
        raise LeaderEndpointError(f"{self}: {during} failed: {message}") from None

    def _decoded(self, decode: Callable[[], T]) -> T:
        try:
            return decode()
        except (ProtocolError, ValueError, KeyError, AttributeError, TypeError) as error:
            raise LeaderEndpointError(f"{self}: undecodable response: {error}") from None

    def _close_connection(self) -> asyncio.StreamWriter | None:
        """Drop the connection at once (the transport closes in the background); returns the
        writer so ``close`` can wait for it."""
        writer, self._reader, self._writer, self._features = self._writer, None, None, None
        if writer is not None:
            writer.close()
        return writer
