"""The namespace layer drops exactly what a fault names (``tests/chaos/netns.py``): datagrams
between two node namespaces, one direction at a time, with the test's own namespace always
through, and nothing left behind by ``destroy``; the latency relays (``tests/chaos/relay.py``)
add their delay to every round trip between two nodes, and carry the bytes."""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.chaos.net_faults import isolate, one_way
from tests.chaos.netns import Network, run, unavailable_reason

pytestmark = pytest.mark.chaos

PORT = 40_000
RECEIVE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(0.3)
print("ready", flush=True)
try:
    print(s.recv(100).decode(), flush=True)
except TimeoutError:
    print("nothing", flush=True)
"""
SEND = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    s.sendto(b"hello", (sys.argv[1], int(sys.argv[2])))
"""
ECHO = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
print("ready", flush=True)
c, _ = s.accept()
while data := c.recv(100):
    c.sendall(data)
"""
# Round trips of one byte over one connection, in milliseconds, one a line.
PING = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(int(sys.argv[3])):
    start = time.monotonic()
    s.sendall(b"x")
    assert s.recv(1) == b"x"
    print((time.monotonic() - start) * 1000, flush=True)
"""


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"network faults and latency relays NOT run (no network namespaces: {reason})")
    network = Network(["x", "y"])
    try:
        network.create()
        network.start_relays()
        yield network
    finally:
        network.destroy()


def arrives(network: Network, source: str | None, destination: str) -> bool:
    """Whether a datagram from ``source`` (None: the test's namespace) reaches ``destination``."""
    address = network.addresses[destination]
    inside = ["ip", "netns", "exec", network.namespace(destination)]
    receiver = subprocess.Popen(
        [*inside, sys.executable, "-c", RECEIVE, address, str(PORT)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        prefix = [] if source is None else ["ip", "netns", "exec", network.namespace(source)]
        subprocess.run([*prefix, sys.executable, "-c", SEND, address, str(PORT)], check=True)
        return receiver.stdout.readline().strip() == "hello"
    finally:
        receiver.wait(5)


def test_one_way_loss_drops_one_direction_and_heal_restores_it(network: Network) -> None:
    assert arrives(network, "x", "y") and arrives(network, "y", "x")
    before = network.dropped.copy()
    network.apply(one_way({"x"}, {"y"}))
    assert not arrives(network, "x", "y")
    assert arrives(network, "y", "x")
    assert arrives(network, None, "y")  # the test client is never cut off
    network.heal()
    assert arrives(network, "x", "y")
    # Only y had a rule; it counted the three datagrams x sent it (and any ICMP port
    # unreachable x sent back for y's datagrams that came after its receiver had gone).
    dropped = network.dropped - before
    assert set(dropped) == {"y"} and dropped["y"] >= 3


def test_isolation_drops_both_directions(network: Network) -> None:
    network.apply(isolate("x", network.names))
    try:
        assert not arrives(network, "x", "y") and not arrives(network, "y", "x")
        assert arrives(network, None, "x")
    finally:
        network.heal()
    assert arrives(network, "y", "x")


def round_trips_ms(network: Network, count: int) -> list[float]:
    """Round trips of a TCP connection x opens to an echo server in y."""
    address = network.addresses["y"]
    echo = subprocess.Popen(
        ["ip", "netns", "exec", network.namespace("y"), sys.executable, "-c", ECHO, address,
         str(PORT)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        ping = subprocess.run(
            ["ip", "netns", "exec", network.namespace("x"), sys.executable, "-c", PING, address,
             str(PORT), str(count)],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return [float(line) for line in ping.stdout.split()]
    finally:
        echo.wait(5)


def test_the_relays_add_their_delay_to_every_round_trip_and_carry_the_bytes(
    network: Network,
) -> None:
    before = network.relay_stats()["x"]
    baseline = statistics.median(round_trips_ms(network, 5))
    network.set_delay(60)
    try:
        slowed = round_trips_ms(network, 5)
    finally:
        network.heal()
    assert network.delay_ms == 0
    # x's relay holds each chunk 60 ms each way: a round trip takes 120 ms more.
    assert 120 <= statistics.median(slowed) - baseline < 170, (baseline, slowed)
    carried = network.relay_stats()["x"] - before
    assert carried["connections"] == 2 and carried["connect failures"] == 0
    assert carried["bytes out"] == carried["bytes back"] == 10
    assert carried["bytes delayed"] == 10  # the five bytes each way of the slowed run
    assert statistics.median(round_trips_ms(network, 5)) < baseline + 50  # healed


def test_destroy_leaves_nothing_behind() -> None:
    network = Network(["z"])
    network.create()
    namespace, bridge = network.namespace("z"), network.bridge
    assert namespace in run("ip", "netns", "list")
    network.destroy()
    assert namespace not in run("ip", "netns", "list")
    links = run("ip", "-o", "link")
    assert bridge not in links and f"{network.tag}h0" not in links
