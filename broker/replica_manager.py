"""The partitions this broker hosts and the data path through them (Kafka's ``ReplicaManager``).

Theory of operation
-------------------
Metadata: ``apply_delta(changes, new_image, wall_clock_ms)`` asks the pure
``replica.replica_core.ReplicaCore`` for the ``MetadataReady`` of ``local_changes(delta,
broker_id)`` — Kafka's ``applyDelta`` order, written once there: deletes, then leaders, then
followers, then the fetcher hand-off at the log end — and ``broker.hosted_partitions`` carries it
out; waiters on every changed partition answer now. ``update_topic_configs`` then gives open logs
their topic's new ``LogConfig`` (Kafka's ``DynamicConfigPublisher``).

Produce: ``start_append_records`` (Kafka's ``appendRecords`` with its response callback;
``append_records`` awaits it) appends through ``append_to_local_log`` (``broker.local_append``:
acks checked, internal topics refused to clients, each partition through
``Partition.append_records_to_leader``, every failure that partition's Kafka error code, e.g.
NOT_ENOUGH_REPLICAS when acks=-1 finds the ISR below min.insync.replicas). A transactional
producer's append is verified with its transaction coordinator first when the broker has a
``TransactionVerifier`` (KIP-890 part 1, ``broker.transactional_appends``). It then answers
acks 0/1 at once, and acks=-1 with at least one partition
appended after ``DelayedProduces`` says each appended partition's high watermark passed its
batch (or the ISR shrank, leadership moved, or ``timeout_ms`` passed: Kafka's DelayedProduce).
Transaction markers take the same path with origin COORDINATOR (``append_txn_markers``).

Fetch: ``read_from_log`` reads every partition in request order with Kafka's size rules
(``broker.log_reads``); a follower's read records its progress (the leader's ISR, high
watermark and low watermark follow from it).
``fetch_messages`` answers at once when Kafka would (``max_wait_ms <= 0``, no partitions,
``min_bytes`` reached, an error, a diverging epoch), otherwise waits in ``DelayedFetches`` and
reads again (without recording follower progress twice). Followers wake on appended bytes,
READ_UNCOMMITTED consumers on bytes the high watermark moved past and READ_COMMITTED ones on
bytes the last stable offset moved past: every such move of a hosted partition (``Partition``
reports it) feeds the purgatories.

Time: one timer (given by the composition root; none in unit tests, which call ``tick``) is
kept armed at ``ReplicaCore.next_deadline_ms``; ``tick`` carries out what the core says is due:
the high-watermark checkpoint (every replica.high.watermark.checkpoint.interval.ms, when given),
the ISR expiration (every ``replica.lag.time.max.ms`` / 2, Kafka's isr-expiration task: every
led partition drops lagging followers; expansions happen on follower fetches, and both go to the
controller through the ``AlterPartitionSubmitter``), then the waiting fetches, produces
and DeleteRecords whose deadline passed.
DeleteRecords: ``start_delete_records`` (``broker.delete_records``) moves the leaders' log
starts and answers once every live replica's log start followed (``DelayedDeleteRecords``).
Storage failures (offline partitions, failed log dirs): ``broker.offline_storage``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

import attrs

from pykraft.broker.alter_partition import AlterPartitionSubmitter, RecordedAlterPartitions
from pykraft.broker.broker_topic_stats import BrokerTopicStats
from pykraft.broker.delayed_produce import DelayedProduces
from pykraft.broker.delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsDone,
    DeleteRecordsResult,
    partition_low_watermark,
    start_delete_records,
)
from pykraft.broker.hosted_partitions import HostedPartitions
from pykraft.broker.local_append import NO_GUARDS, answer, append_to_local_log, start_append
from pykraft.broker.log_reads import read_from_log
from pykraft.broker.partition import (
    EpochEndOffset,
    FetchIsolation,
    Partition,
    PartitionContext,
    PartitionError,
)
from pykraft.broker.purgatory import DelayedFetches, FetchCompletion
from pykraft.broker.replication_quotas import ReplicationQuotas
from pykraft.broker.topic_configs import effective_min_insync_replicas
from pykraft.broker.transaction_verification import (
    DEFAULT_ERROR,
    TransactionSupportedOperation,
)
from pykraft.broker.transactional_appends import TransactionalAppends, TransactionVerifier
from pykraft.broker.txn_markers import append_txn_markers
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import (
    INTERNAL_TOPICS,
    AppendResult,
    FetcherManager,
    FetchParams,
    InitialFetchState,
    LogReadResult,
    PartitionFetch,
    RecordedFetcherManager,
    respond_now,
)
from pykraft.replica.isr import NO_BROKER_EPOCH
from pykraft.replica.partition_core import LogView
from pykraft.replica.ready import Ready
from pykraft.replica.replica_core import ReplicaCore, TickReady
from pykraft.storage import hop_trace
from pykraft.storage.deadline_timer import Timer
from pykraft.storage.log_manager import LogManager
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.partition_log import OffsetAndTimestamp
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from pykraft.storage.verification_guard import VerificationGuard

__all__ = [
    "INTERNAL_TOPICS",
    "AppendResult",
    "FetchParams",
    "FetcherManager",
    "InitialFetchState",
    "LogReadResult",
    "PartitionFetch",
    "RecordedFetcherManager",
    "ReplicaManager",
]

REPLICA_LAG_TIME_MAX_MS = 30_000

# Builds the one timer from what it calls when due (``ReplicaManager.on_timer``).
TimerFactory = Callable[[Callable[[], object]], Timer]


# ---------------------------------------------------------------------------- the manager


class ReplicaManager:
    def __init__(
        self,
        *,
        broker_id: int,
        log_manager: LogManager,
        fetcher_manager: FetcherManager,
        delayed_fetches: DelayedFetches | None = None,
        delayed_produces: DelayedProduces | None = None,
        delayed_delete_records: DelayedDeleteRecords | None = None,
        alter_partition: AlterPartitionSubmitter | None = None,
        inter_broker_listener_name: str = "PLAINTEXT",
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS,
        high_watermark_checkpoint_interval_ms: int | None = None,
        monotonic_ms: Callable[[], int],
        timer: TimerFactory | None = None,
        transaction_verifier: TransactionVerifier | None = None,
        replication_quotas: ReplicationQuotas | None = None,
        broker_topic_stats: BrokerTopicStats | None = None,
    ) -> None:
        self.broker_id = broker_id
        # Kafka's BrokerTopicStats: messages and bytes in and out, ISR changes (GET /metrics).
        self.broker_topic_stats = broker_topic_stats or BrokerTopicStats()
        # KIP-73: the leader throttle applied to follower reads (None: never throttled).
        self.replication_quotas = replication_quotas
        self.log_manager = log_manager
        self.fetcher_manager = fetcher_manager
        # Two clocks, never mixed: ``monotonic_ms`` for deadlines and follower lag, wall time
        # (``wall_clock_ms`` arguments) for what lands on disk (segment creation times).
        self.delayed_fetches = delayed_fetches or DelayedFetches(monotonic_ms=monotonic_ms)
        self.delayed_produces = delayed_produces or DelayedProduces(monotonic_ms=monotonic_ms)
        self.delayed_delete_records = delayed_delete_records or DelayedDeleteRecords(
            monotonic_ms=monotonic_ms
        )
        # Without a controller channel ISR changes are only recorded (they stay pending).
        self.alter_partition = alter_partition or RecordedAlterPartitions()
        self.inter_broker_listener_name = inter_broker_listener_name
        self.min_insync_replicas = min_insync_replicas
        self._min_insync_cache: tuple[MetadataImage | None, dict[str, int]] = (None, {})
        self._local_broker_epoch_cache: tuple[MetadataImage | None, int] = (None, NO_BROKER_EPOCH)
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._monotonic_ms = monotonic_ms
        self.core = ReplicaCore(
            broker_id,
            now_ms=monotonic_ms(),
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            inter_broker_listener_name=inter_broker_listener_name,
            high_watermark_checkpoint_interval_ms=high_watermark_checkpoint_interval_ms,
            fetch_waiters=self.delayed_fetches.purgatory,
            produce_waiters=self.delayed_produces.purgatory,
            delete_records_waiters=self.delayed_delete_records.purgatory,
        )
        self.partition_context = PartitionContext(
            monotonic_ms=monotonic_ms,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            min_insync_replicas=self._min_insync_replicas,
            broker=lambda broker_id: self.image.cluster.broker(broker_id),
            local_broker_epoch=self._local_broker_epoch,
            alter_partition=self.alter_partition,
            on_high_watermark_moved=self._on_high_watermark_moved,
            on_last_stable_offset_moved=self._on_last_stable_offset_moved,
            on_isr_committed=lambda shrink: self.broker_topic_stats.record_isr_change(
                shrink=shrink
            ),
        )
        self.hosted = HostedPartitions(
            broker_id,
            self.core,
            log_manager,
            fetcher_manager,
            self.partition_context,
            on_partition_changed=self._on_partition_changed,
        )
        self.offline_storage = self.hosted.offline_storage
        # KIP-890 part 1: with a verifier (transaction.partition.verification.enable, Kafka's
        # addPartitionsToTxnManager) transactional produces are verified before they append.
        self.transactional_appends = (
            None
            if transaction_verifier is None
            else TransactionalAppends(self, transaction_verifier)
        )
        self._timer: Timer | None = None
        if timer is not None:
            self._timer = timer(self.on_timer)
            self.delayed_fetches.on_deadline_moved = self._arm_timer
            self.delayed_produces.on_deadline_moved = self._arm_timer
            self.delayed_delete_records.on_deadline_moved = self._arm_timer
            self._arm_timer()

    @property
    def image(self) -> MetadataImage:
        """The metadata image last applied."""
        return self.core.image

    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]:
        return dict(self.hosted.partitions)

    def get_partition(self, topic_partition: TopicPartition) -> Partition | None:
        return self.hosted.get(topic_partition)

    def partition_or_error(self, topic_partition: TopicPartition) -> Partition:
        """The hosted partition, else the error Kafka's ``getPartitionOrException`` gives."""
        partition = self.hosted.get(topic_partition)
        if partition is not None:
            return partition
        self.offline_storage.check_online(topic_partition)  # Kafka's HostedPartition.Offline
        topic = self.image.topics.by_name.get(topic_partition.topic)
        if topic is not None and topic_partition.partition in topic.partitions:
            raise PartitionError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.broker_id} is not a replica of {topic_partition}",
            )
        raise PartitionError(
            Errors.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {topic_partition}"
        )

    # ------------------------------------------------------------------ metadata

    def apply_delta(
        self, changes: LocalReplicaChanges, new_image: MetadataImage, wall_clock_ms: int
    ) -> None:
        """Act on one metadata delta: deletes, then leaders, then followers (Kafka's order, as
        ``ReplicaCore.apply_metadata`` lays it out). ``wall_clock_ms`` dates the logs it
        creates; follower lag runs on the monotonic clock."""
        # Each hosted partition's topic id, for the partitions that change only (every
        # NoOpRecord's publish built it for all of them).
        hosted = self.hosted.topic_ids() if changes.leaders or changes.followers else {}
        ready = self.core.apply_metadata(changes, new_image, hosted)
        self.hosted.carry_out(ready, wall_clock_ms)

    def update_topic_configs(self, topics: Collection[str], new_image: MetadataImage) -> None:
        """Give the open logs of ``topics`` their config in ``new_image`` (Kafka's
        ``DynamicConfigPublisher``)."""
        self.hosted.update_topic_configs(topics, new_image)

    def delete_stray_logs(self, image: MetadataImage) -> list[TopicPartition]:
        """Delete local logs ``image`` does not place here; once, at start-up (KAFKA-14616)."""
        return self.hosted.delete_stray_logs(image)

    def _min_insync_replicas(self, topic: str) -> int:
        """Read at every append, follower fetch and HW move, so a changed config applies at
        once: worked out once per topic and metadata image (images are immutable)."""
        image = self.image
        cached_image, by_topic = self._min_insync_cache
        if cached_image is not image:
            by_topic = {}
            self._min_insync_cache = (image, by_topic)
        value = by_topic.get(topic)
        if value is None:
            value = by_topic[topic] = effective_min_insync_replicas(
                image, topic, self.broker_id, self.min_insync_replicas
            )
        return value

    # ------------------------------------------------------------------ produce

    def start_append_records(
        self,
        entries: Mapping[TopicPartition, bytearray | memoryview | None],
        *,
        required_acks: int,
        timeout_ms: int,
        now_ms: int,
        response_callback: Callable[[dict[TopicPartition, AppendResult]], None],
        internal_topics_allowed: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guards: Mapping[TopicPartition, VerificationGuard] = NO_GUARDS,
    ) -> int | None:
        """Kafka's ``appendRecords`` with its ``responseCallback``: append, then answer at once
        (acks 0/1, nothing appended, or the ISR already has it) or, for acks=-1, once the ISR
        has every appended batch or ``timeout_ms`` passed. Returns the waiter's id while the
        answer waits (``DelayedProduces.forget`` drops it), else None (already answered).
        ``verification_guards``: each partition's KIP-890 guard (``broker.local_append``)."""
        results = self.append_to_local_log(
            entries,
            required_acks=required_acks,
            now_ms=now_ms,
            internal_topics_allowed=internal_topics_allowed,
            origin=origin,
            verification_guards=verification_guards,
        )
        if hop_trace.ENABLED:
            hop_trace.mark("appended")
        required_offsets = {
            tp: result.last_offset + 1
            for tp, result in results.items()
            if result.error is Errors.NONE
        }
        # Kafka delayedProduceRequestRequired: acks=-1 and at least one partition appended.
        if required_acks != -1 or not required_offsets:
            response_callback(results)
            return None

        def answer(errors: Mapping[TopicPartition, Errors]) -> None:
            for topic_partition, error in errors.items():
                if error is not Errors.NONE:
                    results[topic_partition] = attrs.evolve(results[topic_partition], error=error)
            response_callback(results)

        return self.delayed_produces.try_complete_else_watch(
            required_offsets,
            timeout_ms=timeout_ms,
            checker=self.check_enough_replicas,
            on_done=answer,
        )

    async def append_records(
        self,
        entries: Mapping[TopicPartition, bytearray | memoryview | None],
        *,
        required_acks: int,
        timeout_ms: int,
        now_ms: int,
        internal_topics_allowed: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transactional_id: str | None = None,
        supported_operation: TransactionSupportedOperation = DEFAULT_ERROR,
    ) -> dict[TopicPartition, AppendResult]:
        """``start_append_records`` awaited. The appends happen before the first ``await``, so
        requests on one connection append in order — except a transactional producer's
        (``transactional_id``) while transaction verification is on: those go through
        ``broker.transactional_appends``, which keeps each producer's appends in order."""
        if transactional_id is not None and self.transactional_appends is not None:
            return await self.transactional_appends.append_records(
                entries,
                transactional_id=transactional_id,
                supported_operation=supported_operation,
                required_acks=required_acks,
                timeout_ms=timeout_ms,
                now_ms=now_ms,
            )
        started = start_append(
            self,
            entries,
            required_acks=required_acks,
            timeout_ms=timeout_ms,
            now_ms=now_ms,
            internal_topics_allowed=internal_topics_allowed,
            origin=origin,
        )
        return await answer(self, started)

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
        """Append each partition's records as leader; every partition gets a result
        (``broker.local_append``)."""
        return append_to_local_log(
            self,
            entries,
            required_acks=required_acks,
            now_ms=now_ms,
            internal_topics_allowed=internal_topics_allowed,
            origin=origin,
            verification_guards=verification_guards,
        )

    def check_enough_replicas(
        self, topic_partition: TopicPartition, required_offset: int
    ) -> tuple[bool, Errors]:
        """DelayedProduce's check: case A (not hosted any more) or the partition's answer."""
        try:
            partition = self.partition_or_error(topic_partition)
        except PartitionError as error:
            return False, error.error
        return partition.check_enough_replicas_reach_offset(required_offset)

    def append_txn_markers(
        self, markers: Sequence[TxnMarker], *, timeout_ms: int, now_ms: int
    ) -> Awaitable[dict[tuple[int, TopicPartition], Errors]]:
        """WriteTxnMarkers (``broker.txn_markers``): every marker appended now as leader,
        origin COORDINATOR, acks=-1; awaiting gives each (producer id, partition) its error."""
        return append_txn_markers(self, markers, timeout_ms=timeout_ms, now_ms=now_ms)

    # ------------------------------------------------------------------ delete records

    def start_delete_records(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int,
        response_callback: DeleteRecordsDone,
    ) -> int | None:
        """Kafka's ``deleteRecords`` (``broker.delete_records``): the leaders' log starts move
        now; the answer comes once the low watermarks follow (or ``timeout_ms``)."""
        return start_delete_records(
            self, offsets, timeout_ms=timeout_ms, response_callback=response_callback
        )

    def low_watermark_or_error(self, topic_partition: TopicPartition) -> DeleteRecordsResult:
        """DelayedDeleteRecords' check: the partition's low watermark, or its error."""
        try:
            partition = self.partition_or_error(topic_partition)
        except PartitionError as error:
            return DeleteRecordsResult(error=error.error)
        return partition_low_watermark(partition)

    # ------------------------------------------------------------------ fetch

    def read_from_log(
        self, params: FetchParams, *, update_fetch_state: bool = True
    ) -> list[LogReadResult]:
        """Read every partition in request order (``broker.log_reads``)."""
        return read_from_log(self, params, update_fetch_state=update_fetch_state)

    async def fetch_messages(self, params: FetchParams) -> list[LogReadResult]:
        """Read now, or wait for ``min_bytes`` / ``max_wait_ms`` and read again; a follower's
        bytes of throttled partitions count against the leader throttle (KIP-73)."""
        results = await self._fetch_messages(params)
        if self.replication_quotas is not None and params.replica_id >= 0:
            self.replication_quotas.record_leader(results, self._monotonic_ms())
        return results

    async def _fetch_messages(self, params: FetchParams) -> list[LogReadResult]:
        results = self.read_from_log(params)
        if respond_now(params, results):
            return results
        completion = await self.delayed_fetches.wait(
            [fetch.topic_partition for fetch in params.partitions],
            min_bytes=params.min_bytes,
            accumulated_bytes=sum(result.size_in_bytes for result in results),
            max_wait_ms=params.max_wait_ms,
            isolation=params.isolation,
        )
        if completion is FetchCompletion.PURGATORY_FULL:
            return results
        # Kafka reads from the purgatory without updating follower state again.
        return self.read_from_log(params, update_fetch_state=False)

    # ------------------------------------------------------------------ replication

    def last_offset_for_leader_epoch(
        self, topic_partition: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset:
        """OffsetsForLeaderEpoch for one partition (Kafka ``lastOffsetForLeaderEpoch``: only
        the leader answers; a partition not hosted here is NOT_LEADER_OR_FOLLOWER when the
        metadata knows it, else UNKNOWN_TOPIC_OR_PARTITION)."""
        try:
            partition = self.partition_or_error(topic_partition)
        except PartitionError as error:
            return EpochEndOffset(error=error.error)
        return partition.last_offset_for_leader_epoch(
            current_leader_epoch, leader_epoch, fetch_only_from_leader=True
        )

    def maybe_shrink_isr(self) -> int:
        """The ISR expiration now: every led partition drops lagging followers; how many
        proposed a shrink."""
        return self._carry_out_isr_shrinks(self.core.shrink_isrs(self._log_view))

    def _log_view(self, topic_partition: TopicPartition) -> LogView:
        partition = self.hosted.get(topic_partition)
        assert partition is not None, f"the core hosts {topic_partition}, its shell does not"
        return partition.log_view()

    def _carry_out_isr_shrinks(self, shrinks: Sequence[tuple[TopicPartition, Ready]]) -> int:
        """Each partition carries out its own Ready; how many proposed a shrink."""
        for topic_partition, ready in shrinks:
            partition = self.hosted.get(topic_partition)
            assert partition is not None
            partition.carry_out(ready)
        return sum(ready.alter_partition is not None for _, ready in shrinks)

    # ------------------------------------------------------------------ time

    def monotonic_ms(self) -> int:
        """The broker's monotonic clock, for views (the metrics' throttle rates)."""
        return self._monotonic_ms()

    def next_deadline_ms(self) -> int:
        """When ``tick`` next has something to do (monotonic milliseconds)."""
        return self.core.next_deadline_ms()

    def tick(self) -> TickReady:
        """Carry out what is due now in ``TickReady``'s order: the high-watermark checkpoint,
        the ISR expiration, then the waiters whose deadline passed; the timer moves to the next
        deadline."""
        ready = self.core.tick(self._monotonic_ms(), self._log_view)
        if ready.checkpoint_high_watermarks:
            # Written off the loop when the broker set a writer; a dir whose file cannot be
            # written goes offline (handleLogDirFailure).
            self.log_manager.checkpoint_high_watermarks(background=True)
        self._carry_out_isr_shrinks(ready.isr_shrinks)
        if ready.expired_fetches:
            self.delayed_fetches.resolve_expired(ready.expired_fetches)
        if ready.expired_produces:
            self.delayed_produces.resolve_expired(ready.expired_produces)
        if ready.expired_delete_records:
            self.delayed_delete_records.resolve_expired(ready.expired_delete_records)
        self._arm_timer()
        return ready

    def on_timer(self) -> None:
        """The timer fired: it is disarmed, then ``tick`` arms it again — even when ``tick``
        raised (a bug, logged by the event loop), so the ISR expiration never stops."""
        if self._timer is not None:
            self._timer.fired()
        try:
            self.tick()
        finally:
            self._arm_timer()

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.arm(self.core.next_deadline_ms())

    def shutdown(self) -> None:
        """Answer every waiting fetch and produce now; the timer stops."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.delayed_fetches.close()
        self.delayed_produces.close()
        self.delayed_delete_records.close()

    def _on_high_watermark_moved(self, topic_partition: TopicPartition, old: int, new: int) -> None:
        """A hosted partition's high watermark moved from ``old`` to ``new`` (Kafka's
        ``tryCompleteDelayedRequests``): consumers may read more, produces may be done."""
        if hop_trace.ENABLED:
            hop_trace.mark("high watermark moved")
        self._wake_fetches(topic_partition, FetchIsolation.HIGH_WATERMARK, old, new)
        self.delayed_produces.check_and_complete(topic_partition, self.check_enough_replicas)

    def _on_last_stable_offset_moved(self, tp: TopicPartition, old: int, new: int) -> None:
        """READ_COMMITTED fetches read up to the last stable offset (Kafka's DelayedFetch)."""
        self._wake_fetches(tp, FetchIsolation.TXN_COMMITTED, old, new)

    def _wake_fetches(
        self, topic_partition: TopicPartition, isolation: FetchIsolation, start: int, end: int
    ) -> None:
        """Fetches of ``isolation`` waiting on the partition may read [start, end) now."""
        if self.delayed_fetches.purgatory.watching(topic_partition, isolation):
            partition = self.hosted.get(topic_partition)
            byte_count = 0 if partition is None else partition.bytes_between(start, end)
            if byte_count:
                self.delayed_fetches.on_readable_moved(topic_partition, isolation, byte_count)

    def _on_partition_changed(self, topic_partition: TopicPartition) -> None:
        self.delayed_fetches.on_partition_changed(topic_partition)
        self.delayed_produces.check_and_complete(topic_partition, self.check_enough_replicas)
        self.delayed_delete_records.check_and_complete(topic_partition, self.low_watermark_or_error)

    def _local_broker_epoch(self) -> int:
        """Read at every append and follower fetch: once per (immutable) metadata image."""
        if self._local_broker_epoch_cache[0] is not self.image:
            registration = self.image.cluster.broker(self.broker_id)
            epoch = NO_BROKER_EPOCH if registration is None else registration.epoch
            self._local_broker_epoch_cache = (self.image, epoch)
        return self._local_broker_epoch_cache[1]

    # ------------------------------------------------------------------ list offsets

    def fetch_offset_for_timestamp(
        self,
        topic_partition: TopicPartition,
        timestamp: int,
        *,
        isolation: FetchIsolation | None,
        current_leader_epoch: int,
        fetch_only_from_leader: bool,
    ) -> OffsetAndTimestamp | None:
        """ListOffsets for one partition; raises ``PartitionError``."""
        return self.partition_or_error(topic_partition).fetch_offset_for_timestamp(
            timestamp,
            isolation=isolation,
            current_leader_epoch=current_leader_epoch,
            fetch_only_from_leader=fetch_only_from_leader,
        )
