"""The DeleteRecords handler (Kafka's ``KafkaApis.handleDeleteRecordsRequest``,
``ReplicaManager.deleteRecords``, ``DelayedDeleteRecords``) over a real ReplicaManager and log;
the cases follow Kafka's ``DeleteRecordsRequestTest`` / ``ReplicaManagerTest`` (delete records
to the high watermark, beyond it, on a follower, waiting for the low watermark) and
``PlaintextAdminIntegrationTest.testDeleteRecords`` (records below the offset are gone for
reads and ListOffsets EARLIEST)."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from pykraft.broker.authorization import RequestAuthorizer
from pykraft.broker.handlers.delete_records import delete_records, delete_records_handler
from pykraft.broker.replica_manager import FetchParams
from pykraft.metadata.auth.acl import AclOperation
from pykraft.metadata.records import TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.log_config import CleanupPolicy, LogConfig
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import by_topic, pets_and_birds
from tests.broker.replica_harness import (
    OTHER,
    PETS0,
    PETS1,
    PETS_ID,
    Cluster,
    at,
    batch,
    call_async,
    encode,
    partition_record,
    services,
)
from tests.broker.test_authorization import acl, authorizer, context

_Topic = DeleteRecordsRequest.DeleteRecordsTopic
_Partition = _Topic.DeleteRecordsPartition
EARLIEST = -2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """pets-0 led here alone (RF 1), pets-1 led here with OTHER following, birds-0 followed."""
    harness = Cluster(tmp_path)
    try:
        harness.start(*pets_and_birds(pets0_leader_epoch=4))
        for partition in (PETS0, PETS1):
            for _ in range(3):  # offsets 0-5, two records a batch
                harness.produce(partition, batch(b"a", b"b"))
        yield harness
    finally:
        harness.close()


async def delete_async(
    cluster: Cluster, offsets: list[tuple[str, int, int]], *, timeout_ms: int = 0, version: int = 2
) -> list[tuple[str, int, int, int]]:
    """[(topic, partition, error, low watermark)] for (topic, partition, offset) deletions."""
    topics = by_topic(
        (topic, _Partition(partition_index=index, offset=offset))
        for topic, index, offset in offsets
    )
    request = DeleteRecordsRequest(
        version=version,
        topics=[_Topic(name=name, partitions=parts) for name, parts in topics.items()],
        timeout_ms=timeout_ms,
    )
    body = await call_async(
        delete_records_handler(services(cluster)),
        ApiKey.DELETE_RECORDS,
        version,
        encode(request, version),
    )
    assert body is not None
    response = DeleteRecordsResponse.decode(body, version=version)
    return [
        (topic.name, p.partition_index, p.error_code, p.low_watermark)
        for topic in response.topics
        for p in topic.partitions
    ]


def delete(cluster: Cluster, offsets: list[tuple[str, int, int]], **kwargs: Any) -> list[Any]:
    return asyncio.run(delete_async(cluster, offsets, **kwargs))


def follower_fetch(cluster: Cluster, offset: int, log_start_offset: int) -> None:
    """OTHER fetches pets-1 from ``offset`` reporting its log start (what the fetcher sends)."""
    params = FetchParams(
        replica_id=OTHER,
        replica_epoch=100 + OTHER,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=(at(PETS1, offset, log_start_offset=log_start_offset),),
    )
    [result] = cluster.replica_manager.read_from_log(params)
    assert result.error is Errors.NONE


def earliest(cluster: Cluster, topic_partition: TopicPartition) -> int:
    found = cluster.replica_manager.fetch_offset_for_timestamp(
        topic_partition,
        EARLIEST,
        isolation=None,
        current_leader_epoch=-1,
        fetch_only_from_leader=True,
    )
    assert found is not None
    return found.offset


@pytest.mark.parametrize("version", [0, 1, 2])
def test_records_below_the_offset_are_gone_for_reads_and_list_offsets(
    cluster: Cluster, version: int
) -> None:
    assert delete(cluster, [("pets", 0, 3)], version=version) == [("pets", 0, Errors.NONE, 3)]
    log = cluster.replica_manager.partitions[PETS0].log
    assert log.log_start_offset == 3
    assert earliest(cluster, PETS0) == 3
    [below] = cluster.fetch(at(PETS0, 2))
    assert below.error is Errors.OFFSET_OUT_OF_RANGE
    [inside] = cluster.fetch(at(PETS0, 3))
    # The batch holding offset 3 starts at 2: it is served whole, as Kafka does.
    assert inside.error is Errors.NONE and inside.log_start_offset == 3


def test_minus_one_deletes_up_to_the_high_watermark(cluster: Cluster) -> None:
    assert cluster.replica_manager.partitions[PETS0].high_watermark == 6
    assert delete(cluster, [("pets", 0, -1)]) == [("pets", 0, Errors.NONE, 6)]
    assert earliest(cluster, PETS0) == 6
    # Deleting below the log start again changes nothing and answers the low watermark.
    assert delete(cluster, [("pets", 0, 2)]) == [("pets", 0, Errors.NONE, 6)]


def test_errors_per_partition(cluster: Cluster) -> None:
    # DeleteRecordsRequestTest: beyond the high watermark and below 0 are OFFSET_OUT_OF_RANGE;
    # a follower is NOT_LEADER_OR_FOLLOWER; unknown partitions UNKNOWN_TOPIC_OR_PARTITION.
    answers = delete(
        cluster,
        [("pets", 0, 7), ("pets", 0, 7), ("birds", 0, 0), ("pets", 9, 0), ("cats", 0, 0)],
    )
    assert answers == [  # by topic, in request order; pets-0 named twice answers once
        ("pets", 0, Errors.OFFSET_OUT_OF_RANGE, -1),
        ("pets", 9, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("birds", 0, Errors.NOT_LEADER_OR_FOLLOWER, -1),
        ("cats", 0, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]
    assert delete(cluster, [("pets", 0, -5)]) == [("pets", 0, Errors.OFFSET_OUT_OF_RANGE, -1)]
    assert cluster.replica_manager.partitions[PETS0].log.log_start_offset == 0


def test_internal_topics_cannot_be_deleted_from(cluster: Cluster) -> None:
    offsets_id = "AAAAAAAAAAAAAAAAAAAAAQ"
    cluster.publish(
        TopicRecord(name="__consumer_offsets", topic_id=offsets_id),
        partition_record(offsets_id, 0, (1,)),
    )
    assert delete(cluster, [("__consumer_offsets", 0, -1)]) == [
        ("__consumer_offsets", 0, Errors.INVALID_TOPIC_EXCEPTION, -1)
    ]


def test_a_compact_only_topic_is_a_policy_violation(tmp_path: Path) -> None:
    # Partition.deleteRecordsOnLeader: "can not be deleted due to the configured policy".
    harness = Cluster(tmp_path, LogConfig(cleanup_policy=frozenset({CleanupPolicy.COMPACT})))
    try:
        harness.start(*pets_and_birds(pets0_leader_epoch=4))
        harness.produce(PETS0, batch(b"a"))
        assert delete(harness, [("pets", 0, 1)]) == [("pets", 0, Errors.POLICY_VIOLATION, -1)]
        assert harness.replica_manager.partitions[PETS0].log.log_start_offset == 0
    finally:
        harness.close()


def test_the_answer_waits_until_the_follower_moved_its_log_start(cluster: Cluster) -> None:
    async def scenario() -> list[Any]:
        follower_fetch(cluster, 6, log_start_offset=0)  # caught up, log start 0
        task = asyncio.ensure_future(delete_async(cluster, [("pets", 1, 4)], timeout_ms=30_000))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not task.done()  # the leader moved, the follower has not
        assert cluster.replica_manager.partitions[PETS1].log.log_start_offset == 4
        follower_fetch(cluster, 6, log_start_offset=2)  # not far enough
        await asyncio.sleep(0)
        assert not task.done()
        follower_fetch(cluster, 6, log_start_offset=4)
        return await task

    assert asyncio.run(scenario()) == [("pets", 1, Errors.NONE, 4)]


def test_the_answer_times_out_with_the_low_watermark_it_had(cluster: Cluster) -> None:
    async def scenario() -> list[Any]:
        follower_fetch(cluster, 6, log_start_offset=1)
        task = asyncio.ensure_future(
            delete_async(cluster, [("pets", 1, 4), ("pets", 0, 2)], timeout_ms=500)
        )
        await asyncio.sleep(0)
        cluster.clock.now_ms += 500
        cluster.replica_manager.tick()
        return await task

    # DelayedDeleteRecords.onExpiration: REQUEST_TIMED_OUT; pets-0 (RF 1) was done at once.
    assert asyncio.run(scenario()) == [
        ("pets", 1, Errors.REQUEST_TIMED_OUT, 1),
        ("pets", 0, Errors.NONE, 2),
    ]


def test_losing_leadership_answers_not_leader_or_follower(cluster: Cluster) -> None:
    async def scenario() -> list[Any]:
        follower_fetch(cluster, 6, log_start_offset=0)
        task = asyncio.ensure_future(delete_async(cluster, [("pets", 1, 4)], timeout_ms=30_000))
        await asyncio.sleep(0)
        cluster.publish(
            partition_record(
                PETS_ID, 1, (1, OTHER), leader=OTHER, leader_epoch=2, partition_epoch=2
            )
        )
        return await task

    assert asyncio.run(scenario()) == [("pets", 1, Errors.NOT_LEADER_OR_FOLLOWER, -1)]


def test_without_delete_on_the_topic_nothing_is_deleted(cluster: Cluster) -> None:
    # KafkaApis.handleDeleteRecordsRequest: DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED.
    topics = [_Topic(name="pets", partitions=[_Partition(partition_index=0, offset=4)])]
    request = DeleteRecordsRequest(version=2, topics=topics, timeout_ms=0)

    def answer(holder: RequestAuthorizer) -> list[tuple[int, int]]:
        response = asyncio.run(
            delete_records(
                services(cluster, authorizer=holder),
                request,
                context(ApiKey.DELETE_RECORDS, 2),
            )
        )
        return [(p.error_code, p.low_watermark) for t in response.topics for p in t.partitions]

    assert answer(authorizer(acl(AclOperation.DESCRIBE))) == [
        (Errors.TOPIC_AUTHORIZATION_FAILED, -1)
    ]
    assert cluster.replica_manager.partitions[PETS0].log.log_start_offset == 0
    assert answer(authorizer(acl(AclOperation.DELETE))) == [(Errors.NONE, 4)]


class _CountedTopics(list[Any]):
    """A request's topic list that counts the passes made over it."""

    passes = 0

    def __iter__(self) -> Iterator[Any]:
        self.passes += 1
        return super().__iter__()


def test_many_topics_are_answered_in_a_constant_number_of_passes(cluster: Cluster) -> None:
    # Kafka answers with one groupBy; a pass per distinct topic made 45k topics (one 1 MiB
    # request) quadratic on the event loop. Unknown topics need no ACL and no log.
    count = 2_000
    topics = _CountedTopics(
        _Topic(name=f"t{n % count}", partitions=[_Partition(partition_index=n // count, offset=0)])
        for n in range(2 * count)
    )
    request = types.SimpleNamespace(version=2, timeout_ms=0, topics=topics)
    response = asyncio.run(delete_records(services(cluster), request))
    assert topics.passes <= 3
    assert [t.name for t in response.topics] == [f"t{n}" for n in range(count)]
    # A topic in two entries is answered once, its partitions in the order named.
    assert {
        (p.partition_index, p.error_code, p.low_watermark) for p in response.topics[7].partitions
    } == {(0, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1), (1, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert [p.partition_index for p in response.topics[7].partitions] == [0, 1]
