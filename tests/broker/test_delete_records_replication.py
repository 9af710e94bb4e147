"""DeleteRecords across three real ReplicaManagers (Kafka's ``ReplicaManagerTest`` /
``DeleteRecordsRequestTest`` with replicas): the leader's log start moves at once, each follower
learns it from its Fetch answer through the shipped ``fetcher.follower_log.append_fetched``
(Kafka's ``maybeIncrementLogStartOffset`` with reason LeaderOffsetIncremented) and reports it in
its next fetch; the answer comes when the low watermark — the smallest log start over the live
replicas — reaches the offset, or at its deadline from the ReplicaManager's one timer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pykraft.broker.delete_records import DeleteRecordsResult
from pykraft.fetcher.follower_log import append_fetched
from pykraft.fetcher.responses import Append
from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import FetchParams, PartitionFetch
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import PETS0, broker
from tests.broker.test_replica_manager_replication import (
    F2,
    F3,
    LAG_MS,
    LEADER,
    ReplicatedCluster,
    run,
    settle,
)


async def follow(cluster: ReplicatedCluster, follower: int) -> None:
    """One fetch by ``follower``, carried out as the fetcher does (records, high watermark,
    then the leader's log start)."""
    log = cluster.managers[follower].partition_or_error(PETS0).log
    latest = log.leader_epoch_cache.latest_epoch
    registration = cluster.image.topics.by_name["pets"].partitions[0]
    params = FetchParams(
        replica_id=follower,
        replica_epoch=100 + follower,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=(
            PartitionFetch(
                topic_partition=PETS0,
                fetch_offset=log.log_end_offset,
                partition_max_bytes=1 << 20,
                current_leader_epoch=registration.leader_epoch,
                last_fetched_epoch=-1 if latest is None else latest,
                log_start_offset=log.log_start_offset,
            ),
        ),
    )
    (result,) = await cluster.leader.fetch_messages(params)
    assert result.error is Errors.NONE
    records = tuple(piece.read_bytes() for piece in result.slices)
    append_fetched(log, Append(records, result.high_watermark, result.log_start_offset))


def start_delete(
    cluster: ReplicatedCluster, offset: int, timeout_ms: int
) -> dict[TopicPartition, DeleteRecordsResult]:
    """Start a DeleteRecords on the leader; the dict fills in when it is answered."""
    answer: dict[TopicPartition, DeleteRecordsResult] = {}
    cluster.leader.start_delete_records(
        {PETS0: offset}, timeout_ms=timeout_ms, response_callback=answer.update
    )
    return answer


def log_starts(cluster: ReplicatedCluster) -> list[int]:
    return [m.partition_or_error(PETS0).log_start_offset for m in cluster.managers.values()]


async def replicated(cluster: ReplicatedCluster, *values: bytes) -> None:
    """Produce and let both followers fetch twice: everyone has the records and the HW."""
    await cluster.produce(*values, acks=1)
    for _ in range(2):
        for follower in (F2, F3):
            await follow(cluster, follower)
    await settle()


def test_the_answer_comes_when_every_follower_moved_its_log_start(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        cluster.start()
        await replicated(cluster, b"a", b"b", b"c", b"d")
        assert cluster.leader.partition_or_error(PETS0).high_watermark == 4
        answer = start_delete(cluster, 3, timeout_ms=30_000)
        assert answer == {} and log_starts(cluster) == [3, 0, 0]
        await follow(cluster, F2)  # learns 3 from the answer...
        assert answer == {} and log_starts(cluster) == [3, 3, 0]
        await follow(cluster, F2)  # ...and reports it now; F3 still holds the low watermark
        await follow(cluster, F3)
        assert answer == {}
        await follow(cluster, F3)
        assert answer == {PETS0: DeleteRecordsResult(3, Errors.NONE)}
        assert log_starts(cluster) == [3, 3, 3]

    run(tmp_path, scenario)


def test_a_fenced_follower_does_not_hold_the_low_watermark(tmp_path: Path) -> None:
    # lowWatermarkIfLeader counts only replicas on alive brokers.
    async def scenario(cluster: ReplicatedCluster) -> None:
        cluster.start()
        await replicated(cluster, b"a", b"b")
        answer = start_delete(cluster, 1, timeout_ms=30_000)
        for _ in range(2):
            await follow(cluster, F2)
        assert answer == {}
        cluster.publish(broker(F3, fenced=True))
        # Nothing re-checks on a fencing alone (as in Kafka): the next fetch does.
        await follow(cluster, F2)
        assert answer == {PETS0: DeleteRecordsResult(1, Errors.NONE)}

    run(tmp_path, scenario)


def test_the_one_timer_expires_a_waiting_delete_records(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        timer = cluster.timers[LEADER]
        cluster.start()
        await replicated(cluster, b"a", b"b")
        answer = start_delete(cluster, -1, timeout_ms=1000)  # -1: the high watermark
        assert timer.armed_ms == cluster.clock.now_ms + 1000  # before the ISR expiration
        assert LAG_MS // 2 > 1000
        timer.fire(cluster.clock)
        assert answer == {PETS0: DeleteRecordsResult(0, Errors.REQUEST_TIMED_OUT)}
        assert log_starts(cluster) == [2, 0, 0]

    run(tmp_path, scenario, timed=True)


def test_shutdown_answers_a_waiting_delete_records(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> Any:
        cluster.start()
        await replicated(cluster, b"a", b"b")
        answer = start_delete(cluster, 2, timeout_ms=30_000)
        cluster.leader.shutdown()
        assert answer == {PETS0: DeleteRecordsResult(0, Errors.REQUEST_TIMED_OUT)}

    run(tmp_path, scenario)
