"""The admin calls ``pykraft reassign-partitions`` makes beyond Metadata, as Kafka's ``Admin``
makes them: ``alterPartitionReassignments`` / ``listPartitionReassignments`` (KIP-455) to any
broker (KRaft brokers forward them to the controller) and ``incrementalAlterConfigs`` (KIP-339)
for the replication throttles, a broker's own configs sent to that broker, as Kafka's
``KafkaAdminClient`` does (``ConstantNodeIdProvider``), topics to any broker.

Encoders and decoders are pure; ``ReassignmentCalls`` runs them on an ``AdminNetwork``. A
top-level NOT_CONTROLLER or REQUEST_TIMED_OUT is retried until ``default.api.timeout.ms``, like
the admin client's retriable errors; any other failure is an ``AdminError``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from pykraft.admin_errors import AdminError
from pykraft.admin_network import AdminNetwork
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

TIMEOUT_MS = 60_000  # the requests' default timeout_ms
RETRIABLE = frozenset({Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT})
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


class ConfigOp(enum.IntEnum):
    """Kafka's ``AlterConfigOp.OpType``."""

    SET = 0
    DELETE = 1


@attrs.frozen
class PartitionReassignment:
    """Kafka's ``org.apache.kafka.clients.admin.PartitionReassignment``."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@attrs.frozen
class ConfigChange:
    resource_type: int  # TOPIC_RESOURCE or BROKER_RESOURCE
    resource_name: str
    name: str
    op: ConfigOp
    value: str | None = None


def _by_topic(partitions: Mapping[TopicPartition, Any]) -> dict[str, list[TopicPartition]]:
    topics: dict[str, list[TopicPartition]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp)
    return topics


def encode_alter_reassignments(
    version: int, targets: Mapping[TopicPartition, Sequence[int] | None]
) -> bytes:
    topic_type = AlterPartitionReassignmentsRequest.ReassignableTopic
    partition_type = topic_type.ReassignablePartition
    topics = [
        topic_type(
            name=name,
            partitions=[
                partition_type(
                    partition_index=tp.partition,
                    replicas=None if targets[tp] is None else list(targets[tp] or ()),
                )
                for tp in tps
            ],
        )
        for name, tps in _by_topic(targets).items()
    ]
    request = AlterPartitionReassignmentsRequest(
        version=version, timeout_ms=TIMEOUT_MS, topics=topics
    )
    return bytes(request.encode(version=version))


@attrs.frozen
class AlterAnswer:
    error: Errors
    message: str | None
    partitions: Mapping[TopicPartition, tuple[Errors, str | None]]


def decode_alter_reassignments(body: bytes | memoryview, version: int) -> AlterAnswer:
    response = AlterPartitionReassignmentsResponse.decode(bytes(body), version=version)
    return AlterAnswer(
        Errors(response.error_code),
        response.error_message,
        {
            TopicPartition(t.name, p.partition_index): (Errors(p.error_code), p.error_message)
            for t in response.responses
            for p in t.partitions
        },
    )


def encode_list_reassignments(version: int, partitions: Sequence[TopicPartition] | None) -> bytes:
    topic_type = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    topics = (
        None
        if partitions is None
        else [
            topic_type(name=name, partition_indexes=[tp.partition for tp in tps])
            for name, tps in _by_topic(dict.fromkeys(partitions)).items()
        ]
    )
    request = ListPartitionReassignmentsRequest(
        version=version, timeout_ms=TIMEOUT_MS, topics=topics
    )
    return bytes(request.encode(version=version))


@attrs.frozen
class ListAnswer:
    error: Errors
    message: str | None
    reassignments: Mapping[TopicPartition, PartitionReassignment]


def decode_list_reassignments(body: bytes | memoryview, version: int) -> ListAnswer:
    response = ListPartitionReassignmentsResponse.decode(bytes(body), version=version)
    return ListAnswer(
        Errors(response.error_code),
        response.error_message,
        {
            TopicPartition(t.name, p.partition_index): PartitionReassignment(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        },
    )


def encode_incremental_alter_configs(version: int, changes: Sequence[ConfigChange]) -> bytes:
    resource_type = IncrementalAlterConfigsRequest.AlterConfigsResource
    config_type = resource_type.AlterableConfig
    resources: dict[tuple[int, str], list[ConfigChange]] = {}
    for change in changes:
        resources.setdefault((change.resource_type, change.resource_name), []).append(change)
    request = IncrementalAlterConfigsRequest(
        version=version,
        resources=[
            resource_type(
                resource_type=kind,
                resource_name=name,
                configs=[
                    config_type(name=c.name, config_operation=int(c.op), value=c.value)
                    for c in entries
                ],
            )
            for (kind, name), entries in resources.items()
        ],
        validate_only=False,
    )
    return bytes(request.encode(version=version))


def decode_incremental_alter_configs(
    body: bytes | memoryview, version: int
) -> dict[tuple[int, str], tuple[Errors, str | None]]:
    response = IncrementalAlterConfigsResponse.decode(bytes(body), version=version)
    return {
        (r.resource_type, r.resource_name): (Errors(r.error_code), r.error_message)
        for r in response.responses
    }


class ReassignmentCalls:
    """The three calls over an ``AdminNetwork``."""

    def __init__(self, network: AdminNetwork) -> None:
        self._network = network

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, tuple[Errors, str | None]]:
        """Each partition's error (NONE when started or cancelled); None cancels."""

        async def attempt() -> AlterAnswer | str:
            node = await self._network.any_broker()
            answer = await self._network.request(
                node,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                lambda version: encode_alter_reassignments(version, targets),
                decode_alter_reassignments,
            )
            return _top_level(answer.error, answer.message, answer)

        answer = await self._network.retrying("alterPartitionReassignments", attempt)
        return dict(answer.partitions)

    async def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        async def attempt() -> ListAnswer | str:
            node = await self._network.any_broker()
            answer = await self._network.request(
                node,
                ApiKey.LIST_PARTITION_REASSIGNMENTS,
                lambda version: encode_list_reassignments(version, partitions),
                decode_list_reassignments,
            )
            return _top_level(answer.error, answer.message, answer)

        answer = await self._network.retrying("listPartitionReassignments", attempt)
        return dict(answer.reassignments)

    async def incremental_alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        """Apply ``changes``; a broker's own configs go to that broker. Raises ``AdminError``
        naming the first resource that failed."""
        groups: dict[int | None, list[ConfigChange]] = {}
        for change in changes:
            node_id = (
                int(change.resource_name)
                if change.resource_type == BROKER_RESOURCE and change.resource_name
                else None
            )
            groups.setdefault(node_id, []).append(change)
        for node_id, group in groups.items():
            await self._alter_configs_on(node_id, group)

    async def _alter_configs_on(self, node_id: int | None, changes: list[ConfigChange]) -> None:
        async def attempt() -> dict[tuple[int, str], tuple[Errors, str | None]] | str:
            if node_id is None:
                node = await self._network.any_broker()
            else:
                metadata = await self._network.metadata([])
                found = metadata.brokers.get(node_id)
                if found is None:
                    return f"broker {node_id} is not in the metadata"
                node = found
            answers = await self._network.request(
                node,
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                lambda version: encode_incremental_alter_configs(version, changes),
                decode_incremental_alter_configs,
            )
            for (kind, name), (error, message) in answers.items():
                if error in RETRIABLE:
                    return f"{name}: {error.name}"
                if error is not Errors.NONE:
                    what = "broker" if kind == BROKER_RESOURCE else "topic"
                    raise AdminError(f"{what} {name}: {message or error.name}", error)
            return answers

        await self._network.retrying("incrementalAlterConfigs", attempt)


A = TypeVar("A")


def _top_level(error: Errors, message: str | None, answer: A) -> A | str:
    if error in RETRIABLE:
        return error.name
    if error is not Errors.NONE:
        raise AdminError(message or error.name, error)
    return answer
