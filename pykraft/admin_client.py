"""A Kafka admin client for pykraft's tools: the calls ``kafka-transactions.sh`` makes through
Kafka's ``Admin`` (KIP-664), on ``admin_network.AdminNetwork`` (connections, Metadata, retries).

Each call looks its keys up — a partition's leader from Metadata, a transactional id's
coordinator from FindCoordinator key type 1 (batched from v4, KIP-699), every broker from
Metadata — sends one request per broker, and sorts each key's answer into done, failed (an
``AdminError`` naming the key, raised at once) or retried, by the rules of Kafka's admin handlers
(``admin_errors``): ``DescribeProducersHandler`` retries NOT_LEADER_OR_FOLLOWER unless a broker
was named, and UNKNOWN_TOPIC_OR_PARTITION; ``DescribeTransactionsHandler`` and the coordinator
lookup retry COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR;
``ListTransactionsHandler`` retries COORDINATOR_LOAD_IN_PROGRESS; ``AbortTransactionHandler``
retries NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, BROKER_NOT_AVAILABLE and
UNKNOWN_TOPIC_OR_PARTITION after finding the leader again.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol

from pykraft.admin_client_quotas import ClientQuotaCalls, Entity, QuotaFilterComponent
from pykraft.admin_codec import (
    BATCHED_FIND_COORDINATOR_VERSION,
    AbortTransactionSpec,
    BrokerNode,
    PartitionProducers,
    TopicMetadata,
    TransactionDescription,
    TransactionListing,
    decode_abort,
    decode_describe_producers,
    decode_describe_transactions,
    decode_find_coordinator,
    decode_list_transactions,
    encode_abort,
    encode_describe_producers,
    encode_describe_transactions,
    encode_find_transaction_coordinator,
    encode_list_transactions,
)
from pykraft.admin_config import AdminConfig
from pykraft.admin_errors import (
    RETRIABLE_ABORT_ERRORS,
    RETRIABLE_COORDINATOR_ERRORS,
    AdminError,
    abort_failure,
    producers_done,
)
from pykraft.admin_network import AdminNetwork, ConnectionFactory
from pykraft.admin_quorum import QuorumCalls
from pykraft.admin_reassignments import ConfigChange, PartitionReassignment, ReassignmentCalls
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.clock import Clock
from pykraft.storage.topic_partition import TopicPartition


class TransactionsAdmin(Protocol):
    """The calls of Kafka's ``Admin`` ``pykraft transactions`` makes: ``KafkaAdminClient``."""

    async def list_topics(self) -> list[str]: ...
    async def describe_topics(self, topics: Sequence[str]) -> dict[str, TopicMetadata]: ...
    async def describe_producers(
        self, partitions: Collection[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, PartitionProducers]: ...
    async def describe_transactions(
        self, transactional_ids: Collection[str]
    ) -> dict[str, TransactionDescription | None]: ...
    async def list_transactions(
        self, producer_ids: Collection[int] = ()
    ) -> dict[int, tuple[TransactionListing, ...]]: ...
    async def abort_transaction(self, spec: AbortTransactionSpec) -> None: ...


class KafkaAdminClient:
    def __init__(
        self,
        bootstrap_servers: Sequence[tuple[str, int]],
        config: AdminConfig,
        clock: Clock,
        connect: ConnectionFactory | None = None,
    ) -> None:
        self._network = AdminNetwork(bootstrap_servers, config, clock, connect)
        self._reassignments = ReassignmentCalls(self._network)
        self.quorum = QuorumCalls(self._network)
        self._client_quotas = ClientQuotaCalls(self._network)

    async def __aenter__(self) -> KafkaAdminClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._network.close()

    # ------------------------------------------------------------------ topics and brokers

    async def list_topics(self) -> list[str]:
        """Every topic, internal ones included (``listTopics(listInternal=true)``)."""
        metadata = await self._network.retrying("listTopics", lambda: self._network.metadata(None))
        return sorted(metadata.topics)

    async def describe_topics(self, topics: Sequence[str]) -> dict[str, TopicMetadata]:
        async def attempt() -> dict[str, TopicMetadata] | str:
            found = (await self._network.metadata(topics)).topics
            for name in topics:
                topic = found.get(name)
                if topic is None or topic.error is Errors.LEADER_NOT_AVAILABLE:
                    return f"topic {name}: {Errors.LEADER_NOT_AVAILABLE.name}"
                if topic.error is not Errors.NONE:
                    raise AdminError(f"topic {name}: {topic.error.name}", topic.error)
            return {name: found[name] for name in topics}

        return await self._network.retrying("describeTopics", attempt)

    async def broker_ids(self) -> list[int]:
        """The live brokers' ids, from Metadata (``describeCluster().nodes()``)."""
        metadata = await self._network.retrying(
            "describeCluster", lambda: self._network.metadata([])
        )
        return sorted(metadata.brokers)

    # ------------------------------------------------------------------ KIP-455, KIP-339

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, tuple[Errors, str | None]]:
        return await self._reassignments.alter_partition_reassignments(targets)

    async def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        return await self._reassignments.list_partition_reassignments(partitions)

    async def incremental_alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        await self._reassignments.incremental_alter_configs(changes)

    # ------------------------------------------------------------------ KIP-546

    async def describe_client_quotas(
        self, components: Sequence[QuotaFilterComponent], strict: bool
    ) -> dict[Entity, dict[str, float]]:
        return await self._client_quotas.describe_client_quotas(components, strict)

    async def alter_client_quotas(self, entity: Entity, ops: Mapping[str, float | None]) -> None:
        await self._client_quotas.alter_client_quotas(entity, ops)

    # ------------------------------------------------------------------ KIP-664

    async def describe_producers(
        self, partitions: Collection[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, PartitionProducers]:
        """Each partition's active producers on its leader, or on ``broker_id``'s replica."""

        async def send(pending: set[TopicPartition]) -> dict[TopicPartition, PartitionProducers]:
            done: dict[TopicPartition, PartitionProducers] = {}
            for node, keys in (await self._by_leader(pending, broker_id)).items():
                answers = await self._network.request(
                    node,
                    ApiKey.DESCRIBE_PRODUCERS,
                    functools.partial(encode_describe_producers, partitions=keys),
                    decode_describe_producers,
                )
                for tp in keys:
                    answer = answers.get(tp)
                    if answer is not None and producers_done(tp, answer, broker_id):
                        done[tp] = answer
            return done

        return await self._network.per_key("describeProducers", partitions, send)

    async def describe_transactions(
        self, transactional_ids: Collection[str]
    ) -> dict[str, TransactionDescription | None]:
        """Each id's state on its coordinator; None when the coordinator does not know the id
        (TRANSACTIONAL_ID_NOT_FOUND, Kafka's ``TransactionalIdNotFoundException``)."""

        async def send(pending: set[str]) -> dict[str, TransactionDescription | None]:
            done: dict[str, TransactionDescription | None] = {}
            for node, keys in (await self._by_coordinator(pending)).items():
                answers = await self._network.request(
                    node,
                    ApiKey.DESCRIBE_TRANSACTIONS,
                    functools.partial(encode_describe_transactions, transactional_ids=keys),
                    functools.partial(decode_describe_transactions, coordinator_id=node.node_id),
                )
                for key in keys:
                    answer = answers.get(key)
                    if answer is None or answer.error in RETRIABLE_COORDINATOR_ERRORS:
                        continue
                    if answer.error is Errors.TRANSACTIONAL_ID_NOT_FOUND:
                        done[key] = None
                    elif answer.error is not Errors.NONE:
                        raise AdminError(
                            f"DescribeTransactions of `{key}` failed: {answer.error.name}",
                            answer.error,
                        )
                    else:
                        done[key] = answer.description
            return done

        return await self._network.per_key("describeTransactions", transactional_ids, send)

    async def list_transactions(
        self, producer_ids: Iterable[int] = (), states: Iterable[str] = ()
    ) -> dict[int, tuple[TransactionListing, ...]]:
        """Every broker's coordinator's transactions, by broker id (``allByBrokerId``)."""
        filters = (list(states), list(producer_ids))
        metadata = await self._network.retrying(
            "listTransactions", lambda: self._network.metadata([])
        )
        brokers = sorted(metadata.brokers)

        async def send(pending: set[int]) -> dict[int, tuple[TransactionListing, ...]]:
            done = {}
            for broker_id in sorted(pending):
                node = self._network.brokers.get(broker_id)
                if node is None:
                    continue
                answer = await self._network.request(
                    node,
                    ApiKey.LIST_TRANSACTIONS,
                    lambda v: encode_list_transactions(v, *filters),
                    decode_list_transactions,
                )
                if answer.error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
                    continue
                if answer.error is not Errors.NONE:
                    raise AdminError(
                        f"ListTransactions request sent to broker {broker_id} failed: "
                        f"{answer.error.name}",
                        answer.error,
                    )
                done[broker_id] = answer.listings
            return done

        return await self._network.per_key("listTransactions", brokers, send)

    async def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        """WriteTxnMarkers ABORT for one partition, to its leader (``abortTransaction``)."""
        tp = spec.topic_partition

        async def send(pending: set[TopicPartition]) -> dict[TopicPartition, bool]:
            for node, _ in (await self._by_leader(pending, None)).items():
                error = await self._network.request(
                    node,
                    ApiKey.WRITE_TXN_MARKERS,
                    lambda v: encode_abort(v, spec),
                    lambda body, v: decode_abort(body, v, spec),
                )
                if error is Errors.NONE:
                    return {tp: True}
                if error not in RETRIABLE_ABORT_ERRORS:
                    raise AdminError(abort_failure(spec, error), error)
            return {}

        await self._network.per_key("abortTransaction", [tp], send)

    # ------------------------------------------------------------------ lookups

    async def _by_leader(
        self, partitions: Iterable[TopicPartition], broker_id: int | None
    ) -> dict[BrokerNode, list[TopicPartition]]:
        """Partitions by the node to ask: ``broker_id`` when named, else each one's leader
        (a partition without one waits for the next round)."""
        wanted = sorted(partitions)
        metadata = await self._network.metadata(sorted({tp.topic for tp in wanted}))
        if broker_id is not None:
            node = metadata.brokers.get(broker_id)
            if node is None:
                raise AdminError(f"broker {broker_id} is not in the cluster's metadata")
            return {node: wanted}
        grouped: dict[BrokerNode, list[TopicPartition]] = {}
        for tp in wanted:
            leader = metadata.brokers.get(metadata.leader_of(tp), None)
            if leader is not None:
                grouped.setdefault(leader, []).append(tp)
        return grouped

    async def _by_coordinator(
        self, transactional_ids: Iterable[str]
    ) -> dict[BrokerNode, list[str]]:
        """Transactional ids by coordinator (FindCoordinator key type 1); an id whose
        coordinator is not available waits for the next round."""
        ids = sorted(transactional_ids)
        node = await self._network.any_broker()
        versions = await self._network.versions(node)
        batched = (versions.of(ApiKey.FIND_COORDINATOR) or 0) >= BATCHED_FIND_COORDINATOR_VERSION
        grouped: dict[BrokerNode, list[str]] = {}
        for keys in [ids] if batched else [[key] for key in ids]:
            found = await self._network.request(
                node,
                ApiKey.FIND_COORDINATOR,
                functools.partial(encode_find_transaction_coordinator, keys=keys),
                functools.partial(decode_find_coordinator, keys=keys),
            )
            for key, coordinator in found.items():
                if coordinator.node is not None:
                    grouped.setdefault(coordinator.node, []).append(key)
                elif coordinator.error not in RETRIABLE_COORDINATOR_ERRORS:
                    raise AdminError(
                        f"FindCoordinator of `{key}` failed: {coordinator.error.name}",
                        coordinator.error,
                    )
        return grouped
