"""The Kafka admin requests pykraft's tools send through ``admin_client.py``, as values: encode the
request, decode the answer into what Kafka's ``Admin`` hands its caller (no I/O here). Values
mirror Kafka's admin classes (``ProducerState``, ``TransactionListing``, ``TransactionDescription``,
``AbortTransactionSpec``) and the decoders apply the rules of the matching
``clients/admin/internals`` handlers: a negative coordinator epoch or transaction start offset in
DescribeProducers is "absent" (``DescribeProducersHandler``), a negative transaction start time in
DescribeTransactions is "absent" (``DescribeTransactionsHandler``), an abort is one
WriteTxnMarkers ABORT entry for one partition (``AbortTransactionHandler``, KIP-664).

The codecs are kafka-python's, through ``protocol.apis`` (the broker decodes the same classes);
``admin_versions`` picks, per API, the highest version both this client and the broker speak.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS, decode_response, request_class
from pykraft.protocol.errors import Errors, ProtocolError
from pykraft.protocol.txn_markers import (
    decode_write_txn_markers_response,
    encode_write_txn_markers,
)
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

TRANSACTION_KEY_TYPE = 1  # FindCoordinatorRequest.CoordinatorType.TRANSACTION
NO_NODE = -1
# The lowest version of each API this client can use: Metadata v1 (null = every topic),
# FindCoordinator v1 (key types). Metadata is the one every broker must serve.
MIN_VERSIONS: Mapping[ApiKey, int] = {
    ApiKey.METADATA: 1,
    ApiKey.FIND_COORDINATOR: 1,
    ApiKey.DESCRIBE_PRODUCERS: 0,
    ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.LIST_TRANSACTIONS: 0,
    ApiKey.WRITE_TXN_MARKERS: 1,
    # pykraft reassign-partitions (KIP-455; IncrementalAlterConfigs for the throttles).
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
    ApiKey.DESCRIBE_QUORUM: 0,  # pykraft metadata-quorum (KIP-853; DescribeCluster: cluster id)
    ApiKey.ADD_RAFT_VOTER: 0,
    ApiKey.REMOVE_RAFT_VOTER: 0,
    ApiKey.DESCRIBE_CLUSTER: 0,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 0,  # pykraft configs --entity-type users|clients (KIP-546)
    ApiKey.ALTER_CLIENT_QUOTAS: 0,
}
# What this client speaks of an API the broker's own table may not list (kafka-python's codec
# covers Kafka 3.9's IncrementalAlterConfigs v0-v1).
CLIENT_ONLY_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1)}
BATCHED_FIND_COORDINATOR_VERSION = 4  # KIP-699


@attrs.frozen
class AdminVersions:
    """The version of each API both sides speak; an API missing here the broker does not serve
    (Kafka's ``UnsupportedVersionException``)."""

    versions: Mapping[ApiKey, int]

    def of(self, api_key: ApiKey) -> int | None:
        return self.versions.get(api_key)


def admin_versions(ranges: Mapping[int, tuple[int, int]]) -> AdminVersions:
    """The broker's ApiVersions ranges -> the versions to use; no Metadata is a ProtocolError."""
    chosen: dict[ApiKey, int] = {}
    for api_key, lowest in MIN_VERSIONS.items():
        supported = SUPPORTED_API_VERSIONS.get(api_key)
        ours = (
            CLIENT_ONLY_VERSIONS[api_key]
            if supported is None
            else (supported.min_version, supported.max_version)
        )
        theirs = ranges.get(api_key)
        if theirs is None:
            continue
        low, high = max(lowest, ours[0], theirs[0]), min(ours[1], theirs[1])
        if low <= high:
            chosen[api_key] = high
    if ApiKey.METADATA not in chosen:
        raise ProtocolError(f"the broker serves no Metadata version from v1: {ranges}")
    return AdminVersions(chosen)


# ---------------------------------------------------------------------------- Metadata


@attrs.frozen
class BrokerNode:
    node_id: int
    host: str
    port: int


@attrs.frozen
class PartitionMetadata:
    partition: int
    error: Errors
    leader: int  # NO_NODE while the partition has none
    replicas: tuple[int, ...]


@attrs.frozen
class TopicMetadata:
    name: str
    error: Errors
    is_internal: bool
    partitions: tuple[PartitionMetadata, ...]


@attrs.frozen
class ClusterMetadata:
    brokers: Mapping[int, BrokerNode]
    topics: Mapping[str, TopicMetadata]

    def leader_of(self, tp: TopicPartition) -> int:
        topic = self.topics.get(tp.topic)
        for partition in () if topic is None else topic.partitions:
            if partition.partition == tp.partition:
                return partition.leader
        return NO_NODE


def encode_metadata(version: int, topics: Sequence[str] | None) -> bytes:
    """Metadata for ``topics`` (None: every topic, internal ones included), never creating one
    (the admin client's ``allowAutoTopicCreation=false``)."""
    request_type: Any = request_class(ApiKey.METADATA)
    wanted = None if topics is None else [request_type.MetadataRequestTopic(name=t) for t in topics]
    fields: dict[str, Any] = {"topics": wanted}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    return bytes(request_type(version=version, **fields).encode(version=version))


def decode_metadata(body: bytes | memoryview, version: int) -> ClusterMetadata:
    response = decode_response(ApiKey.METADATA, version, body)
    brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port) for b in response.brokers}
    topics = {
        t.name: TopicMetadata(
            name=t.name,
            error=Errors(t.error_code),
            is_internal=bool(t.is_internal),
            partitions=tuple(
                PartitionMetadata(
                    partition=p.partition_index,
                    error=Errors(p.error_code),
                    leader=p.leader_id,
                    replicas=tuple(p.replica_nodes),
                )
                for p in sorted(t.partitions, key=lambda p: p.partition_index)
            ),
        )
        for t in response.topics
    }
    return ClusterMetadata(brokers, topics)


# ---------------------------------------------------------------------------- FindCoordinator


@attrs.frozen
class FoundCoordinator:
    error: Errors
    node: BrokerNode | None  # None unless error is NONE


def encode_find_transaction_coordinator(version: int, keys: Sequence[str]) -> bytes:
    """FindCoordinator for transactional ids: all of them from v4 (KIP-699), one before."""
    request_type: Any = request_class(ApiKey.FIND_COORDINATOR)
    if version >= BATCHED_FIND_COORDINATOR_VERSION:
        request = request_type(
            version=version, key_type=TRANSACTION_KEY_TYPE, coordinator_keys=list(keys)
        )
    else:
        assert len(keys) == 1, f"FindCoordinator v{version} takes one key, not {len(keys)}"
        request = request_type(version=version, key_type=TRANSACTION_KEY_TYPE, key=keys[0])
    return bytes(request.encode(version=version))


def decode_find_coordinator(
    body: bytes | memoryview, version: int, keys: Sequence[str]
) -> dict[str, FoundCoordinator]:
    """Each asked key's coordinator; a key the answer leaves out is UNKNOWN_SERVER_ERROR."""
    response = decode_response(ApiKey.FIND_COORDINATOR, version, body)
    entries = response.coordinators if version >= BATCHED_FIND_COORDINATOR_VERSION else [response]
    found = {key: FoundCoordinator(Errors.UNKNOWN_SERVER_ERROR, None) for key in keys}
    for entry in entries:
        key = entry.key if version >= BATCHED_FIND_COORDINATOR_VERSION else keys[0]
        if key not in found:
            continue
        error = Errors(entry.error_code)
        node = BrokerNode(entry.node_id, entry.host, entry.port) if error is Errors.NONE else None
        found[key] = FoundCoordinator(error, node)
    return found


# ---------------------------------------------------------------------------- DescribeProducers


@attrs.frozen
class ProducerState:
    """Kafka's ``org.apache.kafka.clients.admin.ProducerState``."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    current_transaction_start_offset: int | None


@attrs.frozen
class PartitionProducers:
    error: Errors
    error_message: str | None
    active_producers: tuple[ProducerState, ...]


def encode_describe_producers(version: int, partitions: Iterable[TopicPartition]) -> bytes:
    request_type: Any = request_class(ApiKey.DESCRIBE_PRODUCERS)
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    topics = [
        request_type.TopicRequest(name=topic, partition_indexes=indexes)
        for topic, indexes in by_topic.items()
    ]
    return bytes(request_type(version=version, topics=topics).encode(version=version))


def decode_describe_producers(
    body: bytes | memoryview, version: int
) -> dict[TopicPartition, PartitionProducers]:
    response = decode_response(ApiKey.DESCRIBE_PRODUCERS, version, body)
    return {
        TopicPartition(topic.name, partition.partition_index): PartitionProducers(
            error=Errors(partition.error_code),
            error_message=partition.error_message,
            active_producers=tuple(
                ProducerState(
                    producer_id=p.producer_id,
                    producer_epoch=p.producer_epoch,
                    last_sequence=p.last_sequence,
                    last_timestamp=p.last_timestamp,
                    coordinator_epoch=None if p.coordinator_epoch < 0 else p.coordinator_epoch,
                    current_transaction_start_offset=(
                        None if p.current_txn_start_offset < 0 else p.current_txn_start_offset
                    ),
                )
                for p in partition.active_producers
            ),
        )
        for topic in response.topics
        for partition in topic.partitions
    }


# ---------------------------------------------------------------------------- DescribeTransactions


@attrs.frozen
class TransactionDescription:
    """Kafka's ``org.apache.kafka.clients.admin.TransactionDescription``."""

    coordinator_id: int
    state: str  # Kafka's TransactionState names: Ongoing, PrepareAbort, ...
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: tuple[TopicPartition, ...]


@attrs.frozen
class DescribedTransaction:
    error: Errors
    description: TransactionDescription | None  # None unless error is NONE


def encode_describe_transactions(version: int, transactional_ids: Sequence[str]) -> bytes:
    request_type: Any = request_class(ApiKey.DESCRIBE_TRANSACTIONS)
    request = request_type(version=version, transactional_ids=list(transactional_ids))
    return bytes(request.encode(version=version))


def decode_describe_transactions(
    body: bytes | memoryview, version: int, coordinator_id: int
) -> dict[str, DescribedTransaction]:
    response = decode_response(ApiKey.DESCRIBE_TRANSACTIONS, version, body)
    described = {}
    for state in response.transaction_states:
        error = Errors(state.error_code)
        description = None
        if error is Errors.NONE:
            description = TransactionDescription(
                coordinator_id=coordinator_id,
                state=state.transaction_state,
                producer_id=state.producer_id,
                producer_epoch=state.producer_epoch,
                transaction_timeout_ms=state.transaction_timeout_ms,
                transaction_start_time_ms=(
                    None if state.transaction_start_time_ms < 0 else state.transaction_start_time_ms
                ),
                topic_partitions=tuple(
                    sorted(
                        TopicPartition(topic.topic, partition)
                        for topic in state.topics
                        for partition in topic.partitions
                    )
                ),
            )
        described[state.transactional_id] = DescribedTransaction(error, description)
    return described


# ---------------------------------------------------------------------------- ListTransactions


@attrs.frozen
class TransactionListing:
    """Kafka's ``org.apache.kafka.clients.admin.TransactionListing``."""

    transactional_id: str
    producer_id: int
    state: str


@attrs.frozen
class ListedTransactions:
    error: Errors
    listings: tuple[TransactionListing, ...]


def encode_list_transactions(
    version: int, state_filters: Sequence[str], producer_id_filters: Sequence[int]
) -> bytes:
    request_type: Any = request_class(ApiKey.LIST_TRANSACTIONS)
    request = request_type(
        version=version,
        state_filters=list(state_filters),
        producer_id_filters=list(producer_id_filters),
    )
    return bytes(request.encode(version=version))


def decode_list_transactions(body: bytes | memoryview, version: int) -> ListedTransactions:
    response = decode_response(ApiKey.LIST_TRANSACTIONS, version, body)
    return ListedTransactions(
        Errors(response.error_code),
        tuple(
            TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
            for t in response.transaction_states
        ),
    )


# ---------------------------------------------------------------------------- abort


@attrs.frozen
class AbortTransactionSpec:
    """Kafka's ``AbortTransactionSpec``: the ABORT marker an operator writes by hand."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def marker(self) -> TxnMarker:
        return TxnMarker(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            coordinator_epoch=self.coordinator_epoch,
            commit=False,
            partitions=(self.topic_partition,),
        )

    def __str__(self) -> str:
        return (
            f"AbortTransactionSpec(topicPartition={self.topic_partition}, "
            f"producerId={self.producer_id}, producerEpoch={self.producer_epoch}, "
            f"coordinatorEpoch={self.coordinator_epoch})"
        )


def encode_abort(version: int, spec: AbortTransactionSpec) -> bytes:
    return encode_write_txn_markers([spec.marker()], version)


def decode_abort(body: bytes | memoryview, version: int, spec: AbortTransactionSpec) -> Errors:
    """The partition's error (UNKNOWN_SERVER_ERROR when the answer leaves it out)."""
    results = decode_write_txn_markers_response(body, version, [spec.marker()])
    return results[(spec.producer_id, spec.topic_partition)]
