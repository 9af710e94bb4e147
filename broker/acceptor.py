"""The Kafka listener's acceptor: binds the port, accepts within the connection limits, and
closes idle connections (Kafka's ``SocketServer.Acceptor`` with ``ConnectionQuotas`` and the
``Selector``'s idle expiry).

Why not ``asyncio.start_server``: it accepts whatever arrives, so at ``max.connections`` the
broker could only close what it accepted. Kafka instead stops accepting until a connection
closes, and newcomers wait in the kernel's listen backlog (``socket.listen.backlog.size``); the
accept loop here does the same, waiting on ``ConnectionQuotas.slot_available``. The decisions —
who may connect, which connections are idle or in excess — are ``broker.connection_quotas``'s
pure functions; this module owns the socket, the tasks and the clock:

* accept loop: wait for a slot, accept, ``quotas.open`` (a refused address is closed at once and
  counted), then serve the connection in its own task, which releases the slot when it ends;
* idle loop: every ``scan_interval_ms`` the connections quiet for longer than
  ``connections.max.idle.ms`` with nothing in flight are expired;
* a protected (inter-broker) listener's accept makes its peers close their excess connections,
  least recently active first (Kafka's ``Processor.closeExcessConnections``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Collection, Mapping
from types import MappingProxyType
from typing import Protocol

from pykraft.broker.connection_quotas import (
    Admission,
    ConnectionQuotas,
    idle_connections,
    is_ip_literal,
    scan_interval_ms,
)
from pykraft.broker.metrics import CloseReason

logger = logging.getLogger(__name__)

# socket.listen.backlog.size (KIP-764): Kafka's default.
DEFAULT_LISTEN_BACKLOG = 50
# How long the acceptor waits at max.connections before re-checking: a connection closed on
# another listener frees a slot without waking this one.
SLOT_RECHECK_S = 0.1
# Pause after accept() itself fails (EMFILE, ENFILE, ENOBUFS) so the loop does not spin.
ACCEPT_ERROR_BACKOFF_S = 0.1
# A TLS client that has not finished its handshake by then is dropped (it holds a connection
# slot and is not yet a connection the idle expiry sees).
SSL_HANDSHAKE_TIMEOUT_S = 10.0

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class ManagedConnection(Protocol):
    """What the acceptor needs of a served connection (``broker.network``'s connections)."""

    @property
    def last_active_ms(self) -> int: ...

    @property
    def busy(self) -> bool: ...

    @property
    def expiring(self) -> bool: ...

    def expire(self, reason: CloseReason) -> None: ...


class AcceptorMetrics(Protocol):
    def record_connection_refused(self, reason: str) -> None: ...

    def record_acceptor_blocked(self) -> None: ...


class Acceptor:
    """Accepts connections for one listener and hands each to ``serve``."""

    def __init__(
        self,
        serve: Serve,
        connections: Callable[[], Collection[ManagedConnection]],
        *,
        host: str,
        port: int,
        listener_name: str,
        quotas: ConnectionQuotas,
        metrics: AcceptorMetrics,
        connections_max_idle_ms: int,
        listen_backlog: int = DEFAULT_LISTEN_BACKLOG,
        monotonic_ms: Callable[[], int],
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        assert connections_max_idle_ms >= 1 and listen_backlog >= 1
        self._monotonic_ms = monotonic_ms  # idle expiry
        self._serve = serve
        self._connections = connections
        self._host = host
        self._port = port
        self.listener_name = listener_name
        self.quotas = quotas
        self.quotas.add_listener(listener_name)
        self._metrics = metrics
        self.connections_max_idle_ms = connections_max_idle_ms
        self._listen_backlog = listen_backlog
        # SSL / SASL_SSL listeners: every accepted socket completes a TLS handshake first.
        self._ssl_context = ssl_context
        # The broker's other listeners' acceptors (a protected listener makes them shed).
        self.peers: list[Acceptor] = []
        self._socket: socket.socket | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._slot_freed = asyncio.Event()
        # Tasks of accepted sockets, from acceptance until their quota slot is released.
        self._accepted: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._socket is not None, "start() first"
        port: int = self._socket.getsockname()[1]
        return port

    async def start(self) -> None:
        # One address, as Kafka binds ``new InetSocketAddress(host, port)``: the first the name
        # resolves to; an empty host is the wildcard.
        loop = asyncio.get_running_loop()
        family, *_, address = (
            await loop.getaddrinfo(
                self._host or None, self._port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        )[0]
        self._socket = socket.create_server(
            address[:2], family=family, backlog=self._listen_backlog
        )
        self._socket.setblocking(False)
        self._loops = [
            asyncio.create_task(self._accept_connections()),
            asyncio.create_task(self._expire_idle_connections()),
        ]

    async def close(self) -> None:
        """Stop accepting and cancel every accepted connection's task."""
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._loops = []
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        tasks = list(self._accepted)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept_connections(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._socket is not None
        while True:
            await self._wait_for_connection_slot()
            try:
                accepted, address = await loop.sock_accept(self._socket)
            except OSError as error:
                logger.warning("accept on %s failed: %s", self.listener_name, error)
                await asyncio.sleep(ACCEPT_ERROR_BACKOFF_S)
                continue
            ip = str(address[0])
            if self.quotas.open(self.listener_name, ip) is Admission.REFUSED_PER_IP:
                accepted.close()
                self._metrics.record_connection_refused(Admission.REFUSED_PER_IP.value)
                logger.debug("refused a connection from %s: max.connections.per.ip", ip)
                continue
            task = asyncio.create_task(self._serve_accepted(accepted, ip))
            self._accepted.add(task)
            task.add_done_callback(self._accepted.discard)
            for peer in self.peers:
                peer.close_excess_connections()

    async def _wait_for_connection_slot(self) -> None:
        if self.quotas.slot_available(self.listener_name):
            return
        self._metrics.record_acceptor_blocked()
        logger.warning(
            "max.connections (%d) reached: listener %s accepts again once one closes",
            self.quotas.limits.max_connections, self.listener_name,
        )  # fmt: skip
        while not self.quotas.slot_available(self.listener_name):
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), SLOT_RECHECK_S)

    async def _serve_accepted(self, accepted: socket.socket, ip: str) -> None:
        try:
            configure_accepted_socket(accepted)
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(loop=loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol,
                accepted,
                ssl=self._ssl_context,
                ssl_handshake_timeout=SSL_HANDSHAKE_TIMEOUT_S if self._ssl_context else None,
            )
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
            await self._serve(reader, writer)
        except OSError as error:
            # The client left before the transport was set up, or its TLS handshake failed
            # (ssl.SSLError, a timeout): this connection ends, the listener serves on.
            logger.debug("connection from %s failed at set-up: %s", ip, error)
            accepted.close()
        finally:
            self.quotas.close(self.listener_name, ip)
            self._slot_freed.set()

    def close_excess_connections(self) -> None:
        """Kafka's ``Processor.closeExcessConnections``: above max.connections (a protected
        listener let one more in), close this listener's least recently active connections."""
        excess = self.quotas.excess_connections(self.listener_name)
        if not excess:
            return
        connections = self._connections()
        expiring = sum(1 for c in connections if c.expiring)
        candidates = sorted(
            (c for c in connections if not c.expiring), key=lambda c: c.last_active_ms
        )
        for connection in candidates[: max(0, excess - expiring)]:
            connection.expire(CloseReason.MAX_CONNECTIONS)

    async def _expire_idle_connections(self) -> None:
        interval_s = scan_interval_ms(self.connections_max_idle_ms) / 1000
        while True:
            await asyncio.sleep(interval_s)
            self.expire_idle_connections(self._monotonic_ms())

    def expire_idle_connections(self, now_ms: int) -> int:
        """Close connections idle for longer than connections.max.idle.ms (Kafka's Selector);
        how many were expired."""
        candidates = ((c, c.last_active_ms, c.busy) for c in self._connections() if not c.expiring)
        idle = idle_connections(candidates, now_ms, self.connections_max_idle_ms)
        for connection in idle:
            connection.expire(CloseReason.IDLE)
        return len(idle)


def configure_accepted_socket(accepted: socket.socket) -> None:
    """Kafka's ``Acceptor.configureAcceptedSocketChannel``: no Nagle delay, TCP keep-alive.

    asyncio would set TCP_NODELAY itself only on sockets whose ``proto`` is IPPROTO_TCP, and
    sockets accepted from ``socket.create_server``'s have proto 0: without this, small responses
    (acks=all Produce) wait for the peer's delayed ACK — measured 25-30% less produce
    throughput in ``bench/produce_fetch.py``.
    """
    accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    accepted.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


async def resolve_per_ip_overrides(overrides: Mapping[str, int]) -> Mapping[str, int]:
    """``max.connections.per.ip.overrides`` keyed by address: host names are resolved once, at
    start-up (Kafka's ``InetAddress.getByName``); a name that does not resolve is an error."""
    loop = asyncio.get_running_loop()
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        if is_ip_literal(host):
            resolved[str(ipaddress.ip_address(host))] = count
            continue
        for *_, address in await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM):
            resolved[str(address[0])] = count
    return MappingProxyType(resolved)
