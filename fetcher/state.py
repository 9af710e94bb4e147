"""Per-partition fetch state: the follower's state machine for one replicated partition.

Theory of operation
-------------------
A follower's replica fetcher keeps one ``PartitionFetchState`` per partition it replicates
(Kafka's ``PartitionFetchState``): the next ``fetch_offset``, the ``current_leader_epoch`` it
fetches under, the ``last_fetched_epoch`` it sends for the KIP-320 divergence check, its lag,
and a ``FetchState``:

* ``TRUNCATING``: the log may have diverged and must be reconciled before fetching. Becomes
  FETCHING when a truncation completes; stays TRUNCATING after an intermediate (KIP-279)
  truncation on the OffsetsForLeaderEpoch path; becomes DELAYED on a retriable error.
* ``FETCHING``: fetch from ``fetch_offset``. Stays FETCHING on appends, DivergingEpoch
  truncations and out-of-range resets; becomes DELAYED on a retriable error. It never goes
  back to TRUNCATING: a leader change re-adds the partition with a fresh state
  (``initial_fetch_state``).
* ``DELAYED``: backing off after an error until ``delay_deadline_ms``; then returns to the state
  it was delayed from (``resume_if_due``) and nothing else.

Every change goes through ``PartitionFetchState.transition``, which rejects any other move.
What each leader answer makes the follower do, and so which transition it takes, is decided by
the ``on_*`` functions in ``fetcher.responses``.
"""

from __future__ import annotations

import enum

import attrs

from pykraft.fetcher.truncation import FollowerLog
from pykraft.protocol.fetch import FetchPartition

# FetchRequest's "no epoch" value (RecordBatch.NO_PARTITION_LEADER_EPOCH).
NO_EPOCH = -1


class _Keep(enum.Enum):
    """``transition``'s "leave this field as it is", for fields where None is a value."""

    KEEP = "keep"


_KEEP = _Keep.KEEP


class FetchState(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    DELAYED = "delayed"


_LEGAL_TRANSITIONS: dict[FetchState, frozenset[FetchState]] = {
    FetchState.TRUNCATING: frozenset(FetchState),
    FetchState.FETCHING: frozenset({FetchState.FETCHING, FetchState.DELAYED}),
    FetchState.DELAYED: frozenset({FetchState.TRUNCATING, FetchState.FETCHING}),
}


class IllegalFetchStateTransition(RuntimeError):
    """A bug: the fetcher tried a state change the state machine does not allow."""

    def __init__(self, source: FetchState, target: FetchState, detail: str = "") -> None:
        suffix = f": {detail}" if detail else ""
        super().__init__(f"illegal fetch state transition {source.name} -> {target.name}{suffix}")
        self.source = source
        self.target = target


@attrs.frozen
class PartitionFetchState:
    fetch_offset: int
    current_leader_epoch: int
    state: FetchState
    last_fetched_epoch: int | None = None
    lag: int | None = None
    # Invariant: delay_deadline_ms and resume_state are set exactly when state is DELAYED, and
    # resume_state is TRUNCATING or FETCHING.
    delay_deadline_ms: int | None = None
    resume_state: FetchState | None = None

    def __attrs_post_init__(self) -> None:
        delayed = self.state is FetchState.DELAYED
        has_delay = self.delay_deadline_ms is not None and self.resume_state is not None
        assert delayed == has_delay, f"delay fields must be set iff DELAYED: {self}"
        assert self.resume_state is not FetchState.DELAYED, f"cannot resume to DELAYED: {self}"
        assert self.fetch_offset >= 0, f"negative fetch offset: {self}"

    @property
    def is_ready_for_fetch(self) -> bool:
        return self.state is FetchState.FETCHING

    @property
    def is_truncating(self) -> bool:
        return self.state is FetchState.TRUNCATING

    def transition(
        self,
        target: FetchState,
        *,
        fetch_offset: int | None = None,
        last_fetched_epoch: int | _Keep | None = _KEEP,
        lag: int | _Keep | None = _KEEP,
        delay_deadline_ms: int | None = None,
    ) -> PartitionFetchState:
        """The one place a fetch state changes; raises on a move the machine does not allow.

        Fields not given keep their values. Entering DELAYED needs ``delay_deadline_ms``;
        leaving it must return to the state the partition was delayed from. (Built directly,
        not with ``attrs.evolve``: this runs for every partition of every fetch round, and
        evolve's field introspection took 2 us of it, issue 18.)
        """
        source = self.state
        if target not in _LEGAL_TRANSITIONS[source]:
            raise IllegalFetchStateTransition(source, target)
        if source is FetchState.DELAYED and target is not self.resume_state:
            detail = f"was delayed from {self.resume_state}"
            raise IllegalFetchStateTransition(source, target, detail)
        delayed = target is FetchState.DELAYED
        if isinstance(last_fetched_epoch, _Keep):
            last_fetched_epoch = self.last_fetched_epoch
        if isinstance(lag, _Keep):
            lag = self.lag
        return PartitionFetchState(
            self.fetch_offset if fetch_offset is None else fetch_offset,
            self.current_leader_epoch,
            target,
            last_fetched_epoch,
            lag,
            delay_deadline_ms if delayed else None,
            source if delayed else None,
        )

    def delay(self, now_ms: int, backoff_ms: int) -> PartitionFetchState:
        """Back off until ``now_ms + backoff_ms``; an already delayed partition keeps its
        deadline (Kafka ``delayPartitions``)."""
        if self.state is FetchState.DELAYED:
            return self
        return self.transition(FetchState.DELAYED, delay_deadline_ms=now_ms + backoff_ms)

    def resume_if_due(self, now_ms: int) -> PartitionFetchState:
        if self.delay_deadline_ms is None or now_ms < self.delay_deadline_ms:
            return self
        assert self.resume_state is not None
        return self.transition(self.resume_state)


# ------------------------------------------------------------------------- starting to fetch


def initial_fetch_state(
    current: PartitionFetchState | None,
    current_leader_epoch: int,
    follower: FollowerLog,
    *,
    truncate_on_fetch: bool = True,
) -> PartitionFetchState:
    """The state for a partition (re)added under ``current_leader_epoch``.

    Kafka's ``ReplicaManager.initialFetchOffset`` and ``AbstractFetcherThread
    .partitionFetchState``: an unchanged leader epoch keeps the current state (no needless
    truncation). With DivergingEpoch support and an epoch history, fetch from the log end at
    once (the leader will report any divergence); otherwise start TRUNCATING from the high
    watermark.
    """
    if current is not None and current.current_leader_epoch == current_leader_epoch:
        return current
    latest = follower.latest_epoch
    if truncate_on_fetch and latest is not None:
        return PartitionFetchState(
            follower.log_end_offset, current_leader_epoch, FetchState.FETCHING, latest
        )
    return PartitionFetchState(follower.high_watermark, current_leader_epoch, FetchState.TRUNCATING)


def fetch_partition(
    state: PartitionFetchState,
    partition: int,
    log_start_offset: int,
    partition_max_bytes: int,
    *,
    truncate_on_fetch: bool = True,
) -> FetchPartition:
    """The Fetch request entry for a FETCHING partition (Kafka ``buildFetch``)."""
    assert state.is_ready_for_fetch, f"only a FETCHING partition is fetched: {state}"
    last_fetched_epoch = NO_EPOCH
    if truncate_on_fetch and state.last_fetched_epoch is not None:
        last_fetched_epoch = state.last_fetched_epoch
    return FetchPartition(
        partition=partition,
        fetch_offset=state.fetch_offset,
        partition_max_bytes=partition_max_bytes,
        current_leader_epoch=state.current_leader_epoch,
        last_fetched_epoch=last_fetched_epoch,
        log_start_offset=log_start_offset,
    )
