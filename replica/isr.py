"""Follower progress and ISR changes as pure values (Kafka's ``Replica`` and the ISR half of
``cluster.Partition``'s state).

Theory of operation
-------------------
A leader keeps one ``ReplicaState`` per follower. Each follower fetch updates it
(``update_fetch_state``): the follower's log end offset is its fetch offset, and
``last_caught_up_time_ms`` is the latest time its fetch offset had reached the leader's log end —
as of this fetch, or as of the previous one (so a follower that always trails a busy producer by
one fetch still counts as caught up). A follower is caught up while that time is within
``replica.lag.time.max.ms``, or its log end equals the leader's (``is_caught_up``). A new leader
epoch resets every follower (``reset_replica_state``): ISR members count as caught up now, the
others as never.

A replica may join the ISR only while its broker is eligible (``is_replica_isr_eligible``):
registered, not fenced, not in controlled shutdown, and fetching with the broker epoch the
metadata shows (KIP-903); a fetch carrying an older broker epoch than the metadata's is refused
(``is_stale_broker_epoch``).

ISR changes go to the controller as AlterPartition (``PendingIsrChange``). ``IsrState`` and its
legal transitions:

  COMMITTED      -> PENDING_EXPAND   a follower caught up
  COMMITTED      -> PENDING_SHRINK   ISR followers fell out of sync
  PENDING_*      -> COMMITTED        the controller answered with the new ISR; or said it did not
                                     apply the change (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA);
                                     or new metadata arrived
  PENDING_*      -> PENDING_*        other errors: send the change again, or wait for metadata

``alter_partition_error_outcome`` is Kafka's ``handleAlterPartitionError`` table.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import attrs

from pykraft.metadata.image import BrokerRegistration
from pykraft.metadata.records import NO_LEADER
from pykraft.protocol.errors import Errors

# Kafka's UnifiedLog.UNKNOWN_OFFSET: a follower's offsets before its first fetch.
UNKNOWN_OFFSET = -1
# AlterPartition's and Fetch's broker epoch for "not checked" (KIP-903).
NO_BROKER_EPOCH = -1


class IsrState(enum.Enum):
    COMMITTED = "committed"
    PENDING_EXPAND = "pending_expand"
    PENDING_SHRINK = "pending_shrink"


LEGAL_ISR_TRANSITIONS: dict[IsrState, frozenset[IsrState]] = {
    IsrState.COMMITTED: frozenset(IsrState),
    IsrState.PENDING_EXPAND: frozenset({IsrState.COMMITTED, IsrState.PENDING_EXPAND}),
    IsrState.PENDING_SHRINK: frozenset({IsrState.COMMITTED, IsrState.PENDING_SHRINK}),
}


# ---------------------------------------------------------------------------- followers


class ReplicaState(NamedTuple):
    """What the leader knows of one follower (Kafka's ``ReplicaState``): an immutable
    NamedTuple, since every follower fetch builds one (a third of the cost of a frozen attrs
    class built by keyword)."""

    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    # The leader's log end when this follower last fetched.
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    # The latest time the follower's fetch offset had reached the leader's log end.
    last_caught_up_time_ms: int = 0
    # The broker epoch of its last fetch (KIP-903); None before any fetch.
    broker_epoch: int | None = None


def is_caught_up(
    replica: ReplicaState, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int
) -> bool:
    """Kafka ``ReplicaState.isCaughtUp``."""
    return (
        leader_end_offset == replica.log_end_offset
        or now_ms - replica.last_caught_up_time_ms <= replica_lag_time_max_ms
    )


def update_fetch_state(
    replica: ReplicaState,
    *,
    fetch_offset: int,
    log_start_offset: int,
    fetch_time_ms: int,
    leader_end_offset: int,
    broker_epoch: int,
) -> ReplicaState:
    """Kafka ``Replica.updateFetchStateOrThrow`` (the stale-epoch check is the caller's)."""
    if fetch_offset >= leader_end_offset:
        caught_up = max(replica.last_caught_up_time_ms, fetch_time_ms)
    elif fetch_offset >= replica.last_fetch_leader_log_end_offset:
        # It reached the leader's log end as of its previous fetch.
        caught_up = max(replica.last_caught_up_time_ms, replica.last_fetch_time_ms)
    else:
        caught_up = replica.last_caught_up_time_ms
    last_fetch_leader_end = replica.last_fetch_leader_log_end_offset
    # Positional (the field order above), the fastest build: every follower fetch makes one.
    return ReplicaState(
        log_start_offset,  # log_start_offset
        fetch_offset,  # log_end_offset
        max(leader_end_offset, last_fetch_leader_end),  # last_fetch_leader_log_end_offset
        fetch_time_ms,  # last_fetch_time_ms
        caught_up,  # last_caught_up_time_ms
        broker_epoch,  # broker_epoch
    )


def reset_replica_state(
    replica: ReplicaState,
    *,
    now_ms: int,
    leader_end_offset: int,
    is_new_leader: bool,
    is_in_sync: bool,
) -> ReplicaState:
    """Kafka ``Replica.resetReplicaState`` on a new leader epoch: ISR members count as caught
    up now; others as never, so they do not hold the high watermark back."""
    caught_up = now_ms if is_in_sync else 0
    if is_new_leader:
        return ReplicaState(
            last_fetch_leader_log_end_offset=UNKNOWN_OFFSET, last_caught_up_time_ms=caught_up
        )
    return replica._replace(
        last_fetch_leader_log_end_offset=leader_end_offset,
        last_fetch_time_ms=now_ms if is_in_sync else 0,
        last_caught_up_time_ms=caught_up,
    )


def is_stale_broker_epoch(broker: BrokerRegistration | None, broker_epoch: int) -> bool:
    """A fetch from an older incarnation than the metadata's (``updateFetchStateOrThrow``)."""
    alive_epoch = None if broker is None or broker.fenced else broker.epoch
    return (
        broker_epoch != NO_BROKER_EPOCH and alive_epoch is not None and alive_epoch > broker_epoch
    )


def is_replica_isr_eligible(
    replica: ReplicaState | None, broker: BrokerRegistration | None
) -> bool:
    """Kafka ``Partition.isReplicaIsrEligible``: registered, unfenced, not shutting down, and
    fetching with the broker epoch the metadata shows (or -1, which skips the check)."""
    if replica is None or broker is None or broker.fenced or broker.in_controlled_shutdown:
        return False
    stored = replica.broker_epoch
    return stored is not None and (stored == NO_BROKER_EPOCH or stored == broker.epoch)


@attrs.frozen(kw_only=True)
class BrokerState:
    """One member of a proposed ISR with its broker epoch (AlterPartition v3, KIP-903)."""

    broker_id: int
    broker_epoch: int = NO_BROKER_EPOCH


@attrs.frozen(kw_only=True)
class PendingIsrChange:
    """An ISR change sent to the controller (``PendingExpandIsr`` / ``PendingShrinkIsr``)."""

    kind: IsrState
    leader_epoch: int
    # The partition epoch the change is based on (optimistic concurrency).
    partition_epoch: int
    new_isr: tuple[BrokerState, ...]
    # The replica being added (expand) or those being removed (shrink).
    changed: frozenset[int]

    @property
    def new_isr_ids(self) -> tuple[int, ...]:
        return tuple(member.broker_id for member in self.new_isr)


@attrs.frozen(kw_only=True)
class AlterPartitionResult:
    """The controller's answer for one partition (AlterPartitionResponse.PartitionData)."""

    error: Errors
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    message: str | None = None


class AlterPartitionOutcome(enum.Enum):
    COMMITTED = "committed"  # the new ISR and partition epoch are in force
    RESET = "reset"  # the controller did not apply it: back to the committed ISR
    WAIT_FOR_METADATA = "wait_for_metadata"  # stay pending until metadata overrides
    RETRY = "retry"  # send the same change again
    IGNORED = "ignored"  # the state moved on (or the answer is stale): nothing to do


# Kafka ``handleAlterPartitionError``: the controller says the change was not applied.
RESET_ERRORS = frozenset({Errors.OPERATION_NOT_ATTEMPTED, Errors.INELIGIBLE_REPLICA})
# Our view is out of date; only new metadata can tell what happened.
WAIT_ERRORS = frozenset(
    {
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.UNKNOWN_TOPIC_ID,
        Errors.FENCED_LEADER_EPOCH,
        Errors.INVALID_UPDATE_VERSION,
        Errors.INVALID_REQUEST,
        Errors.NEW_LEADER_ELECTED,
    }
)


def alter_partition_error_outcome(error: Errors) -> AlterPartitionOutcome:
    """Kafka ``Partition.handleAlterPartitionError``: what a failed AlterPartition means."""
    assert error is not Errors.NONE
    if error in RESET_ERRORS:
        return AlterPartitionOutcome.RESET
    if error in WAIT_ERRORS:
        return AlterPartitionOutcome.WAIT_FOR_METADATA
    return AlterPartitionOutcome.RETRY
