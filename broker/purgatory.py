"""Delayed fetches' asyncio shell: one future per waiting fetch over the pure
``replica.fetch_waiters.FetchPurgatory`` (Kafka's ``DelayedFetch``; the rules are described
there). It reads the monotonic clock it is given (``storage.clock``).

Deadlines: inside a ``ReplicaManager`` with a timer, the purgatory belongs to its
``replica.replica_core.ReplicaCore``, whose ``tick`` expires the waiters; the shell only says
that a deadline may have moved (``on_deadline_moved``) and answers what ``tick`` expired
(``resolve_expired``). Standing alone (unit tests) it keeps its own ``DeadlineTimer``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable

from pykraft.replica.fetch_waiters import MAX_DELAYED_FETCHES, FetchCompletion, FetchPurgatory
from pykraft.replica.partition_state import FetchIsolation
from pykraft.storage import hop_trace
from pykraft.storage.deadline_timer import DeadlineTimer
from pykraft.storage.topic_partition import TopicPartition

__all__ = ["DelayedFetches", "FetchCompletion"]


class DelayedFetches:
    """The asyncio shell: futures for waiters, one timer for the earliest deadline."""

    def __init__(
        self,
        *,
        monotonic_ms: Callable[[], int],
        max_waiters: int = MAX_DELAYED_FETCHES,
    ) -> None:
        self.purgatory = FetchPurgatory(max_waiters)
        self._monotonic_ms = monotonic_ms
        self._futures: dict[int, asyncio.Future[FetchCompletion]] = {}
        self._timer = DeadlineTimer(monotonic_ms, self.expire_due)
        # Set by the owner of a shared timer (ReplicaManager): called instead of arming ours.
        self.on_deadline_moved: Callable[[], None] | None = None

    async def wait(
        self,
        partitions: Collection[TopicPartition],
        *,
        min_bytes: int,
        accumulated_bytes: int,
        max_wait_ms: int,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
    ) -> FetchCompletion:
        """Wait until enough bytes, a partition change, or the deadline; says which."""
        deadline_ms = self._monotonic_ms() + max(0, max_wait_ms)
        waiter_id = self.purgatory.try_watch(
            partitions,
            min_bytes=min_bytes,
            accumulated_bytes=accumulated_bytes,
            deadline_ms=deadline_ms,
            isolation=isolation,
        )
        if waiter_id is None:
            return FetchCompletion.PURGATORY_FULL
        future: asyncio.Future[FetchCompletion] = asyncio.get_running_loop().create_future()
        self._futures[waiter_id] = future
        self._schedule()
        try:
            return await future
        finally:
            # Cancelled (the connection closed): forget the waiter.
            self._futures.pop(waiter_id, None)
            self.purgatory.remove(waiter_id)

    def on_bytes_appended(self, topic_partition: TopicPartition, byte_count: int) -> None:
        if self.purgatory.watching(topic_partition):
            completed = self.purgatory.on_bytes_appended(topic_partition, byte_count)
            self._resolve(completed, FetchCompletion.ENOUGH_BYTES)

    def on_high_watermark_moved(self, topic_partition: TopicPartition, byte_count: int) -> None:
        self.on_readable_moved(topic_partition, FetchIsolation.HIGH_WATERMARK, byte_count)

    def on_readable_moved(
        self, topic_partition: TopicPartition, isolation: FetchIsolation, byte_count: int
    ) -> None:
        """What consumers of ``isolation`` may read grew by ``byte_count`` bytes: the high
        watermark (READ_UNCOMMITTED) or the last stable offset (READ_COMMITTED) moved."""
        if not self.purgatory.watching(topic_partition):
            return
        if isolation is FetchIsolation.TXN_COMMITTED:
            completed = self.purgatory.on_last_stable_offset_moved(topic_partition, byte_count)
        else:
            completed = self.purgatory.on_high_watermark_moved(topic_partition, byte_count)
        self._resolve(completed, FetchCompletion.ENOUGH_BYTES)

    def on_partition_changed(self, topic_partition: TopicPartition) -> None:
        if self.purgatory.watching(topic_partition):
            completed = self.purgatory.on_partition_changed(topic_partition)
            self._resolve(completed, FetchCompletion.PARTITION_CHANGED)

    def expire_due(self) -> int:
        """Complete every waiter whose deadline has passed; returns how many."""
        expired = self.purgatory.expire(self._monotonic_ms())
        self._resolve(expired, FetchCompletion.DEADLINE)
        self._timer.fired()
        self._schedule()
        return len(expired)

    def resolve_expired(self, waiter_ids: Iterable[int]) -> None:
        """Answer the waiters a ``ReplicaCore.tick`` expired (already out of the purgatory)."""
        self._resolve(list(waiter_ids), FetchCompletion.DEADLINE)

    def close(self) -> None:
        """Answer every waiter now (shutdown) and stop the timer."""
        for waiter_id in list(self._futures):
            self.purgatory.remove(waiter_id)
        self._resolve(list(self._futures), FetchCompletion.DEADLINE)
        self._timer.cancel()

    def _resolve(self, waiter_ids: list[int], completion: FetchCompletion) -> None:
        for waiter_id in waiter_ids:
            future = self._futures.pop(waiter_id, None)
            if future is not None and not future.done():
                if hop_trace.ENABLED:
                    hop_trace.mark(f"fetch woken {completion.name}")
                future.set_result(completion)

    def _schedule(self) -> None:
        """Keep one timer armed for the earliest deadline (the shared one, when there is one)."""
        if self.on_deadline_moved is not None:
            self.on_deadline_moved()
        else:
            self._timer.arm(self.purgatory.next_deadline_ms())
