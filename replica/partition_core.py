"""One hosted partition's decisions as a synchronous, clock-free core (Kafka's ``Partition``
without its log).

Theory of operation
-------------------
``PartitionCore`` holds one ``PartitionState``. Each input — new metadata (``make_leader``,
``make_follower``, ``stop``), a follower's fetch (``on_follower_fetch``), the ISR-expiration tick
(``maybe_shrink_isr``), the controller's AlterPartition answer (``on_alter_partition_result``),
an append (``maybe_increment_high_watermark``) — comes with a ``LogView``: the log's offsets,
the metadata facts and ``now_ms`` (monotonic; only differences matter) sampled by the shell. The
core answers with a ``replica.ready.Ready`` and changes nothing until the shell, having
persisted what the Ready asks, calls ``advance(ready)``. So a failed epoch-file write leaves the
core as it was, and every role and ISR transition is checked (``check_transition``) before
anything is written. The role and ISR transitions themselves are listed in
``replica.partition_state`` and ``replica.isr``.

Expected failures (a stale broker epoch, a fenced or unknown leader epoch, not the leader, too
small an ISR for acks=all) are ``PartitionError`` values carrying Kafka's error code.
"""

from __future__ import annotations

from typing import NamedTuple

from pykraft.protocol.errors import Errors
from pykraft.replica.isr import (
    LEGAL_ISR_TRANSITIONS,
    NO_BROKER_EPOCH,
    AlterPartitionOutcome,
    AlterPartitionResult,
    PendingIsrChange,
    is_stale_broker_epoch,
    update_fetch_state,
)
from pykraft.replica.partition_state import (
    LEGAL_TRANSITIONS,
    NO_PARTITION_LEADER_EPOCH,
    BrokerLookup,
    LeaderAndIsr,
    PartitionError,
    PartitionRole,
    PartitionState,
    check_current_leader_epoch,
    effective_min_isr,
    follower_state,
    handle_alter_partition_result,
    high_watermark_candidate,
    is_stale,
    leader_state,
    needs_expand_isr,
    out_of_sync_replicas,
    prepare_isr_expand,
    prepare_isr_shrink,
    with_follower,
)
from pykraft.replica.ready import Ready
from pykraft.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    Entries,
    OffsetAndEpoch,
    end_offset_for,
)
from pykraft.storage.topic_partition import TopicPartition

# Kafka's replica.lag.time.max.ms default.
REPLICA_LAG_TIME_MAX_MS = 30_000


def _no_broker(broker_id: int) -> None:
    return None


class LogView(NamedTuple):
    """What the core reads of the world at one input, sampled by the shell just before (an
    immutable NamedTuple: one is built for every append and follower fetch)."""

    log_end_offset: int
    high_watermark: int
    # Monotonic milliseconds (follower progress and lag: only differences matter).
    now_ms: int
    # The topic's min.insync.replicas now (configs change).
    min_insync_replicas: int = 1
    # A broker's registration in the current metadata image (None = unknown).
    brokers: BrokerLookup = _no_broker
    # This broker's epoch, sent with its own entry of a proposed ISR (KIP-903).
    local_broker_epoch: int = NO_BROKER_EPOCH


def check_transition(
    topic_partition: TopicPartition, old: PartitionState, new: PartitionState
) -> None:
    """The role and ISR transitions ``partition_state`` and ``isr`` list; a bug otherwise."""
    if (
        new.role is old.role is not PartitionRole.NONE
        and new.pending_isr_change is old.pending_isr_change
    ):
        return  # a follower's progress moved: leader -> leader, the ISR state kept (both legal)
    if new.role not in LEGAL_TRANSITIONS[old.role]:
        raise AssertionError(
            f"{topic_partition}: illegal transition {old.role.name} -> {new.role.name}"
        )
    if new.isr_state not in LEGAL_ISR_TRANSITIONS[old.isr_state]:
        raise AssertionError(
            f"{topic_partition}: illegal ISR transition {old.isr_state.name} -> "
            f"{new.isr_state.name}"
        )


class PartitionCore:
    def __init__(
        self,
        topic_partition: TopicPartition,
        local_broker_id: int,
        replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS,
    ) -> None:
        assert replica_lag_time_max_ms > 0
        self.topic_partition = topic_partition
        self.local_broker_id = local_broker_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.state = PartitionState()

    # ------------------------------------------------------------------ the one state change

    def _ready(
        self,
        new_state: PartitionState,
        view: LogView | None = None,
        *,
        epoch_start: OffsetAndEpoch | None = None,
        partition_changed: bool = False,
        alter_partition: PendingIsrChange | None = None,
    ) -> Ready:
        """A Ready from the current state to ``new_state``, transitions checked, with the high
        watermark ``new_state`` allows when ``view`` is given. The same state is no transition."""
        base = self.state
        if new_state is not base:
            check_transition(self.topic_partition, base, new_state)
        high_watermark = None if view is None else self._high_watermark_move(new_state, view)
        # Positional, in Ready's field order (every append and follower fetch builds one).
        return Ready(
            base, new_state, epoch_start, high_watermark, partition_changed, alter_partition
        )

    def advance(self, ready: Ready) -> None:
        """The shell persisted what ``ready`` asked: its state is now the core's."""
        assert ready.base is self.state, f"{self.topic_partition}: a Ready built on another state"
        self.state = ready.state

    # ------------------------------------------------------------------ metadata

    def make_leader(self, change: LeaderAndIsr, view: LogView) -> Ready | None:
        """Become (or stay) leader (Kafka ``makeLeader``); None for a stale partition epoch.

        A new leader epoch starts at the log end and must be persisted first.
        """
        assert change.leader == self.local_broker_id, "make_leader names another leader"
        if is_stale(self.state, change):
            return None
        new_epoch = change.leader_epoch > self.state.leader_epoch
        epoch_start = OffsetAndEpoch(view.log_end_offset, change.leader_epoch)
        new_state = leader_state(self.state, change, view.log_end_offset, view.now_ms)
        return self._ready(
            new_state,
            view,
            epoch_start=epoch_start if new_epoch else None,
            partition_changed=new_epoch,
        )

    def make_follower(self, change: LeaderAndIsr) -> Ready | None:
        """Follow ``change.leader``; None for a stale partition epoch. ``partition_changed``
        when the leader epoch moved: the fetcher restarts and waiters answer."""
        assert change.leader != self.local_broker_id, "make_follower names this broker leader"
        if is_stale(self.state, change):
            return None
        new_epoch = change.leader_epoch > self.state.leader_epoch
        return self._ready(follower_state(self.state, change), partition_changed=new_epoch)

    def stop(self) -> Ready:
        """Stop serving (deleted, moved away, or its log dir failed); epochs are kept."""
        if self.state.role is PartitionRole.NONE:
            return self._ready(self.state)
        stopped = PartitionState(
            partition_epoch=self.state.partition_epoch, leader_epoch=self.state.leader_epoch
        )
        return self._ready(stopped, partition_changed=True)

    # ------------------------------------------------------------------ high watermark

    def _high_watermark_move(self, state: PartitionState, view: LogView) -> int | None:
        candidate = high_watermark_candidate(
            state,
            log_end_offset=view.log_end_offset,
            now_ms=view.now_ms,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            min_insync_replicas=view.min_insync_replicas,
            brokers=view.brokers,
        )
        return candidate if candidate is not None and candidate > view.high_watermark else None

    def maybe_increment_high_watermark(self, view: LogView) -> Ready:
        """After an append (or any log-end move): the high watermark the ISR now allows."""
        return self._ready(self.state, view)

    # ------------------------------------------------------------------ followers and ISR

    def on_follower_fetch(
        self,
        replica_id: int,
        *,
        fetch_offset: int,
        log_start_offset: int,
        leader_end_offset: int,
        broker_epoch: int,
        view: LogView,
    ) -> Ready:
        """Kafka ``updateFollowerFetchState``: progress, maybe an ISR expansion, maybe the high
        watermark. A fetch from an older broker incarnation is NOT_LEADER_OR_FOLLOWER."""
        broker = view.brokers(replica_id)
        if is_stale_broker_epoch(broker, broker_epoch):
            raise PartitionError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"{self.topic_partition}: stale fetch from broker {replica_id} with broker "
                f"epoch {broker_epoch}",
            )
        previous = self.state.followers[replica_id]
        updated = update_fetch_state(
            previous,
            fetch_offset=fetch_offset,
            log_start_offset=log_start_offset,
            fetch_time_ms=view.now_ms,
            leader_end_offset=leader_end_offset,
            broker_epoch=broker_epoch,
        )
        state = with_follower(self.state, replica_id, updated)
        proposal = None
        if needs_expand_isr(state, replica_id, view.high_watermark, broker):
            state = prepare_isr_expand(state, replica_id, view.local_broker_epoch)
            proposal = state.pending_isr_change
        moved = updated.log_end_offset != previous.log_end_offset
        return self._ready(state, view if moved else None, alter_partition=proposal)

    def maybe_shrink_isr(self, view: LogView) -> Ready:
        """Kafka ``maybeShrinkIsr``: propose dropping ISR followers that stayed behind."""
        out_of_sync = out_of_sync_replicas(
            self.state, view.log_end_offset, view.now_ms, self.replica_lag_time_max_ms
        )
        if not out_of_sync:
            return self._ready(self.state)
        state = prepare_isr_shrink(self.state, out_of_sync, view.local_broker_epoch)
        return self._ready(state, alter_partition=state.pending_isr_change)

    def on_alter_partition_result(
        self, sent: PendingIsrChange, result: AlterPartitionResult, view: LogView
    ) -> tuple[Ready, AlterPartitionOutcome]:
        """The controller's answer to ``sent``: committed, reset, retried (sent again) or
        nothing until metadata says more."""
        new_state, outcome = handle_alter_partition_result(self.state, sent, result)
        if outcome is AlterPartitionOutcome.RETRY:
            return self._ready(self.state, alter_partition=sent), outcome
        if outcome is AlterPartitionOutcome.COMMITTED:
            return self._ready(new_state, view), outcome
        return self._ready(new_state), outcome

    # ------------------------------------------------------------------ checks

    def leader_epoch_error(
        self, current_leader_epoch: int, *, require_leader: bool
    ) -> PartitionError | None:
        """KIP-320's epoch check, then (when asked) that this broker leads."""
        error = check_current_leader_epoch(self.state.leader_epoch, current_leader_epoch)
        if error is not Errors.NONE:
            return PartitionError(
                error,
                f"{self.topic_partition}: request leader epoch {current_leader_epoch}, "
                f"broker {self.local_broker_id} has {self.state.leader_epoch}",
            )
        if require_leader and self.state.role is not PartitionRole.LEADER:
            return PartitionError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} is not the leader of {self.topic_partition} "
                f"(leader {self.state.leader_id}, epoch {self.state.leader_epoch})",
            )
        return None

    def fetch_error(self, replica_id: int, current_leader_epoch: int) -> PartitionError | None:
        """Kafka ``fetchRecords``' checks: the leader epoch, leadership, and for a follower
        that it is a replica (``followerReplicaOrThrow``: with an epoch the pair may just not be
        known yet, a reassignment, so the follower retries on UNKNOWN_LEADER_EPOCH)."""
        state = self.state
        if (
            state.role is PartitionRole.LEADER
            and current_leader_epoch in (NO_PARTITION_LEADER_EPOCH, state.leader_epoch)
            and (replica_id < 0 or replica_id in state.followers)
        ):
            return None  # every check passes (each fetch of every partition asks)
        error = self.leader_epoch_error(current_leader_epoch, require_leader=True)
        if error is not None or replica_id < 0 or replica_id in self.state.followers:
            return error
        code = (
            Errors.NOT_LEADER_OR_FOLLOWER
            if current_leader_epoch == NO_PARTITION_LEADER_EPOCH
            else Errors.UNKNOWN_LEADER_EPOCH
        )
        return PartitionError(
            code,
            f"broker {replica_id} is not a replica of {self.topic_partition} in leader "
            f"epoch {self.state.leader_epoch} (replicas {list(self.state.replicas)})",
        )

    def append_error(self, required_acks: int, min_insync_replicas: int) -> PartitionError | None:
        """Kafka ``appendRecordsToLeader``'s checks before the log is touched (no leader epoch
        to check: only that this broker leads, then acks=all's min ISR)."""
        state = self.state
        if state.role is not PartitionRole.LEADER:
            return self.leader_epoch_error(NO_PARTITION_LEADER_EPOCH, require_leader=True)
        if required_acks != -1:
            return None
        min_isr = effective_min_isr(state, min_insync_replicas)
        if len(state.isr) < min_isr:
            return PartitionError(
                Errors.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {list(state.isr)} is insufficient to satisfy "
                f"the min.isr requirement of {min_isr} for partition {self.topic_partition}",
            )
        return None


def diverging_epoch(
    topic_partition: TopicPartition,
    entries: Entries,
    *,
    last_fetched_epoch: int,
    fetch_offset: int,
    log_start_offset: int,
    log_end_offset: int,
) -> OffsetAndEpoch | None:
    """Kafka ``Partition.readRecords``' last-fetched-epoch check (KIP-320): where the
    follower's log diverges from this leader's epoch history, or None to read on."""
    if last_fetched_epoch < 0:
        return None
    end = end_offset_for(entries, last_fetched_epoch, log_end_offset)
    if end.offset == UNDEFINED_EPOCH_OFFSET or end.leader_epoch == UNDEFINED_EPOCH:
        raise PartitionError(
            Errors.OFFSET_OUT_OF_RANGE,
            f"{topic_partition}: could not determine the end offset of the last "
            f"fetched epoch {last_fetched_epoch}",
        )
    if fetch_offset < log_start_offset:
        raise PartitionError(
            Errors.OFFSET_OUT_OF_RANGE,
            f"{topic_partition}: fetch offset {fetch_offset} is below the log start "
            f"offset {log_start_offset}",
        )
    if end.leader_epoch < last_fetched_epoch or end.offset < fetch_offset:
        return end
    return None
