"""Waiting produces as pure bookkeeping: an acks=all produce waits for the ISR (Kafka's
``DelayedProduce``).

Theory of operation
-------------------
After the local append, an acks=-1 produce with at least one partition appended waits here
(``ReplicaManager.appendRecords``' ``delayedProduceRequestRequired``). Each such partition waits
for its *required offset* (the batch's last offset + 1); partitions whose append failed do not
wait and keep their error. ``ProducePurgatory`` is the pure bookkeeping; a check asks a
``checker(partition, required_offset) -> (done, error)`` — ``Partition.
check_enough_replicas_reach_offset``, or the error of a partition no longer hosted — and, like
Kafka's ``DelayedProduce.tryComplete``, marks a partition done when it answers done or any error:

* (True, NONE): the high watermark reached the required offset with enough ISR members;
* (True, NOT_ENOUGH_REPLICAS_AFTER_APPEND): it did, but the ISR had shrunk below
  min.insync.replicas;
* (False, NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION ...): leadership moved away.

A waiter completes when none of its partitions waits any more; partitions still waiting at its
deadline (``timeout_ms`` of the request) answer REQUEST_TIMED_OUT (``onExpiration``). Checks run
once when the produce starts waiting, and again for every waiter on a partition whenever its
high watermark moves or it changes leadership (``check_and_complete``). At most ``max_waiters``
wait at once; a produce that finds the purgatory full answers at once, its unfinished partitions
with REQUEST_TIMED_OUT (bounded, never an unbounded queue).

The asyncio shell is ``broker.delayed_produce.DelayedProduces``; deadlines are monotonic
milliseconds, passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pykraft.protocol.errors import Errors
from pykraft.replica.waiters import Purgatory
from pykraft.storage.topic_partition import TopicPartition

# Upper bound on concurrently waiting produces (STYLE.md §7).
MAX_DELAYED_PRODUCES = 10_000

# (partition, required offset) -> (done, error): Kafka's checkEnoughReplicasReachOffset.
ReplicaChecker = Callable[[TopicPartition, int], tuple[bool, Errors]]


@attrs.define
class _PartitionStatus:
    required_offset: int
    acks_pending: bool = True
    # Kafka starts every waiting partition at REQUEST_TIMED_OUT: what it answers if nothing
    # completes it before the deadline.
    error: Errors = Errors.REQUEST_TIMED_OUT


@attrs.define
class _Waiter:
    statuses: dict[TopicPartition, _PartitionStatus]

    def errors(self) -> dict[TopicPartition, Errors]:
        return {tp: status.error for tp, status in self.statuses.items()}


class ProducePurgatory(Purgatory[_Waiter]):
    """Pure bookkeeping of waiting produces, keyed by partition; no clock, no I/O."""

    def __init__(self, max_waiters: int = MAX_DELAYED_PRODUCES) -> None:
        super().__init__(max_waiters)

    def watching(self, topic_partition: TopicPartition) -> int:
        return self._index.watching(topic_partition)

    def try_watch(
        self, required_offsets: Mapping[TopicPartition, int], deadline_ms: int
    ) -> int | None:
        """Add a waiter for ``required_offsets``; None when ``max_waiters`` already wait."""
        assert required_offsets, "a delayed produce waits on at least one partition"
        return self._index.try_add(
            required_offsets,
            deadline_ms,
            lambda _waiter_id: _Waiter(
                {tp: _PartitionStatus(offset) for tp, offset in required_offsets.items()}
            ),
        )

    def try_complete(
        self, waiter_id: int, checker: ReplicaChecker
    ) -> dict[TopicPartition, Errors] | None:
        """Check every waiting partition of one waiter; its errors (removed) when done."""
        waiter = self._index[waiter_id]
        for topic_partition, status in waiter.statuses.items():
            if status.acks_pending:
                _check(topic_partition, status, checker)
        if any(status.acks_pending for status in waiter.statuses.values()):
            return None
        self.remove(waiter_id)
        return waiter.errors()

    def check(
        self, topic_partition: TopicPartition, checker: ReplicaChecker
    ) -> dict[int, dict[TopicPartition, Errors]]:
        """Check the waiters on ``topic_partition``; the completed ones' errors (removed)."""
        completed = {}
        for waiter_id in self._index.watchers(topic_partition):
            errors = self.try_complete(waiter_id, checker)
            if errors is not None:
                completed[waiter_id] = errors
        return completed

    def expire(self, now_ms: int) -> dict[int, dict[TopicPartition, Errors]]:
        """Waiters whose deadline is at or before ``now_ms`` (removed): partitions still
        waiting answer REQUEST_TIMED_OUT."""
        return {waiter_id: waiter.errors() for waiter_id, waiter in self._index.pop_expired(now_ms)}

    def remove(self, waiter_id: int) -> dict[TopicPartition, Errors] | None:
        """Forget a waiter; its errors as they stand (REQUEST_TIMED_OUT where still waiting)."""
        waiter = self._index.pop(waiter_id)
        return None if waiter is None else waiter.errors()


def _check(
    topic_partition: TopicPartition, status: _PartitionStatus, checker: ReplicaChecker
) -> None:
    """Kafka ``DelayedProduce.tryComplete`` for one partition: done on success or any error."""
    done, error = checker(topic_partition, status.required_offset)
    if error is not Errors.NONE or done:
        status.acks_pending = False
        status.error = error


def full_purgatory_errors(
    required_offsets: Mapping[TopicPartition, int], checker: ReplicaChecker
) -> dict[TopicPartition, Errors]:
    """No room to wait: one check now; what is not done yet answers REQUEST_TIMED_OUT."""
    errors = {}
    for topic_partition, required_offset in required_offsets.items():
        status = _PartitionStatus(required_offset)
        _check(topic_partition, status, checker)
        errors[topic_partition] = status.error
    return errors
