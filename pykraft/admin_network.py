"""The admin client's network: connections to brokers, Metadata from the first that answers, and
the retry loop every call runs in (Kafka's ``AdminApiDriver``, as far as this tool needs it).

Theory of operation
-------------------
A call is a sequence of attempts. Each attempt looks its keys up and sends one request per
broker; ``per_key`` keeps the keys whose answer is final and resends the rest; an attempt that
fails as a whole (a refused connection, a request timeout, an undecodable answer — a
``BrokerConnectionError``) is retried for all its keys, as a disconnect is in Kafka's client.
Attempts are ``retry.backoff.ms`` apart on the caller's clock until ``default.api.timeout.ms``
has passed; then the call fails with ``AdminError(REQUEST_TIMED_OUT)`` and the last reason. A
refused SASL login or server certificate fails the call at once, as in Kafka.

The bootstrap servers (numbered -1, -2, ... as Kafka numbers them) are tried in order until one
answers Metadata; from then on the brokers Metadata lists are asked first. There is one
connection per broker id (``fetcher.broker_connection.BrokerConnection``: TLS, SASL, ApiVersions),
replaced when the broker's endpoint changes; each API goes at the highest version both sides
speak (``admin_codec.admin_versions``), and an API the broker does not serve fails the call with
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Protocol, TypeVar

from pykraft.admin_codec import (
    AdminVersions,
    BrokerNode,
    ClusterMetadata,
    admin_versions,
    decode_metadata,
    encode_metadata,
)
from pykraft.admin_config import AdminConfig
from pykraft.admin_errors import AdminError, is_authentication_failure, is_reconnect_notice
from pykraft.fetcher.broker_connection import (
    BrokerConnection,
    BrokerConnectionError,
    ConnectionSettings,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.clock import Clock

T = TypeVar("T")
K = TypeVar("K")


class AdminConnection(Protocol):
    """One connection to one broker: ``fetcher.broker_connection.BrokerConnection``."""

    host: str
    port: int

    async def versions(self) -> AdminVersions: ...
    async def exchange(
        self, api_key: ApiKey, build: Callable[[AdminVersions], tuple[int, bytes]]
    ) -> tuple[int, memoryview]: ...
    def decoded(self, decode: Callable[[], T]) -> T: ...
    def drop(self) -> None: ...
    async def close(self) -> None: ...


ConnectionFactory = Callable[[BrokerNode, ConnectionSettings], AdminConnection]


def broker_connection(
    node: BrokerNode, settings: ConnectionSettings, monotonic_ms: Callable[[], int]
) -> AdminConnection:
    return BrokerConnection(
        node.node_id,
        node.host,
        node.port,
        settings,
        admin_versions,
        monotonic_ms=monotonic_ms,
        name="admin client to node",
    )


class AdminNetwork:
    def __init__(
        self,
        bootstrap_servers: Sequence[tuple[str, int]],
        config: AdminConfig,
        clock: Clock,
        connect: ConnectionFactory | None = None,
    ) -> None:
        assert bootstrap_servers, "no bootstrap servers"
        self._bootstrap = [
            BrokerNode(-1 - index, host, port)
            for index, (host, port) in enumerate(bootstrap_servers)
        ]
        self._config = config
        self._clock = clock
        self._settings = ConnectionSettings(
            client_id=config.client_id,
            socket_timeout_ms=config.request_timeout_ms,
            security=config.security,
        )
        self._connect: ConnectionFactory = connect or functools.partial(
            broker_connection, monotonic_ms=clock.monotonic_ms
        )
        self._connections: dict[int, AdminConnection] = {}
        # The brokers the last Metadata answer listed.
        self.brokers: dict[int, BrokerNode] = {}

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            with contextlib.suppress(Exception):
                await connection.close()

    async def metadata(self, topics: Sequence[str] | None) -> ClusterMetadata:
        """Metadata (None: every topic) from the first node that answers: the brokers known,
        then the bootstrap servers."""
        last: Exception | None = None
        for node in [*self.brokers.values(), *self._bootstrap]:
            try:
                metadata = await self.request(
                    node,
                    ApiKey.METADATA,
                    functools.partial(encode_metadata, topics=topics),
                    decode_metadata,
                )
            except BrokerConnectionError as error:
                last = error
                continue
            self.brokers = dict(metadata.brokers)
            return metadata
        raise BrokerConnectionError(f"no broker answered Metadata: {last}")

    async def any_broker(self) -> BrokerNode:
        """A broker Metadata named (the lowest id), asking for Metadata when none is known."""
        brokers = self.brokers or (await self.metadata([])).brokers
        if not brokers:
            raise BrokerConnectionError("Metadata names no broker")
        return brokers[min(brokers)]

    async def versions(self, node: BrokerNode) -> AdminVersions:
        """The versions ``node`` and this client speak (connecting when needed)."""
        return await self._connection(node).versions()

    async def request(
        self,
        node: BrokerNode,
        api_key: ApiKey,
        encode: Callable[[int], bytes],
        decode: Callable[[memoryview, int], T],
    ) -> T:
        """One request to ``node`` at the negotiated version, its answer decoded."""
        connection = self._connection(node)

        def build(versions: AdminVersions) -> tuple[int, bytes]:
            version = versions.of(api_key)
            if version is None:
                raise AdminError(
                    f"broker {node.node_id} at {node.host}:{node.port} does not support "
                    f"{api_key.name}",
                    Errors.UNSUPPORTED_VERSION,
                )
            return version, encode(version)

        try:
            version, body = await connection.exchange(api_key, build)
        except BrokerConnectionError as error:
            if is_authentication_failure(str(error)):
                raise AdminError(str(error)) from None
            raise
        return connection.decoded(lambda: decode(body, version))

    async def per_key(
        self,
        call: str,
        keys: Collection[K],
        send: Callable[[set[K]], Awaitable[dict[K, T]]],
    ) -> dict[K, T]:
        """``send`` the keys not yet done until all are (``send`` raises for a failed one)."""
        done: dict[K, T] = {}
        pending = set(keys)

        async def attempt() -> dict[K, T] | str:
            done.update(await send(pending))
            pending.difference_update(done)
            return f"{len(pending)} of {len(keys)} not done" if pending else done

        if not pending:
            return done
        return await self.retrying(call, attempt)

    async def retrying(self, call: str, attempt: Callable[[], Awaitable[T | str]]) -> T:
        """Run ``attempt`` until it returns a result; a string (why not yet) or a failed
        connection retries after ``retry.backoff.ms``, up to ``default.api.timeout.ms``."""
        deadline_ms = self._clock.monotonic_ms() + self._config.default_api_timeout_ms
        attempts = 0
        cause = ""
        while True:
            attempts += 1
            try:
                result = await attempt()
            except BrokerConnectionError as error:
                result = str(error)
            if not isinstance(result, str):
                return result
            if not (cause and is_reconnect_notice(result)):
                cause = result  # a back-off notice never hides why the connection failed
            if self._clock.monotonic_ms() >= deadline_ms:
                raise AdminError(
                    f"{call} timed out after {self._config.default_api_timeout_ms} ms and "
                    f"{attempts} attempt(s); last: {cause}",
                    Errors.REQUEST_TIMED_OUT,
                )
            await self._clock.wait(asyncio.Event(), self._config.retry_backoff_ms)

    def _connection(self, node: BrokerNode) -> AdminConnection:
        current = self._connections.get(node.node_id)
        if current is not None and (current.host, current.port) == (node.host, node.port):
            return current
        if current is not None:
            current.drop()  # the broker moved
        connection = self._connect(node, self._settings)
        self._connections[node.node_id] = connection
        return connection
