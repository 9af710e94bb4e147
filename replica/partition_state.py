"""A partition's leader state as pure values and decisions (Kafka's ``cluster.Partition`` core).

Theory of operation
-------------------
``PartitionState`` is one immutable value; ``broker.partition.Partition`` (the shell around the
log) replaces it through pure functions of (state, input, ``now_ms``). Nothing here does I/O or
reads a clock.

Roles (``PartitionRole``), all driven by metadata:

  NONE     -> LEADER | FOLLOWER     the first registration naming this broker
  LEADER   -> LEADER | FOLLOWER     ISR/replicas changed, re-election, or another leader elected
  FOLLOWER -> LEADER | FOLLOWER     elected, or the leader / its epoch changed
  LEADER | FOLLOWER -> NONE         the broker stops hosting the partition

A leader keeps each follower's progress (``replica.isr.ReplicaState``) and the ISR, committed
or with one change pending at the controller (``replica.isr.IsrState``). The high watermark and
acks=all use the *maximal* ISR (KIP-497): the committed ISR plus a replica being added, never
minus the ones being removed — the more restrictive set is always safe. A follower joins the ISR
(``needs_expand_isr``) once its log end reaches the high watermark *and* the start of the
current leader epoch (``isFollowerInSync``) and its broker is eligible; ISR followers that are
not caught up for ``replica.lag.time.max.ms`` leave it (``out_of_sync_replicas``). Either way
the change is only proposed (``prepare_isr_*``); ``handle_alter_partition_result`` applies the
controller's answer.

High watermark (``high_watermark_candidate``, Kafka 3.7+ ``maybeIncrementLeaderHW``): the smallest
log end offset over the maximal ISR, also waiting for followers that are caught up and eligible to
join it; it does not move at all while the committed ISR is smaller than the effective
min.insync.replicas (KIP-966: "The HW can only advance if the ISR size is equal or large than the
min ISR"; effective = min(min.insync.replicas, replication factor)).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection
from typing import NamedTuple

import attrs
from immutables import Map

from pykraft.metadata.image import BrokerRegistration, PartitionRegistration
from pykraft.metadata.records import NO_LEADER
from pykraft.protocol.errors import Errors
from pykraft.replica.isr import (
    NO_BROKER_EPOCH,
    AlterPartitionOutcome,
    AlterPartitionResult,
    BrokerState,
    IsrState,
    PendingIsrChange,
    ReplicaState,
    alter_partition_error_outcome,
    is_caught_up,
    is_replica_isr_eligible,
    reset_replica_state,
)
from pykraft.storage.fetch_data import FetchDataInfo
from pykraft.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    OffsetAndEpoch,
)
from pykraft.storage.log_validator import (
    CorruptLogError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordError,
    RecordTooLargeError,
    StaleLeaderEpochError,
    TransactionCoordinatorFencedError,
)
from pykraft.storage.record_batch import CorruptRecordError

# A request's current_leader_epoch / last_fetched_epoch when the client sent none.
NO_PARTITION_LEADER_EPOCH = -1
# Kafka's ListOffsetsRequest.CONSUMER_REPLICA_ID: a client, reading only from the leader.
CONSUMER_REPLICA_ID = -1
# Kafka's ListOffsetsRequest.DEBUGGING_REPLICA_ID: may read from any replica.
DEBUGGING_REPLICA_ID = -2

BrokerLookup = Callable[[int], BrokerRegistration | None]
_NOBODY: frozenset[int] = frozenset()


class PartitionRole(enum.Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


LEGAL_TRANSITIONS: dict[PartitionRole, frozenset[PartitionRole]] = {
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


# ---------------------------------------------------------------------------- the state


class PartitionState(NamedTuple):
    """A partition's state as one immutable value (a NamedTuple: every follower fetch builds one
    with that follower's progress, ``with_follower``). Changed with ``_replace``."""

    role: PartitionRole = PartitionRole.NONE
    leader_id: int = NO_LEADER
    # Invariant: leader_epoch and partition_epoch never decrease.
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    # The committed ISR (leader only; followers keep none). Invariant: no duplicates (the
    # controller refuses them), so its length is its size.
    isr: tuple[int, ...] = ()
    # Invariant: only a leader has a pending change; its kind is PENDING_EXPAND/PENDING_SHRINK.
    pending_isr_change: PendingIsrChange | None = None
    # Leader only: the log end offset at which this leader epoch started.
    leader_epoch_start_offset: int | None = None
    # Leader only: each follower's progress. Invariant: keys are the replicas but the leader.
    followers: Map[int, ReplicaState] = Map()  # (immutable: one empty Map serves every default)

    @property
    def isr_state(self) -> IsrState:
        pending = self.pending_isr_change
        return IsrState.COMMITTED if pending is None else pending.kind

    @property
    def is_inflight(self) -> bool:
        return self.pending_isr_change is not None

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed ISR plus a replica being added (Kafka's ``maximalIsr``, KIP-497)."""
        pending = self.pending_isr_change
        if pending is not None and pending.kind is IsrState.PENDING_EXPAND:
            return frozenset(self.isr) | pending.changed
        return frozenset(self.isr)

    def in_maximal_isr(self, replica_id: int) -> bool:
        """``replica_id in self.maximal_isr`` without building the set: the high watermark
        asks it for each follower at every append and follower fetch."""
        if replica_id in self.isr:
            return True
        pending = self.pending_isr_change
        return (
            pending is not None
            and pending.kind is IsrState.PENDING_EXPAND
            and replica_id in pending.changed
        )

    @property
    def maximal_isr_size(self) -> int:
        """``len(self.maximal_isr)``, the set built only while an expansion is pending."""
        pending = self.pending_isr_change
        if pending is None or pending.kind is not IsrState.PENDING_EXPAND:
            return len(self.isr)
        return len(self.maximal_isr)


def with_follower(state: PartitionState, replica_id: int, progress: ReplicaState) -> PartitionState:
    """``state`` with one follower's progress replaced: every follower fetch makes one, so it
    is built positionally from the tuple (``_replace`` goes through a map and a dict)."""
    role, leader_id, leader_epoch, partition_epoch, replicas, isr, pending, start, followers = state
    return PartitionState(
        role,
        leader_id,
        leader_epoch,
        partition_epoch,
        replicas,
        isr,
        pending,
        start,
        followers.set(replica_id, progress),
    )


def is_stale(state: PartitionState, change: LeaderAndIsr) -> bool:
    return change.partition_epoch < state.partition_epoch


def leader_state(
    state: PartitionState, change: LeaderAndIsr, log_end_offset: int, now_ms: int
) -> PartitionState:
    """The state after ``make_leader`` (Kafka ``Partition.makeLeader``; the change is not stale).

    Any pending ISR change is dropped: the metadata is newer than what it was based on.
    Follower progress is reset only when the leader epoch moves.
    """
    is_new_leader = state.role is not PartitionRole.LEADER
    is_new_epoch = change.leader_epoch > state.leader_epoch
    known = Map() if is_new_leader else state.followers
    followers = {
        replica: known.get(replica, ReplicaState())
        for replica in change.replicas
        if replica != change.leader
    }
    start_offset = state.leader_epoch_start_offset
    if is_new_epoch:
        start_offset = log_end_offset
        followers = {
            replica: reset_replica_state(
                progress,
                now_ms=now_ms,
                leader_end_offset=log_end_offset,
                is_new_leader=is_new_leader,
                is_in_sync=replica in change.isr,
            )
            for replica, progress in followers.items()
        }
    return PartitionState(
        role=PartitionRole.LEADER,
        leader_id=change.leader,
        leader_epoch=max(change.leader_epoch, state.leader_epoch),
        partition_epoch=change.partition_epoch,
        replicas=change.replicas,
        isr=change.isr,
        leader_epoch_start_offset=start_offset,
        followers=Map(followers),
    )


def follower_state(state: PartitionState, change: LeaderAndIsr) -> PartitionState:
    """The state after ``make_follower``: followers keep no ISR and no follower progress."""
    return PartitionState(
        role=PartitionRole.FOLLOWER,
        leader_id=change.leader,
        leader_epoch=change.leader_epoch,
        partition_epoch=change.partition_epoch,
        replicas=change.replicas,
    )


def check_current_leader_epoch(local_leader_epoch: int, requested: int) -> Errors:
    """Kafka's ``Partition.checkCurrentLeaderEpoch`` (KIP-320)."""
    if requested == NO_PARTITION_LEADER_EPOCH:
        return Errors.NONE
    if local_leader_epoch > requested:
        return Errors.FENCED_LEADER_EPOCH
    if local_leader_epoch < requested:
        return Errors.UNKNOWN_LEADER_EPOCH
    return Errors.NONE


# ---------------------------------------------------------------------------- high watermark


def effective_min_isr(state: PartitionState, min_insync_replicas: int) -> int:
    """Kafka ``effectiveMinIsr``: min.insync.replicas capped at the replication factor."""
    return min(min_insync_replicas, len(state.followers) + 1)


def high_watermark_candidate(
    state: PartitionState,
    *,
    log_end_offset: int,
    now_ms: int,
    replica_lag_time_max_ms: int,
    min_insync_replicas: int,
    brokers: BrokerLookup,
) -> int | None:
    """Kafka ``maybeIncrementLeaderHW``: where the high watermark may go; None = nowhere.

    A follower of the maximal ISR holds it at its log end (an unknown one at -1, which moves
    nothing); so does one outside the ISR that is caught up and eligible to join, so that it
    can reach the high watermark and join instead of chasing a moving target.
    """
    followers, isr = state.followers, state.isr
    # Under the effective min ISR (``effective_min_isr``, inline: every append and every
    # follower fetch that moves a log end asks) the high watermark stays (KIP-966).
    if state.role is not PartitionRole.LEADER or len(isr) < min(
        min_insync_replicas, len(followers) + 1
    ):
        return None
    pending = state.pending_isr_change
    # The replica being added counts at once (KIP-497's maximal ISR, ``in_maximal_isr``).
    adding = (
        pending.changed
        if pending is not None and pending.kind is IsrState.PENDING_EXPAND
        else _NOBODY
    )
    candidate = log_end_offset
    for replica_id, replica in followers.items():
        end = replica.log_end_offset
        if end >= candidate:
            continue
        if (
            replica_id in isr
            or replica_id in adding
            or (
                is_caught_up(replica, log_end_offset, now_ms, replica_lag_time_max_ms)
                and is_replica_isr_eligible(replica, brokers(replica_id))
            )
        ):
            candidate = end
    return candidate


def check_enough_replicas_reach_offset(
    state: PartitionState, high_watermark: int, required_offset: int, min_insync_replicas: int
) -> tuple[bool, Errors]:
    """Kafka ``Partition.checkEnoughReplicasReachOffset`` for a delayed acks=all produce."""
    if state.role is not PartitionRole.LEADER:
        return False, Errors.NOT_LEADER_OR_FOLLOWER
    if high_watermark < required_offset:
        return False, Errors.NONE
    # Appended with enough replicas, but the ISR shrank before the high watermark got here.
    if effective_min_isr(state, min_insync_replicas) <= state.maximal_isr_size:
        return True, Errors.NONE
    return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND


# ---------------------------------------------------------------------------- ISR changes


def _with_broker_epochs(
    state: PartitionState, isr: Collection[int], local_broker_epoch: int
) -> tuple[BrokerState, ...]:
    """Kafka ``addBrokerEpochToIsr``: members not heard from yet go with -1, which is safe —
    had one restarted, the controller would have bumped the partition epoch and refused."""
    members = []
    for broker_id in isr:
        replica = state.followers.get(broker_id)
        if broker_id == state.leader_id:
            epoch = local_broker_epoch
        elif replica is None or replica.broker_epoch is None:
            epoch = NO_BROKER_EPOCH
        else:
            epoch = replica.broker_epoch
        members.append(BrokerState(broker_id=broker_id, broker_epoch=epoch))
    return tuple(members)


def is_follower_in_sync(state: PartitionState, replica_id: int, high_watermark: int) -> bool:
    """Kafka ``isFollowerInSync``: at the high watermark and inside the current leader epoch
    (else a new leader could be elected without committed data between HW and its log end)."""
    replica = state.followers.get(replica_id)
    start = state.leader_epoch_start_offset
    return (
        state.role is PartitionRole.LEADER
        and replica is not None
        and replica.log_end_offset >= high_watermark
        and start is not None
        and replica.log_end_offset >= start
    )


def needs_expand_isr(
    state: PartitionState, replica_id: int, high_watermark: int, broker: BrokerRegistration | None
) -> bool:
    """Kafka ``needsExpandIsr`` / ``canAddReplicaToIsr``."""
    return (
        not state.is_inflight
        and replica_id not in state.isr
        and is_replica_isr_eligible(state.followers.get(replica_id), broker)
        and is_follower_in_sync(state, replica_id, high_watermark)
    )


def prepare_isr_expand(
    state: PartitionState, replica_id: int, local_broker_epoch: int
) -> PartitionState:
    """Kafka ``prepareIsrExpand``: the new member counts for the high watermark at once."""
    assert state.isr_state is IsrState.COMMITTED, f"expanding from {state.isr_state.name}"
    return _pending(
        state,
        IsrState.PENDING_EXPAND,
        (*state.isr, replica_id),
        frozenset({replica_id}),
        local_broker_epoch,
    )


def out_of_sync_replicas(
    state: PartitionState, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int
) -> frozenset[int]:
    """Kafka ``getOutOfSyncReplicas``: ISR followers not caught up for the max lag (stuck or
    slow alike); none while an ISR change is in flight."""
    if state.role is not PartitionRole.LEADER or state.is_inflight:
        return frozenset()
    return frozenset(
        replica_id
        for replica_id in state.isr
        if replica_id != state.leader_id
        and (
            (replica := state.followers.get(replica_id)) is None
            or not is_caught_up(replica, leader_end_offset, now_ms, replica_lag_time_max_ms)
        )
    )


def prepare_isr_shrink(
    state: PartitionState, out_of_sync: frozenset[int], local_broker_epoch: int
) -> PartitionState:
    """Kafka ``prepareIsrShrink``: the high watermark keeps counting the old ISR until the
    controller commits (a failed shrink must not have advanced it)."""
    assert state.isr_state is IsrState.COMMITTED, f"shrinking from {state.isr_state.name}"
    assert out_of_sync, "nothing to shrink"
    new_isr = tuple(replica for replica in state.isr if replica not in out_of_sync)
    return _pending(state, IsrState.PENDING_SHRINK, new_isr, out_of_sync, local_broker_epoch)


def _pending(
    state: PartitionState,
    kind: IsrState,
    new_isr: tuple[int, ...],
    changed: frozenset[int],
    local_broker_epoch: int,
) -> PartitionState:
    assert state.role is PartitionRole.LEADER, "only a leader changes the ISR"
    change = PendingIsrChange(
        kind=kind,
        leader_epoch=state.leader_epoch,
        partition_epoch=state.partition_epoch,
        new_isr=_with_broker_epochs(state, new_isr, local_broker_epoch),
        changed=changed,
    )
    return state._replace(pending_isr_change=change)


def handle_alter_partition_result(
    state: PartitionState, sent: PendingIsrChange, result: AlterPartitionResult
) -> tuple[PartitionState, AlterPartitionOutcome]:
    """Kafka ``submitAlterPartition``'s completion: ``handleAlterPartitionUpdate`` /
    ``handleAlterPartitionError``."""
    if state.pending_isr_change != sent:
        return state, AlterPartitionOutcome.IGNORED
    if result.error is not Errors.NONE:
        outcome = alter_partition_error_outcome(result.error)
        if outcome is AlterPartitionOutcome.RESET:
            return state._replace(pending_isr_change=None), outcome
        return state, outcome
    if result.leader_epoch != state.leader_epoch or result.partition_epoch < state.partition_epoch:
        # An answer for another epoch: stay pending until the metadata says more.
        return state, AlterPartitionOutcome.IGNORED
    committed = state._replace(
        isr=result.isr,
        partition_epoch=result.partition_epoch,
        pending_isr_change=None,
    )
    return committed, AlterPartitionOutcome.COMMITTED


# ---------------------------------------------------------------------------- answers


class PartitionError(Exception):
    """An expected per-partition failure, carrying the Kafka error code a response needs (and
    for a refused append's records, KIP-467's per-record errors)."""

    def __init__(
        self, error: Errors, message: str, record_errors: tuple[RecordError, ...] = ()
    ) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.record_errors = record_errors


# Storage failures and their Kafka error codes (Kafka's ReplicaManager.appendToLocalLog).
_ERROR_CODES: tuple[tuple[type[Exception], Errors], ...] = (
    (RecordTooLargeError, Errors.MESSAGE_TOO_LARGE),
    (RecordBatchTooLargeError, Errors.RECORD_LIST_TOO_LARGE),
    (InvalidRecordError, Errors.INVALID_RECORD),
    (CorruptLogError, Errors.CORRUPT_MESSAGE),  # stored data that cannot be read
    (OutOfOrderSequenceError, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (InvalidProducerEpochError, Errors.INVALID_PRODUCER_EPOCH),
    (InvalidTxnStateError, Errors.INVALID_TXN_STATE),
    (TransactionCoordinatorFencedError, Errors.TRANSACTION_COORDINATOR_FENCED),
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


@attrs.frozen
class LogReadInfo:
    """What ``fetch_records`` read, with the offsets sampled before the read (Kafka's)."""

    fetched_data: FetchDataInfo
    diverging_epoch: OffsetAndEpoch | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int


@attrs.frozen(kw_only=True)
class EpochEndOffset:
    """One partition's OffsetsForLeaderEpoch answer; -1/-1 when the epoch is unknown."""

    error: Errors = Errors.NONE
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_EPOCH_OFFSET
