"""Delayed produces' asyncio shell: one future per waiting acks=all produce and one timer for
the earliest deadline over the pure ``replica.produce_waiters.ProducePurgatory`` (Kafka's
``DelayedProduce``; the rules are described there), on the monotonic clock it is given.
``watch`` is the synchronous half (answer now, or call ``on_done`` later), which the replication
simulation drives without asyncio; ``wait`` is ``watch`` over a future. Deadlines work as in
``broker.purgatory``: a ``ReplicaManager`` with a timer expires the waiters
through its ``ReplicaCore.tick`` and hands them to ``resolve_expired``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import NamedTuple

from pykraft.protocol.errors import Errors
from pykraft.replica.produce_waiters import (
    MAX_DELAYED_PRODUCES,
    ProducePurgatory,
    ReplicaChecker,
    full_purgatory_errors,
)
from pykraft.storage.deadline_timer import DeadlineTimer
from pykraft.storage.topic_partition import TopicPartition

__all__ = ["DelayedProduces", "ProduceWatch", "ReplicaChecker"]

# A waiting produce's final errors, once none of its partitions waits any more.
ProduceDone = Callable[[dict[TopicPartition, Errors]], None]


class ProduceWatch(NamedTuple):
    """``watch``'s answer: the errors now (no wait needed), or the id of the waiter."""

    errors: dict[TopicPartition, Errors] | None = None
    waiter_id: int | None = None


class DelayedProduces:
    """The shell: a callback per waiter (a future's, for ``wait``), one timer for the earliest
    deadline unless a ``ReplicaManager`` owns the timer."""

    def __init__(
        self,
        *,
        monotonic_ms: Callable[[], int],
        max_waiters: int = MAX_DELAYED_PRODUCES,
    ) -> None:
        self.purgatory = ProducePurgatory(max_waiters)
        self._monotonic_ms = monotonic_ms
        self._callbacks: dict[int, ProduceDone] = {}
        self._timer = DeadlineTimer(monotonic_ms, self.expire_due)
        # Set by the owner of a shared timer (ReplicaManager): called instead of arming ours.
        self.on_deadline_moved: Callable[[], None] | None = None

    def watch(
        self,
        required_offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int,
        checker: ReplicaChecker,
        on_done: ProduceDone,
    ) -> ProduceWatch:
        """Check once; the errors now when nothing needs to wait (or the purgatory is full),
        else a waiter whose final errors go to ``on_done`` (never called from here)."""
        deadline_ms = self._monotonic_ms() + max(0, timeout_ms)
        waiter_id = self.purgatory.try_watch(required_offsets, deadline_ms)
        if waiter_id is None:
            return ProduceWatch(errors=full_purgatory_errors(required_offsets, checker))
        errors = self.purgatory.try_complete(waiter_id, checker)
        if errors is not None:
            return ProduceWatch(errors=errors)
        self._callbacks[waiter_id] = on_done
        self._schedule()
        return ProduceWatch(waiter_id=waiter_id)

    def forget(self, waiter_id: int) -> None:
        """The produce is no longer waited for (its connection closed): drop the waiter."""
        self._callbacks.pop(waiter_id, None)
        self.purgatory.remove(waiter_id)

    async def wait(
        self,
        required_offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int,
        checker: ReplicaChecker,
    ) -> dict[TopicPartition, Errors]:
        """Each partition's final error once none waits any more, or at the deadline."""
        future: asyncio.Future[dict[TopicPartition, Errors]] = (
            asyncio.get_running_loop().create_future()
        )

        def done(errors: dict[TopicPartition, Errors]) -> None:
            if not future.done():
                future.set_result(errors)

        watch = self.watch(required_offsets, timeout_ms=timeout_ms, checker=checker, on_done=done)
        if watch.errors is not None:
            return watch.errors
        assert watch.waiter_id is not None
        try:
            return await future
        finally:
            self.forget(watch.waiter_id)  # a no-op once answered

    def check_and_complete(self, topic_partition: TopicPartition, checker: ReplicaChecker) -> None:
        """The high watermark moved or leadership changed: re-check its waiters."""
        if self.purgatory.watching(topic_partition):
            self._resolve(self.purgatory.check(topic_partition, checker))

    def expire_due(self) -> int:
        """Complete every waiter whose deadline has passed; returns how many."""
        expired = self.purgatory.expire(self._monotonic_ms())
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
        for waiter_id in list(self._callbacks):
            errors = self.purgatory.remove(waiter_id)
            if errors is not None:
                answers[waiter_id] = errors
        self._resolve(answers)
        self._timer.cancel()

    def _resolve(self, completed: Mapping[int, Mapping[TopicPartition, Errors]]) -> None:
        for waiter_id, errors in completed.items():
            callback = self._callbacks.pop(waiter_id, None)
            if callback is not None:
                callback(dict(errors))

    def _schedule(self) -> None:
        if self.on_deadline_moved is not None:
            self.on_deadline_moved()
        else:
            self._timer.arm(self.purgatory.next_deadline_ms())
