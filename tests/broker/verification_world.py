"""One broker in process with both halves of KIP-890 part 1: the partition leader (a real
``ReplicaManager`` on a real ``LogManager``, produce through the real Produce handler) and the
transaction coordinator (the real ``TransactionCoordinatorShell`` on ``__transaction_state``,
appending through the same ``ReplicaManager``), joined by the real ``AddPartitionsToTxnManager``.

Doubles stand in for the network only: ``HandlerSender`` carries each AddPartitionsToTxn v4
request as bytes to the real handler (``broker/handlers/transactions.py``) and the answer back as
bytes, and can hold a request until told (``gate``); ``LocalMarkers`` hands WriteTxnMarkers to
``ReplicaManager.append_txn_markers`` as the leader's handler would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from pykraft.broker.add_partitions_to_txn_batches import Outcome
from pykraft.broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from pykraft.broker.handlers.produce import produce_handler
from pykraft.broker.handlers.transactions import add_partitions_to_txn
from pykraft.broker.replica_manager import RecordedFetcherManager, ReplicaManager
from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import local_changes
from pykraft.metadata.records import MetadataRecord, TopicRecord
from pykraft.protocol.add_partitions_to_txn import (
    VerifyTransaction,
    decode_add_partitions_to_txn_response,
    encode_verify_request,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_request, encode_response
from pykraft.protocol.errors import Errors
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from tests.broker.handler_support import by_topic
from tests.broker.replica_harness import (
    LOCAL,
    NOW_MS,
    OTHER,
    PETS_ID,
    broker,
    call_async,
    encode,
    partition_record,
    replay,
    request_context,
    services,
)
from tests.coordinator.transaction.fakes import FakeProducerIds
from tests.fake_clock import FakeClock

TXN = "payments"
PETS0, PETS1 = TopicPartition("pets", 0), TopicPartition("pets", 1)
STATE_ID = "dT2Kb4c4Qy6mpnXcWzUchw"
TIMEOUT_MS = 60_000
PRODUCE_VERSION = 9
MAX_INIT_ATTEMPTS = 5

_Topic = ProduceRequest.TopicProduceData
_Partition = _Topic.PartitionProduceData


async def settle() -> None:
    """Let the shells' tasks (loads, appends, markers, verifications) run."""
    for _ in range(50):
        await asyncio.sleep(0)


class HandlerSender:
    """The network between the leader's manager and the coordinator's handler, as bytes."""

    def __init__(self, world: VerificationWorld) -> None:
        self.world = world
        self.requests: list[tuple[int, tuple[VerifyTransaction, ...]]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.closed = False

    async def send(self, broker_id: int, transactions: Sequence[VerifyTransaction]) -> Outcome:
        assert broker_id == LOCAL, "the coordinator is this broker"
        self.requests.append((broker_id, tuple(transactions)))
        await self.gate.wait()
        body = encode_verify_request(transactions, 4)
        request = decode_request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
        context = request_context(ApiKey.ADD_PARTITIONS_TO_TXN, 4)
        world = self.world
        response = await add_partitions_to_txn(world.services, world.coordinator, context, request)
        answer = encode_response(ApiKey.ADD_PARTITIONS_TO_TXN, 4, response)
        return decode_add_partitions_to_txn_response(answer, 4)

    async def close(self) -> None:
        self.closed = True


class LocalMarkers:
    """WriteTxnMarkers to this broker's own ReplicaManager."""

    def __init__(self, world: VerificationWorld) -> None:
        self.world = world

    def leader_of(self, topic_partition: TopicPartition) -> int | None:
        topic = self.world.image.topics.by_name.get(topic_partition.topic)
        registration = None if topic is None else topic.partitions.get(topic_partition.partition)
        return None if registration is None else registration.leader

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> dict[tuple[int, TopicPartition], Errors]:
        return await self.world.replica_manager.append_txn_markers(
            markers, timeout_ms=TIMEOUT_MS, now_ms=NOW_MS
        )


class VerificationWorld:
    """Broker LOCAL leading pets-0, pets-1 and ``__transaction_state``-0; OTHER registered."""

    def __init__(self, tmp_path: Path, *, verification: bool = True) -> None:
        self.clock = FakeClock(50_000, wall_clock_start_ms=NOW_MS)
        self.image = MetadataImage.EMPTY
        self.log_manager = LogManager.open([tmp_path / "logs"], LogConfig(), now_ms=0)
        self.sender = HandlerSender(self)
        self.verifier = AddPartitionsToTxnManager(
            metadata=lambda: self.image,
            listener_name="PLAINTEXT",
            partition_for=lambda transactional_id: 0,
            sender=self.sender,
        )
        self.replica_manager = ReplicaManager(
            broker_id=LOCAL,
            log_manager=self.log_manager,
            fetcher_manager=RecordedFetcherManager(),
            monotonic_ms=self.clock.monotonic_ms,
            transaction_verifier=self.verifier if verification else None,
        )
        self.coordinator = TransactionCoordinatorShell(
            self.replica_manager,
            FakeProducerIds(),
            LocalMarkers(self),
            TransactionConfig(
                transaction_state_log_num_partitions=1,
                transaction_state_log_replication_factor=1,
                transaction_state_log_min_isr=1,
            ),
            wall_clock_ms=self.clock.wall_clock_ms,
        )
        self.services = services(self)  # type: ignore[arg-type]  # duck-typed like Cluster
        self.produce = produce_handler(self.services)

    async def start(self, *topic_records: MetadataRecord) -> None:
        self.publish(
            broker(LOCAL),
            broker(OTHER),
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 0, (LOCAL,)),
            partition_record(PETS_ID, 1, (LOCAL,)),
            TopicRecord(name=TRANSACTION_STATE_TOPIC, topic_id=STATE_ID),
            partition_record(STATE_ID, 0, (LOCAL,)),
            *topic_records,
        )
        await settle()  # the coordinator loads its partition

    def publish(self, *records: MetadataRecord) -> None:
        delta = replay(self.image, records)
        self.image = delta.apply()
        changes = local_changes(delta, LOCAL)
        self.replica_manager.apply_delta(changes, self.image, NOW_MS)
        self.coordinator.on_metadata(changes, self.image)

    async def close(self) -> None:
        await self.coordinator.shutdown()
        await self.verifier.close()
        self.replica_manager.shutdown()
        self.log_manager.shutdown()

    # ------------------------------------------------------------------ a producer's calls

    async def begin(self, *partitions: TopicPartition) -> tuple[int, int]:
        """InitProducerId (retried while a fenced instance's transaction is aborted, as
        clients retry CONCURRENT_TRANSACTIONS) and AddPartitionsToTxn."""
        for _ in range(MAX_INIT_ATTEMPTS):
            init = await self.coordinator.init_producer_id(TXN, TIMEOUT_MS)
            if init.error is not Errors.CONCURRENT_TRANSACTIONS:
                break
            await settle()
        assert init.error is Errors.NONE, init
        if partitions:
            added = await self.coordinator.add_partitions_to_txn(
                TXN, init.producer_id, init.producer_epoch, partitions
            )
            assert set(added.values()) == {Errors.NONE}, added
        return init.producer_id, init.producer_epoch

    async def end(self, producer_id: int, epoch: int, *, commit: bool) -> None:
        error = await self.coordinator.end_txn(TXN, producer_id, epoch, commit)
        assert error is Errors.NONE, error
        await settle()  # the markers go out and the transaction completes

    async def produce_to(
        self,
        topic_partition: TopicPartition,
        producer_id: int,
        epoch: int,
        sequence: int,
        *,
        transactional: bool = True,
        transactional_id: str | None = TXN,
        version: int = PRODUCE_VERSION,
    ) -> tuple[Errors, int, str | None]:
        """One batch through the Produce handler: (error, base offset, error message)."""
        data = build_batch(
            [SimpleRecord(value=b"v%d" % sequence, timestamp=NOW_MS)],
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            is_transactional=transactional,
        )
        response = await self.produce_raw({topic_partition: data}, transactional_id, version)
        [topic] = response.responses
        [partition] = topic.partition_responses
        return Errors(partition.error_code), partition.base_offset, partition.error_message

    async def produce_raw(
        self,
        data: dict[TopicPartition, bytes],
        transactional_id: str | None = TXN,
        version: int = PRODUCE_VERSION,
    ) -> Any:
        topics = by_topic(
            (tp.topic, _Partition(index=tp.partition, records=records))
            for tp, records in data.items()
        )
        request = ProduceRequest(
            version=version,
            transactional_id=transactional_id,
            acks=-1,
            timeout_ms=TIMEOUT_MS,
            topic_data=[_Topic(name=name, partition_data=parts) for name, parts in topics.items()],
        )
        body = await call_async(self.produce, ApiKey.PRODUCE, version, encode(request, version))
        assert body is not None
        return ProduceResponse.decode(body, version=version)

    # ------------------------------------------------------------------ what the log says

    def offsets(self, topic_partition: TopicPartition) -> tuple[int, int, int]:
        """(log end offset, high watermark, last stable offset)."""
        partition = self.replica_manager.get_partition(topic_partition)
        assert partition is not None
        return partition.log_end_offset, partition.high_watermark, partition.last_stable_offset
