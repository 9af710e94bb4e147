"""The metadata quorum as Kafka's DescribeQuorum describes it (KIP-595, KIP-836, KIP-853).

GET /v1/quorum/describe (the active controller answers; a standby redirects with 421
NOT_CONTROLLER like a write, as only Kafka's Raft leader answers DescribeQuorum)
  -> {"leader_id", "leader_epoch", "high_watermark",
      "voters": [{replica_id, log_end_offset, last_fetch_timestamp, last_caught_up_timestamp}],
      "observers": [same],
      "nodes": [{node_id, listeners: [{name, host, port}]}]}

Offsets are metadata log offsets; ``high_watermark`` is exclusive (the offset after the last
committed record), as Kafka's. Timestamps are the leader's wall clock; -1 where unknown, as
Kafka reports it. ``leader_epoch`` is the Raft term. ``GET /v1/quorum`` (``admin.py``) is the
pykraft view of one controller's Raft state, answered by any controller.
"""

from __future__ import annotations

import attrs

from pykraft.metadata.api.json_fields import Fields, JsonObject

UNKNOWN = -1
NO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"


@attrs.frozen(kw_only=True)
class ReplicaState:
    """Kafka's ``DescribeQuorumResponseData.ReplicaState``."""

    replica_id: int
    log_end_offset: int = UNKNOWN
    last_fetch_timestamp: int = UNKNOWN
    last_caught_up_timestamp: int = UNKNOWN
    # KIP-853: the replica's directory id (Kafka's text form); the zero uuid when unknown
    # (a static voter, a broker), Kafka's ``ReplicaKey.NO_DIRECTORY_ID``.
    replica_directory_id: str = NO_DIRECTORY_ID


@attrs.frozen(kw_only=True)
class Listener:
    name: str
    host: str
    port: int


@attrs.frozen(kw_only=True)
class QuorumNode:
    """A voter and its listeners (DescribeQuorum v2's ``Nodes``, KIP-853)."""

    node_id: int
    listeners: tuple[Listener, ...]


@attrs.frozen(kw_only=True)
class DescribeQuorumResponse:
    """Kafka's ``LeaderState.describeQuorum`` with ``LeaderState.nodes``."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]
    nodes: tuple[QuorumNode, ...]


def _replica_to_json(replica: ReplicaState) -> JsonObject:
    return {
        "replica_id": replica.replica_id,
        "log_end_offset": replica.log_end_offset,
        "last_fetch_timestamp": replica.last_fetch_timestamp,
        "last_caught_up_timestamp": replica.last_caught_up_timestamp,
        "replica_directory_id": replica.replica_directory_id,
    }


def _replica_from_json(fields: Fields) -> ReplicaState:
    return ReplicaState(
        replica_id=fields.integer("replica_id"),
        log_end_offset=fields.integer("log_end_offset"),
        last_fetch_timestamp=fields.integer("last_fetch_timestamp"),
        last_caught_up_timestamp=fields.integer("last_caught_up_timestamp"),
        replica_directory_id=fields.string("replica_directory_id", NO_DIRECTORY_ID),
    )


def describe_quorum_to_json(response: DescribeQuorumResponse) -> JsonObject:
    return {
        "leader_id": response.leader_id,
        "leader_epoch": response.leader_epoch,
        "high_watermark": response.high_watermark,
        "voters": [_replica_to_json(r) for r in response.voters],
        "observers": [_replica_to_json(r) for r in response.observers],
        "nodes": [
            {
                "node_id": node.node_id,
                "listeners": [
                    {"name": listener.name, "host": listener.host, "port": listener.port}
                    for listener in node.listeners
                ],
            }
            for node in response.nodes
        ],
    }


def describe_quorum_from_json(fields: Fields) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(
        leader_id=fields.integer("leader_id"),
        leader_epoch=fields.integer("leader_epoch"),
        high_watermark=fields.integer("high_watermark"),
        voters=tuple(_replica_from_json(r) for r in fields.objects("voters")),
        observers=tuple(_replica_from_json(r) for r in fields.objects("observers")),
        nodes=tuple(
            QuorumNode(
                node_id=node.integer("node_id"),
                listeners=tuple(
                    Listener(
                        name=listener.string("name"),
                        host=listener.string("host"),
                        port=listener.integer("port"),
                    )
                    for listener in node.objects("listeners")
                ),
            )
            for node in fields.objects("nodes")
        ),
    )
