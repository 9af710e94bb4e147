"""WriteTxnMarkers both ways: what the coordinator's channel encodes is what the leader's
handler reads, and the leader's answer comes back as one error per (producer id, partition)."""

from __future__ import annotations

import pytest

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_request, encode_response
from pykraft.protocol.errors import Errors
from pykraft.protocol.txn_markers import (
    decode_write_txn_markers_response,
    encode_write_txn_markers,
    write_txn_markers_request,
    write_txn_markers_response,
)
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
MARKERS = (
    TxnMarker(
        producer_id=7, producer_epoch=3, coordinator_epoch=5, commit=True, partitions=(A0, A1, B0)
    ),
    TxnMarker(producer_id=9, producer_epoch=0, coordinator_epoch=5, commit=False, partitions=(B0,)),
)


@pytest.mark.parametrize("version", [1])
def test_the_request_reads_back_as_the_markers_sent(version: int) -> None:
    body = encode_write_txn_markers(MARKERS, version)
    assert (
        write_txn_markers_request(decode_request(ApiKey.WRITE_TXN_MARKERS, version, body))
        == MARKERS
    )


@pytest.mark.parametrize("version", [1])
def test_the_answer_carries_one_error_per_producer_and_partition(version: int) -> None:
    results = {
        (7, A0): Errors.NONE,
        (7, A1): Errors.NOT_LEADER_OR_FOLLOWER,
        (7, B0): Errors.NONE,
        (9, B0): Errors.INVALID_PRODUCER_EPOCH,
    }
    body = encode_response(
        ApiKey.WRITE_TXN_MARKERS, version, write_txn_markers_response(version, results)
    )
    assert decode_write_txn_markers_response(body, version, MARKERS) == results


def test_a_partition_the_answer_leaves_out_is_an_unknown_server_error() -> None:
    body = encode_response(
        ApiKey.WRITE_TXN_MARKERS, 1, write_txn_markers_response(1, {(7, A0): Errors.NONE})
    )
    decoded = decode_write_txn_markers_response(body, 1, MARKERS)
    assert decoded[(7, A0)] is Errors.NONE
    assert decoded[(7, A1)] is decoded[(9, B0)] is Errors.UNKNOWN_SERVER_ERROR
