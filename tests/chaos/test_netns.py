"""The namespace layer drops exactly what a fault names (``tests/chaos/netns.py``): datagrams
between two node namespaces, one direction at a time, with the test's own namespace always
through, and nothing left behind by ``destroy``."""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"network faults NOT run (no network namespaces: {reason})")
    network = Network(["x", "y"])
    try:
        network.create()
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


def test_destroy_leaves_nothing_behind() -> None:
    network = Network(["z"])
    network.create()
    namespace, bridge = network.namespace("z"), network.bridge
    assert namespace in run("ip", "netns", "list")
    network.destroy()
    assert namespace not in run("ip", "netns", "list")
    links = run("ip", "-o", "link")
    assert bridge not in links and f"{network.tag}h0" not in links
