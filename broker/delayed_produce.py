"""Delayed produces' asyncio shell: one future per waiting acks=all produce and one timer for
the earliest deadline over the pure ``replica.produce_waiters.ProducePurgatory`` (Kafka's
``DelayedProduce``; the rules are described there), on an injectable monotonic clock.
Deadlines work as in ``broker.purgatory``: a ``ReplicaManager`` with a timer expires the waiters
through its ``ReplicaCore.tick`` and hands them to ``resolve_expired``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from broker.purgatory import DeadlineTimer, monotonic_ms
from protocol.errors import Errors
from replica.produce_waiters import (
    MAX_DELAYED_PRODUCES,
    ProducePurgatory,
    ReplicaChecker,
    full_purgatory_errors,
)
from storage.topic_partition import TopicPartition

__all__ = ["DelayedProduces", "ReplicaChecker"]


class DelayedProduces:
    """The asyncio shell: futures for waiters, one timer for the earliest deadline."""

    def __init__(
        self,
        max_waiters: int = MAX_DELAYED_PRODUCES,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.purgatory = ProducePurgatory(max_waiters)
        self._clock_ms = clock_ms
        self._futures: dict[int, asyncio.Future[dict[TopicPartition, Errors]]] = {}
        self._timer = DeadlineTimer(clock_ms, self.expire_due)
        # Set by the owner of a shared timer (ReplicaManager): called instead of arming ours.
        self.on_deadline_moved: Callable[[], None] | None = None

    async def wait(
        self,
        required_offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int,
        checker: ReplicaChecker,
    ) -> dict[TopicPartition, Errors]:
        """Each partition's final error once none waits any more, or at the deadline."""
        deadline_ms = self._clock_ms() + max(0, timeout_ms)
        waiter_id = self.purgatory.try_watch(required_offsets, deadline_ms)
        if waiter_id is None:
            return full_purgatory_errors(required_offsets, checker)
        errors = self.purgatory.try_complete(waiter_id, checker)
        if errors is not None:
            return errors
        future: asyncio.Future[dict[TopicPartition, Errors]] = (
            asyncio.get_running_loop().create_future()
        )
        self._futures[waiter_id] = future
        self._schedule()
        try:
            return await future
        finally:
            # Cancelled (the connection closed): forget the waiter.
            self._futures.pop(waiter_id, None)
            self.purgatory.remove(waiter_id)

    def check_and_complete(self, topic_partition: TopicPartition, checker: ReplicaChecker) -> None:
        """The high watermark moved or leadership changed: re-check its waiters."""
        if self.purgatory.watching(topic_partition):
            self._resolve(self.purgatory.check(topic_partition, checker))

    def expire_due(self) -> int:
        """Complete every waiter whose deadline has passed; returns how many."""
        expired = self.purgatory.expire(self._clock_ms())
        self._resolve(expired)
        self._timer.fired()
        self._schedule()
        return len(expired)

    def resolve_expired(self, completed: Mapping[int, Mapping[TopicPartition, Errors]]) -> None:
        """Answer the waiters a ``ReplicaCore.tick`` expired (already out of the purgatory)."""
        self._resolve(completed)

    def close(self) -> None:
        """Answer every waiter now (shutdown): unfinished partitions REQUEST_TIMED_OUT."""
        answers = {}
        for waiter_id in list(self._futures):
            errors = self.purgatory.remove(waiter_id)
            if errors is not None:
                answers[waiter_id] = errors
        self._resolve(answers)
        self._timer.cancel()

    def _resolve(self, completed: Mapping[int, Mapping[TopicPartition, Errors]]) -> None:
        for waiter_id, errors in completed.items():
            future = self._futures.pop(waiter_id, None)
            if future is not None and not future.done():
                future.set_result(dict(errors))

    def _schedule(self) -> None:
        if self.on_deadline_moved is not None:
            self.on_deadline_moved()
        else:
            self._timer.arm(self.purgatory.next_deadline_ms())
