"""The produce and fetch rules ReplicaManager applies (Kafka's ReplicaManager.isValidRequiredAcks,
appendToLocalLog's internal-topic check, fetchMessages' answer-now conditions)."""

from __future__ import annotations

import pytest

from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import (
    FetchParams,
    LogReadResult,
    PartitionFetch,
    append_refusal,
    invalid_acks,
    respond_now,
)
from pykraft.storage.leader_epoch_cache import OffsetAndEpoch
from pykraft.storage.topic_partition import TopicPartition

TP = TopicPartition("pets", 0)


@pytest.mark.parametrize(
    ("acks", "refused"), [(-1, False), (0, False), (1, False), (2, True), (-2, True)]
)
def test_only_acks_minus_one_zero_and_one_are_valid(acks: int, refused: bool) -> None:
    results = invalid_acks([TP], acks)
    assert (results is not None) is refused
    if results is not None:
        assert results[TP].error is Errors.INVALID_REQUIRED_ACKS


@pytest.mark.parametrize(
    ("topic", "has_records", "internal_allowed", "expected"),
    [
        ("pets", True, False, None),
        ("pets", False, False, Errors.INVALID_RECORD),
        ("__consumer_offsets", True, False, Errors.INVALID_TOPIC_EXCEPTION),
        ("__transaction_state", True, False, Errors.INVALID_TOPIC_EXCEPTION),
        ("__consumer_offsets", True, True, None),
    ],
)
def test_append_refusal(
    topic: str, has_records: bool, internal_allowed: bool, expected: Errors | None
) -> None:
    refused = append_refusal(TopicPartition(topic, 0), has_records, internal_allowed)
    assert (None if refused is None else refused.error) is expected


def params(max_wait_ms: int = 500, min_bytes: int = 10, partitions: int = 1) -> FetchParams:
    fetch = PartitionFetch(topic_partition=TP, fetch_offset=0, partition_max_bytes=1 << 20)
    return FetchParams(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        partitions=(fetch,) * partitions,
    )


EMPTY = LogReadResult(topic_partition=TP)


@pytest.mark.parametrize(
    ("fetch", "results", "now"),
    [
        (params(), [EMPTY], False),  # wait for min_bytes
        (params(max_wait_ms=0), [EMPTY], True),
        (params(partitions=0), [], True),
        (params(), [LogReadResult(topic_partition=TP, error=Errors.FENCED_LEADER_EPOCH)], True),
        (params(), [LogReadResult(topic_partition=TP, diverging_epoch=OffsetAndEpoch(3, 1))], True),
    ],
)
def test_respond_now(fetch: FetchParams, results: list[LogReadResult], now: bool) -> None:
    assert respond_now(fetch, results) is now
