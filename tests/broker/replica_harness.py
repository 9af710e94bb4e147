"""The test harness of the broker's data path: one broker (id LOCAL) on a real LogManager fed
metadata records like the metadata loader, an in-process controller backed by the real
``QuorumController`` (so admin requests meet the controller's own validation and error messages),
and helpers to call a Kafka API handler with kafka-python-encoded bytes — no sockets.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pykraft.broker.handlers import BrokerServices, ControllerError
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.broker.network import RequestContext
from pykraft.broker.purgatory import DelayedFetches
from pykraft.broker.replica_manager import (
    AppendResult,
    FetchParams,
    LogReadResult,
    PartitionFetch,
    RecordedFetcherManager,
    ReplicaManager,
)
from pykraft.metadata.api.admin import IncrementalAlterConfigsResponse
from pykraft.metadata.api.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from pykraft.metadata.api.delegation_tokens import (
    CreateDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from pykraft.metadata.api.errors import SUCCESS
from pykraft.metadata.api.reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges, local_changes
from pykraft.metadata.records import (
    BrokerEndpoint,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.protocol.headers import RequestHeader, request_header_version
from pykraft.protocol.segments import Segments
from pykraft.quorum.controller import (
    ApiError,
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeletableTopicResult,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    LegacyAlterConfigsRequest,
    QuorumController,
)
from pykraft.quorum.managers.configs import effective_topic_configs
from pykraft.quorum.managers.reassignment import list_partition_reassignments
from pykraft.storage.file_slice import FileSlice
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"


LOCAL = 1
OTHER = 2
PETS_ID = "ThIaNwRnSM2Nt9Mx1v0RvA"
BIRDS_ID = "f62ptyETTjet8SL5ZeREiw"
NEW_PETS_ID = "b66ybsWIQoygs01vdjH07A"
PETS0 = TopicPartition("pets", 0)
PETS1 = TopicPartition("pets", 1)
NOW_MS = 1_700_000_000_000


def replay(image: MetadataImage, records: Sequence[MetadataRecord]) -> MetadataDelta:
    """The delta a loader builds from ``records`` on top of ``image``."""
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta


def endpoint(broker_id: int) -> BrokerEndpoint:
    return BrokerEndpoint(name="PLAINTEXT", host=f"broker{broker_id}.local", port=9090 + broker_id)


def broker(broker_id: int, fenced: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=f"incarnation-{broker_id}",
        broker_epoch=100 + broker_id,
        end_points=(endpoint(broker_id),),
        rack=None if broker_id == LOCAL else "rack-b",
        fenced=fenced,
    )


def partition_record(
    topic_id: str,
    partition_id: int,
    replicas: tuple[int, ...],
    *,
    leader: int | None = None,
    isr: tuple[int, ...] | None = None,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
) -> PartitionRecord:
    return PartitionRecord(
        topic_id=topic_id,
        partition_id=partition_id,
        replicas=replicas,
        isr=replicas if isr is None else isr,
        leader=replicas[0] if leader is None else leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
    )


def batch(*values: bytes, timestamp: int = 1000, **fields: int) -> bytearray:
    records = [SimpleRecord(value=v, timestamp=timestamp + i) for i, v in enumerate(values)]
    return bytearray(build_batch(records, **fields))  # type: ignore[arg-type]


class Cluster:
    """One broker (id LOCAL) with a real LogManager, fed metadata records like the loader."""

    def __init__(
        self,
        tmp_path: Path,
        config: LogConfig | None = None,
        log_dirs: Sequence[Path] = (),
        *,
        high_watermark_checkpoint_interval_ms: int | None = None,
    ) -> None:
        self.log_dirs = list(log_dirs) or [tmp_path / "logs"]
        self.log_dir = self.log_dirs[0]
        self.log_manager = LogManager.open(self.log_dirs, config or LogConfig(), now_ms=0)
        self.fetchers = RecordedFetcherManager()
        self.clock = FakeClock(50_000, wall_clock_start_ms=NOW_MS)
        self.replica_manager = ReplicaManager(
            broker_id=LOCAL,
            log_manager=self.log_manager,
            fetcher_manager=self.fetchers,
            delayed_fetches=DelayedFetches(monotonic_ms=self.clock.monotonic_ms),
            high_watermark_checkpoint_interval_ms=high_watermark_checkpoint_interval_ms,
            monotonic_ms=self.clock.monotonic_ms,
        )
        self.image = MetadataImage.EMPTY

    def publish(self, *records: MetadataRecord) -> LocalReplicaChanges:
        delta = replay(self.image, records)
        self.image = delta.apply()
        changes = local_changes(delta, LOCAL)
        self.replica_manager.apply_delta(changes, self.image, NOW_MS)
        return changes

    def start(self, *topic_records: MetadataRecord) -> None:
        """Brokers LOCAL and OTHER registered, then ``topic_records``."""
        self.publish(broker(LOCAL), broker(OTHER), *topic_records)

    def produce(
        self, topic_partition: TopicPartition, data: bytearray | None, acks: int = 1
    ) -> AppendResult:
        """Append only (acks=-1 does not wait here: ``produce_and_wait`` does)."""
        results = self.replica_manager.append_to_local_log(
            {topic_partition: data}, required_acks=acks, now_ms=NOW_MS
        )
        return results[topic_partition]

    def fetch(
        self, *fetches: PartitionFetch, replica_id: int = -1, max_bytes: int = 1 << 20
    ) -> list[LogReadResult]:
        params = FetchParams(
            replica_id=replica_id,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=max_bytes,
            partitions=fetches,
        )
        return self.replica_manager.read_from_log(params)

    def close(self) -> None:
        self.replica_manager.shutdown()
        self.log_manager.shutdown()


def at(topic_partition: TopicPartition, offset: int, **fields: int) -> PartitionFetch:
    return PartitionFetch(
        topic_partition=topic_partition,
        fetch_offset=offset,
        partition_max_bytes=1 << 20,
        **fields,
    )


def pets_led_here(
    *,
    replicas: tuple[int, ...] = (LOCAL,),
    isr: tuple[int, ...] | None = None,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
) -> list[MetadataRecord]:
    return [
        TopicRecord(name="pets", topic_id=PETS_ID),
        partition_record(
            PETS_ID,
            0,
            replicas,
            leader=LOCAL,
            isr=isr,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
        ),
    ]


# ------------------------------------------------------------------ the controller, in process


class InProcessController:
    """A ``ControllerClient`` over the real ``QuorumController``: each call computes records
    against the cluster's image, publishes them to the broker, and raises ``ControllerError``
    with the controller's error name and message, as the HTTP routes do."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.controller = QuorumController(rng=random.Random(7), now_ms=NOW_MS)
        self.calls: list[tuple[str, object]] = []

    def _commit(self, records: Sequence[MetadataRecord], error: ApiError) -> None:
        if error.is_failure():
            raise ControllerError(error.name, error.message or error.name)
        if records:
            self.cluster.publish(*records)

    async def create_topic(
        self, topic: CreatableTopic, *, validate_only: bool
    ) -> CreatableTopicResult:
        self.calls.append(("create_topic", topic))
        request = CreateTopicsRequest(topics=(topic,), validate_only=validate_only)
        result = self.controller.create_topics(self.cluster.image, request, NOW_MS)
        created = result.response.topics[0]
        self._commit(result.records, created.error)
        return created

    async def delete_topic(self, name: str) -> DeletableTopicResult:
        self.calls.append(("delete_topic", name))
        result = self.controller.delete_topics(
            self.cluster.image, DeleteTopicsRequest(names=(name,)), NOW_MS
        )
        deleted = result.response.topics[0]
        self._commit(result.records, deleted.error)
        return deleted

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool,
    ) -> None:
        self.calls.append(("create_partitions", (name, count, assignments)))
        topic = CreatePartitionsTopic(
            name=name,
            count=count,
            assignments=None if assignments is None else tuple(tuple(a) for a in assignments),
        )
        result = self.controller.create_partitions(
            self.cluster.image, CreatePartitionsRequest((topic,), validate_only), NOW_MS
        )
        self._commit(result.records, result.response.topics[0].error)

    async def describe_configs(self, resource_type: str, resource_name: str) -> Mapping[str, str]:
        self.calls.append(("describe_configs", (resource_type, resource_name)))
        image = self.cluster.image
        if resource_type == "topic":
            if resource_name not in image.topics.by_name:
                raise ControllerError(
                    "UNKNOWN_TOPIC_OR_PARTITION", f"Topic {resource_name!r} does not exist."
                )
            return effective_topic_configs(image, resource_name)
        return dict(image.configs.config(ConfigResourceType.BROKER, resource_name))

    async def alter_configs_batch(
        self, request: IncrementalAlterConfigsRequest | LegacyAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        """As ``POST /v1/configs``: one ControllerResult, committed whole (each resource's
        error in the response)."""
        self.calls.append(("alter_configs_batch", request))
        image = self.cluster.image
        if isinstance(request, LegacyAlterConfigsRequest):
            result = self.controller.legacy_alter_configs(image, request, NOW_MS)
        else:
            result = self.controller.incremental_alter_configs(image, request, NOW_MS)
        self._commit(result.records, SUCCESS)
        return result.response

    async def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse:
        self.calls.append(("elect_leaders", request))
        result = self.controller.elect_leaders(self.cluster.image, request, NOW_MS)
        self._commit(result.records, result.response.error)
        return result.response

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse:
        self.calls.append(("alter_partition_reassignments", request))
        result = self.controller.alter_partition_reassignments(self.cluster.image, request, NOW_MS)
        self._commit(result.records, result.response.error)
        return result.response

    async def list_partition_reassignments(self) -> ListPartitionReassignmentsResponse:
        self.calls.append(("list_partition_reassignments", None))
        return list_partition_reassignments(self.cluster.image, ListPartitionReassignmentsRequest())

    async def alter_client_quotas(
        self, request: AlterClientQuotasRequest
    ) -> AlterClientQuotasResponse:
        self.calls.append(("alter_client_quotas", request))
        result = self.controller.alter_client_quotas(self.cluster.image, request, NOW_MS)
        if result.records:
            self.cluster.publish(*result.records)
        return result.response

    async def create_delegation_token(self, request: CreateDelegationTokenRequest) -> Any:
        return self._delegation_token("create_delegation_token", request)

    async def renew_delegation_token(self, request: RenewDelegationTokenRequest) -> Any:
        return self._delegation_token("renew_delegation_token", request)

    async def expire_delegation_token(self, request: ExpireDelegationTokenRequest) -> Any:
        return self._delegation_token("expire_delegation_token", request)

    def _delegation_token(self, name: str, request: Any) -> Any:
        # Per-token failures are the response's error code (the route answers 200), as Kafka's.
        self.calls.append((name, request))
        result = self.controller.delegation_token(self.cluster.image, request, NOW_MS, NOW_MS)
        if result.records:
            self.cluster.publish(*result.records)
        return result.response


# ------------------------------------------------------------------ calling handlers


def services(cluster: Cluster, **overrides: Any) -> BrokerServices:
    arguments: dict[str, Any] = {
        "broker_id": LOCAL,
        "cluster_id": CLUSTER_ID,
        "replica_manager": cluster.replica_manager,
        "metadata": lambda: cluster.image,
        "controller": InProcessController(cluster),
        "wall_clock_ms": cluster.clock.wall_clock_ms,
    }
    arguments.update(overrides)
    return BrokerServices(**arguments)


def request_context(api_key: int, api_version: int, listener: str = "PLAINTEXT") -> RequestContext:
    header = RequestHeader(
        api_key, api_version, 11, "harness", request_header_version(api_key, api_version)
    )
    return RequestContext(header, "local-remote-0", listener, "127.0.0.1", 50000)


def encode(message: Any, version: int) -> bytes:
    """A kafka-python request body at ``version``."""
    return bytes(message.encode(version=version))


def flatten(body: bytes | Segments | None) -> bytes | None:
    if body is None or isinstance(body, bytes):
        return body
    return body.to_bytes(lambda part: FileSlice(part.path, part.position, part.length).read_bytes())


async def call_async(
    handler: ApiHandler, api_key: int, version: int, body: bytes, listener: str = "PLAINTEXT"
) -> bytes | None:
    """The response body (no header) the handler produced, or None for no response."""
    context = request_context(api_key, version, listener)
    return flatten(await handler(context, memoryview(bytearray(body))))


def call(
    handler: ApiHandler, api_key: int, version: int, body: bytes, listener: str = "PLAINTEXT"
) -> bytes | None:
    return asyncio.run(call_async(handler, api_key, version, body, listener))
