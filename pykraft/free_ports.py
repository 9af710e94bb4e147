"""Free TCP ports for servers a tool or a test is about to start on 127.0.0.1.

A port from ``bind(("127.0.0.1", 0))`` comes from the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), the same range every outgoing connection takes its
local port from. Between the pick and the server's own bind, a client connection elsewhere on the
machine can take that port (CI saw a broker fail with "address already in use" that way). Ports
below the ephemeral range are never handed to a connection, so they are picked from there, each
checked with a bind, and never handed out twice by one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_LOW = 32768
LOWEST = 10000  # leaves the well-known and most registered service ports alone
_handed_out: set[int] = set()
_random = random.Random()  # seeded from the OS: concurrent processes pick different ports


def ephemeral_low(path: Path = EPHEMERAL_RANGE_FILE) -> int:
    """The first port the kernel may hand to an outgoing connection."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_free_ports(count: int) -> list[int]:
    """``count`` distinct ports below the ephemeral range, free now and new to this process."""
    low = ephemeral_low()
    if low - LOWEST < 1000:  # an unusual range: fall back to the kernel's own choice
        return _kernel_ports(count)
    picked: list[int] = []
    for port in _random.sample(range(LOWEST, low), low - LOWEST):
        if port not in _handed_out and _bindable(port):
            picked.append(port)
            _handed_out.add(port)
            if len(picked) == count:
                return picked
    raise OSError(f"fewer than {count} free ports between {LOWEST} and {low}")


def _kernel_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
