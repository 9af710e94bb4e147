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
The waiting itself is ``replica.waiters.PartitionsPurgatory``'s, shared with produces; this
module gives the rule. No clock, no I/O: deadlines are monotonic milliseconds passed in; the
asyncio shell is ``broker.delete_records.DelayedDeleteRecords``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pykraft.protocol.errors import Errors
from pykraft.replica.partition_state import BrokerLookup, PartitionRole, PartitionState
from pykraft.replica.waiters import PartitionsPurgatory
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


class DeleteRecordsPurgatory(
    PartitionsPurgatory[tuple[int, int], LowWatermarkChecker, DeleteRecordsResult]
):
    """Pure bookkeeping of waiting DeleteRecords requests, keyed by partition: each partition
    accepted with (required offset, low watermark when accepted)."""

    def __init__(self, max_waiters: int = MAX_DELAYED_DELETE_RECORDS) -> None:
        super().__init__(max_waiters)

    def _accept(self, value: tuple[int, int]) -> tuple[int, DeleteRecordsResult]:
        required_offset, low = value
        # Kafka starts every waiting partition at REQUEST_TIMED_OUT (DelayedDeleteRecords' body).
        return required_offset, DeleteRecordsResult(low, Errors.REQUEST_TIMED_OUT)

    def _try_answer(
        self,
        topic_partition: TopicPartition,
        required_offset: int,
        checker: LowWatermarkChecker,
    ) -> DeleteRecordsResult | None:
        """Kafka ``DelayedDeleteRecords.tryComplete`` for one partition."""
        found = checker(topic_partition)
        if found.error is not Errors.NONE:
            return DeleteRecordsResult(INVALID_LOW_WATERMARK, found.error)
        if found.low_watermark >= required_offset:
            return DeleteRecordsResult(found.low_watermark, Errors.NONE)
        return None
