"""WriteTxnMarkers' appends on a leader (Kafka ``KafkaApis.handleWriteTxnMarkersRequest``).

The transaction coordinator ends a transaction by asking each partition's leader to write a
COMMIT or ABORT marker (``storage.txn_markers.TxnMarker``: producer id and epoch,
coordinator epoch, the partitions). Per marker, as Kafka does:

* a partition this broker does not host (not here, or offline) answers
  UNKNOWN_TOPIC_OR_PARTITION without an append (Kafka finds no log config to pick the marker's
  format from);
* the others get the marker batch appended in one ``ReplicaManager`` append, as leader, with
  origin COORDINATOR (the log checks the producer and coordinator epochs), acks=-1 and
  internal topics allowed (markers also go to ``__consumer_offsets``); the answer waits for the
  ISR like any acks=-1 produce (``DelayedProduce``), at most ``timeout_ms``.

Every append happens before ``append_txn_markers`` returns, in request order; the future it
returns resolves once every marker is answered, with one error per (producer id, partition):
NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR. Cancelling the future forgets the waiting appends.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import AppendResult
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

if TYPE_CHECKING:
    from pykraft.broker.replica_manager import ReplicaManager

MarkerErrors = dict[tuple[int, TopicPartition], Errors]


def append_txn_markers(
    replica_manager: ReplicaManager,
    markers: Sequence[TxnMarker],
    *,
    timeout_ms: int,
    now_ms: int,
) -> asyncio.Future[MarkerErrors]:
    """Append every marker now; the future answers once all are acknowledged (module doc).

    ``now_ms`` is wall time: the markers' record timestamp (Kafka ``time.milliseconds()``).
    """
    answer: asyncio.Future[MarkerErrors] = asyncio.get_running_loop().create_future()
    errors: MarkerErrors = {}
    outstanding = len(markers)
    waiter_ids: list[int] = []

    def on_answered(producer_id: int, results: Mapping[TopicPartition, AppendResult]) -> None:
        nonlocal outstanding
        for topic_partition, result in results.items():
            errors[(producer_id, topic_partition)] = result.error
        outstanding -= 1
        if outstanding == 0 and not answer.done():
            answer.set_result(errors)

    for marker in markers:
        entries: dict[TopicPartition, bytearray | memoryview | None] = {}
        for topic_partition in marker.partitions:
            if replica_manager.get_partition(topic_partition) is None:
                errors[(marker.producer_id, topic_partition)] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                entries[topic_partition] = marker.control_batch(now_ms)
        if not entries:
            on_answered(marker.producer_id, {})
            continue
        waiter_id = replica_manager.start_append_records(
            entries,
            required_acks=-1,
            timeout_ms=timeout_ms,
            now_ms=now_ms,
            response_callback=functools.partial(on_answered, marker.producer_id),
            internal_topics_allowed=True,
            origin=AppendOrigin.COORDINATOR,
        )
        if waiter_id is not None:
            waiter_ids.append(waiter_id)
    if not markers:
        answer.set_result(errors)

    def forget_if_cancelled(future: asyncio.Future[MarkerErrors]) -> None:
        if future.cancelled():
            for waiter_id in waiter_ids:
                replica_manager.delayed_produces.forget(waiter_id)  # no-op once answered

    answer.add_done_callback(forget_if_cancelled)
    return answer
