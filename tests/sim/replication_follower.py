"""One follower partition of the replication sim: Kafka's fetcher loop on the pure fetch core.

``PartitionFollower`` is what the asyncio ``fetcher.replica_fetcher.ReplicaFetcher`` does for one
partition, one request at a time, on simulated time: every decision comes from
``fetcher.state`` and ``fetcher.responses`` (``initial_fetch_state``, ``plan_truncation``,
``on_fetch_response``, ``on_epoch_end_offset``, ``on_leader_offsets``, ``on_request_failed``)
and every action is carried out on the broker's ``MemoryLog`` by the same ``fetcher.follower_log``
functions the real fetcher uses (``append_fetched``, ``after_truncation``, ``reset_offset``).
Requests go to the leader broker over the simulated network; an answer that does not come within
the request timeout counts as a failed request (back off, as after a lost connection).

A follower is replaced, never revived: the broker stops it and starts a new one when the leader
epoch moves (``ReplicaManager`` re-adds the partition to the fetcher with a fresh state).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from fetcher.follower_log import CarriedOut, carry_out, follower_view
from fetcher.responses import (
    Append,
    FetchOutcome,
    LeaderOffsets,
    MarkFailed,
    ResetOffset,
    ResolveOutOfRange,
    SendOffsetsForLeaderEpoch,
    Truncate,
    on_epoch_end_offset,
    on_fetch_response,
    on_leader_offsets,
    on_request_failed,
    plan_truncation,
)
from fetcher.state import FetchState, PartitionFetchState, fetch_partition, initial_fetch_state
from fetcher.truncation import LeaderEpochRequest, OffsetResetKind
from protocol.fetch import FetchPartition
from tests.sim.replication_checks import PartitionKey
from tests.sim.replication_leader import (
    EpochAnswer,
    FetchAnswer,
    LeaderRecords,
    answer_epoch_end_offset,
    answer_fetch,
    answer_leader_offsets,
)
from tests.sim.replication_log import MemoryLog

if TYPE_CHECKING:
    from tests.sim.replication_broker import SimBroker

T = TypeVar("T")


class PartitionFollower:
    def __init__(self, broker: SimBroker, key: PartitionKey, leader_id: int,
                 leader_epoch: int) -> None:
        self.broker = broker
        self.key = key
        self.leader_id = leader_id
        self.settings = broker.env.settings
        self.log: MemoryLog = broker.disk.log(key)
        self.state: PartitionFetchState | None = initial_fetch_state(
            None, leader_epoch, follower_view(self.log),
            truncate_on_fetch=self.settings.truncate_on_fetch)
        # Only the answer to the request of this number counts (older ones timed out).
        self._request = 0
        self._waiting = False
        broker.schedule(0, f"fetch {key}", self.do_work)

    def __repr__(self) -> str:
        return f"PartitionFollower({self.key}, leader {self.leader_id}, {self.state})"

    def stop(self) -> None:
        self.state = None

    # ------------------------------------------------------------------ the loop

    def do_work(self) -> None:
        """Kafka ``doWork`` for this partition: resume, maybe truncate, maybe fetch."""
        if self.state is None or self._waiting:
            return
        now_ms = self.broker.env.now_ms
        self.state = self.state.resume_if_due(now_ms)
        if self.state.state is FetchState.DELAYED:
            assert self.state.delay_deadline_ms is not None
            self.broker.schedule(self.state.delay_deadline_ms - now_ms, f"fetch {self.key}",
                                 self.do_work)
        elif self.state.is_truncating:
            self._truncate()
        else:
            self._fetch()

    def _next(self, delay_ms: int) -> None:
        self.broker.schedule(delay_ms, f"fetch {self.key}", self.do_work)

    def _send(self, what: str, handle: Callable[[SimBroker], T],
              on_answer: Callable[[int, T], None]) -> None:
        """Send one request to the leader; only its answer, if it comes in time, counts."""
        self._request += 1
        self._waiting = True
        number = self._request
        self.broker.call_broker(self.leader_id, f"{what} {self.key}", handle,
                                lambda answer: on_answer(number, answer))
        self.broker.schedule(self.settings.request_timeout_ms, f"{what} timeout {self.key}",
                             lambda: self._timed_out(number))

    def _answered(self, number: int) -> bool:
        if self.state is None or number != self._request or not self._waiting:
            return False
        self._waiting = False
        return True

    def _timed_out(self, number: int) -> None:
        if not self._answered(number):
            return
        assert self.state is not None
        outcome = on_request_failed(self.state, self.broker.env.now_ms,
                                    fetch_backoff_ms=self.settings.replica_fetch_backoff_ms)
        self._apply(outcome, None)

    # ------------------------------------------------------------------ truncation phase

    def _truncate(self) -> None:
        assert self.state is not None
        outcome = plan_truncation(self.state, follower_view(self.log),
                                  truncate_on_fetch=self.settings.truncate_on_fetch)
        if not isinstance(outcome.action, SendOffsetsForLeaderEpoch):
            self._apply(outcome, None)
            return
        request = outcome.action.request
        key = self.key
        self.broker.env.checker.stats["OffsetsForLeaderEpoch requests"] += 1
        self._send("OffsetsForLeaderEpoch",
                   lambda leader: answer_epoch_end_offset(leader, key, request),
                   lambda number, answer: self._on_epoch_answer(number, request, answer))

    def _on_epoch_answer(self, number: int, request: LeaderEpochRequest,
                         answer: EpochAnswer) -> None:
        if not self._answered(number):
            return
        assert self.state is not None
        outcome = on_epoch_end_offset(
            self.state, request, answer.data, follower_view(self.log), self.broker.env.now_ms,
            fetch_backoff_ms=self.settings.replica_fetch_backoff_ms,
            truncate_on_fetch=self.settings.truncate_on_fetch)
        self._apply(outcome, answer.leader_records)

    # ------------------------------------------------------------------ fetch phase

    def _fetch(self) -> None:
        assert self.state is not None
        rng = self.broker.env.rng
        max_bytes = rng.choice((1, 200, 400, 1 << 20))
        request = fetch_partition(self.state, self.key[1], self.log.log_start_offset, max_bytes,
                                  truncate_on_fetch=self.settings.truncate_on_fetch)
        replica_id, replica_epoch, key = self.broker.broker_id, self.broker.broker_epoch, self.key
        self._send("Fetch",
                   lambda leader: answer_fetch(leader, replica_id, replica_epoch, key, request),
                   lambda number, answer: self._on_fetch_answer(number, request, answer))

    def _on_fetch_answer(self, number: int, request: FetchPartition, answer: FetchAnswer) -> None:
        if not self._answered(number):
            return
        assert self.state is not None
        now_ms = self.broker.env.now_ms
        state = self.state
        if (state.current_leader_epoch != request.current_leader_epoch
                or state.fetch_offset != request.fetch_offset):
            self._next(0)  # ReplicaFetcher._unchanged: the answer no longer fits
            return
        outcome = on_fetch_response(state, request, answer.data, follower_view(self.log), now_ms,
                                    fetch_backoff_ms=self.settings.replica_fetch_backoff_ms,
                                    truncate_on_fetch=self.settings.truncate_on_fetch)
        if isinstance(outcome.action, ResolveOutOfRange):
            self._resolve_out_of_range(outcome.action.current_leader_epoch)
            return
        if isinstance(outcome.action, Truncate):
            self.broker.env.checker.stats["diverging epochs answered"] += 1
        self._apply(outcome, answer.leader_records)

    def _resolve_out_of_range(self, epoch: int) -> None:
        key = self.key
        self._send("ListOffsets", lambda leader: answer_leader_offsets(leader, key, epoch),
                   lambda number, answer: self._on_leader_offsets(number, epoch, answer))

    def _on_leader_offsets(self, number: int, epoch: int, answer: LeaderOffsets) -> None:
        if not self._answered(number):
            return
        assert self.state is not None
        if self.state.current_leader_epoch != epoch:
            self._next(0)
            return
        outcome = on_leader_offsets(self.state, epoch, answer, follower_view(self.log),
                                    self.broker.env.now_ms,
                                    fetch_backoff_ms=self.settings.replica_fetch_backoff_ms)
        self._apply(outcome, None)

    # ------------------------------------------------------------------ actions

    def _apply(self, outcome: FetchOutcome, leader_records: LeaderRecords | None) -> None:
        """``ReplicaFetcher._apply``: the shipped ``carry_out`` on the log, the checker's
        hooks around it, then go on."""
        action = outcome.action
        checker = self.broker.env.checker
        if isinstance(action, MarkFailed):
            self.state = None  # Kafka markPartitionFailed: wait for new metadata
            return
        if isinstance(action, Truncate):
            checker.on_truncation(self.key, self.broker.broker_id, action.truncation.offset,
                                  self.log)
        elif isinstance(action, ResetOffset):
            if action.reset.kind is OffsetResetKind.TRUNCATE_TO_LEADER_END:
                checker.on_truncation(self.key, self.broker.broker_id,
                                      action.reset.fetch_offset, self.log)
            checker.stats[f"out-of-range resets ({action.reset.kind.value})"] += 1
        batches_before = len(self.log.batches)
        carried = carry_out(self.log, outcome)
        self.state = carried.state
        if isinstance(action, Append):
            checker.on_follower_append(self.key, self.broker.broker_id,
                                       self.log.batches[batches_before:])
        elif (isinstance(action, Truncate) and action.truncation.truncation_completed
              and leader_records is not None):
            checker.on_truncation_complete(self.key, self.broker.broker_id, self.log,
                                           leader_records)
        self._next(self._delay_after(carried))

    def _delay_after(self, carried: CarriedOut) -> int:
        """How long to wait before fetching again: after an empty answer, as long as the
        leader would have held the fetch."""
        if carried.appended is None or carried.appended.last_offset is not None:
            return 0
        return self.broker.env.rng.randint(0, self.settings.replica_fetch_wait_max_ms)
