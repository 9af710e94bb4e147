"""ReplicaManager on real PartitionLogs and MetadataDeltas replayed from real records: leader,
follower and delete transitions (Kafka's ReplicaManager.applyDelta), produce and fetch with
Kafka's error codes, idempotent duplicates, and delayed fetches.

The harness (``Cluster``) lives in tests/broker/replica_harness.py, shared with the handler tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from pykraft.broker.alter_partition import RecordedAlterPartitions
from pykraft.broker.partition import PartitionRole
from pykraft.broker.replica_manager import (
    AppendResult,
    FetchParams,
    InitialFetchState,
    LogReadResult,
    PartitionFetch,
)
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import local_changes
from pykraft.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pykraft.protocol.errors import Errors
from pykraft.storage.checkpoints import REPLICATION_CHECKPOINT, read_offset_checkpoint
from pykraft.storage.leader_epoch_cache import EpochEntry
from pykraft.storage.log_config import LogConfig
from pykraft.storage.records import ControlRecordType, build_control_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import (
    LOCAL,
    NEW_PETS_ID,
    NOW_MS,
    OTHER,
    PETS0,
    PETS1,
    PETS_ID,
    Cluster,
    at,
    batch,
    broker,
    endpoint,
    partition_record,
    pets_led_here,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


# ------------------------------------------------------------------ metadata transitions


def test_a_new_partition_led_here_gets_a_log_and_leads(cluster: Cluster) -> None:
    cluster.start(*pets_led_here(leader_epoch=3, partition_epoch=7))
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition.role is PartitionRole.LEADER
    assert (partition.leader_epoch, partition.state.partition_epoch) == (3, 7)
    assert (cluster.log_dir / "pets-0").is_dir()
    assert partition.log.leader_epoch_cache.entries == (EpochEntry(3, 0),)
    assert cluster.fetchers.assignments == {}


def test_a_new_partition_followed_here_is_handed_to_the_fetchers(cluster: Cluster) -> None:
    # Kafka ReplicaManager.applyLocalFollowersDelta: makeFollower, then addFetcherForPartitions
    # with the leader's endpoint and the log end as the initial offset.
    cluster.start(
        TopicRecord(name="pets", topic_id=PETS_ID),
        partition_record(PETS_ID, 0, (OTHER, LOCAL), leader_epoch=4),
    )
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition.role is PartitionRole.FOLLOWER
    assert cluster.fetchers.assignments == {
        PETS0: InitialFetchState(
            topic_id=PETS_ID,
            leader_id=OTHER,
            leader_endpoint=endpoint(OTHER),
            current_leader_epoch=4,
            init_offset=0,
        )
    }


def test_leader_to_follower_and_back(cluster: Cluster) -> None:
    cluster.start(*pets_led_here(replicas=(LOCAL, OTHER)))
    assert cluster.produce(PETS0, batch(b"a", b"b")).base_offset == 0
    # The controller elects OTHER: leader epoch 0 -> 1.
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER))
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition.role is PartitionRole.FOLLOWER
    handoff = cluster.fetchers.assignments[PETS0]
    assert (handoff.leader_id, handoff.current_leader_epoch, handoff.init_offset) == (OTHER, 1, 2)
    assert cluster.produce(PETS0, batch(b"c")).error is Errors.NOT_LEADER_OR_FOLLOWER
    # Back to LOCAL: leader epoch 2, fetching stops, epoch 2 starts at the log end.
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=LOCAL))
    assert partition.is_leader and partition.leader_epoch == 2
    assert cluster.fetchers.assignments == {}
    assert partition.log.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(2, 2))
    assert cluster.produce(PETS0, batch(b"c")).base_offset == 2


def test_a_new_leader_epoch_of_the_same_leader_restarts_the_fetcher(cluster: Cluster) -> None:
    cluster.start(
        TopicRecord(name="pets", topic_id=PETS_ID),
        partition_record(PETS_ID, 0, (OTHER, LOCAL)),
    )
    assert cluster.fetchers.assignments[PETS0].current_leader_epoch == 0
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER))
    assert cluster.fetchers.assignments[PETS0].current_leader_epoch == 1
    # An ISR change alone (partition epoch only) leaves the fetcher as it is.
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, isr=(OTHER,)))
    assert cluster.fetchers.assignments[PETS0].current_leader_epoch == 1


def test_deleting_the_topic_deletes_the_log(cluster: Cluster) -> None:
    cluster.start(
        *pets_led_here(),
        partition_record(PETS_ID, 1, (OTHER, LOCAL)),
    )
    cluster.produce(PETS0, batch(b"a"))
    assert PETS1 in cluster.fetchers.assignments
    changes = cluster.publish(RemoveTopicRecord(topic_id=PETS_ID))
    assert changes.deletes == {PETS0, PETS1}
    assert cluster.replica_manager.partitions == {}
    assert cluster.fetchers.assignments == {}
    assert not (cluster.log_dir / "pets-0").exists()
    assert not (cluster.log_dir / "pets-1").exists()
    assert cluster.produce(PETS0, batch(b"b")).error is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_a_replica_moved_away_is_deleted(cluster: Cluster) -> None:
    cluster.start(*pets_led_here(replicas=(LOCAL, OTHER)))
    cluster.publish(
        PartitionChangeRecord(
            topic_id=PETS_ID, partition_id=0, leader=OTHER, replicas=(OTHER,), isr=(OTHER,)
        )
    )
    assert cluster.replica_manager.get_partition(PETS0) is None
    assert not (cluster.log_dir / "pets-0").exists()
    # The topic still exists, this broker just does not host it (getPartitionOrException).
    assert cluster.produce(PETS0, batch(b"a")).error is Errors.NOT_LEADER_OR_FOLLOWER


def test_an_isr_change_answered_after_the_topic_was_recreated_is_dropped(
    cluster: Cluster,
) -> None:
    """The ISR expiration proposed a shrink; the topic is deleted and created again before the
    controller answers: the answer reaches the old shell and changes nothing."""
    cluster.start(*pets_led_here(replicas=(LOCAL, OTHER)))
    cluster.clock.now_ms += 30_001  # OTHER never fetched: out of sync
    assert cluster.replica_manager.maybe_shrink_isr() == 1
    alter = cluster.replica_manager.alter_partition
    assert isinstance(alter, RecordedAlterPartitions) and len(alter.items) == 1
    cluster.publish(
        RemoveTopicRecord(topic_id=PETS_ID),
        TopicRecord(name="pets", topic_id=NEW_PETS_ID),
        partition_record(NEW_PETS_ID, 0, (LOCAL, OTHER), leader=LOCAL),
    )
    alter.complete(partition_epoch=1)
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition.topic_id == NEW_PETS_ID
    assert partition.state.isr == (LOCAL, OTHER) and partition.state.pending_isr_change is None


def test_recreated_topic_starts_from_an_empty_log(cluster: Cluster) -> None:
    # One delta deletes "pets" and creates it again under a new id: deletes first.
    cluster.start(*pets_led_here())
    cluster.produce(PETS0, batch(b"old", b"old"))
    cluster.publish(
        RemoveTopicRecord(topic_id=PETS_ID),
        TopicRecord(name="pets", topic_id=NEW_PETS_ID),
        partition_record(NEW_PETS_ID, 0, (LOCAL,)),
    )
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition.topic_id == NEW_PETS_ID
    assert partition.log_end_offset == 0
    assert cluster.produce(PETS0, batch(b"new")).base_offset == 0


def test_a_missed_delete_is_caught_by_the_topic_id(cluster: Cluster) -> None:
    cluster.start(*pets_led_here())
    cluster.produce(PETS0, batch(b"old"))
    # The broker learns the new incarnation from a snapshot-like delta that never saw the
    # RemoveTopicRecord: same name, another topic id.
    stale = cluster.replica_manager.get_partition(PETS0)
    assert stale is not None
    fresh = MetadataDelta(MetadataImage.EMPTY)
    for record in (
        broker(LOCAL),
        broker(OTHER),
        TopicRecord(name="pets", topic_id=NEW_PETS_ID),
        partition_record(NEW_PETS_ID, 0, (LOCAL,)),
    ):
        fresh.replay(record)
    image = fresh.apply()
    cluster.replica_manager.apply_delta(local_changes(fresh, LOCAL), image, NOW_MS)
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition is not stale
    assert partition.topic_id == NEW_PETS_ID and partition.log_end_offset == 0


def test_a_redelivered_older_delta_is_ignored(cluster: Cluster) -> None:
    # Kafka Partition.makeLeader/makeFollower skip a partition epoch below the current one.
    old_changes = cluster.publish(
        broker(LOCAL), broker(OTHER), *pets_led_here(replicas=(LOCAL, OTHER))
    )
    old_image = cluster.image
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER))
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None
    before = partition.state
    cluster.replica_manager.apply_delta(old_changes, old_image, NOW_MS)
    assert partition.state == before
    assert partition.role is PartitionRole.FOLLOWER


def test_topic_configs_become_the_log_config(cluster: Cluster) -> None:
    cluster.start(
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="pets",
            name="segment.bytes",
            value="2048",
        ),
        *pets_led_here(),
    )
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition.log.config.segment_bytes == 2048


# ------------------------------------------------------------------ produce and fetch


def test_produce_then_fetch_returns_the_exact_bytes(cluster: Cluster) -> None:
    cluster.start(*pets_led_here(leader_epoch=5, partition_epoch=5))
    first, second = batch(b"a", b"b"), batch(b"c")
    sent = [bytes(first), bytes(second)]
    assert cluster.produce(PETS0, first).base_offset == 0
    assert cluster.produce(PETS0, second).base_offset == 2
    [result] = cluster.fetch(at(PETS0, 0))
    assert result.error is Errors.NONE
    assert (result.high_watermark, result.log_start_offset, result.log_end_offset) == (3, 0, 3)
    data = b"".join(piece.read_bytes() for piece in result.slices)
    # The stored bytes are the client's, with only base offset and leader epoch stamped.
    expected = bytearray(sent[0] + sent[1])
    expected[0:8] = (0).to_bytes(8, "big")
    expected[12:16] = (5).to_bytes(4, "big")
    second_at = len(sent[0])
    expected[second_at : second_at + 8] = (2).to_bytes(8, "big")
    expected[second_at + 12 : second_at + 16] = (5).to_bytes(4, "big")
    assert data == bytes(expected)


def test_read_only_request_buffers_are_copied_before_stamping(cluster: Cluster) -> None:
    cluster.start(*pets_led_here())
    data = bytes(batch(b"a"))
    results = asyncio.run(
        cluster.replica_manager.append_records(
            {PETS0: memoryview(data)}, required_acks=1, timeout_ms=0, now_ms=NOW_MS
        )
    )
    assert results[PETS0].error is Errors.NONE


def test_fetch_size_rules(cluster: Cluster) -> None:
    # Kafka ReplicaManager.readFromLog: the first non-empty partition may exceed the limits
    # with one whole batch; later partitions get min(partition_max_bytes, bytes left).
    cluster.start(*pets_led_here(), partition_record(PETS_ID, 1, (LOCAL,)))
    big = batch(b"x" * 300)
    cluster.produce(PETS0, big)
    cluster.produce(PETS1, batch(b"y" * 300))
    small = PartitionFetch(topic_partition=PETS0, fetch_offset=0, partition_max_bytes=10)
    other = PartitionFetch(topic_partition=PETS1, fetch_offset=0, partition_max_bytes=1 << 20)
    first, second = cluster.fetch(small, other, max_bytes=len(big) + 5)
    assert first.size_in_bytes == len(big)  # whole batch despite partition_max_bytes=10
    assert second.size_in_bytes == 0  # only 5 bytes were left: no whole batch fits


def test_acks_must_be_minus_one_zero_or_one(cluster: Cluster) -> None:
    cluster.start(*pets_led_here())
    result = cluster.produce(PETS0, batch(b"a"), acks=2)
    assert result.error is Errors.INVALID_REQUIRED_ACKS
    assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 0  # type: ignore[union-attr]


def test_acks_all_with_rf1_completes_at_once(cluster: Cluster) -> None:
    # Kafka DelayedProduce.tryCompleteElseWatch: the first check already finds the high
    # watermark past the batch, so the produce never waits.
    cluster.start(*pets_led_here())
    results = asyncio.run(
        cluster.replica_manager.append_records(
            {PETS0: batch(b"a", b"b")}, required_acks=-1, timeout_ms=0, now_ms=NOW_MS
        )
    )
    assert results[PETS0] == AppendResult(
        base_offset=0, log_start_offset=0, appended_bytes=len(batch(b"a", b"b")), last_offset=1
    )


def test_not_enough_replicas_uses_the_topic_min_insync_replicas(cluster: Cluster) -> None:
    cluster.start(
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="pets",
            name="min.insync.replicas",
            value="2",
        ),
        *pets_led_here(replicas=(LOCAL, OTHER), isr=(LOCAL,)),
    )
    assert cluster.produce(PETS0, batch(b"a"), acks=-1).error is Errors.NOT_ENOUGH_REPLICAS
    assert cluster.produce(PETS0, batch(b"a"), acks=1).error is Errors.NONE


def corrupt(data: bytearray) -> bytearray:
    data[-1] ^= 0xFF  # inside the CRC-covered records
    return data


def control_batch() -> bytearray:
    return bytearray(
        build_control_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=0, timestamp=0)
    )


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (lambda: corrupt(batch(b"a")), Errors.CORRUPT_MESSAGE),
        (lambda: batch(b"a")[:40], Errors.CORRUPT_MESSAGE),  # a torn header
        (lambda: None, Errors.INVALID_RECORD),  # null records
        (lambda: bytearray(), Errors.INVALID_RECORD),
        (control_batch, Errors.INVALID_RECORD),  # clients may not write control batches
        (lambda: batch(b"x" * 2000), Errors.MESSAGE_TOO_LARGE),  # max.message.bytes=1000
    ],
)
def test_produce_errors(tmp_path: Path, records: object, expected: Errors) -> None:
    cluster = Cluster(tmp_path, LogConfig(max_message_bytes=1000))
    try:
        cluster.start(*pets_led_here())
        result = cluster.produce(PETS0, records())  # type: ignore[operator]
        assert result.error is expected
        assert result.error_message
        assert result.base_offset == -1
        assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 0  # type: ignore[union-attr]
    finally:
        cluster.close()


def test_unknown_and_internal_topics(cluster: Cluster) -> None:
    cluster.start(*pets_led_here())
    assert cluster.produce(TopicPartition("nope", 0), batch(b"a")).error is (
        Errors.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert cluster.produce(PETS1, batch(b"a")).error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.produce(TopicPartition("__consumer_offsets", 0), batch(b"a")).error is (
        Errors.INVALID_TOPIC_EXCEPTION
    )


def test_duplicate_idempotent_batch_gets_the_original_offsets(cluster: Cluster) -> None:
    # Kafka ProducerStateManager: a retry of one of the last five batches is a duplicate.
    cluster.start(*pets_led_here())
    cluster.produce(PETS0, batch(b"first"))

    def idempotent(sequence: int, *values: bytes) -> bytearray:
        return batch(*values, producer_id=7, producer_epoch=0, base_sequence=sequence)

    original = cluster.produce(PETS0, idempotent(0, b"a", b"b"))
    assert original.base_offset == 1
    retry = cluster.produce(PETS0, idempotent(0, b"a", b"b"))
    assert retry.error is Errors.NONE and retry.base_offset == 1 and retry.appended_bytes == 0
    assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 3  # type: ignore[union-attr]
    gap = cluster.produce(PETS0, idempotent(5, b"c"))
    assert gap.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_fetch_errors(cluster: Cluster) -> None:
    cluster.start(
        *pets_led_here(leader_epoch=4, partition_epoch=4),
        partition_record(PETS_ID, 1, (OTHER, LOCAL)),
    )
    cluster.produce(PETS0, batch(b"a"))

    def error(fetch: PartitionFetch, replica_id: int = -1) -> Errors:
        [result] = cluster.fetch(fetch, replica_id=replica_id)
        if result.error is not Errors.NONE:
            # Kafka's createLogReadResult(e): unknown offsets on an error.
            assert (result.high_watermark, result.log_start_offset) == (-1, -1)
        return result.error

    assert error(at(TopicPartition("nope", 0), 0)) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert error(at(PETS1, 0)) is Errors.NOT_LEADER_OR_FOLLOWER  # a follower here
    assert error(at(PETS0, 0, current_leader_epoch=3)) is Errors.FENCED_LEADER_EPOCH
    assert error(at(PETS0, 0, current_leader_epoch=5)) is Errors.UNKNOWN_LEADER_EPOCH
    assert error(at(PETS0, 2)) is Errors.OFFSET_OUT_OF_RANGE
    assert error(at(PETS0, 0), replica_id=OTHER) is Errors.NOT_LEADER_OR_FOLLOWER  # not a replica
    assert error(at(PETS0, 1, current_leader_epoch=4)) is Errors.NONE


# ------------------------------------------------------------------ delayed fetch


def fetch_params(min_bytes: int, max_wait_ms: int = 500) -> FetchParams:
    return FetchParams(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        partitions=(at(PETS0, 0),),
    )


def test_a_waiting_fetch_is_woken_by_an_append(cluster: Cluster) -> None:
    cluster.start(*pets_led_here())

    async def scenario() -> list[LogReadResult]:
        task = asyncio.ensure_future(cluster.replica_manager.fetch_messages(fetch_params(1)))
        await asyncio.sleep(0)
        assert not task.done()  # nothing to read yet: it waits in the purgatory
        cluster.produce(PETS0, batch(b"a"))
        return await task

    [result] = asyncio.run(scenario())
    assert result.size_in_bytes == len(batch(b"a"))


def fetch_woken_by_one_produce_over_both_pets(
    cluster: Cluster, replica_id: int
) -> list[LogReadResult]:
    """A fetch of pets-0 and pets-1 waits; one Produce request appends to both (from a loop
    callback, as the listener's read callback runs a Produce's first step)."""
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=(at(PETS0, 0), at(PETS1, 0)),
    )

    async def scenario() -> list[LogReadResult]:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(cluster.replica_manager.fetch_messages(params))
        await asyncio.sleep(0)
        loop.call_soon(
            lambda: cluster.replica_manager.append_to_local_log(
                {PETS0: batch(b"a"), PETS1: batch(b"b")}, required_acks=1, now_ms=NOW_MS
            )
        )
        return await task

    return asyncio.run(scenario())


def test_a_follower_woken_by_a_request_reads_all_its_partitions_appends(
    cluster: Cluster,
) -> None:
    # Kafka completes the DelayedFetches a produce makes completable after the request's
    # appends (its action queue): the woken follower reads every partition the request
    # appended, not the first one.
    cluster.start(
        *pets_led_here(replicas=(LOCAL, OTHER)), partition_record(PETS_ID, 1, (LOCAL, OTHER))
    )
    results = fetch_woken_by_one_produce_over_both_pets(cluster, replica_id=OTHER)
    assert [result.size_in_bytes for result in results] == [len(batch(b"a")), len(batch(b"b"))]


def test_a_waiting_fetch_answers_empty_at_its_deadline(cluster: Cluster) -> None:
    cluster.start(*pets_led_here())

    async def scenario() -> list[LogReadResult]:
        task = asyncio.ensure_future(cluster.replica_manager.fetch_messages(fetch_params(1)))
        await asyncio.sleep(0)
        cluster.clock.now_ms += 500
        assert cluster.replica_manager.delayed_fetches.expire_due() == 1
        return await task

    [result] = asyncio.run(scenario())
    assert result.error is Errors.NONE and result.size_in_bytes == 0


def test_a_leadership_change_answers_waiting_fetches(cluster: Cluster) -> None:
    cluster.start(*pets_led_here(replicas=(LOCAL, OTHER)))

    async def scenario() -> list[LogReadResult]:
        task = asyncio.ensure_future(cluster.replica_manager.fetch_messages(fetch_params(1)))
        await asyncio.sleep(0)
        cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER))
        return await task

    [result] = asyncio.run(scenario())
    assert result.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_fetches_that_need_not_wait_answer_at_once(cluster: Cluster) -> None:
    cluster.start(*pets_led_here())
    cluster.produce(PETS0, batch(b"a"))

    async def fetch(params: FetchParams) -> list[LogReadResult]:
        return await cluster.replica_manager.fetch_messages(params)

    assert asyncio.run(fetch(fetch_params(1)))[0].size_in_bytes > 0  # min_bytes reached
    assert asyncio.run(fetch(fetch_params(10**6, max_wait_ms=0)))[0].size_in_bytes > 0
    errored = attrs.evolve(fetch_params(10**6), partitions=(at(PETS0, 9),))
    assert asyncio.run(fetch(errored))[0].error is Errors.OFFSET_OUT_OF_RANGE
    assert len(cluster.replica_manager.delayed_fetches.purgatory) == 0


def test_an_isr_only_change_does_not_wake_waiting_fetches(cluster: Cluster) -> None:
    cluster.start(*pets_led_here(replicas=(LOCAL, OTHER)))

    async def scenario() -> list[LogReadResult]:
        task = asyncio.ensure_future(cluster.replica_manager.fetch_messages(fetch_params(1)))
        await asyncio.sleep(0)
        cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, isr=(LOCAL,)))
        await asyncio.sleep(0)
        assert not task.done()  # same leader epoch: nothing for the fetch to learn
        cluster.produce(PETS0, batch(b"a"))
        return await task

    [result] = asyncio.run(scenario())
    assert result.error is Errors.NONE and result.size_in_bytes > 0


def test_a_follower_without_a_leader_stops_fetching(cluster: Cluster) -> None:
    # The leader's broker went away and no ISR member could take over: leader -1.
    cluster.start(
        TopicRecord(name="pets", topic_id=PETS_ID),
        partition_record(PETS_ID, 0, (OTHER, LOCAL), isr=(OTHER,)),
    )
    assert PETS0 in cluster.fetchers.assignments
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=-1))
    partition = cluster.replica_manager.get_partition(PETS0)
    assert partition is not None and partition.role is PartitionRole.FOLLOWER
    assert partition.state.leader_id == -1
    assert cluster.fetchers.assignments == {}


def test_stray_logs_are_deleted_at_start_up(tmp_path: Path) -> None:
    # KAFKA-14616: replicas deleted or moved away while the broker was down.
    first = Cluster(tmp_path)
    first.start(*pets_led_here(), partition_record(PETS_ID, 1, (LOCAL,)))
    first.produce(PETS0, batch(b"a"))
    first.close()
    restarted = Cluster(tmp_path)  # reopens the same log dir
    try:
        assert set(restarted.log_manager.logs) == {PETS0, PETS1}
        image_records: list[MetadataRecord] = [
            broker(LOCAL),
            broker(OTHER),
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 0, (LOCAL,)),
            partition_record(PETS_ID, 1, (OTHER,)),
        ]
        delta = MetadataDelta(MetadataImage.EMPTY)
        for record in image_records:
            delta.replay(record)
        image = delta.apply()
        assert restarted.replica_manager.delete_stray_logs(image) == [PETS1]
        assert set(restarted.log_manager.logs) == {PETS0}
        assert not (restarted.log_dir / "pets-1").exists()
    finally:
        restarted.close()


def test_tick_checkpoints_high_watermarks_from_start_up_every_interval(tmp_path: Path) -> None:
    """Kafka's ReplicaManager runs highwatermark-checkpoint from start-up on, every
    replica.high.watermark.checkpoint.interval.ms (``scheduler.schedule(..., 0L, interval)``)."""
    cluster = Cluster(tmp_path, high_watermark_checkpoint_interval_ms=5_000)
    checkpoint = cluster.log_dir / REPLICATION_CHECKPOINT
    try:
        start_ms = cluster.clock.now_ms
        assert cluster.replica_manager.next_deadline_ms() == start_ms
        cluster.start(*pets_led_here())
        cluster.produce(PETS0, batch(b"a"))
        assert cluster.replica_manager.tick().checkpoint_high_watermarks
        assert read_offset_checkpoint(checkpoint) == {PETS0: 1}
        assert cluster.replica_manager.next_deadline_ms() == start_ms + 5_000
        cluster.produce(PETS0, batch(b"b"))
        cluster.clock.now_ms = start_ms + 4_999
        assert not cluster.replica_manager.tick().checkpoint_high_watermarks
        assert read_offset_checkpoint(checkpoint) == {PETS0: 1}
        cluster.clock.now_ms = start_ms + 5_000
        assert cluster.replica_manager.tick().checkpoint_high_watermarks
        assert read_offset_checkpoint(checkpoint) == {PETS0: 2}
    finally:
        cluster.close()


def test_the_replica_core_holds_the_core_of_every_hosted_partition(cluster: Cluster) -> None:
    cluster.start(*pets_led_here())
    partition = cluster.replica_manager.partition_or_error(PETS0)
    assert cluster.replica_manager.core.partitions == {PETS0: partition.core}
    cluster.publish(RemoveTopicRecord(topic_id=PETS_ID))
    assert cluster.replica_manager.core.partitions == {}


def test_a_consumer_woken_by_a_request_reads_all_its_partitions_appends(cluster: Cluster) -> None:
    # With the leader alone in the ISR the high watermark moves inside each partition's append;
    # Kafka completes the DelayedFetches it makes completable after the request's appends (its
    # action queue): the woken consumer reads every partition the request appended, not the
    # first one.
    cluster.start(*pets_led_here(), partition_record(PETS_ID, 1, (LOCAL,)))
    results = fetch_woken_by_one_produce_over_both_pets(cluster, replica_id=-1)
    assert [result.size_in_bytes for result in results] == [len(batch(b"a")), len(batch(b"b"))]
