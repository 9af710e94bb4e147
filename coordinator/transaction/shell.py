"""The asyncio shell around the pure transaction coordinator: futures, the timer, appends,
markers, loading.

Theory of operation
-------------------
Requests: each call picks a request id, parks a future under it, and hands the request to the
pure ``TransactionCoordinator`` with the wall clock's ``now_ms`` (Kafka dates transactions and
times them out by ``time.milliseconds()``). The ``Effects`` that come back are applied at once:
answers resolve their futures, appends and markers start, and the one timer moves to
``next_deadline_ms``. When the timer fires, ``poll`` runs and its effects are applied the same
way. InitProducerId first gets a producer id from the broker's ``ProducerIdGenerator`` when the
core may need one (``needs_new_producer_id``).

Appends: each ``Append`` becomes one RecordBatch v2 appended to its ``__transaction_state``
partition through ``Replicas.append_records`` (the broker's ``ReplicaManager``, the protocol the
group coordinator uses too) with acks=-1; the outcome goes back with ``on_append_done``.
Appends start in the order the core asked for them.

Markers: ``marker_sender`` routes every ``SendMarkers`` of one round of effects to the
partitions' leaders through the broker's ``TxnMarkerChannel``, one WriteTxnMarkers request per
broker, and reports the outcomes with ``on_markers_written``; retries and their backoff are the
core's (``coordinator.transaction.markers``).

Leadership (``on_leadership``, or ``on_metadata`` after ``ReplicaManager.apply_delta``): a
partition of ``__transaction_state`` this broker was elected to lead is loaded (replayed by
``coordinator.transaction.loader``; its prepared transactions are completed); one it stopped
leading is unloaded, and callers waiting on its writes are told NOT_COORDINATOR.

Shutdown answers whatever still waits (NOT_COORDINATOR) and stops the shell's tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from pykraft.coordinator.group.replicas import Replicas
from pykraft.coordinator.log_reader import LoadError
from pykraft.coordinator.shell_runtime import ShellRuntime
from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from pykraft.coordinator.transaction.coordinator import TransactionCoordinator
from pykraft.coordinator.transaction.effects import (
    Append,
    Effects,
    InitProducerIdResult,
    ListTransactionsResult,
    ProducerIdAndEpoch,
    Result,
    SendMarkers,
    TransactionDescription,
    TxnResult,
)
from pykraft.coordinator.transaction.loader import load_transactions
from pykraft.coordinator.transaction.manager import OwnedPartition, PartitionStatus
from pykraft.coordinator.transaction.marker_sender import (
    MarkerReport,
    Route,
    TxnMarkerChannel,
    route_markers,
    send_route,
)
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.protocol.errors import Errors
from pykraft.storage.deadline_timer import DeadlineTimer
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

MAX_LOGGED_PROBLEMS = 5


class ProducerIdGenerator(Protocol):
    """The broker's ``ProducerIdManager`` (``broker/producer_ids.py``)."""

    async def generate_producer_id(self) -> int | None:
        """A producer id never handed out before, or None while none is at hand (the
        coordinator answers COORDINATOR_LOAD_IN_PROGRESS then, and so on an exception)."""
        ...


class TransactionCoordinatorShell:
    def __init__(
        self,
        replicas: Replicas,
        producer_ids: ProducerIdGenerator,
        marker_channel: TxnMarkerChannel,
        config: TransactionConfig,
        *,
        wall_clock_ms: Callable[[], int],
    ) -> None:
        self.replicas = replicas
        self.producer_ids = producer_ids
        self.marker_channel = marker_channel
        self.config = config
        self.core = TransactionCoordinator(config)
        self.wall_clock_ms = wall_clock_ms
        self._runtime: ShellRuntime[Result] = ShellRuntime(logger)
        self._timer = DeadlineTimer(lambda: self.wall_clock_ms(), self._on_timer)

    # ------------------------------------------------------------------ requests

    async def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        expected: ProducerIdAndEpoch | None = None,
    ) -> InitProducerIdResult:
        """InitProducerId; ``expected`` is v3+'s producer id and epoch when not both -1."""
        new_producer_id = None
        if self.core.needs_new_producer_id(transactional_id, transaction_timeout_ms):
            new_producer_id = await self._generate_producer_id()
        result = await self._call(
            lambda rid, now: self.core.handle_init_producer_id(
                transactional_id, transaction_timeout_ms, expected, rid, now, new_producer_id
            ),
            InitProducerIdResult(Errors.NOT_COORDINATOR),
        )
        assert isinstance(result, InitProducerIdResult)
        return result

    async def _generate_producer_id(self) -> int | None:
        try:
            return await self.producer_ids.generate_producer_id()
        except Exception:
            logger.exception("no producer id for InitProducerId")
            return None

    async def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        verify_only: bool = False,
    ) -> dict[TopicPartition, Errors]:
        """AddPartitionsToTxn: the error per partition (one error for all, unless
        ``verify_only``, KIP-890's check of which partitions are in the transaction)."""
        added = frozenset(partitions)
        if verify_only:
            return self.core.handle_verify_partitions(
                transactional_id, producer_id, producer_epoch, added
            )
        result = await self._call(
            lambda rid, now: self.core.handle_add_partitions(
                transactional_id, producer_id, producer_epoch, added, rid, now
            ),
            TxnResult(Errors.NOT_COORDINATOR),
        )
        assert isinstance(result, TxnResult)
        return dict.fromkeys(added, result.error)

    async def add_offsets_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets_partition: TopicPartition,
    ) -> Errors:
        """AddOffsetsToTxn: ``offsets_partition`` is the group's ``__consumer_offsets``
        partition (the group coordinator's ``partition_for``)."""
        result = await self._call(
            lambda rid, now: self.core.handle_add_offsets(
                transactional_id, producer_id, producer_epoch, offsets_partition, rid, now
            ),
            TxnResult(Errors.NOT_COORDINATOR),
        )
        assert isinstance(result, TxnResult)
        return result.error

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Errors:
        result = await self._call(
            lambda rid, now: self.core.handle_end_txn(
                transactional_id, producer_id, producer_epoch, commit, rid, now
            ),
            TxnResult(Errors.NOT_COORDINATOR),
        )
        assert isinstance(result, TxnResult)
        return result.error

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> list[TransactionDescription]:
        return [self.core.describe_transaction(tid) for tid in transactional_ids]

    def list_transactions(
        self, state_filters: Iterable[str] = (), producer_id_filters: Iterable[int] = ()
    ) -> ListTransactionsResult:
        return self.core.list_transactions(state_filters, producer_id_filters)

    def partition_for(self, transactional_id: str) -> int:
        return self.core.partition_for(transactional_id)

    async def _call(self, handle: Callable[[int, int], Effects], fallback: Result) -> Result:
        return await self._runtime.call(
            lambda request_id: self._apply(handle(request_id, self.wall_clock_ms())), fallback
        )

    # ------------------------------------------------------------------ effects

    def _apply(self, effects: Effects) -> None:
        self._answer(effects)
        for append in effects.appends:
            name = f"append to {TRANSACTION_STATE_TOPIC}-{append.partition}"
            self._runtime.spawn(self._append(append), name)
        if effects.markers:
            self._send_markers(effects.markers)
        self._reschedule()

    def _answer(self, effects: Effects) -> None:
        for answer in effects.answers:
            self._runtime.answer(answer.request_id, answer.result)

    async def _append(self, append: Append) -> None:
        topic_partition = TopicPartition(TRANSACTION_STATE_TOPIC, append.partition)
        records = [
            SimpleRecord(key=r.key, value=r.value, timestamp=append.timestamp_ms)
            for r in append.records
        ]
        try:
            results = await self.replicas.append_records(
                {topic_partition: bytearray(build_batch(records))},
                required_acks=-1,
                timeout_ms=append.timeout_ms,
                now_ms=self.wall_clock_ms(),
                internal_topics_allowed=True,
                origin=AppendOrigin.COORDINATOR,
            )
            error = results[topic_partition].error
        except Exception:
            # A bug below: log it, and still answer whoever waits for this write.
            logger.exception("appending to %s failed", topic_partition)
            error = Errors.UNKNOWN_SERVER_ERROR
        if error is not Errors.NONE:
            logger.info("appending to %s failed: %s", topic_partition, error.name)
        self._apply(self.core.on_append_done(append.write_id, error, self.wall_clock_ms()))

    def _send_markers(self, sends: list[SendMarkers]) -> None:
        routes, reports = route_markers(sends, self.marker_channel.leader_of)
        for route in routes:
            self._runtime.spawn(
                self._send_route(route), f"WriteTxnMarkers to broker {route.broker_id}"
            )
        self._report(reports)

    async def _send_route(self, route: Route) -> None:
        reports, failure = await send_route(
            self.marker_channel, route, self.config.request_timeout_ms
        )
        if failure is not None:
            logger.info("WriteTxnMarkers to broker %d failed: %r", route.broker_id, failure)
        self._report(reports)

    def _report(self, reports: Iterable[MarkerReport]) -> None:
        for report in reports:
            effects = self.core.on_markers_written(
                report.transactional_id,
                report.coordinator_epoch,
                report.errors,
                report.deleted,
                self.wall_clock_ms(),
            )
            self._apply(effects)

    def _reschedule(self) -> None:
        self._timer.arm(self.core.next_deadline_ms())

    def _on_timer(self) -> None:
        self._timer.fired()
        self.poll()

    def poll(self) -> None:
        """Act on every deadline passed by now (the timer calls it; so may a simulated clock)."""
        self._apply(self.core.poll(self.wall_clock_ms()))

    # ------------------------------------------------------------------ leadership

    def on_metadata(self, changes: LocalReplicaChanges, image: MetadataImage) -> None:
        """React to this broker's leaderships of ``__transaction_state`` partitions."""
        topic = image.topics.by_name.get(TRANSACTION_STATE_TOPIC)
        if topic is not None and topic.partitions and not self.core.manager.partitions:
            # Kafka reads the partition count of an existing topic, not the config.
            self.core.manager.num_partitions = len(topic.partitions)
        resigned: dict[int, int | None] = {
            key.partition: None for key in changes.deletes if key.topic == TRANSACTION_STATE_TOPIC
        }
        for key, info in changes.followers.items():
            if key.topic == TRANSACTION_STATE_TOPIC:
                resigned[key.partition] = info.leader_epoch
        led = {
            key.partition: info.leader_epoch
            for key, info in changes.elected_leaders.items()
            if key.topic == TRANSACTION_STATE_TOPIC
        }
        self.on_leadership(led, resigned)

    def on_leadership(self, led: Mapping[int, int], resigned: Mapping[int, int | None]) -> None:
        """``led``: partitions this broker now leads, with their leader epochs (the coordinator
        epoch); ``resigned``: partitions it no longer leads, with the new leader epoch when
        known (Kafka's ``onElection`` / ``onResignation``)."""
        now_ms = self.wall_clock_ms()
        for partition in sorted(resigned):
            if partition in self.core.manager.partitions:
                logger.info("no longer the transaction coordinator of partition %d", partition)
                self._apply(self.core.unload(partition, resigned[partition], now_ms))
        for partition, epoch in sorted(led.items()):
            needed, effects = self.core.begin_loading(partition, epoch, now_ms)
            self._apply(effects)
            if needed:
                name = f"load {TRANSACTION_STATE_TOPIC}-{partition}"
                self._runtime.spawn(self._load(partition, epoch), name)

    async def _load(self, partition: int, epoch: int) -> None:
        topic_partition = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        hosted = self.replicas.get_partition(topic_partition)
        if hosted is None or not hosted.is_leader or hosted.leader_epoch != epoch:
            logger.info("%s is not led here in epoch %d: not loading it", topic_partition, epoch)
            self._abort_load(partition, epoch)
            return
        started_ms = self.wall_clock_ms()
        chunk_bytes = self.config.transaction_state_log_load_buffer_size
        try:
            replay = await load_transactions(hosted.log, chunk_bytes=chunk_bytes)
        except LoadError as error:
            logger.error("cannot load the transactions of %s: %s", topic_partition, error)
            self._abort_load(partition, epoch)
            return
        for problem in replay.problems[:MAX_LOGGED_PROBLEMS]:
            logger.warning("%s: skipped a %s", topic_partition, problem)
        now_ms = self.wall_clock_ms()
        self._apply(self.core.complete_loading(partition, epoch, replay.loaded(), now_ms))
        logger.info(
            "loaded %s (epoch %d): %d records, %d transactional ids in %d ms",
            topic_partition,
            epoch,
            replay.records,
            len(replay.values),
            now_ms - started_ms,
        )

    def _abort_load(self, partition: int, epoch: int) -> None:
        """Give the partition up (clients get NOT_COORDINATOR) unless it moved on already."""
        loading = OwnedPartition(PartitionStatus.LOADING, epoch)
        if self.core.manager.partitions.get(partition) == loading:
            self._apply(self.core.unload(partition, epoch, self.wall_clock_ms()))

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        self._timer.cancel()
        self._answer(self.core.shutdown(self.wall_clock_ms()))
        await self._runtime.stop()
