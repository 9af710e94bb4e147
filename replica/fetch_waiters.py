"""Waiting fetches as pure bookkeeping: a Fetch waits for ``min_bytes`` or ``max_wait_ms``
(Kafka's ``DelayedFetch``).

Theory of operation
-------------------
A fetch that found fewer than ``min_bytes`` readable bytes (and no error, no diverging epoch)
waits instead of answering at once (``ReplicaManager.fetchMessages``). Each waiter watches its
partitions, starts with the bytes it already found, and has a deadline ``now_ms + max_wait_ms``
(monotonic time, passed in). A waiter completes

* ``ENOUGH_BYTES`` when newly readable bytes on its partitions bring it to ``min_bytes``
  (Kafka ``DelayedFetch.tryComplete`` case F). What is readable depends on who reads: a
  follower (``FetchIsolation.LOG_END``) counts bytes appended to the log
  (``on_bytes_appended``), a READ_UNCOMMITTED consumer bytes the high watermark moved past
  (``on_high_watermark_moved``) — with replicas, an append alone is not yet readable — and a
  READ_COMMITTED one bytes the last stable offset moved past (``on_last_stable_offset_moved``:
  Kafka's ``DelayedFetch`` reads up to ``lastStableOffset`` for ``FetchIsolation.TXN_COMMITTED``),
* ``PARTITION_CHANGED`` when one of its partitions changes leadership or is deleted (cases B-E:
  the response must tell the client now),
* ``DEADLINE`` when its deadline passes (``onExpiration``).

Completion removes the waiter everywhere; the caller then reads again and answers. At most
``max_waiters`` wait at once: a fetch that finds the purgatory full answers immediately with
what it has (a smaller response, never an unbounded queue). The asyncio shell is
``broker.purgatory.DelayedFetches``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection

import attrs

from pykraft.replica.partition_state import FetchIsolation
from pykraft.replica.waiters import Purgatory
from pykraft.storage.topic_partition import TopicPartition

# Upper bound on concurrently waiting fetches (STYLE.md §7).
MAX_DELAYED_FETCHES = 10_000


class FetchCompletion(enum.Enum):
    ENOUGH_BYTES = "enough_bytes"
    PARTITION_CHANGED = "partition_changed"
    DEADLINE = "deadline"
    # Not a wait at all: the purgatory was full, answer with what was read.
    PURGATORY_FULL = "purgatory_full"


@attrs.define
class _Waiter:
    min_bytes: int
    accumulated_bytes: int
    # LOG_END waiters count appended bytes, HIGH_WATERMARK ones bytes below the high
    # watermark, TXN_COMMITTED ones bytes below the last stable offset.
    isolation: FetchIsolation = FetchIsolation.LOG_END


class FetchPurgatory(Purgatory[_Waiter]):
    """Pure bookkeeping of waiting fetches, keyed by partition; no clock, no I/O."""

    def __init__(self, max_waiters: int = MAX_DELAYED_FETCHES) -> None:
        super().__init__(max_waiters)

    def watching(
        self, topic_partition: TopicPartition, isolation: FetchIsolation | None = None
    ) -> int:
        """Waiters on ``topic_partition``; with ``isolation``, only those that read so far."""
        watching = self._index.watching(topic_partition)
        if isolation is None or not watching:
            return watching
        return sum(
            1
            for waiter_id in self._index.watchers(topic_partition)
            if self._index[waiter_id].isolation is isolation
        )

    def try_watch(
        self,
        partitions: Collection[TopicPartition],
        *,
        min_bytes: int,
        accumulated_bytes: int,
        deadline_ms: int,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
    ) -> int | None:
        """Add a waiter; returns its id, or None when ``max_waiters`` already wait."""
        return self._index.try_add(
            partitions,
            deadline_ms,
            lambda _waiter_id: _Waiter(min_bytes, accumulated_bytes, isolation),
        )

    def on_bytes_appended(self, topic_partition: TopicPartition, byte_count: int) -> list[int]:
        """Count appended bytes for followers; returns the waiters that now have enough."""
        return self._count(topic_partition, byte_count, lambda iso: iso is FetchIsolation.LOG_END)

    def on_high_watermark_moved(
        self, topic_partition: TopicPartition, byte_count: int
    ) -> list[int]:
        """Count bytes the high watermark moved past for READ_UNCOMMITTED consumers; returns
        the waiters that now have enough (removed)."""
        return self._count(
            topic_partition, byte_count, lambda iso: iso is FetchIsolation.HIGH_WATERMARK
        )

    def on_last_stable_offset_moved(
        self, topic_partition: TopicPartition, byte_count: int
    ) -> list[int]:
        """Count bytes the last stable offset moved past for READ_COMMITTED consumers; returns
        the waiters that now have enough (removed)."""
        return self._count(
            topic_partition, byte_count, lambda iso: iso is FetchIsolation.TXN_COMMITTED
        )

    def _count(
        self,
        topic_partition: TopicPartition,
        byte_count: int,
        counts: Callable[[FetchIsolation], bool],
    ) -> list[int]:
        completed = []
        for waiter_id in self._index.watchers(topic_partition):
            waiter = self._index[waiter_id]
            if not counts(waiter.isolation):
                continue
            waiter.accumulated_bytes += byte_count
            if waiter.accumulated_bytes >= waiter.min_bytes:
                completed.append(waiter_id)
        for waiter_id in completed:
            self.remove(waiter_id)
        return completed

    def on_partition_changed(self, topic_partition: TopicPartition) -> list[int]:
        """Leadership moved or the partition went away: its waiters answer now (removed)."""
        completed = self._index.watchers(topic_partition)
        for waiter_id in completed:
            self.remove(waiter_id)
        return completed

    def expire(self, now_ms: int) -> list[int]:
        """Waiters whose deadline is at or before ``now_ms`` (removed), oldest first."""
        return [waiter_id for waiter_id, _ in self._index.pop_expired(now_ms)]

    def remove(self, waiter_id: int) -> None:
        self._index.pop(waiter_id)
