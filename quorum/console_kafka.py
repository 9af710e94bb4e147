"""What the web console asks the brokers, over the Kafka protocol (confluent-kafka's AdminClient).

Why the Kafka protocol and not the brokers' ``/metrics``: consumer groups live on the brokers'
group coordinators, and Kafka's own tools read them with ListGroups, DescribeGroups, OffsetFetch
and ListOffsets; the controller knows every broker's Kafka listeners from its metadata image
(``RegisterBrokerRecord.EndPoints``) but not their HTTP ports. The same ListOffsets answers give
the console its live rates: records appended per second on the partitions a broker leads (the
growth of their log end offsets) and records consumed per second (the growth of the groups'
committed offsets), sampled each time a page asks (``console_views.rates_per_s``).

The controller connects to a PLAINTEXT listener of the brokers (security protocol 0); a cluster
whose brokers have none shows the groups and rates as unavailable, with the reason, rather than
hold client credentials on the controllers. Every call is bounded by ``timeout_s``; librdkafka
blocks, so the shell runs ``Probe`` methods in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from pykraft.metadata.image import MetadataImage
from pykraft.quorum.console_views import Member

T = TypeVar("T")
PLAINTEXT = 0  # Kafka's SecurityProtocol id
_NO_OFFSET = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID
# Bounds: ListOffsets for the rates covers at most this many partitions, committed offsets at
# most this many groups; past them the rates say so instead of growing the page's cost.
MAX_SAMPLED_PARTITIONS = 2000
MAX_SAMPLED_GROUPS = 50
LOG_WARNING = 4
_STATE_NAMES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
}


class ProbeError(Exception):
    """The brokers could not be asked; the message says why, for the page."""


def bootstrap_servers(image: MetadataImage) -> str:
    """The PLAINTEXT listeners of the unfenced brokers; ProbeError when there is none."""
    servers = [
        f"{endpoint.host}:{endpoint.port}"
        for _, broker in sorted(image.cluster.brokers.items())
        if not broker.fenced
        for endpoint in broker.endpoints
        if endpoint.security_protocol == PLAINTEXT
    ]
    if not servers:
        raise ProbeError("No running broker has a PLAINTEXT listener the controller can read.")
    return ",".join(servers)


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return _STATE_NAMES.get(name, name.title())


class Probe:
    """One short-lived AdminClient; each method blocks at most about ``timeout_s``."""

    def __init__(self, bootstrap: str, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._admin = AdminClient(
            {"bootstrap.servers": bootstrap, "log_level": LOG_WARNING, "client.id": "console"}
        )

    def _wait(self, future: Future[T]) -> T:
        try:
            return future.result(timeout=self._timeout_s + 1)
        except KafkaException as error:
            raise ProbeError(str(error.args[0] if error.args else error)) from None
        except TimeoutError:
            raise ProbeError("The brokers did not answer in time.") from None

    def list_groups(self) -> list[tuple[str, str]]:
        answer = self._wait(self._admin.list_consumer_groups(request_timeout=self._timeout_s))
        return sorted((g.group_id, _state_name(g.state)) for g in answer.valid)

    def describe_group(self, group: str) -> tuple[str, tuple[Member, ...]]:
        futures = self._admin.describe_consumer_groups([group], request_timeout=self._timeout_s)
        answer = self._wait(futures[group])
        members = tuple(
            Member(
                m.member_id,
                m.host,
                m.client_id,
                tuple((p.topic, p.partition) for p in m.assignment.topic_partitions),
            )
            for m in answer.members
        )
        return _state_name(answer.state), members

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        futures = self._admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self._timeout_s
        )
        answer = self._wait(futures[group])
        return {
            (p.topic, p.partition): p.offset
            for p in answer.topic_partitions or []
            if p.offset != _NO_OFFSET and p.error is None
        }

    def log_end_offsets(
        self, partitions: Collection[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """ListOffsets(latest); a partition whose leader did not answer is absent."""
        if not partitions:
            return {}
        spec: Any = OffsetSpec
        request = {ConfluentPartition(t, p): spec.latest() for t, p in partitions}
        futures = self._admin.list_offsets(request, request_timeout=self._timeout_s)
        found = {}
        for partition, future in futures.items():
            try:
                found[(partition.topic, partition.partition)] = int(self._wait(future).offset)
            except ProbeError:
                continue
        return found

    def committed_totals(self, groups: Sequence[str]) -> dict[tuple[str, int], int]:
        """The committed offsets of ``groups``, summed per partition."""
        totals: dict[tuple[str, int], int] = {}
        for group in groups[:MAX_SAMPLED_GROUPS]:
            for key, offset in self.committed(group).items():
                totals[key] = totals.get(key, 0) + offset
        return totals


def all_partitions(image: MetadataImage) -> list[tuple[str, int]]:
    """Every partition of the image, internal topics excepted, at most MAX_SAMPLED_PARTITIONS."""
    partitions = [
        (name, index)
        for name, topic in sorted(image.topics.by_name.items())
        if not name.startswith("__")
        for index in sorted(topic.partitions.keys())
    ]
    return partitions[:MAX_SAMPLED_PARTITIONS]


def group_partitions(
    members: Sequence[Member], committed: Mapping[tuple[str, int], int]
) -> set[tuple[str, int]]:
    return {key for m in members for key in m.assignment} | set(committed)
