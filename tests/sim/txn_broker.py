"""One broker process of the transaction sim: a replication sim broker that also runs the shipped
transaction coordinator and serves the transactional producers and read_committed consumers.

On top of ``replication_broker.SimBroker`` (lifecycle, metadata, partitions, fetchers):

* the shipped ``coordinator.transaction.shell.TransactionCoordinatorShell`` — the pure
  ``TransactionCoordinator`` inside it, its appends to ``__transaction_state`` through the
  broker's ``ReplicaManager.append_records`` (acks=-1), its loading on leadership changes (the
  metadata publisher's listener, as ``BrokerServer`` wires it), its one timer — on the broker's
  ``txn_loop.SimLoop``;
* its marker channel: the shipped ``broker.txn_marker_channel.TxnMarkerChannel`` finding leaders
  in the broker's image (``leader_of``), with only the network half replaced (``SimMarkerChannel``:
  the WriteTxnMarkers request's bytes travel the simulated network, with the sim's marker faults,
  to the leader, where the shipped ``write_txn_markers_handler`` decodes and appends them through
  ``ReplicaManager.append_txn_markers``); producer ids from the sim (``SimProducerIds``: what the
  controller's AllocateProducerIds would hand out);
* the transactional producers' requests: InitProducerId, AddPartitionsToTxn and EndTxn to the
  shell, transactional batches through ``ReplicaManager.start_append_records`` (acks=-1), and
  read_committed Fetch through the shipped ``broker.handlers.fetch.handle_fetch``.

``ObservedReplicaManager`` is the shipped ``ReplicaManager`` with the checker's hook around
``append_to_local_log``: every batch a leader appends is reported (the replication checks'
log matching, the coordinator's decisions, the markers); it decides nothing.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Protocol

from pykraft.broker.handlers.fetch import handle_fetch
from pykraft.broker.handlers.write_txn_markers import write_txn_markers_handler
from pykraft.broker.local_append import NO_GUARDS
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.txn_marker_channel import TxnMarkerChannel
from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.fetcher.broker_connection import ConnectionSettings
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import FetchPartition, FetchRequest, FetchTopic, PartitionData
from pykraft.protocol.headers import RequestHeader, request_header_version
from pykraft.protocol.txn_markers import (
    MarkerResults,
    decode_write_txn_markers_response,
    encode_write_txn_markers,
)
from pykraft.replica.data_path import AppendResult
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from pykraft.storage.verification_guard import VerificationGuard
from tests.sim.replication_broker import BrokerEnv, SimBroker
from tests.sim.replication_checks import InvariantViolation
from tests.sim.replication_leader import LISTENER_NAME, services
from tests.sim.replication_log import BrokerDisk, batch_at
from tests.sim.replication_net import SimFuture, SimTask
from tests.sim.txn_checks import TxnChecker
from tests.sim.txn_log import log_batches, state_records
from tests.sim.txn_loop import SimLoop

WRITE_TXN_MARKERS_VERSION = 1
# Fetch v11: isolation level and aborted transactions, topics by name.
CONSUMER_FETCH_VERSION = 11
CONSUMER_FETCH_MAX_WAIT_MS = 200
CONSUMER_FETCH_MAX_BYTES = 1 << 20

_DECISIONS = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})

AppendObserver = Callable[[TopicPartition, AppendResult, AppendOrigin], None]


class TxnBrokerEnv(BrokerEnv, Protocol):
    checker: TxnChecker
    txn_config: TransactionConfig
    brokers: Mapping[int, SimBroker | None]

    def allocate_producer_id(self) -> int: ...

    def send_markers(
        self,
        broker: TxnSimBroker,
        target: int,
        body: bytes,
        on_answer: Callable[[bytes], None],
    ) -> bool: ...

    def on_decision(self, coordinator_id: int, partitions: Iterable[TopicPartition]) -> None: ...

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        """The partition's leader epoch in the controller's image (-1 if unknown)."""
        ...


class ObservedReplicaManager(ReplicaManager):
    """The shipped ``ReplicaManager``; every batch its leader appends goes to ``observer``."""

    observer: AppendObserver | None = None

    def append_to_local_log(
        self,
        entries: Mapping[TopicPartition, bytearray | memoryview | None],
        *,
        required_acks: int,
        now_ms: int,
        internal_topics_allowed: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guards: Mapping[TopicPartition, VerificationGuard] = NO_GUARDS,
    ) -> dict[TopicPartition, AppendResult]:
        results = super().append_to_local_log(
            entries,
            required_acks=required_acks,
            now_ms=now_ms,
            internal_topics_allowed=internal_topics_allowed,
            origin=origin,
            verification_guards=verification_guards,
        )
        if self.observer is not None:
            for topic_partition, result in results.items():
                if result.error is Errors.NONE and result.appended_bytes > 0:
                    self.observer(topic_partition, result, origin)
        return results


class SimProducerIds:
    """The broker's ``ProducerIdManager``: ids the controller would allocate, never reused."""

    def __init__(self, env: TxnBrokerEnv) -> None:
        self.env = env

    async def generate_producer_id(self) -> int | None:
        return self.env.allocate_producer_id()


class SimMarkerChannel(TxnMarkerChannel):
    """The shipped channel's leader lookup; WriteTxnMarkers over the simulated network."""

    def __init__(self, broker: TxnSimBroker) -> None:
        super().__init__(
            broker.broker_id,
            lambda: broker.replica_manager.image,
            LISTENER_NAME,
            ConnectionSettings(client_id=f"broker-{broker.broker_id}-txn-marker-sender"),
            monotonic_ms=lambda: broker.env.now_ms,
        )
        self.broker = broker

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> MarkerResults:
        """One request; a refused connection answers NETWORK_EXCEPTION at once (as the real
        channel does), a lost request or answer leaves the shell's timeout to end the wait."""
        body = encode_write_txn_markers(markers, WRITE_TXN_MARKERS_VERSION)
        answered: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        def on_answer(response: bytes) -> None:
            if not answered.done():  # the shell may have given up on it
                answered.set_result(response)

        if not self.broker.env.send_markers(self.broker, broker_id, body, on_answer):
            return {
                (m.producer_id, tp): Errors.NETWORK_EXCEPTION
                for m in markers
                for tp in m.partitions
            }
        response = await answered
        return decode_write_txn_markers_response(response, WRITE_TXN_MARKERS_VERSION, markers)


class TxnSimBroker(SimBroker):
    replica_manager_class = ObservedReplicaManager
    env: TxnBrokerEnv

    def __init__(
        self, env: TxnBrokerEnv, broker_id: int, incarnation: int, disk: BrokerDisk
    ) -> None:
        super().__init__(env, broker_id, incarnation, disk)
        self.loop = SimLoop(
            self,
            lambda: env.now_ms,
            f"broker {broker_id}#{incarnation}",
            alive=lambda: env.brokers.get(broker_id) is self,
        )
        observed = self.replica_manager
        assert isinstance(observed, ObservedReplicaManager)
        observed.observer = self._on_leader_append
        self.marker_channel = SimMarkerChannel(self)
        self.coordinator = TransactionCoordinatorShell(
            self.replica_manager,
            SimProducerIds(env),
            self.marker_channel,
            env.txn_config,
            wall_clock_ms=lambda: env.now_ms,
        )
        self._correlation_ids = itertools.count(1)

    def on_local_changes(self, changes: LocalReplicaChanges, image: MetadataImage) -> None:
        self.coordinator.on_metadata(changes, image)

    def run_async(self, coroutine: Coroutine[Any, Any, Any]) -> SimFuture:
        """Run a shipped coroutine as a task on this broker's loop; resolves with its result
        (its exception, a bug, fails the event that finds it)."""
        answer = SimFuture()
        task = self.loop.create_task(coroutine)
        task.add_done_callback(lambda done: answer.resolve(done.result()))
        return answer

    # ------------------------------------------------------------------ observing appends

    def _on_leader_append(
        self, topic_partition: TopicPartition, result: AppendResult, origin: AppendOrigin
    ) -> None:
        try:
            self._observe_append(topic_partition, result, origin)
        except InvariantViolation as violation:
            # Raised inside the shipped code, which may catch it (the coordinator's shell logs
            # a failed append): kept, and raised once the event returns to the simulation.
            self.env.checker.deferred.append(violation)
            raise

    def _observe_append(
        self, topic_partition: TopicPartition, result: AppendResult, origin: AppendOrigin
    ) -> None:
        key = (topic_partition.topic, topic_partition.partition)
        log = self.disk.log(key)
        checker = self.env.checker
        checker.on_leader_append(key, batch_at(log, result.base_offset))
        if topic_partition.topic == TRANSACTION_STATE_TOPIC:
            partition = topic_partition.partition
            checker.on_state_append(partition, log, result.base_offset, self.env.leader_epoch)
            for record in state_records(log, result.base_offset):
                value = record.value
                if value is not None and value.transaction_status in _DECISIONS:
                    self.env.on_decision(self.broker_id, value.topic_partitions)
            return
        batch = next(log_batches(log, result.base_offset))
        if batch.marker is not None:
            assert origin is AppendOrigin.COORDINATOR, (key, batch)
            leader_epoch = self.replica_manager.partitions[topic_partition].leader_epoch
            checker.on_marker_append(key, batch, leader_epoch)

    # ------------------------------------------------------------------ producers' requests

    def serve_init_producer_id(self, transactional_id: str, timeout_ms: int) -> SimFuture:
        return self.run_async(self.coordinator.init_producer_id(transactional_id, timeout_ms))

    def serve_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> SimFuture:
        async def add() -> Errors:
            errors = await self.coordinator.add_partitions_to_txn(
                transactional_id, producer_id, producer_epoch, partitions
            )
            assert len(set(errors.values())) == 1, errors  # v0-v3: one error for all
            return next(iter(errors.values()))

        return self.run_async(add())

    def serve_end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> SimFuture:
        return self.run_async(
            self.coordinator.end_txn(transactional_id, producer_id, producer_epoch, commit)
        )

    def serve_produce(self, topic_partition: TopicPartition, batch: bytearray) -> SimFuture:
        """An acks=-1 transactional produce; resolves with the partition's ``AppendResult``."""
        answer = SimFuture()
        if not self.serving:
            answer.resolve(AppendResult(error=Errors.NOT_LEADER_OR_FOLLOWER))
            return answer
        self.replica_manager.start_append_records(
            {topic_partition: batch},
            required_acks=-1,
            timeout_ms=self.env.settings.produce_timeout_ms,
            now_ms=self.env.now_ms,
            response_callback=lambda results: answer.resolve(results[topic_partition]),
        )
        return answer

    def serve_read_committed(self, topic_partition: TopicPartition, fetch_offset: int) -> SimFuture:
        """A read_committed consumer's Fetch through the shipped handler; resolves with the
        partition's ``PartitionData`` (its records joined into the bytes of the wire)."""
        if not self.serving:
            refused = SimFuture()
            refused.resolve(
                PartitionData(topic_partition.partition, error_code=Errors.NOT_LEADER_OR_FOLLOWER)
            )
            return refused
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=CONSUMER_FETCH_MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=CONSUMER_FETCH_MAX_BYTES,
            isolation_level=1,
            topics=(
                FetchTopic(
                    (
                        FetchPartition(
                            topic_partition.partition, fetch_offset, CONSUMER_FETCH_MAX_BYTES
                        ),
                    ),
                    topic=topic_partition.topic,
                ),
            ),
        )
        return SimTask(self, "read_committed Fetch", functools.partial(self._fetch, request)).result

    async def _fetch(self, request: FetchRequest) -> PartitionData:
        response = await handle_fetch(
            services(self), request, CONSUMER_FETCH_VERSION, LISTENER_NAME
        )
        (topic,) = response.responses
        (data,) = topic.partitions
        wire = b"".join(bytes(piece) for piece in data.records or ())  # type: ignore[arg-type]
        return PartitionData(
            data.partition_index,
            error_code=data.error_code,
            high_watermark=data.high_watermark,
            last_stable_offset=data.last_stable_offset,
            aborted_transactions=data.aborted_transactions,
            records=(wire,) if wire else (),
        )

    # ------------------------------------------------------------------ WriteTxnMarkers

    def serve_write_txn_markers(self, body: bytes) -> SimFuture:
        """The shipped WriteTxnMarkers handler (no group coordinator: nothing here writes to
        ``__consumer_offsets``), bytes in, bytes out."""
        api_key, version = ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION
        header = RequestHeader(
            api_key,
            version,
            next(self._correlation_ids),
            "txn-marker-sender",
            request_header_version(api_key, version),
        )
        context = RequestContext(header, "sim", LISTENER_NAME, "sim", 0)
        handler = write_txn_markers_handler(services(self), None)

        async def handle() -> bytes:
            response = await handler(context, memoryview(body))
            assert isinstance(response, bytes)
            return response

        return self.run_async(handle())
