"""Waiters indexed by partition and by deadline: the bookkeeping both purgatories share.

Kafka's ``DelayedOperationPurgatory`` keeps, for every kind of delayed request, a watch list
per partition and a timer for the deadlines. ``WaiterIndex`` is that part alone, generic over
what a waiter holds: ``FetchPurgatory`` (bytes counted towards ``min_bytes``) and
``ProducePurgatory`` (offsets the ISR must reach) keep only the rule that completes a waiter.

A waiter is added with the partitions it watches and its deadline, and leaves through ``pop``
(completed or cancelled) or ``pop_expired`` (deadline passed). ``Purgatory`` is the part of a
purgatory around its index that every kind shares. Deadlines sit in a heap whose
entries for waiters already gone are skipped lazily. At most ``max_waiters`` wait at once
(STYLE.md §7): ``try_add`` answers None instead of queueing. No clock, no I/O.

``PartitionsPurgatory`` is the shape Kafka's ``DelayedProduce`` and ``DelayedDeleteRecords``
share: a request waits on several partitions, each with a required offset and the answer it
gives if the request's deadline passes first (``onExpiration``: REQUEST_TIMED_OUT); a check
(``tryComplete``) asks the rule about each partition still pending, and the request completes
when none is. ``ProducePurgatory`` and ``DeleteRecordsPurgatory`` give only the rule.
"""

from __future__ import annotations

import abc
import heapq
from collections.abc import Callable, Collection, Mapping
from typing import Generic, TypeVar

import attrs

from pykraft.storage.topic_partition import TopicPartition

W = TypeVar("W")
V = TypeVar("V")  # what a request accepted for one partition (its required offset and more)
C = TypeVar("C")  # the checker a check asks (Partition's view of the replicas)
R = TypeVar("R")  # one partition's answer


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


@attrs.define
class _PartitionWait(Generic[R]):
    required_offset: int
    # Invariant: while ``acks_pending``, the answer the deadline gives (REQUEST_TIMED_OUT);
    # once done, the final answer.
    answer: R
    acks_pending: bool = True


class PartitionsPurgatory(
    Purgatory[dict[TopicPartition, _PartitionWait[R]]], Generic[V, C, R], abc.ABC
):
    """Requests waiting on several partitions each, keyed by partition; a subclass gives the
    rule (``_accept``, ``_try_answer``). No clock, no I/O."""

    @abc.abstractmethod
    def _accept(self, value: V) -> tuple[int, R]:
        """One accepted partition: (its required offset, what it answers at the deadline)."""

    @abc.abstractmethod
    def _try_answer(
        self, topic_partition: TopicPartition, required_offset: int, checker: C
    ) -> R | None:
        """One partition's ``tryComplete``: its final answer, or None while it still waits.

        Invariant (``check`` relies on it): for one state of the partition, a partition that
        still waits at ``required_offset`` also waits at every higher one (the high watermark
        or the low watermark has not reached it)."""

    def watching(self, topic_partition: TopicPartition) -> int:
        return self._index.watching(topic_partition)

    def try_watch(self, waiting: Mapping[TopicPartition, V], deadline_ms: int) -> int | None:
        """Add a waiter for ``waiting``; None when ``max_waiters`` already wait."""
        assert waiting, "a delayed request waits on at least one partition"
        return self._index.try_add(waiting, deadline_ms, lambda _waiter_id: self._statuses(waiting))

    def try_complete_else_watch(
        self, waiting: Mapping[TopicPartition, V], deadline_ms: int, checker: C
    ) -> tuple[dict[TopicPartition, R] | None, int | None]:
        """Kafka's ``tryCompleteElseWatch`` in one step: (answers, None) when no partition
        needs to wait, or when ``max_waiters`` already wait (what is not done gives its
        deadline's answer); else (None, the new waiter's id). Checking before adding (one
        thread, nothing moves in between) spares the index an acks=all produce the high
        watermark already covers: every RF=1 one (issue 18)."""
        assert waiting, "a delayed request waits on at least one partition"
        statuses = self._statuses(waiting)
        if self._check_pending(statuses, checker):
            return _answers(statuses), None
        waiter_id = self._index.try_add(statuses, deadline_ms, lambda _waiter_id: statuses)
        if waiter_id is None:
            return _answers(statuses), None
        return None, waiter_id

    def try_complete(self, waiter_id: int, checker: C) -> dict[TopicPartition, R] | None:
        """Check every waiting partition of one waiter; its answers (removed) when done."""
        statuses = self._index[waiter_id]
        if not self._check_pending(statuses, checker):
            return None
        self._index.pop(waiter_id)
        return _answers(statuses)

    def check(
        self, topic_partition: TopicPartition, checker: C
    ) -> dict[int, dict[TopicPartition, R]]:
        """Check the waiters on ``topic_partition``; the completed ones' answers (removed).

        Once a waiter still waits on ``topic_partition`` at some required offset, every waiter
        whose required offset there is as high waits too (``_try_answer``'s invariant) and is
        not asked again: a moved high watermark costs the waiters it completes, not every
        acks=all produce in flight on the partition (issue 18)."""
        completed = {}
        waiting_from: int | None = None  # the lowest required offset found still waiting
        for waiter_id in self._index.watchers(topic_partition):
            status = self._index[waiter_id][topic_partition]
            pending = status.acks_pending
            if pending and waiting_from is not None and status.required_offset >= waiting_from:
                continue
            answers = self.try_complete(waiter_id, checker)
            if answers is not None:
                completed[waiter_id] = answers
            elif status.acks_pending:
                offset = status.required_offset
                waiting_from = offset if waiting_from is None else min(waiting_from, offset)
        return completed

    def expire(self, now_ms: int) -> dict[int, dict[TopicPartition, R]]:
        """Waiters whose deadline is at or before ``now_ms`` (removed): partitions still
        waiting give their deadline's answer."""
        return {
            waiter_id: _answers(statuses) for waiter_id, statuses in self._index.pop_expired(now_ms)
        }

    def remove(self, waiter_id: int) -> dict[TopicPartition, R] | None:
        """Forget a waiter; its answers as they stand."""
        statuses = self._index.pop(waiter_id)
        return None if statuses is None else _answers(statuses)

    def check_once(
        self, waiting: Mapping[TopicPartition, V], checker: C
    ) -> dict[TopicPartition, R]:
        """No room to wait (the purgatory is full): one check now; what is not done gives its
        deadline's answer."""
        statuses = self._statuses(waiting)
        self._check_pending(statuses, checker)
        return _answers(statuses)

    def _statuses(
        self, waiting: Mapping[TopicPartition, V]
    ) -> dict[TopicPartition, _PartitionWait[R]]:
        return {tp: _PartitionWait(*self._accept(value)) for tp, value in waiting.items()}

    def _check_pending(
        self, statuses: Mapping[TopicPartition, _PartitionWait[R]], checker: C
    ) -> bool:
        """Check each partition still pending; True when none is any more."""
        for topic_partition, status in statuses.items():
            if status.acks_pending:
                answer = self._try_answer(topic_partition, status.required_offset, checker)
                if answer is not None:
                    status.answer = answer
                    status.acks_pending = False
        return not any(status.acks_pending for status in statuses.values())


def _answers(statuses: Mapping[TopicPartition, _PartitionWait[R]]) -> dict[TopicPartition, R]:
    return {tp: status.answer for tp, status in statuses.items()}
