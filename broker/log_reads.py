"""The leader's reads for a Fetch (Kafka's ``ReplicaManager.readFromLog``), for
``ReplicaManager.read_from_log``.

Every partition is read in request order with Kafka's size rules: each gets at most
``min(partition_max_bytes, bytes left of max_bytes)``, and the first non-empty one may exceed
both with one whole batch (Fetch v3+: ``hardMaxBytesLimit`` is false). A follower's read records
its progress in its ``Partition`` (the ISR and high watermark follow from it) and, since its log
start offset may have moved, re-checks the DeleteRecords waiting on the low watermark
(``broker.delete_records``); the bytes an out-of-sync follower reads of a throttled partition
are bounded by the leader's replication throttle (KIP-73, ``broker.replication_quotas``). A
partition that fails answers its Kafka error code; an I/O error
takes its log dir offline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pykraft.broker.partition import PartitionError
from pykraft.replica.data_path import FetchParams, LogReadResult, PartitionFetch

if TYPE_CHECKING:
    from pykraft.broker.replica_manager import ReplicaManager


def read_from_log(
    manager: ReplicaManager, params: FetchParams, *, update_fetch_state: bool = True
) -> list[LogReadResult]:
    """Read every partition in request order (Kafka's ``readFromLog`` size rules)."""
    results = []
    bytes_left = params.max_bytes
    min_one_batch = True  # Fetch v3+: hardMaxBytesLimit is false
    for fetch in params.partitions:
        max_bytes = min(fetch.partition_max_bytes, bytes_left)
        result = _read_one(manager, params, fetch, max_bytes, min_one_batch, update_fetch_state)
        if result.size_in_bytes > 0:
            min_one_batch = False
        bytes_left = max(0, bytes_left - result.size_in_bytes)
        results.append(result)
    return results


def _read_one(
    manager: ReplicaManager,
    params: FetchParams,
    fetch: PartitionFetch,
    max_bytes: int,
    min_one_batch: bool,
    update_fetch_state: bool,
) -> LogReadResult:
    try:
        partition = manager.partition_or_error(fetch.topic_partition)
        info = partition.fetch_records(
            replica_id=params.replica_id,
            fetch_offset=fetch.fetch_offset,
            max_bytes=max(0, max_bytes),
            isolation=params.isolation,
            min_one_batch=min_one_batch,
            current_leader_epoch=fetch.current_leader_epoch,
            last_fetched_epoch=fetch.last_fetched_epoch,
            replica_epoch=params.replica_epoch,
            follower_log_start_offset=fetch.log_start_offset,
            update_fetch_state=update_fetch_state,
        )
    except PartitionError as error:
        manager.offline_storage.maybe_fail_log_dir(fetch.topic_partition, error)
        return LogReadResult(
            topic_partition=fetch.topic_partition,
            error=error.error,
            error_message=error.message,
        )
    if params.replica_id >= 0 and update_fetch_state:
        # Kafka's updateFollowerFetchState: a moved low watermark completes DeleteRecords.
        manager.delayed_delete_records.check_and_complete(
            fetch.topic_partition, manager.low_watermark_or_error
        )
    result = LogReadResult.of(fetch.topic_partition, info)
    if manager.replication_quotas is not None and params.replica_id >= 0:
        # KIP-73: a throttled, out-of-sync follower's bytes count against the leader throttle.
        result = manager.replication_quotas.throttle_leader_read(
            result, params.replica_id, partition.state.isr, manager.monotonic_ms()
        )
    return result
