"""Kafka's DescribeQuorum from pysyncobj's status (quorum/describe_quorum.py), following
KafkaRaftClientTest.testDescribeQuorum* and LeaderStateTest.testDescribeQuorum*: the leader
reports its own log end and now for both of its times; a voter is described as far as the Raft
state shows it, -1 where it does not; observers carry the offsets their heartbeats report."""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.metadata.api.json_fields import Fields
from pykraft.metadata.api.quorum import (
    UNKNOWN,
    DescribeQuorumResponse,
    Listener,
    QuorumNode,
    ReplicaState,
    describe_quorum_from_json,
    describe_quorum_to_json,
)
from pykraft.quorum.config import HostPort
from pykraft.quorum.describe_quorum import describe_quorum
from pykraft.quorum.voter_changes import NO_DIRECTORY_ID, Voter, VoterSet

DIR_3 = "c1HvGC5lRTWeCWkSXVRMXQ"
VOTERS = VoterSet.of(
    [
        Voter(
            node_id=node_id,
            directory_id=DIR_3 if node_id == 3 else NO_DIRECTORY_ID,
            raft_address=HostPort(host="127.0.0.1", port=9092 + node_id),
        )
        for node_id in (1, 2, 3)
    ]
)
ADDRESS = {voter.node_id: str(voter.raft_address) for voter in VOTERS.voters}
NOW_MS = 1_700_000_000_000
NODES = (QuorumNode(node_id=1, listeners=(Listener(name="CONTROLLER", host="h", port=1),)),)


def status(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"state": 2, "raft_term": 7, "last_applied": 40, "commit_idx": 40}
    return base | fields


def describe(
    raft: dict[str, Any], committed_offset: int = 99, observers: tuple[tuple[int, int], ...] = ()
) -> DescribeQuorumResponse:
    return describe_quorum(
        leader_id=1,
        voters=VOTERS,
        status=raft,
        committed_offset=committed_offset,
        observers=observers,
        nodes=NODES,
        now_ms=NOW_MS,
    )


def test_the_leader_reports_its_epoch_high_watermark_and_itself_caught_up_now() -> None:
    answer = describe(status())
    assert (answer.leader_id, answer.leader_epoch, answer.high_watermark) == (1, 7, 100)
    assert answer.voters[0] == ReplicaState(
        replica_id=1, log_end_offset=100, last_fetch_timestamp=NOW_MS,
        last_caught_up_timestamp=NOW_MS,
    )  # fmt: skip
    assert answer.nodes == NODES


@pytest.mark.parametrize(
    ("match_index", "expected"),
    [
        # Holds every entry the leader applied: the whole committed log, caught up now.
        (40, ReplicaState(replica_id=2, log_end_offset=100, last_caught_up_timestamp=NOW_MS)),
        (41, ReplicaState(replica_id=2, log_end_offset=100, last_caught_up_timestamp=NOW_MS)),
        # Behind: its offset in metadata records is not known here.
        (39, ReplicaState(replica_id=2)),
        (None, ReplicaState(replica_id=2)),  # pysyncobj has no match index (a new leader)
        ("40", ReplicaState(replica_id=2)),  # not an int: not trusted
    ],
)
def test_a_follower_voter(match_index: object, expected: ReplicaState) -> None:
    raft = status()
    if match_index is not None:
        raft[f"match_idx_server_{ADDRESS[2]}"] = match_index
    assert describe(raft).voters[1] == expected
    assert expected.last_fetch_timestamp == UNKNOWN  # pysyncobj does not publish it


def test_an_empty_log_has_high_watermark_zero() -> None:
    answer = describe(status(raft_term=1, last_applied=0), committed_offset=-1)
    assert (answer.high_watermark, answer.voters[0].log_end_offset) == (0, 0)


def test_observers_are_the_brokers_at_their_reported_offsets() -> None:
    answer = describe(status(), observers=((11, -1), (10, 98)))
    assert answer.observers == (
        ReplicaState(replica_id=10, log_end_offset=99),
        ReplicaState(replica_id=11, log_end_offset=UNKNOWN),
    )


def test_the_json_contract_round_trips() -> None:
    raft = status(**{f"match_idx_server_{ADDRESS[3]}": 40})
    answer = describe(raft, observers=((10, 5),))
    assert describe_quorum_from_json(Fields.of(describe_quorum_to_json(answer), "x")) == answer


def test_voters_carry_their_directory_ids_kip_853() -> None:
    """DescribeQuorum v2's ReplicaDirectoryId: a voter added with AddRaftVoter has its own, a
    static voter Kafka's zero uuid; it survives the JSON between controller and broker."""
    answer = describe(status(**{"match_idx_server_127.0.0.1:9095": 40}))
    assert [v.replica_directory_id for v in answer.voters] == [
        NO_DIRECTORY_ID,
        NO_DIRECTORY_ID,
        DIR_3,
    ]
    assert describe_quorum_from_json(Fields(describe_quorum_to_json(answer))) == answer
