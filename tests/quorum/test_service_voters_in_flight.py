"""The one voter change in flight (``service_voters._in_flight``; Kafka's ``LeaderState`` holds
one ``AddVoterHandlerState`` or ``RemoveVoterHandlerState``): set while the change runs, cleared
when it ends however it ends, never clearing a change that replaced it."""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.quorum.config import HostPort
from pykraft.quorum.service_voters import _in_flight
from pykraft.quorum.voter_changes import (
    NO_DIRECTORY_ID,
    PendingVoterChange,
    Voter,
    VoterChangeKind,
)


def change(node_id: int, kind: VoterChangeKind = VoterChangeKind.ADD) -> PendingVoterChange:
    voter = Voter(
        node_id=node_id,
        directory_id=NO_DIRECTORY_ID,
        raft_address=HostPort(host="127.0.0.1", port=9090 + node_id),
        http_listener=HostPort(host="127.0.0.1", port=19090 + node_id),
    )
    return PendingVoterChange(kind=kind, voter=voter, deadline_ms=1_000)


def test_the_change_is_in_flight_while_it_runs_then_cleared() -> None:
    slot: dict[str, Any] = {}
    add = change(4)
    with _in_flight(slot, add):
        assert slot["change"] is add
    assert slot == {}


def test_a_failed_change_is_cleared_too() -> None:
    slot: dict[str, Any] = {}
    with pytest.raises(TimeoutError), _in_flight(slot, change(4, VoterChangeKind.REMOVE)):
        raise TimeoutError("commit timed out")
    assert slot == {}


def test_a_change_that_replaced_it_is_left_in_flight() -> None:
    slot: dict[str, Any] = {}
    later = change(5)
    with _in_flight(slot, change(4)):
        slot["change"] = later
    assert slot["change"] is later
