"""The ListOffsets handler (Kafka's handleListOffsetRequestV1AndAbove, KIP-734 max timestamp),
requests and responses through kafka-python's classes, lookups through the real time index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from pykraft.broker.handlers.list_offsets import list_offsets_handler
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import by_topic, pets_and_birds
from tests.broker.replica_harness import (
    PETS0,
    Cluster,
    batch,
    call,
    encode,
    services,
)

_Topic = ListOffsetsRequest.ListOffsetsTopic
_Partition = _Topic.ListOffsetsPartition
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path)
    try:
        harness.start(*pets_and_birds(pets0_leader_epoch=4))
        harness.produce(PETS0, batch(b"a", b"b", timestamp=1000))  # offsets 0-1: 1000, 1001
        harness.produce(PETS0, batch(b"c", timestamp=5000))  # offset 2: 5000
        yield harness
    finally:
        harness.close()


def list_offsets(
    cluster: Cluster,
    queries: list[tuple[str, int, int]],
    *,
    version: int = 7,
    replica_id: int = -1,
    current_leader_epoch: int = -1,
) -> list[tuple[int, int, int, int]]:
    """[(error, timestamp, offset, leader epoch)] for (topic, partition, timestamp) queries."""
    topics = by_topic(
        (
            topic,
            _Partition(
                partition_index=index,
                current_leader_epoch=current_leader_epoch,
                timestamp=timestamp,
            ),
        )
        for topic, index, timestamp in queries
    )
    request = ListOffsetsRequest(
        version=version,
        replica_id=replica_id,
        isolation_level=0,
        topics=[_Topic(name=name, partitions=parts) for name, parts in topics.items()],
    )
    body = call(
        list_offsets_handler(services(cluster)),
        ApiKey.LIST_OFFSETS,
        version,
        encode(request, version),
    )
    assert body is not None
    response = ListOffsetsResponse.decode(body, version=version)
    return [
        (p.error_code, p.timestamp, p.offset, p.leader_epoch if version >= 4 else -1)
        for topic in response.topics
        for p in topic.partitions
    ]


@pytest.mark.parametrize("version", range(1, 10))
def test_earliest_and_latest_at_every_version(cluster: Cluster, version: int) -> None:
    epoch = 4 if version >= 4 else -1
    assert list_offsets(cluster, [("pets", 0, EARLIEST), ("pets", 0, LATEST)], version=version) == [
        (Errors.INVALID_REQUEST, -1, -1, -1),
        (Errors.INVALID_REQUEST, -1, -1, -1),
    ]  # the same partition twice in one request (Kafka: duplicatePartitions)
    assert list_offsets(cluster, [("pets", 0, EARLIEST)], version=version) == [
        (Errors.NONE, -1, 0, epoch)
    ]
    assert list_offsets(cluster, [("pets", 0, LATEST)], version=version) == [
        (Errors.NONE, -1, 3, epoch)
    ]


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        (0, (Errors.NONE, 1000, 0, 4)),
        (1001, (Errors.NONE, 1001, 1, 4)),  # inside the first batch
        (1002, (Errors.NONE, 5000, 2, 4)),
        (5000, (Errors.NONE, 5000, 2, 4)),
        (5001, (Errors.NONE, -1, -1, -1)),  # nothing that late: no error, unknown offset
        (MAX_TIMESTAMP, (Errors.NONE, 5000, 2, 4)),  # KIP-734
    ],
)
def test_lookup_by_timestamp(
    cluster: Cluster, timestamp: int, expected: tuple[int, int, int, int]
) -> None:
    assert list_offsets(cluster, [("pets", 0, timestamp)]) == [expected]


def test_consumers_only_see_up_to_the_high_watermark(cluster: Cluster) -> None:
    pets1 = TopicPartition("pets", 1)
    cluster.produce(pets1, batch(b"a", timestamp=100))  # follower 2 has not fetched: hw 0
    assert list_offsets(cluster, [("pets", 1, LATEST)]) == [(Errors.NONE, -1, 0, 1)]
    assert list_offsets(cluster, [("pets", 1, 0)]) == [(Errors.NONE, -1, -1, -1)]
    # A replica (here: a debugging tool, replica id -2) sees up to the log end.
    assert list_offsets(cluster, [("pets", 1, LATEST)], replica_id=-2) == [(Errors.NONE, -1, 1, 1)]


def test_errors(cluster: Cluster) -> None:
    assert list_offsets(cluster, [("nope", 0, LATEST)]) == [
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)
    ]
    assert list_offsets(cluster, [("birds", 0, LATEST)]) == [
        (Errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1)
    ]
    assert list_offsets(cluster, [("pets", 0, LATEST)], current_leader_epoch=3) == [
        (Errors.FENCED_LEADER_EPOCH, -1, -1, -1)
    ]
    assert list_offsets(cluster, [("pets", 0, LATEST)], current_leader_epoch=5) == [
        (Errors.UNKNOWN_LEADER_EPOCH, -1, -1, -1)
    ]
    assert list_offsets(cluster, [("pets", 0, LATEST)], current_leader_epoch=4) == [
        (Errors.NONE, -1, 3, 4)
    ]


def test_partitions_answer_in_request_order(cluster: Cluster) -> None:
    assert list_offsets(cluster, [("birds", 0, LATEST), ("pets", 0, EARLIEST)]) == [
        (Errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1),
        (Errors.NONE, -1, 0, 4),
    ]


@pytest.mark.parametrize(
    ("timestamp", "first_version"),
    [(-3, 7), (-4, 8), (-5, 9)],  # KIP-734 max timestamp, KIP-405 local start, KIP-1005 tiered
)
def test_a_special_timestamp_needs_the_version_that_added_it(
    cluster: Cluster, timestamp: int, first_version: int
) -> None:
    # KafkaApis.handleListOffsetRequestV1AndAbove: timestampMinSupportedVersion.
    before = list_offsets(cluster, [("pets", 0, timestamp)], version=first_version - 1)
    assert before == [(Errors.UNSUPPORTED_VERSION, -1, -1, -1)]
    after = list_offsets(cluster, [("pets", 0, timestamp)], version=first_version)
    assert after[0][0] == Errors.NONE


def test_an_unknown_special_timestamp_is_unsupported(cluster: Cluster) -> None:
    assert list_offsets(cluster, [("pets", 0, -6)], version=9) == [
        (Errors.UNSUPPORTED_VERSION, -1, -1, -1)
    ]


def test_the_last_tiered_offset_without_tiered_storage(cluster: Cluster) -> None:
    # UnifiedLog.fetchOffsetByTimestamp without remote storage: offset -1, epoch -1 — after
    # the partition's leader and epoch checks.
    assert list_offsets(cluster, [("pets", 0, -5)], version=9) == [(Errors.NONE, -1, -1, -1)]
    assert list_offsets(cluster, [("birds", 0, -5)], version=9) == [
        (Errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1)
    ]
    assert list_offsets(cluster, [("pets", 0, -5)], version=9, current_leader_epoch=3) == [
        (Errors.FENCED_LEADER_EPOCH, -1, -1, -1)
    ]
