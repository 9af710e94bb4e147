"""The admin calls ``pykraft metadata-quorum`` makes, as Kafka's ``Admin`` makes them:
``describeMetadataQuorum`` (DescribeQuorum for ``__cluster_metadata``-0), ``addRaftVoter`` and
``removeRaftVoter`` (KIP-853), each to any broker (brokers forward them to the active controller),
and ``describeCluster``'s cluster id (DescribeCluster).

Encoders and decoders are pure; ``QuorumCalls`` runs them on an ``AdminNetwork``. NOT_CONTROLLER
and REQUEST_TIMED_OUT of DescribeQuorum are retried until ``default.api.timeout.ms``, like the
admin client's retriable errors; AddRaftVoter and RemoveRaftVoter are not resent (a second add of
the same voter is DUPLICATE_VOTER), as Kafka's handlers fail the call on any error. Any other
failure is an ``AdminError`` carrying Kafka's error and message.
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)

from pykraft.admin_errors import AdminError
from pykraft.admin_network import AdminNetwork
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.raft_voter_messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
)

METADATA_TOPIC = "__cluster_metadata"
RETRIABLE = frozenset({Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT})


@attrs.frozen
class ReplicaDescription:
    """Kafka's ``QuorumInfo.ReplicaState``."""

    replica_id: int
    directory_id: uuid.UUID
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@attrs.frozen
class QuorumInfo:
    """Kafka's ``QuorumInfo``: the leader, its epoch, the high watermark, voters, observers and
    the voters' endpoints (``nodes``: node id -> ``NAME://host:port`` strings)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]
    nodes: dict[int, tuple[str, ...]]


@attrs.frozen
class NewVoterListener:
    name: str
    host: str
    port: int


def encode_describe_quorum(version: int) -> bytes:
    topic = DescribeQuorumRequest.TopicData
    request = DescribeQuorumRequest(
        version=version,
        topics=[
            topic(topic_name=METADATA_TOPIC, partitions=[topic.PartitionData(partition_index=0)])
        ],
    )
    return bytes(request.encode(version=version))


def _replica(replica: Any) -> ReplicaDescription:
    directory = getattr(replica, "replica_directory_id", None)
    return ReplicaDescription(
        replica_id=replica.replica_id,
        directory_id=directory if isinstance(directory, uuid.UUID) else uuid.UUID(int=0),
        log_end_offset=replica.log_end_offset,
        last_fetch_timestamp=getattr(replica, "last_fetch_timestamp", -1),
        last_caught_up_timestamp=getattr(replica, "last_caught_up_timestamp", -1),
    )


def decode_describe_quorum(body: bytes | memoryview, version: int) -> QuorumInfo | Errors:
    """The quorum, or the (top-level or partition) error to retry or report."""
    response = DescribeQuorumResponse.decode(bytes(body), version=version)
    if response.error_code != Errors.NONE.code:
        return Errors(response.error_code)
    [topic] = response.topics
    [partition] = topic.partitions
    if partition.error_code != Errors.NONE.code:
        return Errors(partition.error_code)
    nodes = {
        node.node_id: tuple(f"{e.name}://{e.host}:{e.port}" for e in node.listeners)
        for node in (getattr(response, "nodes", None) or ())
    }
    return QuorumInfo(
        leader_id=partition.leader_id,
        leader_epoch=partition.leader_epoch,
        high_watermark=partition.high_watermark,
        voters=tuple(_replica(r) for r in partition.current_voters),
        observers=tuple(_replica(r) for r in partition.observers),
        nodes=nodes,
    )


def encode_add_raft_voter(
    version: int,
    *,
    cluster_id: str | None,
    timeout_ms: int,
    voter_id: int,
    directory_id: uuid.UUID,
    listeners: tuple[NewVoterListener, ...],
) -> bytes:
    request = AddRaftVoterRequest(
        version=version,
        cluster_id=cluster_id,
        timeout_ms=timeout_ms,
        voter_id=voter_id,
        voter_directory_id=directory_id,
        listeners=[
            AddRaftVoterRequest.Listener(name=item.name, host=item.host, port=item.port)
            for item in listeners
        ],
    )
    return bytes(request.encode(version=version))


def encode_remove_raft_voter(
    version: int, *, cluster_id: str | None, voter_id: int, directory_id: uuid.UUID
) -> bytes:
    request = RemoveRaftVoterRequest(
        version=version, cluster_id=cluster_id, voter_id=voter_id, voter_directory_id=directory_id
    )
    return bytes(request.encode(version=version))


def decode_voter_change(response_cls: Any, body: bytes | memoryview, version: int) -> None:
    response = response_cls.decode(bytes(body), version=version)
    if response.error_code != Errors.NONE.code:
        error = Errors(response.error_code)
        message = response.error_message or error.name
        raise AdminError(f"{error.name}: {message}", error)


class QuorumCalls:
    """The metadata-quorum calls on an ``AdminNetwork``."""

    def __init__(self, network: AdminNetwork) -> None:
        self._network = network

    async def describe_metadata_quorum(self) -> QuorumInfo:
        async def attempt() -> QuorumInfo | str:
            node = await self._network.any_broker()
            answer = await self._network.request(
                node, ApiKey.DESCRIBE_QUORUM, encode_describe_quorum, decode_describe_quorum
            )
            if isinstance(answer, QuorumInfo):
                return answer
            if answer in RETRIABLE:
                return f"DescribeQuorum: {answer.name}"
            raise AdminError(f"DescribeQuorum failed: {answer.name}", answer)

        return await self._network.retrying("describeMetadataQuorum", attempt)

    async def cluster_id(self) -> str | None:
        def decode(body: memoryview, version: int) -> str | None:
            response = DescribeClusterResponse.decode(bytes(body), version=version)
            return str(response.cluster_id) if response.error_code == 0 else None

        def encode(version: int) -> bytes:
            request = DescribeClusterRequest(
                version=version, include_cluster_authorized_operations=False
            )
            return bytes(request.encode(version=version))

        node = await self._network.any_broker()
        return await self._network.request(node, ApiKey.DESCRIBE_CLUSTER, encode, decode)

    async def add_raft_voter(
        self,
        *,
        cluster_id: str | None,
        timeout_ms: int,
        voter_id: int,
        directory_id: uuid.UUID,
        listeners: tuple[NewVoterListener, ...],
    ) -> None:
        node = await self._network.any_broker()

        def encode(version: int) -> bytes:
            return encode_add_raft_voter(
                version,
                cluster_id=cluster_id,
                timeout_ms=timeout_ms,
                voter_id=voter_id,
                directory_id=directory_id,
                listeners=listeners,
            )

        await self._network.request(
            node,
            ApiKey.ADD_RAFT_VOTER,
            encode,
            lambda body, version: decode_voter_change(AddRaftVoterResponse, body, version),
        )

    async def remove_raft_voter(
        self, *, cluster_id: str | None, voter_id: int, directory_id: uuid.UUID
    ) -> None:
        node = await self._network.any_broker()

        def encode(version: int) -> bytes:
            return encode_remove_raft_voter(
                version, cluster_id=cluster_id, voter_id=voter_id, directory_id=directory_id
            )

        await self._network.request(
            node,
            ApiKey.REMOVE_RAFT_VOTER,
            encode,
            lambda body, version: decode_voter_change(RemoveRaftVoterResponse, body, version),
        )
