"""One Kafka-protocol connection from this broker to another broker (Kafka's ``NetworkClient``
for one node, used as ``BlockingSend`` does: one request at a time).

Theory of operation
-------------------
Two inter-broker clients share it: a follower's ``KafkaLeaderEndpoint`` (Fetch,
OffsetsForLeaderEpoch, ListOffsets) and the transaction coordinator's marker channel
(WriteTxnMarkers, ``broker.txn_marker_channel``). The connection opens lazily: connect (TLS when
the inter-broker listener uses it), ApiVersions (v3, falling back to v0 as KIP-511 allows), the
owner's ``negotiate`` turning the peer's ``{api_key: (min, max)}`` into the versions it will use,
then SASL when the listener asks for it (SaslHandshake v1, SaslAuthenticate v2 until the
mechanism completes, Kafka's ``SaslClientAuthenticator``). Any failure — refused connection, a
request outlasting ``socket_timeout_ms``, an oversized or malformed frame, a correlation id that
does not match, a peer whose versions ``negotiate`` refuses — closes the connection and raises
``BrokerConnectionError``; the next request reconnects no sooner than an exponential back-off
(``reconnect.backoff.ms`` 50 doubling to ``reconnect.backoff.max.ms`` 1000). A request
cancelled mid-flight also closes the connection: its answer would otherwise arrive as the answer
to the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
from collections.abc import Callable, Mapping
from typing import Generic, NoReturn, TypeVar

import attrs
from kafka.protocol.metadata import ApiVersionsRequest

from pykraft.fetcher.frame_stream import FrameStream
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class
from pykraft.protocol.errors import Errors, ProtocolError
from pykraft.protocol.framing import DEFAULT_SOCKET_REQUEST_MAX_BYTES, encode_frame
from pykraft.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    request_header_version,
    response_header_version,
)
from pykraft.protocol.sasl_client import SaslClient, SaslClientCredentials, SaslClientError
from pykraft.storage import hop_trace

logger = logging.getLogger(__name__)
T = TypeVar("T")
F = TypeVar("F")
ApiRanges = Mapping[int, tuple[int, int]]

# replica.socket.timeout.ms default: how long one request may take, connect included.
REPLICA_SOCKET_TIMEOUT_MS_DEFAULT = 30_000
# reconnect.backoff.ms / reconnect.backoff.max.ms defaults (Kafka's NetworkClient).
RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000
# The largest response frame accepted; Kafka's own bound on a frame (socket.request.max.bytes).
MAX_RESPONSE_BYTES_DEFAULT = DEFAULT_SOCKET_REQUEST_MAX_BYTES
API_VERSIONS_VERSION = 3
# What can go wrong on the wire; anything else is a bug and propagates.
_CONNECTION_ERRORS = (
    OSError, EOFError, asyncio.TimeoutError, ProtocolError, ValueError, SaslClientError
)  # fmt: skip
# SaslHandshake v1 then SaslAuthenticate v2 (KIP-152, KIP-368), as Kafka's clients send them.
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
# PLAIN needs one token, SCRAM two; a peer asking for more is not following the mechanism.
SASL_ROUNDS_MAX = 4
SCRAM_NONCE_BYTES = 18


class BrokerConnectionError(Exception):
    """A request to the other broker failed as a whole (connection, timeout, bad response)."""


@attrs.frozen
class ClientSecurity:
    """How this broker connects to the inter-broker listener (``inter.broker.listener.name``):
    TLS with the listener's trust store (and key store: the client certificate), and/or SASL
    with ``sasl.mechanism.inter.broker.protocol`` and the broker's own credentials."""

    ssl_context: ssl.SSLContext | None = None
    sasl: SaslClientCredentials | None = None


@attrs.frozen
class ConnectionSettings:
    client_id: str
    socket_timeout_ms: int = REPLICA_SOCKET_TIMEOUT_MS_DEFAULT
    max_response_bytes: int = MAX_RESPONSE_BYTES_DEFAULT
    security: ClientSecurity = attrs.field(factory=ClientSecurity)


def decode_api_versions_response(
    body: memoryview | bytes, version: int
) -> tuple[int, dict[int, tuple[int, int]] | None]:
    """The error code and, when there is none, the peer's ``{api_key: (min, max)}``.

    A peer that does not know ``version`` answers in v0 (KIP-511), so a body that does not
    decode at ``version`` is read again as v0 (Kafka's ``ApiVersionsResponse.parse``).
    """
    try:
        response = decode_response(ApiKey.API_VERSIONS, version, body)
    except ProtocolError:
        if version == 0:
            raise
        response = decode_response(ApiKey.API_VERSIONS, 0, body)
    if response.error_code != Errors.NONE:
        return response.error_code, None
    return Errors.NONE, {e.api_key: (e.min_version, e.max_version) for e in response.api_keys}


class BrokerConnection(Generic[F]):
    """One asyncio TCP connection to broker ``node_id`` at ``host:port``; ``negotiate`` turns
    the peer's API ranges into the owner's versions (``F``), or raises ``ProtocolError``."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        settings: ConnectionSettings,
        negotiate: Callable[[ApiRanges], F],
        *,
        monotonic_ms: Callable[[], int],
        name: str = "broker",
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.settings = settings
        self._negotiate_versions = negotiate
        self._monotonic_ms = monotonic_ms  # reconnect backoff
        self._name = name
        self._lock = asyncio.Lock()
        # The connection: its transport and the frames received on it (``FrameStream``).
        self._stream: FrameStream | None = None
        self._versions: F | None = None
        self._correlation_id = 0
        # Invariant: _failures counts consecutive failed connections/requests (0 when healthy).
        self._failures = 0
        self._reconnect_at_ms = 0

    def __repr__(self) -> str:
        return f"{self._name} {self.node_id} at {self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._stream is not None and self._versions is not None

    async def versions(self) -> F:
        """The negotiated versions; connects (and negotiates) when not connected."""
        if self._versions is not None and self._stream is not None:
            return self._versions  # connected: no lock to take (a fetcher asks every round)
        async with self._lock:
            return await self._connect_if_needed()

    async def exchange(
        self, api_key: ApiKey, build: Callable[[F], tuple[int, bytes]]
    ) -> tuple[int, memoryview]:
        """Send one request built for the negotiated versions; return (version, body)."""
        async with self._lock:
            versions = self._versions
            if versions is None or self._stream is None:
                versions = await self._connect_if_needed()
            version, body = build(versions)
            return version, await self._send_or_fail(api_key, version, body)

    def decoded(self, decode: Callable[[], T]) -> T:
        """``decode()``, with any failure to read the answer as a ``BrokerConnectionError``."""
        try:
            return decode()
        except (ProtocolError, ValueError, KeyError, AttributeError, TypeError) as error:
            raise BrokerConnectionError(f"{self}: undecodable response: {error}") from None

    def drop(self) -> None:
        """Close at once, without waiting for the transport (a peer that moved)."""
        self._close_connection()

    async def close(self) -> None:
        stream = self._close_connection()
        if stream is not None:
            with contextlib.suppress(OSError):
                await stream.wait_closed()

    # ------------------------------------------------------------------ connection

    async def _connect_if_needed(self) -> F:
        if self._versions is not None and self._stream is not None:
            return self._versions
        now_ms = self._monotonic_ms()
        if now_ms < self._reconnect_at_ms:
            raise BrokerConnectionError(
                f"{self}: reconnecting in {self._reconnect_at_ms - now_ms} ms after "
                f"{self._failures} failure(s)"
            )
        timeout_s = self.settings.socket_timeout_ms / 1000
        security = self.settings.security
        try:
            max_bytes = self.settings.max_response_bytes
            _, self._stream = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(
                    lambda: FrameStream(max_bytes),
                    self.host,
                    self.port,
                    ssl=security.ssl_context,
                    server_hostname=self.host if security.ssl_context else None,
                ),
                timeout_s,
            )
        except BaseException as error:
            self._fail(error, "connect")
        versions = await self._negotiate()
        if security.sasl is not None:
            await self._authenticate(security.sasl)
        self._versions = versions
        logger.info("%s: connected, %s", self, versions)
        return versions

    async def _negotiate(self) -> F:
        """ApiVersions v3; a peer that does not know v3 answers UNSUPPORTED_VERSION in v0,
        and the request is repeated at v0 (KIP-511)."""
        for version in (API_VERSIONS_VERSION, 0):
            request = ApiVersionsRequest(
                version=version, client_software_name="pykraft", client_software_version="1.0"
            )
            encoded = bytes(request.encode(version=version))
            body = await self._send_or_fail(ApiKey.API_VERSIONS, version, encoded)
            try:
                error, ranges = decode_api_versions_response(body, version)
                versions = None if ranges is None else self._negotiate_versions(ranges)
            except _CONNECTION_ERRORS as problem:
                self._fail(problem, "ApiVersions")
            if error == Errors.NONE and versions is not None:
                self._failures = 0
                return versions
            if error != Errors.UNSUPPORTED_VERSION:
                break
        self._fail(BrokerConnectionError(f"ApiVersions answered error {error}"), "connect")

    async def _authenticate(self, credentials: SaslClientCredentials) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism completes (Kafka's
        ``SaslClientAuthenticator``); any refusal fails the connection."""
        handshake = request_class(ApiKey.SASL_HANDSHAKE)(
            version=SASL_HANDSHAKE_VERSION, mechanism=credentials.mechanism
        )
        body = await self._send_or_fail(
            ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, bytes(handshake.encode(version=1))
        )
        answer = self.decoded(
            lambda: decode_response(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, body)
        )
        if answer.error_code != Errors.NONE:
            self._fail(
                BrokerConnectionError(
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
        self._fail(BrokerConnectionError(f"more than {SASL_ROUNDS_MAX} SASL rounds"), "SASL")

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
        answer = self.decoded(lambda: decode_response(ApiKey.SASL_AUTHENTICATE, version, body))
        if answer.error_code != Errors.NONE:
            self._fail(
                BrokerConnectionError(
                    f"SaslAuthenticate: {Errors(answer.error_code).name}: {answer.error_message}"
                ),
                "SASL",
            )
        return bytes(answer.auth_bytes)

    async def _send_or_fail(self, api_key: ApiKey, version: int, body: bytes) -> memoryview:
        stream = self._stream
        assert stream is not None, "round trip without a connection"
        # The request's deadline aborts the stream (its waits raise TimeoutError), which fails
        # this round trip as any lost connection does. A timer on the stream, not a task: no
        # task per request, no extra event-loop turn between the answer arriving and the fetcher
        # reading it (wait_for runs one on Python 3.11), and none of asyncio.timeout's
        # cancel-and-uncancel, which took 3% of a follower round (issue 18).
        deadline = asyncio.get_running_loop().call_later(
            self.settings.socket_timeout_ms / 1000, _time_out, stream
        )
        try:
            return await self._round_trip(api_key, version, body)
        except BaseException as error:
            self._fail(error, f"{api_key.name} v{version}")
        finally:
            deadline.cancel()

    async def _round_trip(self, api_key: ApiKey, version: int, body: bytes) -> memoryview:
        stream = self._stream
        assert stream is not None and stream.transport, "round trip without a connection"
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        header = RequestHeader(
            api_key,
            version,
            correlation_id,
            self.settings.client_id,
            request_header_version(api_key, version),
        )
        stream.transport.write(encode_frame(encode_request_header(header) + body))
        if hop_trace.ENABLED:  # this end's address: the leader's marks name it as the peer
            hop_trace.mark(f"send {ApiKey(api_key).name} @{_address(stream)}")
        await stream.drain()
        frame = await stream.next_frame()
        if hop_trace.ENABLED:
            hop_trace.mark(f"receive {ApiKey(api_key).name} @{_address(stream)}")
        answered, start = parse_response_header(frame, response_header_version(api_key, version))
        if answered != correlation_id:
            raise BrokerConnectionError(
                f"response correlation id {answered} does not match request {correlation_id}"
            )
        return frame[start:]

    def _fail(self, error: BaseException, during: str) -> NoReturn:
        """Close the connection, schedule the reconnect, and raise: a ``BrokerConnectionError``
        for what the network can do, the error itself for cancellation or a bug."""
        self._close_connection()
        if not isinstance(error, (*_CONNECTION_ERRORS, BrokerConnectionError)):
            raise error
        self._failures += 1
        backoff_ms = min(RECONNECT_BACKOFF_MAX_MS, RECONNECT_BACKOFF_MS << (self._failures - 1))
        self._reconnect_at_ms = self._monotonic_ms() + backoff_ms
        message = str(error) or type(error).__name__
        raise BrokerConnectionError(f"{self}: {during} failed: {message}") from None

    def _close_connection(self) -> FrameStream | None:
        """Drop the connection at once (the transport closes in the background); returns the
        stream so ``close`` can wait for it."""
        stream, self._stream, self._versions = self._stream, None, None
        if stream is not None and stream.transport is not None:
            stream.transport.close()
        return stream


def _time_out(stream: FrameStream) -> None:
    stream.abort(TimeoutError("no response within the socket timeout"))


def _address(stream: FrameStream) -> str:
    """``host:port`` of this end of the connection, written as the leader's connection id
    (``broker/network.py``) writes its peer, so ``bench/hop_timeline.py`` pairs the two ends."""
    transport = stream.transport
    local = None if transport is None else transport.get_extra_info("sockname")
    return f"{local[0]}:{local[1]}" if local else "?"
