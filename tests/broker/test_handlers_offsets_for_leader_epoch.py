"""The OffsetsForLeaderEpoch handler (Kafka's handleOffsetForLeaderEpochRequest and
ReplicaManager.lastOffsetForLeaderEpoch), requests and responses through kafka-python's classes
at every served version, answers from the real leader-epoch cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from pykraft.broker.handlers.offsets_for_leader_epoch import offsets_for_leader_epoch_handler
from pykraft.metadata.records import PartitionChangeRecord, TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from tests.broker.handler_support import by_topic
from tests.broker.replica_harness import (
    BIRDS_ID,
    LOCAL,
    OTHER,
    PETS0,
    PETS_ID,
    Cluster,
    batch,
    call,
    encode,
    partition_record,
    pets_led_here,
    services,
)

_Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_Partition = _Topic.OffsetForLeaderPartition
# (topic, partition, current leader epoch, leader epoch) -> (error, leader epoch, end offset)
Answer = tuple[Errors, int, int]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    # pets-0 led here: epoch 1 wrote offsets 0-1, epoch 3 offsets 2-4 (epoch 2 never wrote);
    # birds-0 is followed here; pets-9 does not exist.
    harness = Cluster(tmp_path)
    try:
        harness.start(
            *pets_led_here(replicas=(LOCAL, OTHER), leader_epoch=1, partition_epoch=1),
            TopicRecord(name="birds", topic_id=BIRDS_ID),
            partition_record(BIRDS_ID, 0, (OTHER, LOCAL), leader_epoch=6),
        )
        harness.produce(PETS0, batch(b"a", b"b"))
        for leader in (OTHER, LOCAL):  # epochs 2 (elsewhere) and 3 (here again)
            harness.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=leader))
        harness.produce(PETS0, batch(b"c", b"d", b"e"))
        yield harness
    finally:
        harness.close()


def ask(
    cluster: Cluster, queries: list[tuple[str, int, int, int]], version: int = 4
) -> list[tuple[str, int, Answer]]:
    topics = by_topic(
        (topic, _Partition(partition=partition, current_leader_epoch=current, leader_epoch=epoch))
        for topic, partition, current, epoch in queries
    )
    request = OffsetForLeaderEpochRequest(
        version=version,
        replica_id=OTHER,
        topics=[_Topic(topic=name, partitions=parts) for name, parts in topics.items()],
    )
    handler = offsets_for_leader_epoch_handler(services(cluster))
    body = call(handler, ApiKey.OFFSET_FOR_LEADER_EPOCH, version, encode(request, version))
    assert body is not None
    response = OffsetForLeaderEpochResponse.decode(body, version=version)
    return [
        (topic.topic, p.partition, (Errors(p.error_code), p.leader_epoch, p.end_offset))
        for topic in response.topics
        for p in topic.partitions
    ]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_end_offsets_from_the_leader_epoch_cache(cluster: Cluster, version: int) -> None:
    # LeaderEpochFileCache.endOffsetFor: the latest epoch ends at the log end; an epoch that
    # never wrote answers the largest one below it with the next one's start.
    assert ask(
        cluster,
        [("pets", 0, 3, 3), ("pets", 0, 3, 2), ("pets", 0, 3, 1), ("pets", 0, -1, 0)],
        version,
    ) == [
        ("pets", 0, (Errors.NONE, 3, 5)),
        ("pets", 0, (Errors.NONE, 1, 2)),
        ("pets", 0, (Errors.NONE, 1, 2)),
        # below every epoch: the requested epoch, ending where the first known one starts
        ("pets", 0, (Errors.NONE, 0, 0)),
    ]


def test_an_epoch_above_every_known_one_is_undefined(cluster: Cluster) -> None:
    # UnifiedLog.endOffsetForEpoch -> None: no error, leader epoch -1, end offset -1.
    assert ask(cluster, [("pets", 0, 3, 4)]) == [("pets", 0, (Errors.NONE, -1, -1))]


def test_errors_per_partition(cluster: Cluster) -> None:
    assert ask(
        cluster,
        [
            ("pets", 0, 2, 1),  # the asker is behind
            ("pets", 0, 4, 1),  # this broker is behind
            ("birds", 0, -1, 6),  # followed here: only the leader answers
            ("pets", 9, -1, 1),  # no such partition
            ("fish", 0, -1, 1),  # no such topic
        ],
    ) == [
        ("pets", 0, (Errors.FENCED_LEADER_EPOCH, -1, -1)),
        ("pets", 0, (Errors.UNKNOWN_LEADER_EPOCH, -1, -1)),
        ("pets", 9, (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)),  # the request groups by topic
        ("birds", 0, (Errors.NOT_LEADER_OR_FOLLOWER, -1, -1)),
        ("fish", 0, (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)),
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_versions_0_and_1_answer_without_fencing(cluster: Cluster, version: int) -> None:
    # Kafka 3.9 serves v0-1 (KIP-896 dropped them in 4.0): v0 answers the end offset alone,
    # v1 adds its leader epoch (KIP-279). Neither carries a current leader epoch (v2+, KIP-320),
    # so the 99 asked here is not sent and nothing is fenced.
    epochs = (3, 1) if version == 1 else (-1, -1)
    assert ask(cluster, [("pets", 0, 99, 3), ("pets", 0, 99, 2)], version) == [
        ("pets", 0, (Errors.NONE, epochs[0], 5)),
        ("pets", 0, (Errors.NONE, epochs[1], 2)),
    ]
    assert ask(cluster, [("pets", 0, 99, 3)], 2) == [
        ("pets", 0, (Errors.UNKNOWN_LEADER_EPOCH, -1, -1))
    ]
