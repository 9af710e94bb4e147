"""One step of filling a future log from its partition's current log (KIP-113).

Kafka's ``ReplicaAlterLogDirsThread`` is a fetcher whose leader is the local current log
(``fetchFromLeader`` reads it through ``ReplicaManager.fetchMessages``): it reconciles the
future log with the current one by leader epoch (``fetchEpochEndOffsets`` answers from the
current log's epoch cache), appends what it read as a follower would (offsets and epochs kept),
follows the current log's high watermark and log start offset, and — once the future log has
caught up — asks for the swap (``Partition.maybeReplaceCurrentWithFutureReplica``, which swaps
only when the two log ends are equal, under the partition's lock).

``copy_step`` is that loop's body, synchronous and clock-free: the caller (an asyncio shell)
runs it between other work, so nothing is appended to the current log while one step runs, and
calls ``LogManager.replace_current_with_future_log`` when it answers ``CAUGHT_UP``.
"""

from __future__ import annotations

import enum

from pykraft.storage.leader_epoch_cache import UNDEFINED_EPOCH_OFFSET
from pykraft.storage.partition_log import PartitionLog

# How much one step copies at most (Kafka's replica.fetch.max.bytes default, 1 MiB).
COPY_STEP_MAX_BYTES = 1024 * 1024


class CopyStep(enum.Enum):
    COPIED = "copied"  # progress made; more to copy
    CAUGHT_UP = "caught_up"  # the future log ends where the current one does: swap now


def reconcile(current: PartitionLog, future: PartitionLog, now_ms: int) -> None:
    """Truncate what of ``future`` the current log no longer has (KIP-101/279 against the
    local log), and restart it at the current log start when it fell below it (Kafka's
    out-of-range handling: ``truncateFullyAndStartAt(leaderLogStartOffset)``)."""
    latest = future.leader_epoch_cache.latest_epoch
    if latest is not None and future.log_end_offset > future.log_start_offset:
        answer = current.leader_epoch_cache.end_offset_for(latest, current.log_end_offset)
        if answer.offset == UNDEFINED_EPOCH_OFFSET:
            future.truncate_fully_and_start_at(current.log_start_offset, now_ms)
        else:
            end = answer.offset
            if answer.leader_epoch != latest:  # the current log never had ``latest``
                mine = future.leader_epoch_cache.end_offset_for(
                    answer.leader_epoch, future.log_end_offset
                )
                end = min(end, mine.offset)
            future.truncate_to(min(end, future.log_end_offset))
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(current.log_end_offset)
    if future.log_end_offset < current.log_start_offset or (
        future.log_end_offset == future.log_start_offset
        and future.log_start_offset != current.log_start_offset
    ):
        future.truncate_fully_and_start_at(current.log_start_offset, now_ms)


def copy_step(
    current: PartitionLog,
    future: PartitionLog,
    now_ms: int,
    max_bytes: int = COPY_STEP_MAX_BYTES,
) -> CopyStep:
    """Copy at most ``max_bytes`` (one whole batch at least) from ``current`` into
    ``future``; ``CAUGHT_UP`` when both end at the same offset afterwards."""
    reconcile(current, future, now_ms)
    if future.log_end_offset < current.log_end_offset:
        data = current.read(future.log_end_offset, max_bytes, current.log_end_offset).read_bytes()
        future.append_as_follower(data, now_ms)
    future.update_high_watermark(min(current.high_watermark, future.log_end_offset))
    if current.log_start_offset > future.log_start_offset:
        future.delete_records(min(current.log_start_offset, future.high_watermark))
    if future.log_end_offset == current.log_end_offset:
        return CopyStep.CAUGHT_UP
    return CopyStep.COPIED


def offset_lag(current: PartitionLog, future: PartitionLog) -> int:
    """DescribeLogDirs' ``offset_lag`` of a future replica: how far it trails the current log
    (Kafka ``ReplicaManager.describeLogDirs``: ``max(current LEO - future LEO, 0)``)."""
    return max(current.log_end_offset - future.log_end_offset, 0)
