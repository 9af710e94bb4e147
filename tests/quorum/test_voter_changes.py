"""AddRaftVoter / RemoveRaftVoter decisions (KIP-853), as Kafka's ``KafkaRaftClientReconfigTest``
exercises them: testAddVoterInvalidClusterId, testDuplicateVoterIsRejected,
testAddVoterToNotLeader, testAddVoterWithPendingAddVoter, testAddVoterWithMissingDefaultListener,
testRemoveVoterInvalidClusterId, testRemoveVoterToNotLeader, testRemoveVoterWithPendingRemoveVoter,
testRemoveVoterToEmptyVoterSet (refused here), testInvalidVoterReplicaKey."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from pykraft.protocol.errors import Errors
from pykraft.quorum.config import HostPort
from pykraft.quorum.voter_changes import (
    HWM_NOT_ESTABLISHED,
    NO_DIRECTORY_ID,
    LeaderView,
    Listener,
    PendingVoterChange,
    Refusal,
    Voter,
    VoterChangeKind,
    VoterSet,
    check_cluster_id,
    check_new_voter_ready,
    decide_add_voter,
    decide_remove_voter,
    is_caught_up,
    refusal_at_append,
)

DIR_3 = "c1HvGC5lRTWeCWkSXVRMXQ"
DIR_4 = "hFnSqqNsQQm7ZhaWQxTbcA"


def voter(node_id: int, directory_id: str = NO_DIRECTORY_ID) -> Voter:
    return Voter(
        node_id=node_id,
        directory_id=directory_id,
        raft_address=HostPort(host="127.0.0.1", port=9090 + node_id),
        http_listener=HostPort(host="127.0.0.1", port=19090 + node_id),
    )


VOTERS = VoterSet.of([voter(1), voter(2), voter(3, DIR_3)])
VIEW = LeaderView(
    cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
    is_leader=True,
    committed_in_term=True,
    last_change_committed=True,
    voters=VOTERS,
    pending=None,
    now_ms=1_000,
)
LISTENERS_4 = (
    Listener(name="CONTROLLER", host="127.0.0.1", port=19094),
    Listener(name="RAFT", host="127.0.0.1", port=9094),
)


def add(view: LeaderView = VIEW, **overrides: object) -> Voter | Refusal:
    arguments: dict[str, object] = {
        "cluster_id": "MkU3OEVBNTcwNTJENDM2Qk",
        "voter_id": 4,
        "directory_id": DIR_4,
        "listeners": LISTENERS_4,
    }
    arguments.update(overrides)
    return decide_add_voter(view, **arguments)  # type: ignore[arg-type]


def remove(view: LeaderView = VIEW, voter_id: int = 3, directory_id: str = DIR_3) -> object:
    return decide_remove_voter(
        view, cluster_id="MkU3OEVBNTcwNTJENDM2Qk", voter_id=voter_id, directory_id=directory_id
    )


def error_of(answer: object) -> Errors | None:
    return answer.error if isinstance(answer, Refusal) else None


PENDING = PendingVoterChange(kind=VoterChangeKind.ADD, voter=voter(5, DIR_4), deadline_ms=2_000)


def test_a_new_voter_is_added_with_its_raft_and_http_endpoints() -> None:
    assert add() == Voter(
        node_id=4,
        directory_id=DIR_4,
        raft_address=HostPort(host="127.0.0.1", port=9094),
        http_listener=HostPort(host="127.0.0.1", port=19094),
    )
    assert add(listeners=(Listener(name="raft", host="h", port=1),)) == Voter(
        node_id=4, directory_id=DIR_4, raft_address=HostPort(host="h", port=1)
    )


@pytest.mark.parametrize(
    ("view_change", "request_change", "expected"),
    [
        ({}, {"cluster_id": "other"}, Errors.INCONSISTENT_CLUSTER_ID),
        ({}, {"cluster_id": None}, None),  # no cluster id: accepted (hasValidClusterId)
        ({}, {"cluster_id": ""}, None),
        ({"cluster_id": None}, {"cluster_id": "any"}, None),
        ({"is_leader": False}, {}, Errors.NOT_LEADER_OR_FOLLOWER),
        # the cluster id is checked before the leadership, as Kafka does
        ({"is_leader": False}, {"cluster_id": "other"}, Errors.INCONSISTENT_CLUSTER_ID),
        ({}, {"voter_id": -1}, Errors.INVALID_REQUEST),
        ({}, {"directory_id": NO_DIRECTORY_ID}, Errors.INVALID_REQUEST),
        ({}, {"listeners": LISTENERS_4[:1]}, Errors.INVALID_REQUEST),  # no RAFT endpoint
        ({}, {"listeners": (Listener(name="RAFT", host="", port=1),)}, Errors.INVALID_REQUEST),
        ({}, {"listeners": (Listener(name="RAFT", host="h", port=0),)}, Errors.INVALID_REQUEST),
        ({}, {"listeners": LISTENERS_4 * 9}, Errors.INVALID_REQUEST),  # over MAX_LISTENERS
        ({"pending": PENDING}, {}, Errors.REQUEST_TIMED_OUT),
        ({"pending": PENDING, "now_ms": 2_000}, {}, None),  # an expired change no longer blocks
        ({"committed_in_term": False}, {}, Errors.REQUEST_TIMED_OUT),
        ({"last_change_committed": False}, {}, Errors.REQUEST_TIMED_OUT),
        ({}, {"voter_id": 3}, Errors.DUPLICATE_VOTER),
        ({}, {"voter_id": 2, "directory_id": DIR_4}, Errors.DUPLICATE_VOTER),
        # another id on a voter's Raft address would make two members of one process
        (
            {},
            {"listeners": (Listener(name="RAFT", host="127.0.0.1", port=9093),)},
            Errors.DUPLICATE_VOTER,
        ),
        # a request that is malformed is refused before the state is looked at
        ({"pending": PENDING}, {"voter_id": -1}, Errors.INVALID_REQUEST),
        ({"committed_in_term": False}, {"voter_id": 3}, Errors.REQUEST_TIMED_OUT),
    ],
)
def test_add_voter_refusals(
    view_change: dict[str, Any], request_change: dict[str, object], expected: Errors | None
) -> None:
    assert error_of(add(attrs.evolve(VIEW, **view_change), **request_change)) is expected


def test_add_voter_messages_are_kafkas() -> None:
    duplicate = add(voter_id=3)
    assert isinstance(duplicate, Refusal)
    assert (
        duplicate.message is not None and "already part of the set of voters" in duplicate.message
    )
    pending = add(attrs.evolve(VIEW, pending=PENDING))
    assert isinstance(pending, Refusal)
    assert pending.message == (
        "Request timed out waiting for leader to handle previous voter change request"
    )
    refused = check_cluster_id("b", "a")
    assert refused == Refusal(
        error=Errors.INCONSISTENT_CLUSTER_ID,
        message='The given id "b" doesn\'t match the cluster id "a"',
    )


@pytest.mark.parametrize(
    ("view_change", "voter_id", "directory_id", "expected"),
    [
        ({}, 3, DIR_3, None),
        ({}, 1, NO_DIRECTORY_ID, None),  # a static voter: its directory id is unknown
        ({}, 1, DIR_3, Errors.VOTER_NOT_FOUND),  # a directory id a static voter does not have
        ({}, 3, NO_DIRECTORY_ID, Errors.VOTER_NOT_FOUND),  # voter 3 has a directory id
        ({}, 3, DIR_4, Errors.VOTER_NOT_FOUND),
        ({}, 7, DIR_3, Errors.VOTER_NOT_FOUND),
        ({}, -1, DIR_3, Errors.INVALID_REQUEST),
        ({"is_leader": False}, 3, DIR_3, Errors.NOT_LEADER_OR_FOLLOWER),
        ({"pending": PENDING}, 3, DIR_3, Errors.REQUEST_TIMED_OUT),
        ({"committed_in_term": False}, 3, DIR_3, Errors.REQUEST_TIMED_OUT),
        ({"last_change_committed": False}, 3, DIR_3, Errors.REQUEST_TIMED_OUT),
        ({"voters": VoterSet.of([voter(1)])}, 1, NO_DIRECTORY_ID, Errors.INVALID_REQUEST),
    ],
)
def test_remove_voter_refusals(
    view_change: dict[str, Any], voter_id: int, directory_id: str, expected: Errors | None
) -> None:
    answer = remove(attrs.evolve(VIEW, **view_change), voter_id, directory_id)
    assert error_of(answer) is expected
    if expected is None:
        assert answer == VOTERS.get(voter_id)


def test_remove_voter_from_another_cluster() -> None:
    answer = decide_remove_voter(VIEW, cluster_id="nope", voter_id=3, directory_id=DIR_3)
    assert error_of(answer) is Errors.INCONSISTENT_CLUSTER_ID


def test_voter_set_is_sorted_and_changes_one_voter_at_a_time() -> None:
    assert VOTERS.node_ids == (1, 2, 3)
    assert VOTERS.without(3).with_voter(voter(4, DIR_4)).node_ids == (1, 2, 4)
    assert VOTERS.by_raft_address("127.0.0.1:9092") == voter(2)
    assert VOTERS.by_raft_address("127.0.0.1:1") is None
    with pytest.raises(AssertionError):
        VOTERS.with_voter(voter(3))


@pytest.mark.parametrize(
    ("match_index", "commit_index", "expected"),
    [(None, 5, False), (4, 5, False), (5, 5, True), (9, 5, True)],
)
def test_caught_up_when_the_match_index_reaches_the_commit_index(
    match_index: int | None, commit_index: int, expected: bool
) -> None:
    assert is_caught_up(match_index=match_index, leader_commit_index=commit_index) is expected


def test_voters_round_trip_through_json_and_bad_shapes_are_refused() -> None:
    from pykraft.quorum.voter_changes import voter_from_json, voter_to_json

    for one in (voter(1), voter(3, DIR_3), attrs.evolve(voter(2), http_listener=None)):
        assert voter_from_json(voter_to_json(one)) == one
    bad: object
    for bad in (
        None,
        [],
        {"node_id": "1", "directory_id": DIR_3, "raft": "h:1"},
        {"node_id": -1, "directory_id": DIR_3, "raft": "h:1"},
        {"node_id": 1, "directory_id": DIR_3, "raft": "h"},
        {"node_id": 1, "directory_id": DIR_3, "raft": "h:70000"},
        {"node_id": 1, "directory_id": DIR_3, "raft": "h:1", "http": 5},
    ):
        with pytest.raises(ValueError):
            voter_from_json(bad)


STATIC = attrs.evolve(VIEW, kraft_version=0)


def test_a_static_quorum_refuses_voter_changes_with_kafkas_unsupported_version() -> None:
    """Kafka 3.9's ``AddVoterHandler`` / ``RemoveVoterHandler`` at kraft.version 0
    (``KRaftVersion.isReconfigSupported``): a quorum of static controller.quorum.voters."""
    assert add(STATIC) == Refusal(
        error=Errors.UNSUPPORTED_VERSION,
        message="Cluster doesn't support adding voter because the kraft.version feature is 0",
    )
    assert remove(STATIC) == Refusal(
        error=Errors.UNSUPPORTED_VERSION,
        message="Cluster doesn't support removing voter because the kraft.version feature is 0",
    )


@pytest.mark.parametrize(
    ("view_change", "expected"),
    [
        # Kafka's order: a pending change and the high watermark come before kraft.version ...
        ({"pending": PENDING}, Errors.REQUEST_TIMED_OUT),
        ({"committed_in_term": False}, Errors.REQUEST_TIMED_OUT),
        ({"is_leader": False}, Errors.NOT_LEADER_OR_FOLLOWER),
        # ... which comes before the last change's commit and the voter set's checks.
        ({"last_change_committed": False}, Errors.UNSUPPORTED_VERSION),
        ({}, Errors.UNSUPPORTED_VERSION),
    ],
)
def test_the_kraft_version_check_comes_in_kafkas_order(
    view_change: dict[str, Any], expected: Errors
) -> None:
    view = attrs.evolve(STATIC, **view_change)
    assert error_of(add(view)) is expected
    assert error_of(add(view, voter_id=3)) is expected  # a duplicate too
    assert error_of(remove(view)) is expected
    assert error_of(remove(view, voter_id=7)) is expected  # an unknown voter too


@pytest.mark.parametrize(
    ("reachable", "connected_voters", "expected"),
    [
        (True, 3, None),
        (True, 2, None),  # {1, 2, 3} with 3 down: 2 reached + the new one = 3 of 4
        (True, 1, Errors.REQUEST_TIMED_OUT),  # 1 + the new one = 2 of 4: could never commit
        (False, 3, Errors.REQUEST_TIMED_OUT),  # a dead or wrong RAFT endpoint
    ],
)
def test_a_new_voter_must_answer_and_keep_a_majority_before_it_is_appended(
    reachable: bool, connected_voters: int, expected: Errors | None
) -> None:
    """Review finding 5, Kafka's ``AddVoterHandler``: the new voter is probed (API_VERSIONS)
    before ``appendVotersRecord``; REQUEST_TIMED_OUT with nothing appended otherwise. An entry
    that needs more voters than the leader reaches would stall every later write."""
    new = voter(4, DIR_4)
    refused = check_new_voter_ready(
        new,
        reachable=reachable,
        connected_voters=connected_voters,
        new_set=VOTERS.with_voter(new),
    )
    assert error_of(refused) is expected
    if not reachable:
        assert refused == Refusal(
            error=Errors.REQUEST_TIMED_OUT,
            message=f"New voter ReplicaKey(id=4, directoryId={DIR_4}) is not ready to receive "
            "requests",
        )


@pytest.mark.parametrize(
    ("committed_in_term", "last_change_committed", "message"),
    [
        (False, True, HWM_NOT_ESTABLISHED),
        (True, False, "Request timed out waiting for voters to commit the latest voter change"),
        (True, True, "The voter set changed before the change was appended; retry"),
    ],
)
def test_a_refusal_at_the_append_names_its_reason(
    committed_in_term: bool, last_change_committed: bool, message: str
) -> None:
    """Review finding 8: a change refused at the append was reported as the HWM reason even
    when the last change was still in flight."""
    assert refusal_at_append(
        committed_in_term=committed_in_term, last_change_committed=last_change_committed
    ) == Refusal(error=Errors.REQUEST_TIMED_OUT, message=message)
