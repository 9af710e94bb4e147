"""One broker serving the transaction APIs in process, for the handler tests: the real
``TransactionCoordinatorShell`` and ``GroupCoordinatorShell`` over a real ``ReplicaManager``
(``__transaction_state`` and ``__consumer_offsets`` are real logs), every handler behind
``KafkaApis.dispatch`` with a principal on the request context, and doubles only at the I/O
edges: a producer-id source counting up, and a marker channel that carries the coordinator's
WriteTxnMarkers to this broker's own handler — encoded and decoded as on the wire, as the
broker's principal — the way ``broker.txn_marker_channel`` does over TCP.

Time is the cluster's fake clock; each scenario runs in one event loop and ends with
``shutdown`` so no coordinator task or timer outlives it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
)

from pykraft.broker.authorization import ALLOW_EVERYTHING, RequestAuthorizer
from pykraft.broker.handlers import broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.metadata.auth.principal import KafkaPrincipal, user
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.metadata.records import MetadataRecord, TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import parse_response_header, response_header_version
from pykraft.protocol.txn_markers import (
    MarkerResults,
    decode_write_txn_markers_response,
    encode_write_txn_markers,
)
from pykraft.storage.file_slice import FileSlice
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from tests.broker.handler_support import by_topic
from tests.broker.replica_harness import (
    LOCAL,
    NOW_MS,
    InProcessController,
    encode,
    partition_record,
    services,
)
from tests.broker.test_authorization import context
from tests.broker.test_handlers_groups import GroupCluster, offsets_led_here
from tests.broker.test_handlers_groups import settle as settle_groups

TXN_STATE_ID = "AAAAAAAAAAAAAAAAAAAAAw"
# The inter-broker principal the marker channel speaks as (a super user of the tests'
# authorizer settings, ``User:admin``, unless a test says otherwise).
BROKER_PRINCIPAL = user("admin")
ANYONE = user("anyone")
TRANSACTION_TIMEOUT_MS = 60_000


class TxnCluster(GroupCluster):
    """The replica harness whose metadata changes also reach both coordinators."""

    transactions: TransactionCoordinatorShell | None = None

    def publish(self, *records: MetadataRecord) -> LocalReplicaChanges:
        changes = super().publish(*records)
        if self.transactions is not None:
            self.transactions.on_metadata(changes, self.image)
        return changes


def transaction_state_led_here() -> list[MetadataRecord]:
    """``__transaction_state`` with one partition, led here alone (acks=-1 completes at once)."""
    return [
        TopicRecord(name=TRANSACTION_STATE_TOPIC, topic_id=TXN_STATE_ID),
        partition_record(TXN_STATE_ID, 0, (LOCAL,)),
    ]


class CountingProducerIds:
    """The broker's ``ProducerIdManager`` double: ids from ``first`` up; none while
    ``available`` is False."""

    def __init__(self, first: int = 4000) -> None:
        self.next = first
        self.available = True

    async def generate_producer_id(self) -> int | None:
        if not self.available:
            return None
        self.next += 1
        return self.next - 1


class HandlerChannel:
    """A ``TxnMarkerChannel`` whose requests reach this broker's WriteTxnMarkers handler through
    ``KafkaApis.dispatch``: leaders from the cluster's image, the request encoded at v1 and the
    answer decoded as ``broker.txn_marker_channel`` does. ``lose`` requests raise instead (a
    lost connection); every request is kept in ``sent``."""

    def __init__(self, cluster: TxnCluster) -> None:
        self.cluster = cluster
        self.apis: KafkaApis | None = None
        self.principal = BROKER_PRINCIPAL
        self.lose = 0
        self.sent: list[tuple[int, tuple[TxnMarker, ...]]] = []

    def leader_of(self, topic_partition: TopicPartition, /) -> int | None:
        topic = self.cluster.image.topics.by_name.get(topic_partition.topic)
        registration = None if topic is None else topic.partitions.get(topic_partition.partition)
        if registration is None:
            return None
        return registration.leader if registration.has_leader() else -1

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker], /
    ) -> MarkerResults:
        self.sent.append((broker_id, tuple(markers)))
        if self.lose:
            self.lose -= 1
            raise ConnectionResetError("the connection to the leader was lost")
        assert self.apis is not None and broker_id == LOCAL, broker_id
        version = 1
        body = await dispatch_bytes(
            self.apis,
            ApiKey.WRITE_TXN_MARKERS,
            version,
            encode_write_txn_markers(markers, version),
            self.principal,
        )
        return decode_write_txn_markers_response(body, version, markers)


async def dispatch_bytes(
    apis: KafkaApis, api_key: ApiKey, version: int, body: bytes, principal: KafkaPrincipal
) -> bytes:
    """The response body (after its header) ``KafkaApis.dispatch`` answers ``body`` with."""
    request = memoryview(bytearray(body))
    segments = await apis.dispatch(context(api_key, version, principal), request)
    assert segments is not None
    frame = segments.to_bytes(
        lambda part: FileSlice(part.path, part.position, part.length).read_bytes()
    )
    _, start = parse_response_header(frame[4:], response_header_version(api_key, version))
    return frame[4 + start :]


class TxnBroker:
    """Both coordinators and every handler of one broker, behind ``KafkaApis``."""

    def __init__(
        self,
        cluster: TxnCluster,
        authorizer: RequestAuthorizer = ALLOW_EVERYTHING,
        **config: Any,
    ) -> None:
        config.setdefault("transaction_state_log_num_partitions", 1)
        wall_clock_ms = cluster.clock.wall_clock_ms
        self.cluster = cluster
        self.producer_ids = CountingProducerIds()
        self.channel = HandlerChannel(cluster)
        self.groups = GroupCoordinatorShell(
            cluster.replica_manager,
            GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0),
            wall_clock_ms=wall_clock_ms,
        )
        self.transactions = TransactionCoordinatorShell(
            cluster.replica_manager,
            self.producer_ids,
            self.channel,
            TransactionConfig(**config),
            wall_clock_ms=wall_clock_ms,
        )
        cluster.shell = self.groups
        cluster.transactions = self.transactions
        self.authorizer = authorizer
        self.controller = InProcessController(cluster)
        handlers = broker_handlers(
            services(
                cluster,
                controller=self.controller,
                authorizer=authorizer,
                wall_clock_ms=wall_clock_ms,
            ),
            producer_ids=self.producer_ids,
            group_coordinator=self.groups,
            transaction_coordinator=self.transactions,
        )
        self.apis = KafkaApis()
        self.apis.register_all(handlers)
        self.channel.apis = self.apis

    async def start(self) -> None:
        """Lead ``__transaction_state`` and ``__consumer_offsets`` here and load both."""
        self.cluster.publish(*transaction_state_led_here(), *offsets_led_here())
        await settle()

    async def send(
        self, api_key: ApiKey, version: int, request: Any, principal: KafkaPrincipal = ANYONE
    ) -> Any:
        body = await dispatch_bytes(
            self.apis, api_key, version, encode(request, version), principal
        )
        if api_key is ApiKey.PRODUCE:  # served by the hand-written codec
            return ProduceResponse.decode(body, version=version)
        return decode_response(api_key, version, body)

    async def shutdown(self) -> None:
        await self.groups.shutdown()
        await self.transactions.shutdown()


async def settle() -> None:
    """Let both coordinators' tasks (loads, appends, marker requests) run."""
    for _ in range(3):
        await settle_groups()


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def errors_by_partition(topic_results: Sequence[Any]) -> dict[TopicPartition, Errors]:
    """An AddPartitionsToTxn topic results list as one error per partition."""
    return {
        TopicPartition(topic.name, result.partition_index): Errors(result.partition_error_code)
        for topic in topic_results
        for result in topic.results_by_partition
    }


# ------------------------------------------------------------------ requests, as clients send them

_AddTopic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
_AddTransaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
_CommitTopic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
_CommitPartition = _CommitTopic.TxnOffsetCommitRequestPartition


def _add_topics(partitions: Sequence[TopicPartition]) -> list[Any]:
    return [
        _AddTopic(name=topic, partitions=indexes)
        for topic, indexes in by_topic((tp.topic, tp.partition) for tp in partitions).items()
    ]


def init_producer_id(
    transactional_id: str | None, version: int = 4, producer_id: int = -1, producer_epoch: int = -1
) -> Any:
    return InitProducerIdRequest(
        version=version,
        transactional_id=transactional_id,
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


def add_partitions(
    transactional_id: str, producer_id: int, producer_epoch: int, *partitions: TopicPartition,
    version: int = 3,
) -> Any:  # fmt: skip
    """AddPartitionsToTxn v0-v3, a client's."""
    return AddPartitionsToTxnRequest(
        version=version,
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=_add_topics(partitions),
    )


def batched_transaction(
    transactional_id: str, producer_id: int, producer_epoch: int, *partitions: TopicPartition,
    verify_only: bool = False,
) -> Any:  # fmt: skip
    return _AddTransaction(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        verify_only=verify_only,
        topics=_add_topics(partitions),
    )


def add_partitions_batched(*transactions: Any) -> Any:
    """AddPartitionsToTxn v4, a broker's (KIP-890)."""
    return AddPartitionsToTxnRequest(version=4, transactions=list(transactions))


def add_offsets(
    transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, version: int = 3
) -> Any:
    return AddOffsetsToTxnRequest(
        version=version,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        group_id=group_id,
    )


def end_txn(
    transactional_id: str, producer_id: int, producer_epoch: int, *, commit: bool, version: int = 3
) -> Any:
    return EndTxnRequest(
        version=version,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        committed=commit,
    )


def txn_offset_commit(
    transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
    offsets: Mapping[TopicPartition, int], version: int = 3,
) -> Any:  # fmt: skip
    partitions = by_topic(
        (tp.topic, _CommitPartition(partition_index=tp.partition, committed_offset=offset,
                                    committed_leader_epoch=-1, committed_metadata=None))
        for tp, offset in offsets.items()
    )  # fmt: skip
    return TxnOffsetCommitRequest(
        version=version,
        transactional_id=transactional_id,
        group_id=group_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[_CommitTopic(name=name, partitions=parts) for name, parts in partitions.items()],
    )


def txn_offset_errors(response: Any) -> dict[TopicPartition, Errors]:
    return {
        TopicPartition(topic.name, partition.partition_index): Errors(partition.error_code)
        for topic in response.topics
        for partition in topic.partitions
    }


def transactional_produce(
    transactional_id: str, producer_id: int, producer_epoch: int, sequence: int,
    topic_partition: TopicPartition, *values: bytes,
) -> Any:  # fmt: skip
    """Produce v10 of one transactional batch, as a transactional producer sends it."""
    records = [SimpleRecord(value=value, timestamp=NOW_MS) for value in values]
    data = build_batch(
        records,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=sequence,
        is_transactional=True,
    )
    topic = ProduceRequest.TopicProduceData
    return ProduceRequest(
        version=10, transactional_id=transactional_id, acks=-1, timeout_ms=1000,
        topic_data=[topic(name=topic_partition.topic, partition_data=[
            topic.PartitionProduceData(index=topic_partition.partition, records=bytes(data))
        ])],
    )  # fmt: skip


def produce_error(response: Any) -> Errors:
    [topic] = response.responses
    [partition] = topic.partition_responses
    return Errors(partition.error_code)
