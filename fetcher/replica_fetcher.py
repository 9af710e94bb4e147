"""ReplicaFetcher: one asyncio task replicating a set of partitions from one leader.

Theory of operation
-------------------
The asyncio shell of Kafka's ``AbstractFetcherThread`` / ``ReplicaFetcherThread``. Each
partition it replicates has a ``PartitionFetchState`` (``fetcher.state``: TRUNCATING, FETCHING,
DELAYED); every decision comes from ``fetcher.responses``; this module only talks to the leader
(a ``LeaderEndpoint``) and carries the decided actions out on the local log (a ``ReplicaLog``).

One round (``do_work``, Kafka's ``doWork``):

1. partitions whose back-off is over resume (``resume_if_due``);
2. the leader's versions are learnt (the endpoint connects when needed). Fetch v12+ means
   DivergingEpoch truncation (KIP-320); without it every partition restarts on the
   OffsetsForLeaderEpoch path (KIP-101/279);
3. ``maybe_truncate``: TRUNCATING partitions with an epoch history ask OffsetsForLeaderEpoch in
   one request; those without one truncate to their high watermark at once;
4. ``maybe_fetch``: one Fetch for every FETCHING partition; each answer is an append (then the
   follower high watermark and log start offset follow the leader's), a truncation (a
   DivergingEpoch), an out-of-range reset (ListOffsets to the leader), a back-off, or a failure.

Failures stay small: a request that fails as a whole backs off only the partitions it carried;
an error applying one partition's answer (corrupt data backs off; a storage or unexpected error
marks it failed and removes it) never stops the others or the fetcher. Every await can change
the partition set (the broker removes and re-adds partitions on the same event loop), so each
answer is matched against the partition's current state after the await and stale answers are
dropped — the same checks Kafka makes under its partition-map lock.

``run`` repeats rounds until ``shutdown``; with nothing ready it waits for the earliest back-off
to end or for a partition to be added. The leader's ``replica.fetch.wait.max.ms`` long poll paces
rounds that find no new data. ``shutdown`` raises a stop flag, wakes the task and cancels it: the
cancellation ends an in-flight request at once, and the flag, checked before every round,
between its requests and before every wait, ends the loop even when a cancellation is lost on
the way (Python 3.11's ``asyncio.wait_for`` can swallow one that races a completion, CPython
gh-86296) — Kafka's ``ShutdownableThread.initiateShutdown`` / ``isRunning`` pair. In a broker the
lost cancellation came from the leader endpoint's request timeouts: the leader answering a Fetch
and the retiring fetcher's cancel follow the same leadership change, so they often land in the
same loop turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from pykraft.fetcher.fetcher_config import FetcherConfig, PartitionStart
from pykraft.fetcher.follower_log import (
    LogLookup,
    carry_out,
    follower_view,
    local_error_kind,
)
from pykraft.fetcher.leader_endpoint import (
    FetchTarget,
    LeaderEndpoint,
    LeaderEndpointError,
    ReplicaFetch,
)
from pykraft.fetcher.replication_quota import ReplicationQuota
from pykraft.fetcher.responses import (
    Append,
    FailureReason,
    FetchOutcome,
    MarkFailed,
    ResolveOutOfRange,
    SendOffsetsForLeaderEpoch,
    on_epoch_end_offset,
    on_fetch_response,
    on_leader_offsets,
    on_local_error,
    on_request_failed,
    plan_truncation,
)
from pykraft.fetcher.state import (
    FetchState,
    PartitionFetchState,
    fetch_partition,
    initial_fetch_state,
)
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import PartitionData
from pykraft.protocol.segments import segment_length
from pykraft.storage import hop_trace
from pykraft.storage.clock import Clock
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


FailureListener = Callable[[TopicPartition, FailureReason], None]
# Told the size of the records each successful follower append wrote (Kafka's
# ReplicaFetcherThread.processPartitionData: brokerTopicStats.updateReplicationBytesIn).
BytesInListener = Callable[[int], None]


class ReplicaFetcher:
    def __init__(
        self,
        fetcher_id: int,
        endpoint: LeaderEndpoint,
        log_for: LogLookup,
        config: FetcherConfig,
        *,
        clock: Clock,
        on_partition_failed: FailureListener | None = None,
        quota: ReplicationQuota | None = None,
        on_replication_bytes_in: BytesInListener | None = None,
    ) -> None:
        self.fetcher_id = fetcher_id
        self._on_replication_bytes_in = on_replication_bytes_in
        # The broker's follower replication throttle (KIP-73); None: never throttled.
        self.quota = quota
        self.endpoint = endpoint
        self.config = config
        self._log_for = log_for
        self._on_partition_failed = on_partition_failed
        self._clock = clock  # monotonic time for backoffs; its wait idles the fetcher
        # Invariant: _starts and _states have the same keys.
        self._starts: dict[TopicPartition, PartitionStart] = {}
        self._states: dict[TopicPartition, PartitionFetchState] = {}
        # DivergingEpoch support assumed until the leader says otherwise (all pykraft brokers
        # serve Fetch v12+); a change restarts every partition's state.
        self._truncate_on_fetch = True
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Set once by ``shutdown``; ``run`` returns at its next check.
        self._stopping = False

    def __repr__(self) -> str:
        return f"ReplicaFetcher-{self.fetcher_id}-{self.endpoint.leader_id}"

    @property
    def leader_id(self) -> int:
        return self.endpoint.leader_id

    @property
    def partition_states(self) -> Mapping[TopicPartition, PartitionFetchState]:
        return self._states

    @property
    def partition_count(self) -> int:
        return len(self._states)

    # ------------------------------------------------------------------ partitions

    def add_partitions(self, starts: Mapping[TopicPartition, PartitionStart]) -> None:
        """Start (or keep, when the leader epoch is unchanged) fetching ``starts``."""
        for topic_partition, start in starts.items():
            log = self._log_for(topic_partition)
            if log is None:
                logger.error("%s: no local log for %s", self, topic_partition)
                self._fail_partition(topic_partition, FailureReason.UNEXPECTED_ERROR)
                continue
            state = initial_fetch_state(
                self._states.get(topic_partition),
                start.current_leader_epoch,
                follower_view(log),
                truncate_on_fetch=self._truncate_on_fetch,
            )
            self._starts[topic_partition] = start
            self._states[topic_partition] = state
        self._wakeup.set()

    def adopt_partitions(
        self, taken: Mapping[TopicPartition, tuple[PartitionStart, PartitionFetchState]]
    ) -> None:
        """Take over partitions, states and all, from a fetcher being replaced."""
        for topic_partition, (start, state) in taken.items():
            self._starts[topic_partition] = start
            self._states[topic_partition] = state
        self._wakeup.set()

    def remove_partitions(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, tuple[PartitionStart, PartitionFetchState]]:
        """Stop fetching ``partitions``; returns what they were, for ``adopt_partitions``."""
        removed = {}
        for topic_partition in partitions:
            state = self._states.pop(topic_partition, None)
            start = self._starts.pop(topic_partition, None)
            if state is not None and start is not None:
                removed[topic_partition] = (start, state)
        return removed

    # ------------------------------------------------------------------ task

    def start(self) -> None:
        assert self._task is None, f"{self} started twice"
        self._task = asyncio.get_running_loop().create_task(self.run(), name=repr(self))

    async def shutdown(self) -> None:
        """Stop the task (an in-flight request is abandoned) and close the connection."""
        self._stopping = True
        self._wakeup.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.endpoint.close()

    async def run(self) -> None:
        while not self._stopping:
            self._wakeup.clear()
            try:
                await self.do_work()
            except Exception:
                # A bug in one round must not stop replication: log it, back everything off.
                logger.exception("%s: round failed", self)
                self._back_off(list(self._states))
            if not self._stopping and not self._has_ready_partition():
                await self._clock.wait(self._wakeup, self._idle_timeout_ms())

    def _has_ready_partition(self) -> bool:
        return any(state.state is not FetchState.DELAYED for state in self._states.values())

    def _idle_timeout_ms(self) -> int | None:
        deadlines = [s.delay_deadline_ms for s in self._states.values() if s.delay_deadline_ms]
        return min(deadlines) - self._clock.monotonic_ms() if deadlines else None

    # ------------------------------------------------------------------ one round

    async def do_work(self) -> None:
        """One round: resume, learn the leader's versions, maybe truncate, maybe fetch."""
        now_ms = self._clock.monotonic_ms()
        delayed = [(tp, s) for tp, s in self._states.items() if s.state is FetchState.DELAYED]
        for topic_partition, state in delayed:
            self._states[topic_partition] = state.resume_if_due(now_ms)
        if not self._has_ready_partition():
            return
        try:
            features = await self.endpoint.features()
        except LeaderEndpointError as error:
            logger.info("%s: %s", self, error)
            self._back_off(list(self._states))
            return
        # After each request: a shutdown whose cancellation the request lost (it completed in
        # the same loop turn) ends the round here, not one long poll later.
        if self._stopping:
            return
        if features.truncation_on_fetch_supported != self._truncate_on_fetch:
            self._restart_all(features.truncation_on_fetch_supported)
        await self.maybe_truncate(features.offsets_for_leader_epoch_supported)
        if not self._stopping:
            await self.maybe_fetch()

    def _restart_all(self, truncate_on_fetch: bool) -> None:
        logger.info("%s: leader DivergingEpoch support is now %s", self, truncate_on_fetch)
        self._truncate_on_fetch = truncate_on_fetch
        self._states.clear()
        starts, self._starts = self._starts, {}
        self.add_partitions(starts)

    async def maybe_truncate(self, offsets_for_leader_epoch_supported: bool) -> None:
        """Kafka ``maybeTruncate``: truncate or ask OffsetsForLeaderEpoch for TRUNCATING ones."""
        requests: dict[TopicPartition, LeaderEpochRequest] = {}
        truncating = [(tp, s) for tp, s in self._states.items() if s.is_truncating]
        for topic_partition, state in truncating:
            log = self._log_for(topic_partition)
            if log is None:
                continue
            outcome = plan_truncation(
                state,
                follower_view(log),
                truncate_on_fetch=self._truncate_on_fetch,
                offsets_for_leader_epoch_supported=offsets_for_leader_epoch_supported,
            )
            if isinstance(outcome.action, SendOffsetsForLeaderEpoch):
                requests[topic_partition] = outcome.action.request
            else:
                self._apply(topic_partition, outcome)
        if not requests:
            return
        try:
            answers = await self.endpoint.fetch_epoch_end_offsets(requests)
        except LeaderEndpointError as error:
            logger.info("%s: OffsetsForLeaderEpoch failed: %s", self, error)
            self._back_off(list(requests))
            return
        for topic_partition, request in requests.items():
            self._on_epoch_end_offset(topic_partition, request, answers.get(topic_partition))

    def _on_epoch_end_offset(
        self,
        topic_partition: TopicPartition,
        request: LeaderEpochRequest,
        answer: LeaderEpochEndOffset | None,
    ) -> None:
        state, log = self._states.get(topic_partition), self._log_for(topic_partition)
        if state is None or log is None:
            return  # removed while the request was in flight
        outcome = on_epoch_end_offset(
            state,
            request,
            answer or LeaderEpochEndOffset(Errors.UNKNOWN_SERVER_ERROR),
            follower_view(log),
            self._clock.monotonic_ms(),
            fetch_backoff_ms=self.config.fetch_backoff_ms,
            truncate_on_fetch=self._truncate_on_fetch,
        )
        self._apply(topic_partition, outcome)

    async def maybe_fetch(self) -> None:
        """Kafka ``maybeFetch``: one Fetch for every FETCHING partition, answers applied. When
        the follower throttle held every partition back, wait until it would let them go (at
        most ``replica.fetch.backoff.ms``, Kafka's wait on an empty fetch) instead of spinning."""
        request = self._build_fetch()
        if not request.targets:
            if self.quota is not None and self._throttled_now():
                wait_ms = self.quota.ms_until_within_quota(self._clock.monotonic_ms())
                await self._clock.wait(
                    self._wakeup, max(1, min(self.config.fetch_backoff_ms, wait_ms))
                )
            return
        try:
            answers = await self.endpoint.fetch(request)
        except LeaderEndpointError as error:
            logger.info("%s: Fetch failed: %s", self, error)
            self._back_off([t.topic_partition for t in request.targets if self._unchanged(t)])
            return
        for target in request.targets:
            answer = answers.get(target.topic_partition)
            if answer is None or not self._unchanged(target):
                continue
            outcome = self._on_fetch_answer(target, answer)
            if outcome is None:
                continue
            topic_partition = target.topic_partition
            if isinstance(outcome.action, ResolveOutOfRange):
                resolved = await self._resolve_out_of_range(topic_partition, outcome.action)
                if resolved is not None:
                    self._apply(topic_partition, resolved)
            else:
                self._apply(topic_partition, outcome)

    def _should_throttle(self, topic_partition: TopicPartition, state: PartitionFetchState) -> bool:
        """Kafka ``shouldFollowerThrottle``: a replica not caught up (lag > 0 or unknown), on a
        throttled partition, while the follower quota is exceeded."""
        quota = self.quota
        in_sync = state.lag is not None and state.lag <= 0
        return (
            quota is not None
            and not in_sync
            and quota.is_throttled(topic_partition)
            and quota.is_quota_exceeded(self._clock.monotonic_ms())
        )

    def _throttled_now(self) -> bool:
        return any(
            state.is_ready_for_fetch and self._should_throttle(tp, state)
            for tp, state in self._states.items()
        )

    def _build_fetch(self) -> ReplicaFetch:
        targets = []
        for topic_partition, state in self._states.items():
            log = self._log_for(topic_partition)
            if not state.is_ready_for_fetch or log is None:
                continue
            if self._should_throttle(topic_partition, state):
                continue
            partition = fetch_partition(
                state,
                topic_partition.partition,
                log.log_start_offset,
                self.config.fetch_max_bytes,
                truncate_on_fetch=self._truncate_on_fetch,
            )
            topic_id = self._starts[topic_partition].topic_id
            targets.append(FetchTarget(topic_partition, topic_id, partition))
        return ReplicaFetch(
            tuple(targets),
            self.config.fetch_wait_max_ms,
            self.config.fetch_min_bytes,
            self.config.fetch_response_max_bytes,
        )

    def _unchanged(self, target: FetchTarget) -> bool:
        """The partition is still fetched under the epoch and from the offset of the request."""
        state = self._states.get(target.topic_partition)
        return (
            state is not None
            and state.current_leader_epoch == target.partition.current_leader_epoch
            and state.fetch_offset == target.partition.fetch_offset
        )

    def _on_fetch_answer(self, target: FetchTarget, answer: PartitionData) -> FetchOutcome | None:
        """What one partition's answer makes it do (None: it failed for want of a log). Not a
        coroutine: only an out-of-range answer awaits (``maybe_fetch``), not every append."""
        topic_partition = target.topic_partition
        if self.quota is not None and answer.records and self.quota.is_throttled(topic_partition):
            # Kafka's ReplicaFetcherThread.processPartitionData: quota.record(records.sizeInBytes)
            size = sum(segment_length(segment) for segment in answer.records)
            self.quota.record(size, self._clock.monotonic_ms())
        state, log = self._states[topic_partition], self._log_for(topic_partition)
        if log is None:
            self._fail_partition(topic_partition, FailureReason.UNEXPECTED_ERROR)
            return None
        return on_fetch_response(
            state,
            target.partition,
            answer,
            follower_view(log),
            self._clock.monotonic_ms(),
            fetch_backoff_ms=self.config.fetch_backoff_ms,
            truncate_on_fetch=self._truncate_on_fetch,
        )

    async def _resolve_out_of_range(
        self, topic_partition: TopicPartition, action: ResolveOutOfRange
    ) -> FetchOutcome | None:
        """ListOffsets to the leader (Kafka ``handleOutOfRangeError``); None when the partition
        changed meanwhile."""
        epoch = action.current_leader_epoch
        try:
            offsets = await self.endpoint.fetch_leader_offsets(topic_partition, epoch)
        except LeaderEndpointError as error:
            logger.info("%s: ListOffsets for %s failed: %s", self, topic_partition, error)
            state = self._states.get(topic_partition)
            if state is None or state.current_leader_epoch != epoch:
                return None
            return on_request_failed(
                state, self._clock.monotonic_ms(), fetch_backoff_ms=self.config.fetch_backoff_ms
            )
        state, log = self._states.get(topic_partition), self._log_for(topic_partition)
        if state is None or log is None or state.current_leader_epoch != epoch:
            return None
        return on_leader_offsets(
            state,
            epoch,
            offsets,
            follower_view(log),
            self._clock.monotonic_ms(),
            fetch_backoff_ms=self.config.fetch_backoff_ms,
        )

    # ------------------------------------------------------------------ carrying actions out

    def _apply(self, topic_partition: TopicPartition, outcome: FetchOutcome) -> None:
        """Carry one outcome out on the local log; a local failure goes back to the core."""
        if isinstance(outcome.action, MarkFailed):
            self._fail_partition(topic_partition, outcome.action.reason)
            return
        assert outcome.state is not None, f"only MarkFailed removes a partition: {outcome}"
        log = self._log_for(topic_partition)
        if log is None:
            self._fail_partition(topic_partition, FailureReason.UNEXPECTED_ERROR)
            return
        try:
            new_state = carry_out(log, outcome)
        except Exception as error:  # the log's failure is this partition's alone
            self._on_local_error(topic_partition, error)
            return
        self._states[topic_partition] = new_state
        if hop_trace.ENABLED and isinstance(outcome.action, Append):
            hop_trace.mark("follower appended")
        if isinstance(outcome.action, Append) and self._on_replication_bytes_in is not None:
            size = sum(segment_length(segment) for segment in outcome.action.records)
            if size:
                self._on_replication_bytes_in(size)

    def _on_local_error(self, topic_partition: TopicPartition, error: Exception) -> None:
        kind = local_error_kind(error)
        logger.warning("%s: %s on %s: %s", self, kind.value, topic_partition, error)
        outcome = on_local_error(
            self._states[topic_partition],
            kind,
            self._clock.monotonic_ms(),
            fetch_backoff_ms=self.config.fetch_backoff_ms,
        )
        if isinstance(outcome.action, MarkFailed):
            self._fail_partition(topic_partition, outcome.action.reason)
        elif outcome.state is not None:
            self._states[topic_partition] = outcome.state

    def _back_off(self, partitions: Sequence[TopicPartition]) -> None:
        now_ms = self._clock.monotonic_ms()
        for topic_partition in partitions:
            state = self._states.get(topic_partition)
            if state is not None:
                outcome = on_request_failed(
                    state, now_ms, fetch_backoff_ms=self.config.fetch_backoff_ms
                )
                assert outcome.state is not None
                self._states[topic_partition] = outcome.state

    def _fail_partition(self, topic_partition: TopicPartition, reason: FailureReason) -> None:
        """Kafka ``markPartitionFailed``: stop fetching it until it is added again."""
        logger.warning("%s: %s removed from fetching: %s", self, topic_partition, reason.value)
        self.remove_partitions([topic_partition])
        if self._on_partition_failed is not None:
            self._on_partition_failed(topic_partition, reason)
