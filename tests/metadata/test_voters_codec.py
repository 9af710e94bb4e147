"""The AddRaftVoter / RemoveRaftVoter routes' JSON (metadata/api/voters.py): what the broker
sends is what the controller reads, and bodies the contract refuses (a directory id that is not
a Kafka uuid, too many listeners, a timeout out of range) are JsonBodyErrors, the HTTP API's 400
INVALID_REQUEST naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.metadata.api.json_fields import Fields, JsonBodyError
from pykraft.metadata.api.voters import (
    MAX_VOTER_LISTENERS,
    AddVoterRequest,
    RemoveVoterRequest,
    VoterListener,
    add_voter_from_json,
    add_voter_to_json,
    remove_voter_from_json,
    remove_voter_to_json,
)

ADD = AddVoterRequest(
    cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
    timeout_ms=30_000,
    voter_id=4,
    voter_directory_id="hFnSqqNsQQm7ZhaWQxTbcA",
    listeners=(
        VoterListener(name="CONTROLLER", host="127.0.0.1", port=19096),
        VoterListener(name="RAFT", host="127.0.0.1", port=9096),
    ),
)
REMOVE = RemoveVoterRequest(
    cluster_id=None, voter_id=3, voter_directory_id="AAAAAAAAAAAAAAAAAAAAAA"
)


def test_round_trips() -> None:
    assert add_voter_from_json(Fields(add_voter_to_json(ADD))) == ADD
    assert remove_voter_from_json(Fields(remove_voter_to_json(REMOVE))) == REMOVE


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"voter_directory_id": "not-a-uuid"}, "voter_directory_id"),
        ({"voter_directory_id": "hFnSqqNsQQm7ZhaWQxTbcB"}, "voter_directory_id"),  # not canonical
        ({"timeout_ms": -1}, "timeout_ms"),
        ({"timeout_ms": 10 * 60 * 1000 + 1}, "timeout_ms"),
        ({"listeners": [{"name": "RAFT", "host": "h", "port": 1}] * (MAX_VOTER_LISTENERS + 1)},
         "listeners"),
        ({"listeners": [{"name": "RAFT", "host": "h"}]}, "port"),
        ({"voter_id": "4"}, "voter_id"),
    ],
)  # fmt: skip
def test_refused_bodies_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(JsonBodyError, match=field):
        add_voter_from_json(Fields(add_voter_to_json(ADD) | change))
