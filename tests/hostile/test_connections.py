"""Connection floods against a real broker: max.connections, max.connections.per.ip,
connections.max.idle.ms (Kafka's names and rules, ``broker.connection_quotas``).

The flood comes from 127.0.0.2 (all of 127/8 is loopback on Linux) so that a well-behaved
kafka-python client on 127.0.0.1 is a different address for the per-ip limit. Flood sockets
connect without blocking: at max.connections the broker stops accepting (Kafka's blocking
acceptor), so most of them stay in the kernel's backlog or in SYN_SENT until the flood ends.
"""

from __future__ import annotations

import errno
import functools
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.broker.wire_client import api_versions_frame, correlation_id
from tests.hostile.conftest import SingleBroker
from tests.hostile.support import nothing_written
from tests.integration.conftest import http

FLOOD_ADDRESS = "127.0.0.2"
FLOOD_CONNECTIONS = 5_000
MAX_CONNECTIONS = 1_000
# The broker's RSS while it holds 1,000 idle connections; measured 80-90 MB on this machine
# (a fresh broker is ~70 MB), so this bound leaves room without hiding a leak per connection.
RSS_BOUND_MB = 150
# A second flood may not grow RSS by more than this: the first one's memory is reused. (It is
# not handed back to the OS: CPython keeps the small-object arenas ~10 KB per connection
# touched; gc.collect() and malloc_trim(0) recover 3 MB of 11 in a measurement.)
RSS_REUSE_MB = 3
# Idle floods after the first, and the most RSS each later connection may leave behind. The
# first flood costs ~12 KB per connection (71 -> 94 MB for 2,000); later ones ~0.1 KB.
IDLE_FLOODS = 3
LEAK_BOUND_KB_PER_CONNECTION = 1.0
WAIT_S = 30.0


def rss_mb(broker: SingleBroker) -> float:
    assert broker.broker.process is not None
    with open(f"/proc/{broker.broker.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line")


def metric(broker: SingleBroker, name: str) -> float:
    """A sample of the broker's /metrics (``name`` may carry its labels)."""
    text = http("GET", broker.broker.http_url + "/metrics").decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def closed_at_least(broker: SingleBroker, counter: str, count: int) -> bool:
    return metric(broker, counter) >= count


def wait_until(
    predicate: Callable[[], bool],
    what: str,
    timeout_s: float = WAIT_S,
    state: Callable[[], object] = lambda: "",
) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}: {state()}"
        time.sleep(0.1)


@contextmanager
def flood(broker: SingleBroker, count: int) -> Iterator[list[socket.socket]]:
    """``count`` idle connections from FLOOD_ADDRESS, connecting in the background; closed on
    exit."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((FLOOD_ADDRESS, 0))
            sock.setblocking(False)
            code = sock.connect_ex(broker.host_port)
            assert code in (0, errno.EINPROGRESS), errno.errorcode.get(code, code)
            sockets.append(sock)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def served_by_raw_client(broker: SingleBroker) -> bool:
    with socket.create_connection(broker.host_port, timeout=5) as sock:
        sock.sendall(api_versions_frame(77, 3))
        answer = sock.recv(8)
    return len(answer) == 8 and correlation_id(answer[4:]) == 77


def hold_flood(broker: SingleBroker, expected_open: int) -> float:
    """Flood the broker, check it holds exactly ``expected_open`` connections; its RSS then."""
    with flood(broker, FLOOD_CONNECTIONS):
        peak = 0.0

        def held() -> bool:
            nonlocal peak
            peak = max(peak, metric(broker, "pykraft_connections"))
            return peak >= expected_open

        wait_until(held, "the broker holds max.connections", state=lambda: peak)
        time.sleep(2)  # give the broker every chance to accept more than it should
        held()
        assert peak == expected_open
        rss_during = rss_mb(broker)
    wait_until(lambda: metric(broker, "pykraft_connections") == 0, "the flood is gone")
    return rss_during


# A deep listen backlog: with Kafka's 50, the kernel's SYN cookies answer most of the flood,
# and a cookie connection whose final ACK meets a full backlog is lost for good (the idle
# client never retransmits), so whether 1,000 arrive at all would be luck.
@pytest.mark.broker_properties(
    {"max.connections": str(MAX_CONNECTIONS), "socket.listen.backlog.size": "4096"}
)
def test_a_flood_of_5000_connections_is_held_to_max_connections(
    single_broker: SingleBroker,
) -> None:
    broker = single_broker
    refused = 'pykraft_connections_refused_total{reason="max_connections_per_ip"}'
    with nothing_written(broker):
        rss_before = rss_mb(broker)
        rss_during = hold_flood(broker, MAX_CONNECTIONS)
        # Kafka's acceptor blocks at the limit rather than refusing: nothing was refused.
        assert metric(broker, "pykraft_acceptor_blocked_total") >= 1
        assert metric(broker, refused) == 0
        assert rss_during < RSS_BOUND_MB, (rss_before, rss_during)
        rss_after = rss_mb(broker)
        assert served_by_raw_client(broker)
        # A second flood reuses the memory the first one left: no growth per flood.
        rss_second = hold_flood(broker, MAX_CONNECTIONS)
        assert rss_second <= rss_during + RSS_REUSE_MB, (rss_during, rss_second)
    print(
        f"RSS MB before {rss_before:.1f}, with 1000 held {rss_during:.1f}, after {rss_after:.1f},"
        f" second flood {rss_second:.1f}"
    )
    broker.assert_still_serves()


@pytest.mark.broker_properties(
    {
        "max.connections": str(MAX_CONNECTIONS),
        "max.connections.per.ip": "100",
        # Refused connections leave at once; a deep backlog lets the whole flood connect
        # without waiting out SYN retransmits (1 s, 3 s, 7 s, ...).
        "socket.listen.backlog.size": "4096",
    }
)
def test_the_per_ip_limit_refuses_a_flood_and_others_are_served_during_it(
    single_broker: SingleBroker,
) -> None:
    broker = single_broker
    refused = 'pykraft_connections_refused_total{reason="max_connections_per_ip"}'
    with nothing_written(broker), flood(broker, FLOOD_CONNECTIONS):
        # Kafka's TooManyConnectionsException: every connection past 100 is closed at once.
        wait_until(
            lambda: metric(broker, refused) == FLOOD_CONNECTIONS - 100,
            "every connection over the per-ip limit is refused",
            timeout_s=60,
        )
        assert metric(broker, "pykraft_connections") == 100
        # A client from another address is served while the flood holds its 100.
        assert served_by_raw_client(broker)
        broker.assert_still_serves()
        assert metric(broker, refused) == FLOOD_CONNECTIONS - 100


@pytest.mark.broker_properties(
    {"connections.max.idle.ms": "2000", "socket.listen.backlog.size": "4096"}
)
def test_idle_connections_are_closed_after_connections_max_idle_ms(
    single_broker: SingleBroker,
) -> None:
    broker = single_broker
    idle_closed = 'pykraft_connections_closed_total{reason="idle"}'
    with nothing_written(broker):
        with flood(broker, 2_000) as idle:
            wait_until(lambda: metric(broker, "pykraft_connections") == 2_000, "all are open")
            with socket.create_connection(broker.host_port, timeout=5) as busy:
                # A connection that keeps talking stays open past the idle limit.
                for correlation in range(10):
                    busy.sendall(api_versions_frame(correlation, 3))
                    assert busy.recv(8)[4:8] == correlation.to_bytes(4, "big")
                    busy.recv(65536)
                    time.sleep(0.4)
                wait_until(lambda: metric(broker, idle_closed) == 2_000, "the idle ones close")
                assert metric(broker, "pykraft_connections") == 1
                busy.sendall(api_versions_frame(99, 3))
                assert busy.recv(8)[4:8] == (99).to_bytes(4, "big")
            # The flood's sockets see the broker's close (EOF).
            idle[0].setblocking(True)
            idle[0].settimeout(5)
            assert idle[0].recv(1) == b""
        rss_first = rss_mb(broker)
        # Idle floods no longer accumulate (issue 9: 2,000 were kept forever). One flood's
        # growth is noise-prone (a CI run saw +4.2 MB once where this machine sees +0.5), so
        # the bound is on the mean over several: a leak of even a tenth of a connection's
        # cost would exceed it on every flood.
        for closed in range(4_000, 2_000 * (IDLE_FLOODS + 2), 2_000):
            with flood(broker, 2_000):
                wait_until(
                    functools.partial(closed_at_least, broker, idle_closed, closed),
                    f"{closed} idle connections closed",
                )
        rss_last = rss_mb(broker)
    growth_kb_per_connection = (rss_last - rss_first) * 1024 / (IDLE_FLOODS * 2_000)
    print(
        f"RSS MB after one idle flood of 2000 {rss_first:.1f}, after {IDLE_FLOODS} more"
        f" {rss_last:.1f} ({growth_kb_per_connection:.2f} KB per connection)"
    )
    assert growth_kb_per_connection <= LEAK_BOUND_KB_PER_CONNECTION
    broker.assert_still_serves()
