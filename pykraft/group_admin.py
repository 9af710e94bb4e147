"""The Kafka ``Admin`` calls of ``pykraft consumer-groups`` and ``pykraft get-offsets``, made
with confluent-kafka (librdkafka) and answered as plain values.

Why a real client library: these tools are what operators point at any Kafka cluster, so they
talk to pykraft exactly as a Java or librdkafka admin client would (ListGroups, DescribeGroups,
OffsetFetch, OffsetCommit through AlterConsumerGroupOffsets, DeleteGroups, ListOffsets,
Metadata). librdkafka has no OffsetDelete call, so ``delete_offsets`` uses kafka-python's
``KafkaAdminClient.delete_group_offsets`` with the same ``--command-config``.

Every call waits at most ``timeout_ms`` (Kafka's ``--timeout``, default 5000 ms); a failure
raises ``GroupAdminError`` with the broker's error text.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaException,
)
from confluent_kafka import TopicCollection as ConfluentTopics
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from pykraft.client_properties import kafka_python_config, librdkafka_config
from pykraft.consumer_groups_views import GroupDescription, Member
from pykraft.storage.topic_partition import TopicPartition

T = TypeVar("T")
# librdkafka's "no committed offset" (RD_KAFKA_OFFSET_INVALID).
_NO_OFFSET = -1001
# Kafka's GroupState.toString for librdkafka's states.
_STATE_NAMES = {
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.EMPTY: "Empty",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.UNKNOWN: "Unknown",
}
STATES_BY_NAME = {name.lower(): state for state, name in _STATE_NAMES.items()}
# Kafka's GroupType.toString; --type accepts these two (ConsumerGroupCommand's validTypes).
_TYPE_NAMES = {
    ConsumerGroupType.CONSUMER: "Consumer",
    ConsumerGroupType.CLASSIC: "Classic",
    ConsumerGroupType.UNKNOWN: "Unknown",
}
TYPES_BY_NAME = {"consumer": ConsumerGroupType.CONSUMER, "classic": ConsumerGroupType.CLASSIC}
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
LOG_WARNING = 4  # syslog levels, librdkafka's log_level  # Kafka's ListOffsetsRequest timestamps


class GroupAdminError(Exception):
    """A call failed; the message is the broker's or the client's error text."""


def _offset_spec(timestamp: int) -> Any:
    spec: Any = OffsetSpec
    if timestamp == EARLIEST:
        return spec.earliest()
    if timestamp == LATEST:
        return spec.latest()
    if timestamp == MAX_TIMESTAMP:
        return spec.max_timestamp()
    return spec.for_timestamp(timestamp)


def _error_text(error: BaseException) -> str:
    if isinstance(error, KafkaException) and error.args:
        inner = error.args[0]
        text = inner.str() if hasattr(inner, "str") else str(inner)
        return str(text)
    return str(error)


class GroupAdmin:
    def __init__(
        self, bootstrap_servers: str, properties: Mapping[str, str], timeout_ms: int
    ) -> None:
        self._bootstrap = bootstrap_servers
        self._properties = dict(properties)
        self._timeout_s = timeout_ms / 1000
        # librdkafka's warnings and errors only, as Kafka's tools log at WARN.
        config = {**librdkafka_config(bootstrap_servers, properties), "log_level": LOG_WARNING}
        try:
            self._admin = AdminClient(config)
        except KafkaException as error:  # a setting librdkafka refuses
            raise GroupAdminError(_error_text(error)) from None

    def _wait(self, future: Future[T]) -> T:
        try:
            return future.result(timeout=self._timeout_s + 5)
        except KafkaException as error:
            raise GroupAdminError(_error_text(error)) from None
        except TimeoutError:
            raise GroupAdminError("Timed out waiting for a node assignment.") from None

    def list_groups(self, states: Collection[str] = ()) -> list[tuple[str, str]]:
        """Every consumer group with its state (``states``: only those)."""
        wanted = {STATES_BY_NAME[s.lower()] for s in states}
        options: dict[str, Any] = {"request_timeout": self._timeout_s}
        if wanted:
            options["states"] = wanted
        result = self._wait(self._admin.list_consumer_groups(**options))
        if result.errors:
            raise GroupAdminError(_error_text(result.errors[0]))
        listed = [(g.group_id, _STATE_NAMES.get(g.state, "Unknown")) for g in result.valid]
        return sorted(listed)

    def list_group_listings(
        self, states: Collection[str] = (), types: Collection[str] = ()
    ) -> list[tuple[str, str, str]]:
        """``--list --type/--state``: (group, type, state) of every consumer group matching
        both filters (KIP-848's ListGroups v5 ``TypesFilter``)."""
        options: dict[str, Any] = {"request_timeout": self._timeout_s}
        if states:
            options["states"] = {STATES_BY_NAME[s.lower()] for s in states}
        if types:
            options["types"] = {TYPES_BY_NAME[t.lower()] for t in types}
        result = self._wait(self._admin.list_consumer_groups(**options))
        if result.errors:
            raise GroupAdminError(_error_text(result.errors[0]))
        listed = [
            (
                g.group_id,
                _TYPE_NAMES.get(g.type, "Unknown"),
                _STATE_NAMES.get(g.state, "Unknown"),
            )
            for g in result.valid
        ]
        return sorted(listed)

    def describe_groups(self, groups: Sequence[str]) -> dict[str, GroupDescription]:
        futures = self._admin.describe_consumer_groups(
            list(groups), request_timeout=self._timeout_s
        )
        described = {}
        for group, future in futures.items():
            answer = self._wait(future)
            members = tuple(
                Member(
                    m.member_id,
                    m.host,
                    m.client_id,
                    m.group_instance_id or "",
                    tuple(
                        TopicPartition(p.topic, p.partition) for p in m.assignment.topic_partitions
                    ),
                )
                for m in answer.members
            )
            node = answer.coordinator
            coordinator = f"{node.host}:{node.port}  ({node.id})" if node else "-"
            described[group] = GroupDescription(
                group,
                _STATE_NAMES.get(answer.state, "Unknown"),
                members,
                coordinator,
                answer.partition_assignor or "",
            )
        return described

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        return {p: offset for p, (offset, _) in self.committed_with_epochs(group).items()}

    def committed_with_epochs(self, group: str) -> dict[TopicPartition, tuple[int, int | None]]:
        """The group's committed offsets with their leader epochs (None: not recorded)."""
        request = [ConsumerGroupTopicPartitions(group)]
        futures = self._admin.list_consumer_group_offsets(request, request_timeout=self._timeout_s)
        answer = self._wait(futures[group])
        committed = {}
        for p in answer.topic_partitions or []:
            if p.offset != _NO_OFFSET and p.error is None:
                epoch = p.leader_epoch
                committed[TopicPartition(p.topic, p.partition)] = (
                    p.offset,
                    epoch if epoch is not None and epoch >= 0 else None,
                )
        return committed

    def alter_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        partitions = [ConfluentPartition(p.topic, p.partition, o) for p, o in offsets.items()]
        request = [ConsumerGroupTopicPartitions(group, partitions)]
        futures = self._admin.alter_consumer_group_offsets(request, request_timeout=self._timeout_s)
        answer = self._wait(futures[group])
        for partition in answer.topic_partitions or []:
            if partition.error is not None:
                raise GroupAdminError(f"{partition.topic}-{partition.partition}: {partition.error}")

    def delete_groups(self, groups: Sequence[str]) -> dict[str, str | None]:
        futures = self._admin.delete_consumer_groups(list(groups), request_timeout=self._timeout_s)
        results: dict[str, str | None] = {}
        for group, future in futures.items():
            try:
                self._wait(future)
                results[group] = None
            except GroupAdminError as error:
                results[group] = str(error)
        return results

    def partition_counts(self, topics: Collection[str]) -> dict[str, int]:
        """Each topic's number of partitions; an unknown topic raises."""
        if not topics:
            return {}
        futures = self._admin.describe_topics(
            ConfluentTopics(sorted(topics)), request_timeout=self._timeout_s
        )
        return {topic: len(self._wait(future).partitions) for topic, future in futures.items()}

    def topic_partitions(self) -> dict[str, int]:
        """Every topic (internal ones too) and its number of partitions, from Metadata."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
        except KafkaException as error:
            raise GroupAdminError(_error_text(error)) from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items()}

    def list_offsets(
        self, partitions: Collection[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets for ``timestamp`` (EARLIEST, LATEST, MAX_TIMESTAMP or a time in ms);
        a partition the broker gave no answer for is absent."""
        answers = self.list_offsets_or_errors(partitions, timestamp)
        return {p: answer for p, answer in answers.items() if isinstance(answer, int)}

    def list_offsets_or_errors(
        self, partitions: Collection[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int | str]:
        """Each partition's offset, or the text of its error."""
        if not partitions:
            return {}
        spec = _offset_spec(timestamp)
        request = {ConfluentPartition(p.topic, p.partition): spec for p in partitions}
        futures = self._admin.list_offsets(request, request_timeout=self._timeout_s)
        found: dict[TopicPartition, int | str] = {}
        for partition, future in futures.items():
            key = TopicPartition(partition.topic, partition.partition)
            try:
                found[key] = int(self._wait(future).offset)
            except GroupAdminError as error:
                found[key] = str(error)
        return found

    def delete_offsets(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> tuple[str | None, dict[TopicPartition, str | None]]:
        """OffsetDelete: the top-level error's text (None: none) and each partition's."""
        from kafka import TopicPartition as KafkaPartition
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError

        admin = KafkaAdminClient(
            **kafka_python_config(self._bootstrap, self._properties),
            request_timeout_ms=int(self._timeout_s * 1000) + 1000,
        )
        try:
            answer = admin.delete_group_offsets(
                group, [KafkaPartition(p.topic, p.partition) for p in partitions]
            )
        except KafkaError as error:
            return _kafka_python_text(error), dict.fromkeys(partitions, _kafka_python_text(error))
        finally:
            admin.close()
        results: dict[TopicPartition, str | None] = {}
        top_level = None
        for partition, failure in answer.items():
            key = TopicPartition(partition.topic, partition.partition)
            if getattr(failure, "errno", 0):
                results[key] = _kafka_python_text(failure)
                top_level = "Encountered some partition-level error, see the follow-up details."
            else:
                results[key] = None
        return top_level, results

    def close(self) -> None:
        """librdkafka's admin client has nothing to close; dropping it ends its threads."""
        del self._admin


def _kafka_python_text(error: Any) -> str:
    """kafka-python's error class (or instance) as Kafka's exception message."""
    description = getattr(error, "description", None)
    return str(description) if description else str(error)
