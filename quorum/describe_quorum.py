"""Kafka's DescribeQuorum answer from the active controller's Raft state (pysyncobj).

Kafka's ``KafkaRaftClient.handleDescribeQuorumRequest`` answers from the leader's
``LeaderState.describeQuorum``: the leader id, its epoch, the high watermark, and per voter and
observer the log end offset and the leader's wall-clock times of its last fetch and of the last
time it was caught up (the leader itself: its own log end, and now for both times).

What pysyncobj lets us say, and where pykraft answers Kafka's -1 ("unknown"):

* epoch: the Raft term (``raft_term``); high watermark: the offset after the last committed
  metadata record.
* the leader's own log end offset: the high watermark — its applied log; entries proposed but
  not committed yet have no metadata offsets until they apply (``raft_state.apply_entry``).
* a follower voter: pysyncobj knows its match index in Raft entries, not in metadata offsets.
  When it covers every entry the leader has applied, the follower holds the whole committed log:
  its log end offset is the high watermark and it is caught up now. Otherwise both are unknown
  (-1). pysyncobj does not publish when a follower last answered, so its last fetch is -1.
* observers: Kafka's brokers fetch the metadata log from the Raft leader; pykraft's long-poll the
  controllers over HTTP. Their log end offsets are the metadata offsets their heartbeats report
  to the active controller (-1 before the first); fetch times are unknown (-1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pykraft.metadata.api.quorum import UNKNOWN, DescribeQuorumResponse, QuorumNode, ReplicaState
from pykraft.quorum.voter_changes import Voter, VoterSet


def _int(status: Mapping[str, Any], key: str) -> int | None:
    value = status.get(key)
    return value if type(value) is int else None


def _follower(
    voter: Voter, status: Mapping[str, Any], high_watermark: int, now_ms: int
) -> ReplicaState:
    match_index = _int(status, f"match_idx_server_{voter.raft_address}")
    applied_index = _int(status, "last_applied")
    if match_index is None or applied_index is None or match_index < applied_index:
        return ReplicaState(replica_id=voter.node_id, replica_directory_id=voter.directory_id)
    return ReplicaState(
        replica_id=voter.node_id,
        replica_directory_id=voter.directory_id,
        log_end_offset=high_watermark,
        last_caught_up_timestamp=now_ms,
    )


def describe_quorum(
    *,
    leader_id: int,
    voters: VoterSet,
    status: Mapping[str, Any],
    committed_offset: int,
    observers: Sequence[tuple[int, int]],
    nodes: tuple[QuorumNode, ...],
    now_ms: int,
) -> DescribeQuorumResponse:
    """The leader's answer: ``voters`` the voter set (KIP-853; pysyncobj keys its status with
    their Raft addresses), ``status`` is pysyncobj's ``getStatus()``, ``committed_offset`` the last
    committed metadata offset (-1: none), ``observers`` (broker id, reported metadata offset),
    ``now_ms`` the leader's wall clock."""
    assert leader_id in voters.node_ids, (leader_id, voters.node_ids)
    high_watermark = committed_offset + 1
    described = []
    for voter in voters.voters:
        if voter.node_id == leader_id:
            described.append(
                ReplicaState(
                    replica_id=voter.node_id,
                    replica_directory_id=voter.directory_id,
                    log_end_offset=high_watermark,
                    last_fetch_timestamp=now_ms,
                    last_caught_up_timestamp=now_ms,
                )
            )
        else:
            described.append(_follower(voter, status, high_watermark, now_ms))
    return DescribeQuorumResponse(
        leader_id=leader_id,
        leader_epoch=_int(status, "raft_term") or 0,
        high_watermark=high_watermark,
        voters=tuple(described),
        observers=tuple(
            ReplicaState(
                replica_id=broker_id, log_end_offset=offset + 1 if offset >= 0 else UNKNOWN
            )
            for broker_id, offset in sorted(observers)
        ),
        nodes=nodes,
    )
