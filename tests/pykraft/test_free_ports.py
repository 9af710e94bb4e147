"""Ports for test and dev servers come from below the kernel's ephemeral range, where no outgoing
connection can take one between the pick and the server's bind."""

from __future__ import annotations

import socket
from pathlib import Path

from pykraft.free_ports import LOWEST, ephemeral_low, pick_free_ports


def test_picked_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    ports = pick_free_ports(8)
    assert len(set(ports)) == 8
    assert all(LOWEST <= port < ephemeral_low() for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_is_never_handed_out_twice_by_one_process() -> None:
    first = set(pick_free_ports(50))
    second = set(pick_free_ports(50))
    assert not first & second


def test_a_port_in_use_is_skipped() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert taken not in pick_free_ports(200)


def test_the_ephemeral_range_is_read_from_proc_with_a_default(tmp_path: Path) -> None:
    good = tmp_path / "range"
    good.write_text("40000\t60999\n")
    assert ephemeral_low(good) == 40000
    assert ephemeral_low(tmp_path / "missing") == 32768
