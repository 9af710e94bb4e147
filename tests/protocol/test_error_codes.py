"""The one ``Errors`` enum: Kafka's names and wire codes (``Errors.java``).

The controller's HTTP admin API answers ``{"error": NAME}`` with these names; the rows below are
every code the controller produced before the two enums became one, so a rename or renumbering
that would change an HTTP answer fails here.
"""

from __future__ import annotations

from pykraft.metadata.api.errors import ApiError
from pykraft.protocol.errors import Errors


def check(name: str, code: int) -> None:
    assert Errors[name].code == code, name
    assert Errors(code).name == name, code
    assert ApiError.of(Errors[name]).name == name
    assert ApiError.of(Errors[name]).code == code


def test_the_controllers_error_names_and_codes() -> None:
    check("UNKNOWN_SERVER_ERROR", -1)
    check("NONE", 0)
    check("UNKNOWN_TOPIC_OR_PARTITION", 3)
    check("NOT_LEADER_OR_FOLLOWER", 6)
    check("INVALID_TOPIC_EXCEPTION", 17)
    check("UNSUPPORTED_VERSION", 35)
    check("TOPIC_ALREADY_EXISTS", 36)
    check("INVALID_PARTITIONS", 37)
    check("INVALID_REPLICATION_FACTOR", 38)
    check("INVALID_REPLICA_ASSIGNMENT", 39)
    check("INVALID_CONFIG", 40)
    check("NOT_CONTROLLER", 41)
    check("INVALID_REQUEST", 42)
    check("FENCED_LEADER_EPOCH", 74)
    check("STALE_BROKER_EPOCH", 77)
    check("PREFERRED_LEADER_NOT_AVAILABLE", 80)
    check("ELIGIBLE_LEADERS_NOT_AVAILABLE", 83)
    check("ELECTION_NOT_NEEDED", 84)
    check("INVALID_UPDATE_VERSION", 95)
    check("UNKNOWN_TOPIC_ID", 100)
    check("DUPLICATE_BROKER_REGISTRATION", 101)
    check("BROKER_ID_NOT_REGISTERED", 102)
    check("INELIGIBLE_REPLICA", 107)
    check("NEW_LEADER_ELECTED", 108)


def test_every_code_from_unknown_server_error_to_voter_not_found_decodes() -> None:
    # Errors.java has no gaps from -1 to 127 (KIP-853's DUPLICATE_VOTER, VOTER_NOT_FOUND): a
    # code a peer sends always has a member.
    assert [error.code for error in Errors] == list(range(-1, 128))


def test_a_code_is_a_plain_int_on_the_wire() -> None:
    assert Errors.NOT_COORDINATOR.code == 16
    assert type(Errors.NOT_COORDINATOR.code) is int
