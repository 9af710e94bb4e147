"""How many Kafka connections the broker holds: Kafka's ``ConnectionQuotas``, as a pure core.

Why: without limits every accepted socket is kept until its client leaves, so a flood of idle
connections grows the broker without bound (issue 9). Kafka's rules, with Kafka's names:

* ``max.connections`` (default ``Integer.MAX_VALUE``): broker-wide. At the limit Kafka's acceptor
  **blocks** (``ConnectionQuotas.waitForConnectionSlot``) until a connection closes; new clients
  wait in the kernel's listen backlog rather than being refused. ``slot_available`` is that
  test; the listener's accept loop waits on it.
* the inter-broker listener is *protected* when the broker has more than one listener
  (``ConnectionQuotas.protectedListener``): it accepts even at the broker-wide limit, and each
  other listener then closes its least recently active connection while the total is above the
  limit (``maxConnectionsExceeded`` / ``Processor.closeExcessConnections``), so followers and
  other brokers always get in. With one listener — pykraft's usual setup, where followers fetch
  over the client listener — nothing is protected, exactly as in Kafka: replica fetchers hold
  long-lived connections opened at start-up, so a flood delays only their reconnects.
* ``max.connections.per.ip`` (default ``Integer.MAX_VALUE``) and
  ``max.connections.per.ip.overrides`` (``"host:count,ip:count"``): a connection from an address
  already at its maximum is **closed at once** (``TooManyConnectionsException``), after the
  broker-wide wait, as in ``ConnectionQuotas.inc``.
* ``connections.max.idle.ms`` (default 10 minutes): a connection with no request in flight and
  no bytes read or written for that long is closed (Kafka's ``Selector`` idle expiry);
  ``idle_connections`` picks them.

The core holds counts only; the listener (``broker.network``) owns sockets, clock and waiting.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TypeVar

import attrs

# Kafka's default for both limits: Integer.MAX_VALUE (no limit).
DEFAULT_MAX_CONNECTIONS = 2**31 - 1
DEFAULT_MAX_CONNECTIONS_PER_IP = 2**31 - 1
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 10 * 60 * 1000


class Admission(enum.Enum):
    """What happens to a connection just accepted."""

    OPEN = "open"
    # Closed at once: its address holds max.connections.per.ip (or its override) already.
    REFUSED_PER_IP = "max_connections_per_ip"


def parse_per_ip_overrides(text: str) -> Mapping[str, int]:
    """``max.connections.per.ip.overrides``: ``"hostName:100,127.0.0.1:200"`` (Kafka's example).

    Raises ``ValueError`` on an entry without ``:count`` or a negative count. Keys stay as
    written; IPv6 addresses may be bracketed (``[::1]:5``). Hosts are resolved by the shell.
    """
    overrides: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, separator, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not separator or not host or not count.strip().isdigit():
            raise ValueError(f"expected host:count, got {item!r}")
        overrides[host] = int(count)
    return MappingProxyType(overrides)


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@attrs.frozen
class ConnectionLimits:
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP
    # ip -> maximum; hosts already resolved to addresses by the shell.
    max_connections_per_ip_overrides: Mapping[str, int] = attrs.field(
        factory=lambda: MappingProxyType({})
    )

    def max_for(self, ip: str) -> int:
        return self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)


class ConnectionQuotas:
    """Open-connection counts per listener and per address, shared by every listener."""

    def __init__(
        self, limits: ConnectionLimits, *, inter_broker_listener: str | None = None
    ) -> None:
        self.limits = limits
        self._inter_broker_listener = inter_broker_listener
        self._listener_counts: dict[str, int] = {}
        self._ip_counts: dict[str, int] = {}
        # Invariant: total == sum(_listener_counts.values()) == sum(_ip_counts.values()).
        self.total = 0

    def add_listener(self, listener_name: str) -> None:
        self._listener_counts.setdefault(listener_name, 0)

    def count(self, ip: str) -> int:
        return self._ip_counts.get(ip, 0)

    def is_protected(self, listener_name: str) -> bool:
        """Kafka's ``protectedListener``: the inter-broker listener, when there are others."""
        return listener_name == self._inter_broker_listener and len(self._listener_counts) > 1

    def slot_available(self, listener_name: str) -> bool:
        """Whether the acceptor of ``listener_name`` may accept now (else it waits)."""
        return self.is_protected(listener_name) or self.total < self.limits.max_connections

    def excess_connections(self, listener_name: str) -> int:
        """Connections an unprotected listener should close: the total above the limit."""
        if self.is_protected(listener_name):
            return 0
        return max(0, self.total - self.limits.max_connections)

    def open(self, listener_name: str, ip: str) -> Admission:
        """Count a connection just accepted, or refuse it (then nothing is counted)."""
        assert listener_name in self._listener_counts, f"{listener_name}: add_listener first"
        if self.count(ip) >= self.limits.max_for(ip):
            return Admission.REFUSED_PER_IP
        self._ip_counts[ip] = self.count(ip) + 1
        self._listener_counts[listener_name] += 1
        self.total += 1
        return Admission.OPEN

    def close(self, listener_name: str, ip: str) -> None:
        """Uncount a connection ``open`` admitted."""
        assert self.count(ip) > 0 and self._listener_counts[listener_name] > 0, (listener_name, ip)
        self._ip_counts[ip] -= 1
        if not self._ip_counts[ip]:
            del self._ip_counts[ip]
        self._listener_counts[listener_name] -= 1
        self.total -= 1


Key = TypeVar("Key")


def idle_connections(
    last_active_ms: Iterable[tuple[Key, int, bool]], now_ms: int, max_idle_ms: int
) -> list[Key]:
    """The connections to close for idleness: ``(key, last active, has requests in flight)``
    triples whose last activity is more than ``connections.max.idle.ms`` ago and that wait for
    no response (a request being served is not idleness)."""
    return [
        key for key, last_ms, busy in last_active_ms if not busy and now_ms - last_ms > max_idle_ms
    ]


def scan_interval_ms(max_idle_ms: int) -> int:
    """How often the listener looks for idle connections: a quarter of the idle limit, so one
    closes at most 25% late, between 10 ms and ``IDLE_SCAN_INTERVAL_MAX_MS``."""
    return max(10, min(IDLE_SCAN_INTERVAL_MAX_MS, max_idle_ms // 4))


IDLE_SCAN_INTERVAL_MAX_MS = 5_000
