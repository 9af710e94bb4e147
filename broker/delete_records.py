"""DeleteRecords on the leaders of this broker (Kafka's ``ReplicaManager.deleteRecords``,
``deleteRecordsOnLocalLog``, ``Partition.deleteRecordsOnLeader``) and the asyncio shell of the
waiting ones (``DelayedDeleteRecords`` over the pure ``replica.delete_records_waiters``).

Each partition is tried in turn: an internal topic is INVALID_TOPIC_EXCEPTION; one not led here
answers the error ``ReplicaManager.partition_or_error`` gives (UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR); a log whose ``cleanup.policy`` lacks ``delete``
is POLICY_VIOLATION; offset -1 means the high watermark; an offset below 0 or past the high
watermark is OFFSET_OUT_OF_RANGE (``UnifiedLog.maybeIncrementLogStartOffset``). Otherwise the
leader's log start moves now (``UnifiedLog.delete_records``: the segments wholly below it go
with it) and the partition waits for the low watermark. The answer comes at once when no
partition moved (``delayedDeleteRecordsRequired``), else once every moved partition's low
watermark reached its offset, its leadership moved, or ``timeout_ms`` passed.

Waiting requests are held by ``broker.delayed_operations.DelayedOperations``, as produces are:
inside a ``ReplicaManager`` with a timer the purgatory is its ``ReplicaCore``'s, whose ``tick``
expires the waiters; standing alone the shell keeps its own ``DeadlineTimer``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pykraft.broker.delayed_operations import DelayedOperations
from pykraft.broker.partition import Partition, PartitionError
from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import INTERNAL_TOPICS
from pykraft.replica.delete_records_waiters import (
    MAX_DELAYED_DELETE_RECORDS,
    DeleteRecordsPurgatory,
    DeleteRecordsResult,
    LowWatermarkChecker,
    delete_offset,
    low_watermark,
)
from pykraft.replica.partition_state import error_for
from pykraft.storage.log_config import CleanupPolicy
from pykraft.storage.log_validator import LogError
from pykraft.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from pykraft.broker.replica_manager import ReplicaManager

__all__ = [
    "DelayedDeleteRecords",
    "DeleteRecordsDone",
    "DeleteRecordsResult",
    "delete_records_on_leader",
    "partition_low_watermark",
    "start_delete_records",
]

logger = logging.getLogger(__name__)

# Every partition's result, once the request is answered.
DeleteRecordsDone = Callable[[dict[TopicPartition, DeleteRecordsResult]], None]


def partition_low_watermark(partition: Partition) -> DeleteRecordsResult:
    """Kafka ``lowWatermarkIfLeader`` as a result: NOT_LEADER_OR_FOLLOWER off the leader."""
    found = low_watermark(partition.state, partition.log_start_offset, partition.context.broker)
    if found is None:
        return DeleteRecordsResult(error=Errors.NOT_LEADER_OR_FOLLOWER)
    return DeleteRecordsResult(found)


def delete_records_on_leader(partition: Partition, offset: int) -> tuple[int, int]:
    """Kafka ``Partition.deleteRecordsOnLeader``: move the leader's log start to ``offset``
    (-1: the high watermark); (the offset asked for, the low watermark now). Raises
    ``PartitionError``."""
    if not partition.is_leader:
        raise PartitionError(
            Errors.NOT_LEADER_OR_FOLLOWER,
            f"leader not local for {partition.topic_partition} on broker "
            f"{partition.local_broker_id}",
        )
    log = partition.log
    if CleanupPolicy.DELETE not in log.config.cleanup_policy:
        raise PartitionError(
            Errors.POLICY_VIOLATION,
            f"records of {partition.topic_partition} cannot be deleted due to the configured "
            "policy",
        )
    requested = delete_offset(offset, log.high_watermark)
    try:
        log.delete_records(requested)
    except (OSError, LogError) as failure:
        raise PartitionError(error_for(failure), str(failure)) from failure
    return requested, partition_low_watermark(partition).low_watermark


def _delete_on_local_log(
    manager: ReplicaManager, offsets: Mapping[TopicPartition, int]
) -> tuple[dict[TopicPartition, DeleteRecordsResult], dict[TopicPartition, tuple[int, int]]]:
    """Kafka ``deleteRecordsOnLocalLog``: the partitions that failed with their results, and
    the ones whose log start moved with (required offset, low watermark)."""
    failed: dict[TopicPartition, DeleteRecordsResult] = {}
    accepted: dict[TopicPartition, tuple[int, int]] = {}
    for topic_partition, offset in offsets.items():
        if topic_partition.topic in INTERNAL_TOPICS:
            failed[topic_partition] = DeleteRecordsResult(error=Errors.INVALID_TOPIC_EXCEPTION)
            continue
        try:
            partition = manager.partition_or_error(topic_partition)
            accepted[topic_partition] = delete_records_on_leader(partition, offset)
        except PartitionError as error:
            manager.offline_storage.maybe_fail_log_dir(topic_partition, error)
            logger.info("DeleteRecords on %s: %s", topic_partition, error.message)
            failed[topic_partition] = DeleteRecordsResult(error=error.error)
    return failed, accepted


def start_delete_records(
    manager: ReplicaManager,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_ms: int,
    response_callback: DeleteRecordsDone,
) -> int | None:
    """Kafka ``ReplicaManager.deleteRecords``: delete on the local leaders now, then answer at
    once or once the low watermarks follow. Returns the waiter's id while the answer waits."""
    failed, accepted = _delete_on_local_log(manager, offsets)

    def answer(results: Mapping[TopicPartition, DeleteRecordsResult]) -> None:
        merged = {**failed, **results}
        response_callback({tp: merged[tp] for tp in offsets})

    if not accepted:
        answer({})
        return None
    return manager.delayed_delete_records.try_complete_else_watch(
        accepted,
        timeout_ms=timeout_ms,
        checker=manager.low_watermark_or_error,
        on_done=answer,
    )


class DelayedDeleteRecords(
    DelayedOperations[tuple[int, int], LowWatermarkChecker, DeleteRecordsResult]
):
    """A callback per waiting DeleteRecords request, each answering every moved partition's
    result; one timer unless a ``ReplicaManager`` owns it (``broker.delayed_operations``)."""

    purgatory: DeleteRecordsPurgatory

    def __init__(
        self,
        *,
        monotonic_ms: Callable[[], int],
        max_waiters: int = MAX_DELAYED_DELETE_RECORDS,
    ) -> None:
        super().__init__(DeleteRecordsPurgatory(max_waiters), monotonic_ms=monotonic_ms)
