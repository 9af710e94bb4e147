"""A partition this broker hosts: its log plus its leader state (Kafka's ``cluster.Partition``).

Theory of operation
-------------------
The metadata log decides who leads each partition. The broker learns it as ``LeaderAndIsr``
values (the partition's registration in the metadata image) and applies them with
``make_leader`` / ``make_follower``. The leader state is one immutable ``PartitionState`` that
only ``_become`` replaces; the decisions are pure functions of (state, change).

Roles (``PartitionRole``) and their legal transitions, all driven by metadata:

  NONE     -> LEADER | FOLLOWER     the first registration naming this broker
  LEADER   -> LEADER | FOLLOWER     ISR/replicas changed, re-election, or another leader elected
  FOLLOWER -> LEADER | FOLLOWER     elected, or the leader / its epoch changed
  LEADER | FOLLOWER -> NONE         the broker stops hosting the partition (``stop``)

A change whose partition epoch is below the one already applied is stale and ignored: both
``make_*`` return False and change nothing (Kafka's ``Partition.makeLeader`` / ``makeFollower``:
"Skipped the become-leader state change ... since the leader is already at a newer partition
epoch"). An equal partition epoch is applied again, as in Kafka (an AlterPartition response can
teach the epoch before the metadata log does).

A leader that sees a new leader epoch records it in the leader-epoch cache at its log end offset
(``maybeAssignEpochStartOffset``), so followers of later epochs can find where to truncate.

High watermark (leader only): the minimum log end offset over the ISR, counting the leader's
own log end and each follower's last fetch offset (``follower_log_end_offsets``); a follower of
the ISR whose offset is not known yet holds it back. It only moves forward. With replication
factor 1 the ISR is the leader alone, so the high watermark follows the log end after every
append. ISR shrink/expand comes with replication (DESIGN.md §3.4).

Reads (``fetch_records``): consumers read up to the high watermark (there are no transactions,
so the last stable offset equals it), followers up to the log end. ``current_leader_epoch``
(KIP-320) is checked first: older than ours is FENCED_LEADER_EPOCH, newer is
UNKNOWN_LEADER_EPOCH (Kafka ``checkCurrentLeaderEpoch``); a ``last_fetched_epoch`` whose epoch
ended before the fetch offset answers a diverging epoch instead of data (KIP-595/KIP-320).
"""

from __future__ import annotations

import enum

import attrs
from immutables import Map

from metadata.image import PartitionRegistration
from metadata.records import NO_LEADER
from protocol.errors import Errors
from storage.file_slice import FetchDataInfo, LogOffsetMetadata
from storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, OffsetAndEpoch
from storage.log_reader import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from storage.log_validator import (
    InvalidProducerEpochError,
    InvalidRecordError,
    LogAppendInfo,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StaleLeaderEpochError,
)
from storage.partition_log import OffsetAndTimestamp, PartitionLog
from storage.record_batch import CorruptRecordError
from storage.topic_partition import TopicPartition

# A request's current_leader_epoch / last_fetched_epoch when the client sent none.
NO_PARTITION_LEADER_EPOCH = -1
# Kafka's ListOffsetsRequest.DEBUGGING_REPLICA_ID: may read from any replica.
DEBUGGING_REPLICA_ID = -2


class PartitionRole(enum.Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


_LEGAL_TRANSITIONS: dict[PartitionRole, frozenset[PartitionRole]] = {
    PartitionRole.NONE: frozenset({PartitionRole.LEADER, PartitionRole.FOLLOWER}),
    PartitionRole.LEADER: frozenset(PartitionRole),
    PartitionRole.FOLLOWER: frozenset(PartitionRole),
}


class FetchIsolation(enum.Enum):
    """How far a read may go (Kafka's ``FetchIsolation``)."""

    LOG_END = "log_end"  # followers
    HIGH_WATERMARK = "high_watermark"  # consumers, READ_UNCOMMITTED
    TXN_COMMITTED = "txn_committed"  # consumers, READ_COMMITTED (last stable offset)

    @classmethod
    def of(cls, replica_id: int, isolation_level: int) -> FetchIsolation:
        if replica_id >= 0:
            return cls.LOG_END
        return cls.TXN_COMMITTED if isolation_level == 1 else cls.HIGH_WATERMARK


class PartitionError(Exception):
    """An expected per-partition failure, carrying the Kafka error code a response needs."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


# Storage failures and their Kafka error codes (Kafka's ReplicaManager.appendToLocalLog).
_ERROR_CODES: tuple[tuple[type[Exception], Errors], ...] = (
    (RecordTooLargeError, Errors.MESSAGE_TOO_LARGE),
    (RecordBatchTooLargeError, Errors.RECORD_LIST_TOO_LARGE),
    (InvalidRecordError, Errors.INVALID_RECORD),
    (OutOfOrderSequenceError, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (InvalidProducerEpochError, Errors.INVALID_PRODUCER_EPOCH),
    (StaleLeaderEpochError, Errors.NOT_LEADER_OR_FOLLOWER),
    (OffsetOutOfRangeError, Errors.OFFSET_OUT_OF_RANGE),
    (OSError, Errors.KAFKA_STORAGE_ERROR),
)


def error_for(exception: Exception) -> Errors:
    """The Kafka error code for a storage failure."""
    if isinstance(exception, CorruptRecordError):
        # A v0/v1 batch is not corrupt, just not allowed (ProduceRequest.validateRecords).
        return Errors.INVALID_RECORD if exception.field == "magic" else Errors.CORRUPT_MESSAGE
    for kind, error in _ERROR_CODES:
        if isinstance(exception, kind):
            return error
    return Errors.UNKNOWN_SERVER_ERROR


# ---------------------------------------------------------------------------- the pure core


@attrs.frozen(kw_only=True)
class LeaderAndIsr:
    """A partition's registration as the metadata log states it (LeaderAndIsrPartitionState)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @classmethod
    def from_registration(cls, registration: PartitionRegistration) -> LeaderAndIsr:
        return cls(
            leader=registration.leader,
            leader_epoch=registration.leader_epoch,
            partition_epoch=registration.partition_epoch,
            replicas=registration.replicas,
            isr=registration.isr,
        )


@attrs.frozen(kw_only=True)
class PartitionState:
    role: PartitionRole = PartitionRole.NONE
    leader_id: int = NO_LEADER
    # Invariant: leader_epoch and partition_epoch never decrease.
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    # Leader only: the log end offset at which this leader epoch started.
    leader_epoch_start_offset: int | None = None
    # Leader only: follower broker id -> log end offset of its last fetch (Kafka's Replica).
    # Invariant: keys are replicas other than the leader.
    follower_log_end_offsets: Map[int, int] = attrs.field(factory=Map)


def is_stale(state: PartitionState, change: LeaderAndIsr) -> bool:
    return change.partition_epoch < state.partition_epoch


def leader_state(
    state: PartitionState, change: LeaderAndIsr, log_end_offset: int
) -> PartitionState:
    """The state after ``make_leader`` (the change is not stale)."""
    new_epoch = change.leader_epoch > state.leader_epoch
    was_leader = state.role is PartitionRole.LEADER
    followers = state.follower_log_end_offsets if was_leader else Map()
    kept = Map({r: o for r, o in followers.items() if r in change.replicas and r != change.leader})
    return PartitionState(
        role=PartitionRole.LEADER,
        leader_id=change.leader,
        leader_epoch=max(change.leader_epoch, state.leader_epoch),
        partition_epoch=change.partition_epoch,
        replicas=change.replicas,
        isr=change.isr,
        leader_epoch_start_offset=(
            log_end_offset if new_epoch or not was_leader else state.leader_epoch_start_offset
        ),
        follower_log_end_offsets=kept,
    )


def follower_state(state: PartitionState, change: LeaderAndIsr) -> PartitionState:
    """The state after ``make_follower``: followers keep no ISR (Kafka clears it)."""
    return PartitionState(
        role=PartitionRole.FOLLOWER,
        leader_id=change.leader,
        leader_epoch=change.leader_epoch,
        partition_epoch=change.partition_epoch,
        replicas=change.replicas,
        isr=(),
    )


def high_watermark_candidate(
    state: PartitionState, local_broker_id: int, log_end_offset: int
) -> int | None:
    """Min log end offset over the ISR; None while an ISR follower's offset is unknown."""
    candidate = log_end_offset
    for replica in state.isr:
        if replica == local_broker_id:
            continue
        follower_offset = state.follower_log_end_offsets.get(replica)
        if follower_offset is None:
            return None
        candidate = min(candidate, follower_offset)
    return candidate


def check_current_leader_epoch(local_leader_epoch: int, requested: int) -> Errors:
    """Kafka's ``Partition.checkCurrentLeaderEpoch`` (KIP-320)."""
    if requested == NO_PARTITION_LEADER_EPOCH:
        return Errors.NONE
    if local_leader_epoch > requested:
        return Errors.FENCED_LEADER_EPOCH
    if local_leader_epoch < requested:
        return Errors.UNKNOWN_LEADER_EPOCH
    return Errors.NONE


# ---------------------------------------------------------------------------- the partition


@attrs.frozen
class LogReadInfo:
    """What ``fetch_records`` read, with the offsets sampled before the read (Kafka's)."""

    fetched_data: FetchDataInfo
    diverging_epoch: OffsetAndEpoch | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int


class Partition:
    def __init__(
        self,
        topic_partition: TopicPartition,
        topic_id: str,
        log: PartitionLog,
        local_broker_id: int,
    ) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.state = PartitionState()

    def __repr__(self) -> str:
        return f"Partition({self.topic_partition}, {self.state.role.name}, {self.state})"

    # ------------------------------------------------------------------ state

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

    def _become(self, new_state: PartitionState) -> None:
        """The one place the state changes; checks the role transition."""
        old_role, new_role = self.state.role, new_state.role
        if new_role not in _LEGAL_TRANSITIONS[old_role]:
            raise AssertionError(
                f"{self.topic_partition}: illegal transition {old_role.name} -> {new_role.name}"
            )
        self.state = new_state

    def make_leader(self, change: LeaderAndIsr) -> bool:
        """Become (or stay) leader; True when this broker was not leading before.

        Returns False and changes nothing for a stale partition epoch.
        """
        assert change.leader == self.local_broker_id, "make_leader names another leader"
        if is_stale(self.state, change):
            return False
        was_leader = self.is_leader
        if change.leader_epoch > self.state.leader_epoch:
            self.log.leader_epoch_cache.assign(change.leader_epoch, self.log.log_end_offset)
        self._become(leader_state(self.state, change, self.log.log_end_offset))
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(self, change: LeaderAndIsr) -> bool:
        """Follow ``change.leader``; True when the leader epoch moved (restart the fetcher).

        Returns False and changes nothing for a stale partition epoch.
        """
        assert change.leader != self.local_broker_id, "make_follower names this broker leader"
        if is_stale(self.state, change):
            return False
        new_leader_epoch = change.leader_epoch > self.state.leader_epoch
        self._become(follower_state(self.state, change))
        return new_leader_epoch

    def stop(self) -> None:
        """Stop serving (the partition is being deleted or moved away from this broker)."""
        if self.state.role is not PartitionRole.NONE:
            self._become(attrs.evolve(self.state, role=PartitionRole.NONE, isr=()))

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up to the ISR's minimum log end; True if it moved."""
        if not self.is_leader:
            return False
        candidate = high_watermark_candidate(
            self.state, self.local_broker_id, self.log.log_end_offset
        )
        if candidate is None or candidate <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(candidate)
        return True

    def update_follower_fetch_state(self, replica_id: int, log_end_offset: int) -> bool:
        """Record a follower's fetch offset (its log end); True if the high watermark moved."""
        followers = self.state.follower_log_end_offsets.set(replica_id, log_end_offset)
        self._become(attrs.evolve(self.state, follower_log_end_offsets=followers))
        return self.maybe_increment_high_watermark()

    # ------------------------------------------------------------------ checks

    def _check_leader_epoch(self, current_leader_epoch: int, require_leader: bool) -> None:
        error = check_current_leader_epoch(self.state.leader_epoch, current_leader_epoch)
        if error is not Errors.NONE:
            raise PartitionError(
                error,
                f"{self.topic_partition}: request leader epoch {current_leader_epoch}, "
                f"broker {self.local_broker_id} has {self.state.leader_epoch}",
            )
        if require_leader and not self.is_leader:
            raise PartitionError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} is not the leader of {self.topic_partition} "
                f"(leader {self.state.leader_id}, epoch {self.state.leader_epoch})",
            )

    # ------------------------------------------------------------------ append

    def append_records_to_leader(
        self,
        records: bytearray | memoryview,
        *,
        required_acks: int,
        min_insync_replicas: int,
        now_ms: int,
    ) -> LogAppendInfo:
        """Append a client's batches as leader (Kafka ``appendRecordsToLeader``).

        Raises ``PartitionError`` with the Kafka error code; writes nothing then.
        """
        self._check_leader_epoch(NO_PARTITION_LEADER_EPOCH, require_leader=True)
        if required_acks == -1 and len(self.state.isr) < min_insync_replicas:
            raise PartitionError(
                Errors.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {list(self.state.isr)} is insufficient to satisfy "
                f"the min.isr requirement of {min_insync_replicas} for partition "
                f"{self.topic_partition}",
            )
        try:
            info = self.log.append_as_leader(records, self.state.leader_epoch, now_ms)
        except (CorruptRecordError, OSError, LogError) as error:
            raise PartitionError(error_for(error), str(error)) from error
        self.maybe_increment_high_watermark()
        return info

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
    ) -> LogReadInfo:
        """Read for a consumer (``replica_id`` -1) or a follower (its broker id).

        Only the leader serves reads (no KIP-392 follower fetching). Raises ``PartitionError``.
        """
        self._check_leader_epoch(current_leader_epoch, require_leader=True)
        if replica_id >= 0 and replica_id not in self.state.replicas:
            raise PartitionError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a replica of {self.topic_partition} "
                f"(replicas {list(self.state.replicas)})",
            )
        log = self.log
        high_watermark, log_end_offset = log.high_watermark, log.log_end_offset
        log_start_offset = log.log_start_offset
        diverging = self._diverging_epoch(last_fetched_epoch, fetch_offset, log_end_offset)
        if diverging is not None:
            fetched = FetchDataInfo(LogOffsetMetadata(fetch_offset), (), fetch_offset)
        else:
            upper = log_end_offset if isolation is FetchIsolation.LOG_END else high_watermark
            try:
                fetched = log.read(fetch_offset, max_bytes, upper, min_one_batch)
            except (OffsetOutOfRangeError, OSError) as error:
                raise PartitionError(error_for(error), str(error)) from error
            if replica_id >= 0:
                # Like Kafka, the response carries the high watermark sampled before this
                # update; the follower learns the new one on its next fetch.
                self.update_follower_fetch_state(replica_id, fetch_offset)
        return LogReadInfo(
            fetched, diverging, high_watermark, log_start_offset, log_end_offset, high_watermark
        )

    def _diverging_epoch(
        self, last_fetched_epoch: int, fetch_offset: int, log_end_offset: int
    ) -> OffsetAndEpoch | None:
        """Kafka ``Partition.readRecords``' last-fetched-epoch check (KIP-320)."""
        if last_fetched_epoch < 0:
            return None
        end = self.log.leader_epoch_cache.end_offset_for(last_fetched_epoch, log_end_offset)
        if end.offset == UNDEFINED_EPOCH_OFFSET or end.leader_epoch == UNDEFINED_EPOCH:
            raise PartitionError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"{self.topic_partition}: could not determine the end offset of the last "
                f"fetched epoch {last_fetched_epoch}",
            )
        if fetch_offset < self.log.log_start_offset:
            raise PartitionError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"{self.topic_partition}: fetch offset {fetch_offset} is below the log start "
                f"offset {self.log.log_start_offset}",
            )
        if end.leader_epoch < last_fetched_epoch or end.offset < fetch_offset:
            return end
        return None

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
        log = self.log
        last_fetchable = log.log_end_offset if isolation is None else log.high_watermark
        lagging = (
            isolation is not None
            and self.state.leader_epoch_start_offset is not None
            and self.state.leader_epoch_start_offset > log.high_watermark
        )
        if timestamp == LATEST_TIMESTAMP:
            self._raise_if_lagging(lagging)
            return OffsetAndTimestamp(last_fetchable, -1, self.state.leader_epoch)
        try:
            found = log.fetch_offset_for_timestamp(timestamp)
        except ValueError as error:
            raise PartitionError(Errors.INVALID_REQUEST, str(error)) from error
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return found
        if found is not None and found.offset < last_fetchable:
            return found
        self._raise_if_lagging(lagging)
        return None

    def _raise_if_lagging(self, lagging: bool) -> None:
        if lagging:
            raise PartitionError(
                Errors.OFFSET_NOT_AVAILABLE,
                f"{self.topic_partition}: the high watermark {self.log.high_watermark} lags "
                f"behind the start of leader epoch {self.state.leader_epoch} "
                f"({self.state.leader_epoch_start_offset})",
            )
