"""A partition this broker hosts: its log plus its leader state (Kafka's ``cluster.Partition``).

Theory of operation
-------------------
The decisions live in ``replica.partition_state`` and ``replica.isr`` (pure); this shell holds the
log and one ``PartitionState``, which only ``_become`` replaces (checking the role and ISR
transitions the pure modules list), and carries out what the decisions call for: appends and
reads on the log, high-watermark moves, AlterPartition submissions.

Metadata: ``make_leader`` / ``make_follower`` apply a ``LeaderAndIsr``; a change whose partition
epoch is below the one applied is stale and ignored (both return False), an equal one is applied
again, as in Kafka (an AlterPartition answer can teach the epoch before the metadata log does). A
new leader epoch is recorded in the leader-epoch cache at the log end
(``maybeAssignEpochStartOffset``) and resets follower progress (unknown log ends; ISR members
caught up as of now).

Inputs: an append, a follower's fetch and an AlterPartition answer go, with the ``LogView`` this
shell samples (``log_view``), to the replica-wide ``replica.replica_core.ReplicaCore``
(``append``, ``on_fetch``, ``on_alter_partition_result``); the partition's ``Ready`` comes back
and ``carry_out`` carries it out in the one order of ``replica.ready``.

Leader: every follower fetch (replica id >= 0, v15's ReplicaState included) updates that
follower's progress, may propose adding it to the ISR, and may move the high watermark; the ISR
expiration (``ReplicaCore.tick``, whose Readys ``ReplicaManager`` hands to ``carry_out``; here
``maybe_shrink_isr`` for one partition) proposes dropping followers that stayed behind. A
proposal goes to ``PartitionContext.alter_partition`` and its answer comes back to
``_on_alter_partition_result``.
Each high-watermark move is reported to ``PartitionContext.on_high_watermark_moved`` (delayed
produces and READ_UNCOMMITTED fetches wait on it), and each move of the last stable offset it
causes to ``on_last_stable_offset_moved`` (READ_COMMITTED fetches). ``check_enough_replicas_
reach_offset`` answers a waiting acks=all produce.

Reads (``fetch_records``, Kafka ``readRecords``): READ_UNCOMMITTED consumers read up to the
high watermark, READ_COMMITTED ones up to the last stable offset (``UnifiedLog
.lastStableOffset``) and get the aborted transactions overlapping what they read
(``collectAbortedTransactions``), followers read up to the log end. Every answer carries the
LSO sampled before the read. ``current_leader_epoch`` (KIP-320) is
checked first: older than ours is FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH; a
``last_fetched_epoch`` whose epoch ended before the fetch offset answers a diverging epoch
instead of data. Only the leader serves reads (no KIP-392 follower fetching).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs

from pykraft.broker.alter_partition import AlterPartitionSubmitter, RecordedAlterPartitions
from pykraft.broker.partition_reads import offset_for_timestamp, read_records
from pykraft.protocol.errors import Errors
from pykraft.replica.alter_partition_queue import AlterPartitionItem
from pykraft.replica.isr import (
    NO_BROKER_EPOCH,
    AlterPartitionOutcome,
    AlterPartitionResult,
    IsrState,
    PendingIsrChange,
)
from pykraft.replica.partition_core import (
    REPLICA_LAG_TIME_MAX_MS,
    LogView,
    PartitionCore,
)
from pykraft.replica.partition_state import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    NO_PARTITION_LEADER_EPOCH,
    BrokerLookup,
    EpochEndOffset,
    FetchIsolation,
    LeaderAndIsr,
    LogReadInfo,
    PartitionError,
    PartitionRole,
    PartitionState,
    check_enough_replicas_reach_offset,
    error_for,
)
from pykraft.replica.ready import Ready
from pykraft.replica.replica_core import ReplicaCore
from pykraft.storage.leader_epoch_cache import UNDEFINED_EPOCH_OFFSET
from pykraft.storage.log_validator import (
    AppendOrigin,
    LogAppendInfo,
    LogError,
    RecordValidationError,
)
from pykraft.storage.partition_log import OffsetAndTimestamp, PartitionLog
from pykraft.storage.producer_entry import ProducerStateEntry
from pykraft.storage.record_batch import CorruptRecordError
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.verification_guard import VerificationGuard

__all__ = [
    "CONSUMER_REPLICA_ID",
    "DEBUGGING_REPLICA_ID",
    "NO_PARTITION_LEADER_EPOCH",
    "EpochEndOffset",
    "FetchIsolation",
    "LeaderAndIsr",
    "LogReadInfo",
    "Partition",
    "PartitionContext",
    "PartitionError",
    "PartitionRole",
    "PartitionState",
    "error_for",
]

logger = logging.getLogger(__name__)

# A consumer's min_bytes is an int32: sizing an offset move never needs to read more.
MAX_NEWLY_READABLE_BYTES = 2**31 - 1

# (topic partition, old offset, new offset): a high watermark or last stable offset moved.
HighWatermarkListener = Callable[[TopicPartition, int, int], None]


@attrs.frozen(kw_only=True)
class PartitionContext:
    """What every Partition needs from its broker; ReplicaManager builds one for all."""

    # Monotonic milliseconds, sampled for each input to the core (follower progress and lag:
    # only differences matter). Record timestamps come from wall time, passed as ``now_ms``.
    monotonic_ms: Callable[[], int]
    replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS
    # The topic's effective min.insync.replicas, read at each use (configs change).
    min_insync_replicas: Callable[[str], int] = lambda topic: 1
    # A broker's registration in the current metadata image (None = unknown).
    broker: BrokerLookup = lambda broker_id: None
    # This broker's epoch, sent with its own entry of a proposed ISR.
    local_broker_epoch: Callable[[], int] = lambda: NO_BROKER_EPOCH
    alter_partition: AlterPartitionSubmitter = attrs.field(factory=RecordedAlterPartitions)
    on_high_watermark_moved: HighWatermarkListener = lambda tp, old, new: None
    on_last_stable_offset_moved: HighWatermarkListener = lambda tp, old, new: None
    # A proposed ISR change committed: shrink True / False (Kafka's AlterPartitionListener
    # markShrink / markExpand, ReplicaManager's IsrShrinksPerSec / IsrExpandsPerSec).
    on_isr_committed: Callable[[bool], None] = lambda shrink: None


class Partition:
    def __init__(
        self,
        topic_partition: TopicPartition,
        topic_id: str,
        log: PartitionLog,
        local_broker_id: int,
        context: PartitionContext,
        replicas: ReplicaCore | None = None,
    ) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.context = context
        # The replica-wide core (ReplicaManager's) that takes this partition's inputs; standing
        # alone (unit tests) a partition has one of its own.
        self.replicas = replicas or ReplicaCore(
            local_broker_id,
            now_ms=context.monotonic_ms(),
            replica_lag_time_max_ms=context.replica_lag_time_max_ms,
        )
        self.core: PartitionCore = self.replicas.host(topic_partition)

    def __repr__(self) -> str:
        return f"Partition({self.topic_partition}, {self.state.role.name}, {self.state})"

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> PartitionState:
        return self.core.state

    @property
    def role(self) -> PartitionRole:
        return self.state.role

    @property
    def is_leader(self) -> bool:
        return self.state.role is PartitionRole.LEADER

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka ``Partition.lastStableOffset``: how far READ_COMMITTED consumers may read."""
        return self.log.last_stable_offset

    def active_producers(self) -> list[ProducerStateEntry]:
        """Kafka ``Partition.activeProducerState`` (DescribeProducers): every producer the log
        remembers, by id."""
        producers = self.log.producer_state.producers
        return [producers[producer_id] for producer_id in sorted(producers)]

    @property
    def min_insync_replicas(self) -> int:
        return self.context.min_insync_replicas(self.topic_partition.topic)

    def bytes_between(self, start: int, end: int) -> int:
        """The bytes of the batches in [start, end): what a consumer may newly read when the
        high watermark or the last stable offset moves (0 when the log cannot say)."""
        try:
            data = self.log.read(start, MAX_NEWLY_READABLE_BYTES, end, True)
        except (OSError, ValueError, LogError) as error:
            logger.warning("%s: cannot size [%d, %d): %s", self.topic_partition, start, end, error)
            return 0
        return data.size_in_bytes

    def log_view(self) -> LogView:
        """What the core reads for one input: the log's offsets, metadata facts, the time."""
        log, context = self.log, self.context
        # Positional, in LogView's field order (every append and follower fetch builds one).
        return LogView(
            log.log_end_offset,
            log.high_watermark,
            context.monotonic_ms(),
            context.min_insync_replicas(self.topic_partition.topic),
            context.broker,
            context.local_broker_epoch(),
        )

    def carry_out(self, ready: Ready, last_stable_offset: int | None = None) -> None:
        """The one order (``replica.ready``): persist, then apply, then answer.

        ``last_stable_offset``: the log's LSO when the caller sampled it with nothing written
        since (a follower fetch's read did), so a moving high watermark need not work it out
        again; None: read it here."""
        if ready.epoch_start is not None:
            self.log.leader_epoch_cache.assign(
                ready.epoch_start.leader_epoch, ready.epoch_start.offset
            )
        self.core.advance(ready)
        if ready.high_watermark is not None:
            old = self.log.high_watermark
            old_stable = (
                self.log.last_stable_offset if last_stable_offset is None else last_stable_offset
            )
            new = self.log.update_high_watermark(ready.high_watermark)
            self.context.on_high_watermark_moved(self.topic_partition, old, new)
            new_stable = self.log.last_stable_offset
            if new_stable > old_stable:
                self.context.on_last_stable_offset_moved(
                    self.topic_partition, old_stable, new_stable
                )
        if ready.alter_partition is not None:
            change = ready.alter_partition
            logger.info(
                "%s: proposing the ISR %s (%s %s; high watermark %d, log end %d)",
                self.topic_partition,
                list(change.new_isr_ids),
                change.kind.name,
                sorted(change.changed),
                self.log.high_watermark,
                self.log.log_end_offset,
            )
            self._submit(change)

    def make_leader(self, change: LeaderAndIsr) -> bool:
        """Become (or stay) leader; True when this broker was not leading before.

        Returns False and changes nothing for a stale partition epoch. The transition is
        checked before the new epoch is written to the leader-epoch file.
        """
        ready = self.core.make_leader(change, self.log_view())
        if ready is None:
            return False
        self.carry_out(ready)
        return ready.base.role is not PartitionRole.LEADER

    def make_follower(self, change: LeaderAndIsr) -> bool:
        """Follow ``change.leader``; True when the leader epoch moved (restart the fetcher).

        Returns False and changes nothing for a stale partition epoch.
        """
        ready = self.core.make_follower(change)
        if ready is None:
            return False
        self.carry_out(ready)
        return ready.partition_changed

    def stop(self) -> None:
        """Stop serving (the partition is being deleted or moved away from this broker)."""
        self.carry_out(self.core.stop())

    # ------------------------------------------------------------------ high watermark

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up as far as the ISR allows; True if it moved."""
        ready = self.replicas.append(self.topic_partition, self.log_view())
        self.carry_out(ready)
        return ready.high_watermark is not None

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """Whether a waiting acks=all produce ending before ``required_offset`` is done."""
        return check_enough_replicas_reach_offset(
            self.state, self.log.high_watermark, required_offset, self.min_insync_replicas
        )

    # ------------------------------------------------------------------ ISR

    def maybe_shrink_isr(self) -> bool:
        """Propose dropping ISR followers that stayed behind (Kafka ``maybeShrinkIsr``)."""
        ready = self.replicas.shrink_isr(self.topic_partition, self.log_view())
        self.carry_out(ready)
        return ready.alter_partition is not None

    def _submit(self, change: PendingIsrChange) -> None:
        item = AlterPartitionItem(
            topic_id=self.topic_id,
            partition_index=self.topic_partition.partition,
            leader_id=self.local_broker_id,
            change=change,
        )
        self.context.alter_partition.submit(
            item, lambda result: self._on_alter_partition_result(change, result)
        )

    def _on_alter_partition_result(
        self, sent: PendingIsrChange, result: AlterPartitionResult
    ) -> None:
        if self.replicas.partitions.get(self.topic_partition) is not self.core:
            # Deleted or its log dir failed while the request was in flight (a re-created
            # partition has a fresh core and shell): the answer is for nobody.
            logger.info("%s: ISR change answered after the partition stopped", self.topic_partition)
            return
        ready, outcome = self.replicas.on_alter_partition_result(
            self.topic_partition, sent, result, self.log_view()
        )
        if outcome is AlterPartitionOutcome.RETRY:
            logger.warning(
                "%s: ISR change failed with %s; retrying", self.topic_partition, result.error.name
            )
        elif outcome in (AlterPartitionOutcome.IGNORED, AlterPartitionOutcome.WAIT_FOR_METADATA):
            logger.info(
                "%s: ISR change answered %s (%s); waiting for metadata",
                self.topic_partition,
                result.error.name,
                outcome.value,
            )
        elif outcome is AlterPartitionOutcome.COMMITTED:
            self.context.on_isr_committed(sent.kind is IsrState.PENDING_SHRINK)
            logger.info(
                "%s: ISR is now %s at partition epoch %d",
                self.topic_partition,
                list(ready.state.isr),
                ready.state.partition_epoch,
            )
        self.carry_out(ready)

    # ------------------------------------------------------------------ checks

    def _check_leader_epoch(self, current_leader_epoch: int, require_leader: bool) -> None:
        error = self.core.leader_epoch_error(current_leader_epoch, require_leader=require_leader)
        if error is not None:
            raise error

    # ------------------------------------------------------------------ append

    def append_records_to_leader(
        self,
        records: bytearray | memoryview,
        *,
        required_acks: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        """Append batches as leader (Kafka ``appendRecordsToLeader``): a client's, or a
        coordinator's (``origin``: transaction markers, coordinator records); ``now_ms`` is wall
        time, for the records' LogAppendTime. ``verification_guard``: KIP-890's, when the
        append asks for transaction verification (``UnifiedLog.append_as_leader``).

        Raises ``PartitionError`` with the Kafka error code; writes nothing then.
        """
        error = self.core.append_error(required_acks, self.min_insync_replicas)
        if error is not None:
            raise error
        try:
            info = self.log.append_as_leader(
                records,
                self.state.leader_epoch,
                now_ms,
                origin=origin,
                verification_guard=verification_guard,
            )
        except (CorruptRecordError, OSError, LogError) as failure:
            record_errors = (
                failure.record_errors if isinstance(failure, RecordValidationError) else ()
            )
            raise PartitionError(error_for(failure), str(failure), record_errors) from failure
        self.maybe_increment_high_watermark()
        return info

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationGuard:
        """Kafka ``Partition.maybeStartTransactionVerification``: the leader's log hands out the
        producer's guard (``SENTINEL`` when its transaction is open here); not the leader ->
        NOT_LEADER_OR_FOLLOWER."""
        if not self.is_leader:
            raise PartitionError(
                Errors.NOT_LEADER_OR_FOLLOWER, f"{self.topic_partition} is not led here"
            )
        return self.log.maybe_start_transaction_verification(producer_id, sequence, epoch, now_ms)

    # ------------------------------------------------------------------ read

    def fetch_records(
        self,
        *,
        replica_id: int,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_batch: bool,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        last_fetched_epoch: int = NO_PARTITION_LEADER_EPOCH,
        replica_epoch: int = NO_BROKER_EPOCH,
        follower_log_start_offset: int = -1,
        update_fetch_state: bool = True,
    ) -> LogReadInfo:
        """Read for a consumer (``replica_id`` -1) or a follower (its broker id); a follower's
        read also records its progress unless ``update_fetch_state`` is False (the re-read of a
        delayed fetch). Raises ``PartitionError`` (Kafka ``Partition.fetchRecords``)."""
        refused = self.core.fetch_error(replica_id, current_leader_epoch)
        if refused is not None:
            raise refused
        info = self._read_records(
            fetch_offset, max_bytes, isolation, min_one_batch, last_fetched_epoch
        )
        if replica_id >= 0 and update_fetch_state and info.diverging_epoch is None:
            # Like Kafka, the answer carries the high watermark sampled before this update;
            # the follower learns the new one on its next fetch.
            ready = self.replicas.on_fetch(
                self.topic_partition,
                replica_id,
                fetch_offset=fetch_offset,
                log_start_offset=follower_log_start_offset,
                leader_end_offset=info.log_end_offset,
                broker_epoch=replica_epoch,
                view=self.log_view(),
            )
            # The read sampled the LSO and wrote nothing: the old LSO if the HW moves.
            self.carry_out(ready, last_stable_offset=info.last_stable_offset)
        return info

    def _read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_batch: bool,
        last_fetched_epoch: int,
    ) -> LogReadInfo:
        return read_records(
            self.topic_partition,
            self.log,
            fetch_offset=fetch_offset,
            max_bytes=max_bytes,
            isolation=isolation,
            min_one_batch=min_one_batch,
            last_fetched_epoch=last_fetched_epoch,
        )

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int, *, fetch_only_from_leader: bool
    ) -> EpochEndOffset:
        """OffsetsForLeaderEpoch (Kafka ``lastOffsetForLeaderEpoch``): the end offset of the
        largest epoch <= ``leader_epoch``; errors are answered, not raised."""
        try:
            self._check_leader_epoch(current_leader_epoch, require_leader=fetch_only_from_leader)
        except PartitionError as error:
            return EpochEndOffset(error=error.error)
        end = self.log.leader_epoch_cache.end_offset_for(leader_epoch, self.log.log_end_offset)
        if end.offset == UNDEFINED_EPOCH_OFFSET:
            return EpochEndOffset()
        return EpochEndOffset(leader_epoch=end.leader_epoch, end_offset=end.offset)

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        *,
        isolation: FetchIsolation | None,
        current_leader_epoch: int,
        fetch_only_from_leader: bool,
    ) -> OffsetAndTimestamp | None:
        """ListOffsets (Kafka ``Partition.fetchOffsetForTimestamp``); None = no such offset.

        ``isolation`` is None for requests from replicas, which may see up to the log end.
        """
        self._check_leader_epoch(current_leader_epoch, require_leader=fetch_only_from_leader)
        return offset_for_timestamp(
            self.topic_partition, self.log, self.state, timestamp, isolation=isolation
        )
