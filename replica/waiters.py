"""Waiters indexed by partition and by deadline: the bookkeeping both purgatories share.

Kafka's ``DelayedOperationPurgatory`` keeps, for every kind of delayed request, a watch list
per partition and a timer for the deadlines. ``WaiterIndex`` is that part alone, generic over
what a waiter holds: ``FetchPurgatory`` (bytes counted towards ``min_bytes``) and
``ProducePurgatory`` (offsets the ISR must reach) keep only the rule that completes a waiter.

A waiter is added with the partitions it watches and its deadline, and leaves through ``pop``
(completed or cancelled) or ``pop_expired`` (deadline passed). ``Purgatory`` is the part of a
purgatory around its index that both kinds share. Deadlines sit in a heap whose
entries for waiters already gone are skipped lazily. At most ``max_waiters`` wait at once
(STYLE.md §7): ``try_add`` answers None instead of queueing. No clock, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection
from typing import Generic, TypeVar

from pykraft.storage.topic_partition import TopicPartition

W = TypeVar("W")


class WaiterIndex(Generic[W]):
    """Waiters by id, by watched partition and by deadline; bounded by ``max_waiters``."""

    def __init__(self, max_waiters: int) -> None:
        assert max_waiters > 0
        self.max_waiters = max_waiters
        self._waiters: dict[int, tuple[W, frozenset[TopicPartition]]] = {}
        self._by_partition: dict[TopicPartition, set[int]] = {}
        # (deadline_ms, waiter_id); entries of removed waiters are skipped lazily.
        self._deadlines: list[tuple[int, int]] = []
        self._next_id = 0

    def __len__(self) -> int:
        return len(self._waiters)

    def __getitem__(self, waiter_id: int) -> W:
        return self._waiters[waiter_id][0]

    def watchers(self, topic_partition: TopicPartition) -> list[int]:
        """Ids of the waiters watching ``topic_partition``, oldest first."""
        return sorted(self._by_partition.get(topic_partition, ()))

    def watching(self, topic_partition: TopicPartition) -> int:
        return len(self._by_partition.get(topic_partition, ()))

    def try_add(
        self,
        partitions: Collection[TopicPartition],
        deadline_ms: int,
        make_waiter: Callable[[int], W],
    ) -> int | None:
        """Add ``make_waiter(waiter_id)``; its id, or None when ``max_waiters`` already wait."""
        if len(self._waiters) >= self.max_waiters:
            return None
        waiter_id = self._next_id
        self._next_id += 1
        watched = frozenset(partitions)
        self._waiters[waiter_id] = (make_waiter(waiter_id), watched)
        for topic_partition in watched:
            self._by_partition.setdefault(topic_partition, set()).add(waiter_id)
        heapq.heappush(self._deadlines, (deadline_ms, waiter_id))
        return waiter_id

    def pop(self, waiter_id: int) -> W | None:
        """Forget a waiter; it, or None when it was already gone."""
        entry = self._waiters.pop(waiter_id, None)
        if entry is None:
            return None
        waiter, watched = entry
        for topic_partition in watched:
            watchers = self._by_partition[topic_partition]
            watchers.discard(waiter_id)
            if not watchers:
                del self._by_partition[topic_partition]
        if not self._waiters:
            self._deadlines.clear()  # nothing left to skip lazily
        return waiter

    def pop_expired(self, now_ms: int) -> list[tuple[int, W]]:
        """Waiters whose deadline is at or before ``now_ms`` (removed), oldest deadline first."""
        expired = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, waiter_id = heapq.heappop(self._deadlines)
            waiter = self.pop(waiter_id)
            if waiter is not None:
                expired.append((waiter_id, waiter))
        return expired

    def next_deadline_ms(self) -> int | None:
        while self._deadlines and self._deadlines[0][1] not in self._waiters:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None


class Purgatory(Generic[W]):
    """What every purgatory shares over its ``WaiterIndex``: the bound, the count and the next
    deadline; subclasses add the rule that completes a waiter."""

    def __init__(self, max_waiters: int) -> None:
        self._index: WaiterIndex[W] = WaiterIndex(max_waiters)

    @property
    def max_waiters(self) -> int:
        return self._index.max_waiters

    def __len__(self) -> int:
        return len(self._index)

    def next_deadline_ms(self) -> int | None:
        return self._index.next_deadline_ms()
