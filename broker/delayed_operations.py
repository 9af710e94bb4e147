"""The shell both acks-waiting delayed requests share, produces (``broker.delayed_produce``) and
DeleteRecords (``broker.delete_records``): a callback per waiter and one timer for the earliest
deadline over a pure ``replica.waiters.PartitionsPurgatory`` (Kafka's
``DelayedOperationPurgatory`` around ``DelayedProduce`` / ``DelayedDeleteRecords``), on the
monotonic clock it is given.

``watch`` is synchronous (answer now, or call ``on_done`` later), so the replication simulation
drives it without asyncio. Deadlines work as in ``broker.purgatory``: inside a
``ReplicaManager`` with a timer the purgatory is its ``ReplicaCore``'s, whose ``tick`` expires
the waiters and hands them to ``resolve_expired``; the shell only says that a deadline may have
moved (``on_deadline_moved``). Standing alone (unit tests) it keeps its own ``DeadlineTimer``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, NamedTuple, TypeVar

from pykraft.replica.waiters import PartitionsPurgatory
from pykraft.storage import hop_trace
from pykraft.storage.deadline_timer import DeadlineTimer
from pykraft.storage.topic_partition import TopicPartition

__all__ = ["DelayedOperations", "Watch"]

V = TypeVar("V")  # what a request accepted for one partition
C = TypeVar("C")  # the checker
R = TypeVar("R")  # one partition's answer


class Watch(NamedTuple, Generic[R]):
    """``watch``'s answer: every partition's answer now (no wait needed), or the waiter's id."""

    answers: dict[TopicPartition, R] | None = None
    waiter_id: int | None = None


class DelayedOperations(Generic[V, C, R]):
    """The shell: a callback per waiter, one timer unless a ``ReplicaManager`` owns it."""

    def __init__(
        self, purgatory: PartitionsPurgatory[V, C, R], *, monotonic_ms: Callable[[], int]
    ) -> None:
        self.purgatory = purgatory
        self._monotonic_ms = monotonic_ms
        self._callbacks: dict[int, Callable[[dict[TopicPartition, R]], None]] = {}
        self._timer = DeadlineTimer(monotonic_ms, self.expire_due)
        # Set by the owner of a shared timer (ReplicaManager): called instead of arming ours.
        self.on_deadline_moved: Callable[[], None] | None = None

    def watch(
        self,
        waiting: Mapping[TopicPartition, V],
        *,
        timeout_ms: int,
        checker: C,
        on_done: Callable[[dict[TopicPartition, R]], None],
    ) -> Watch[R]:
        """Check once; the answers now when nothing needs to wait (or the purgatory is full),
        else a waiter whose answers go to ``on_done`` (never called from here)."""
        if hop_trace.ENABLED:
            hop_trace.mark("delayed watch")
        deadline_ms = self._monotonic_ms() + max(0, timeout_ms)
        answers, waiter_id = self.purgatory.try_complete_else_watch(waiting, deadline_ms, checker)
        if waiter_id is None:
            return Watch(answers=answers)
        self._callbacks[waiter_id] = on_done
        self._schedule()
        return Watch(waiter_id=waiter_id)

    def try_complete_else_watch(
        self,
        waiting: Mapping[TopicPartition, V],
        *,
        timeout_ms: int,
        checker: C,
        on_done: Callable[[dict[TopicPartition, R]], None],
    ) -> int | None:
        """Kafka's ``tryCompleteElseWatch``: ``watch``, with ``on_done`` called at once when no
        wait is needed. The waiter's id while the answer waits, else None (answered)."""
        watch = self.watch(waiting, timeout_ms=timeout_ms, checker=checker, on_done=on_done)
        if watch.answers is not None:
            on_done(watch.answers)
        return watch.waiter_id

    def forget(self, waiter_id: int) -> None:
        """Nobody waits for the answer any more (its connection closed): drop the waiter."""
        self._callbacks.pop(waiter_id, None)
        self.purgatory.remove(waiter_id)

    def check_and_complete(self, topic_partition: TopicPartition, checker: C) -> None:
        """Something a waiter on ``topic_partition`` waits for moved, or leadership changed."""
        if self.purgatory.watching(topic_partition):
            self._resolve(self.purgatory.check(topic_partition, checker))

    def expire_due(self) -> int:
        """Complete every waiter whose deadline has passed; returns how many."""
        expired = self.purgatory.expire(self._monotonic_ms())
        self._resolve(expired)
        self._timer.fired()
        self._schedule()
        return len(expired)

    def resolve_expired(self, completed: Mapping[int, Mapping[TopicPartition, R]]) -> None:
        """Answer the waiters a ``ReplicaCore.tick`` expired (already out of the purgatory)."""
        self._resolve(completed)

    def close(self) -> None:
        """Answer every waiter now (shutdown): unfinished partitions REQUEST_TIMED_OUT."""
        answers = {}
        for waiter_id in list(self._callbacks):
            removed = self.purgatory.remove(waiter_id)
            if removed is not None:
                answers[waiter_id] = removed
        self._resolve(answers)
        self._timer.cancel()

    def _resolve(self, completed: Mapping[int, Mapping[TopicPartition, R]]) -> None:
        for waiter_id, answers in completed.items():
            callback = self._callbacks.pop(waiter_id, None)
            if callback is not None:
                if hop_trace.ENABLED:
                    hop_trace.mark("delayed completed")
                callback(dict(answers))

    def _schedule(self) -> None:
        if self.on_deadline_moved is not None:
            self.on_deadline_moved()
        else:
            self._timer.arm(self.purgatory.next_deadline_ms())
