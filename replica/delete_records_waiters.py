"""Waiting DeleteRecords requests as pure bookkeeping, and the low watermark they wait for
(Kafka's ``DelayedDeleteRecords`` and ``Partition.lowWatermarkIfLeader``).

Theory of operation
-------------------
DeleteRecords moves the leader's log start offset at once (``Partition.deleteRecordsOnLeader``);
the answer then waits until every live replica has moved its own: the *low watermark*, the
smallest log start offset over the leader and the followers on alive (registered, unfenced)
brokers (``low_watermark``), reaches the requested offset. Followers learn the leader's log start
from their Fetch answers and report theirs in their next fetch, so the leader's low watermark
moves on follower fetches. A follower the leader has not heard from since it became leader has
an unknown log start (-1) and holds the low watermark there, as in Kafka.

``DeleteRecordsPurgatory`` is the pure bookkeeping. Like Kafka's ``ReplicaManager
.deleteRecords``, a request waits only when some partition moved its log start; partitions that
failed keep their error and do not wait. Every waiting partition starts at REQUEST_TIMED_OUT
with the low watermark known when it was accepted, which is what it answers if its deadline
(the request's ``timeout_ms``) passes first (``DelayedDeleteRecords.onExpiration``). A check
asks a ``checker(partition) -> (low_watermark, error)``: an error (no longer the leader: the
partition is NOT_LEADER_OR_FOLLOWER, offline KAFKA_STORAGE_ERROR, gone UNKNOWN_TOPIC_OR_PARTITION)
completes the partition with low watermark -1; a low watermark at or past the required offset
completes it with NONE (``DelayedDeleteRecords.tryComplete``). A waiter completes when none of
its partitions waits. Checks run when the request starts waiting, on every follower fetch of a
watched partition and when it changes leadership. At most ``max_waiters`` wait at once; a
request that finds the purgatory full is checked once and answered (bounded, STYLE.md §7).
No clock, no I/O: deadlines are monotonic milliseconds passed in; the asyncio shell is
``broker.delete_records.DelayedDeleteRecords``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import attrs

from pykraft.protocol.errors import Errors
from pykraft.replica.partition_state import BrokerLookup, PartitionRole, PartitionState
from pykraft.replica.waiters import Purgatory
from pykraft.storage.topic_partition import TopicPartition

# Upper bound on concurrently waiting DeleteRecords requests (STYLE.md §7).
MAX_DELAYED_DELETE_RECORDS = 1_000

# Kafka ``DeleteRecordsResponse.INVALID_LOW_WATERMARK``: what a failed partition answers.
INVALID_LOW_WATERMARK = -1

# Kafka ``DeleteRecordsRequest.HIGH_WATERMARK``: "delete up to the high watermark".
HIGH_WATERMARK = -1


class DeleteRecordsResult(NamedTuple):
    """One partition's answer (Kafka's ``DeleteRecordsPartitionResult``)."""

    low_watermark: int = INVALID_LOW_WATERMARK
    error: Errors = Errors.NONE


# partition -> (its low watermark, error): Kafka's lowWatermarkIfLeader or the error a
# partition no longer led here answers.
LowWatermarkChecker = Callable[[TopicPartition], DeleteRecordsResult]


def low_watermark(
    state: PartitionState, log_start_offset: int, brokers: BrokerLookup
) -> int | None:
    """Kafka ``Partition.lowWatermarkIfLeader``: the smallest log start offset over the leader's
    log and every follower on an alive broker; None when this replica does not lead."""
    if state.role is not PartitionRole.LEADER:
        return None
    lowest = log_start_offset
    for replica_id, replica in state.followers.items():
        registration = brokers(replica_id)
        if registration is not None and not registration.fenced:
            lowest = min(lowest, replica.log_start_offset)
    return lowest


def delete_offset(requested: int, high_watermark: int) -> int:
    """The offset a DeleteRecords ``offset`` asks for: -1 is the high watermark
    (``Partition.deleteRecordsOnLeader``); anything else as given (the log checks the range)."""
    return high_watermark if requested == HIGH_WATERMARK else requested


@attrs.define
class _PartitionStatus:
    required_offset: int
    low_watermark: int
    acks_pending: bool = True
    # Kafka starts every waiting partition at REQUEST_TIMED_OUT (DelayedDeleteRecords' body).
    error: Errors = Errors.REQUEST_TIMED_OUT

    def result(self) -> DeleteRecordsResult:
        return DeleteRecordsResult(self.low_watermark, self.error)


@attrs.define
class _Waiter:
    statuses: dict[TopicPartition, _PartitionStatus]

    def results(self) -> dict[TopicPartition, DeleteRecordsResult]:
        return {tp: status.result() for tp, status in self.statuses.items()}


class DeleteRecordsPurgatory(Purgatory[_Waiter]):
    """Pure bookkeeping of waiting DeleteRecords requests, keyed by partition."""

    def __init__(self, max_waiters: int = MAX_DELAYED_DELETE_RECORDS) -> None:
        super().__init__(max_waiters)

    def watching(self, topic_partition: TopicPartition) -> int:
        return self._index.watching(topic_partition)

    def try_watch(
        self, accepted: Mapping[TopicPartition, tuple[int, int]], deadline_ms: int
    ) -> int | None:
        """Add a waiter for ``accepted``: partition -> (required offset, low watermark when
        accepted). None when ``max_waiters`` already wait."""
        assert accepted, "a delayed DeleteRecords waits on at least one partition"
        return self._index.try_add(
            accepted,
            deadline_ms,
            lambda _waiter_id: _Waiter(
                {tp: _PartitionStatus(offset, low) for tp, (offset, low) in accepted.items()}
            ),
        )

    def try_complete(
        self, waiter_id: int, checker: LowWatermarkChecker
    ) -> dict[TopicPartition, DeleteRecordsResult] | None:
        """Check every waiting partition of one waiter; its results (removed) when done."""
        waiter = self._index[waiter_id]
        for topic_partition, status in waiter.statuses.items():
            if status.acks_pending:
                _check(topic_partition, status, checker)
        if any(status.acks_pending for status in waiter.statuses.values()):
            return None
        self._index.pop(waiter_id)
        return waiter.results()

    def check(
        self, topic_partition: TopicPartition, checker: LowWatermarkChecker
    ) -> dict[int, dict[TopicPartition, DeleteRecordsResult]]:
        """Check the waiters on ``topic_partition``; the completed ones' results (removed)."""
        completed = {}
        for waiter_id in self._index.watchers(topic_partition):
            results = self.try_complete(waiter_id, checker)
            if results is not None:
                completed[waiter_id] = results
        return completed

    def expire(self, now_ms: int) -> dict[int, dict[TopicPartition, DeleteRecordsResult]]:
        """Waiters whose deadline is at or before ``now_ms`` (removed): partitions still
        waiting answer REQUEST_TIMED_OUT with the low watermark known when accepted."""
        return {
            waiter_id: waiter.results() for waiter_id, waiter in self._index.pop_expired(now_ms)
        }

    def remove(self, waiter_id: int) -> dict[TopicPartition, DeleteRecordsResult] | None:
        """Forget a waiter; its results as they stand."""
        waiter = self._index.pop(waiter_id)
        return None if waiter is None else waiter.results()


def _check(
    topic_partition: TopicPartition, status: _PartitionStatus, checker: LowWatermarkChecker
) -> None:
    """Kafka ``DelayedDeleteRecords.tryComplete`` for one partition."""
    found = checker(topic_partition)
    if found.error is not Errors.NONE:
        status.acks_pending = False
        status.error = found.error
        status.low_watermark = INVALID_LOW_WATERMARK
    elif found.low_watermark >= status.required_offset:
        status.acks_pending = False
        status.error = Errors.NONE
        status.low_watermark = found.low_watermark


def check_once(
    accepted: Mapping[TopicPartition, tuple[int, int]], checker: LowWatermarkChecker
) -> dict[TopicPartition, DeleteRecordsResult]:
    """No room to wait: one check now; what is not done answers REQUEST_TIMED_OUT."""
    results = {}
    for topic_partition, (required_offset, low) in accepted.items():
        status = _PartitionStatus(required_offset, low)
        _check(topic_partition, status, checker)
        results[topic_partition] = status.result()
    return results
