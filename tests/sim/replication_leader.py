"""The leader side of the replication sim: answers to followers, and AlterPartition.

The answers come from the broker's shipped ``ReplicaManager``: ``read_from_log`` (follower
progress, ISR expansion, high watermark), ``last_offset_for_leader_epoch`` and
``fetch_offset_for_timestamp``; an error becomes the error code of the answer, as the handlers
do. A broker that has not caught up with the metadata log yet answers
NOT_LEADER_OR_FOLLOWER (Kafka holds the request until then; the follower backs off either way).

``SimAlterPartitionManager`` is the transport of the shipped ``replica.alter_partition_queue``
on the simulated network (what ``broker.alter_partition.AlterPartitionManager`` does with
asyncio and HTTP): a lost answer times out, a failure retries after 50 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from broker.partition import PartitionError
from fetcher.responses import LeaderOffsets
from fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from protocol.errors import Errors
from protocol.fetch import EpochEndOffset, FetchPartition, PartitionData
from quorum.controller import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerState,
)
from quorum.controller import AlterPartitionResult as ControllerAlterPartitionResult
from replica.alter_partition_queue import (
    ALTER_PARTITION_RETRY_BACKOFF_MS,
    AlterPartitionCallback,
    AlterPartitionItem,
    AlterPartitionQueue,
    AlterPartitionRequestBatch,
)
from replica.data_path import FetchParams, PartitionFetch
from replica.isr import AlterPartitionResult
from storage.log_reader import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from storage.topic_partition import TopicPartition
from tests.sim.replication_checks import PartitionKey
from tests.sim.replication_log import records

if TYPE_CHECKING:
    from tests.sim.replication_broker import SimBroker

LeaderRecords = tuple[tuple[int, int, str], ...]


@attrs.frozen
class FetchAnswer:
    data: PartitionData
    # The leader's records when it answered a diverging epoch (for the prefix check).
    leader_records: LeaderRecords | None = None


@attrs.frozen
class EpochAnswer:
    data: LeaderEpochEndOffset
    leader_records: LeaderRecords


def _not_serving(broker: SimBroker) -> PartitionError | None:
    """Before its metadata is published a broker hosts nothing yet (Kafka holds the request)."""
    if broker.serving:
        return None
    return PartitionError(Errors.NOT_LEADER_OR_FOLLOWER,
                          f"broker {broker.broker_id} has not caught up with the metadata")


def _records(broker: SimBroker, key: PartitionKey) -> LeaderRecords:
    partition = broker.partitions.get(key)
    if partition is None:
        return ()
    return tuple(records(partition.log))


def answer_fetch(broker: SimBroker, replica_id: int, replica_epoch: int, key: PartitionKey,
                 request: FetchPartition) -> FetchAnswer:
    """``ReplicaManager.read_from_log`` for one follower partition, and the answer's fields
    as ``broker.handlers.fetch`` fills them."""
    refused = _not_serving(broker)
    if refused is not None:
        return FetchAnswer(PartitionData(key[1], error_code=refused.error))
    fetch = PartitionFetch(
        topic_partition=TopicPartition(*key), fetch_offset=request.fetch_offset,
        partition_max_bytes=request.partition_max_bytes,
        current_leader_epoch=request.current_leader_epoch,
        last_fetched_epoch=request.last_fetched_epoch, log_start_offset=request.log_start_offset)
    params = FetchParams(replica_id=replica_id, replica_epoch=replica_epoch, max_wait_ms=0,
                         min_bytes=1, max_bytes=request.partition_max_bytes, partitions=(fetch,))
    [result] = broker.replica_manager.read_from_log(params)
    if result.error is not Errors.NONE:
        return FetchAnswer(PartitionData(key[1], error_code=result.error))
    diverging = result.diverging_epoch
    data = b"".join(piece.read_bytes() for piece in result.slices)
    answer = PartitionData(
        key[1], high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset, log_start_offset=result.log_start_offset,
        diverging_epoch=(EpochEndOffset() if diverging is None
                         else EpochEndOffset(diverging.leader_epoch, diverging.offset)),
        records=(data,) if data else ())
    return FetchAnswer(answer, None if diverging is None else _records(broker, key))


def answer_epoch_end_offset(broker: SimBroker, key: PartitionKey,
                            request: LeaderEpochRequest) -> EpochAnswer:
    """``ReplicaManager.last_offset_for_leader_epoch``."""
    refused = _not_serving(broker)
    if refused is not None:
        return EpochAnswer(LeaderEpochEndOffset(refused.error), ())
    found = broker.replica_manager.last_offset_for_leader_epoch(
        TopicPartition(*key), request.current_leader_epoch, request.leader_epoch)
    return EpochAnswer(LeaderEpochEndOffset(found.error, found.leader_epoch, found.end_offset),
                       _records(broker, key))


def answer_leader_offsets(broker: SimBroker, key: PartitionKey,
                          current_leader_epoch: int) -> LeaderOffsets:
    """ListOffsets latest then earliest from a replica (``KafkaLeaderEndpoint``), answered by
    ``ReplicaManager.fetch_offset_for_timestamp``."""
    try:
        refused = _not_serving(broker)
        if refused is not None:
            raise refused
        offsets = []
        for timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
            found = broker.replica_manager.fetch_offset_for_timestamp(
                TopicPartition(*key), timestamp, isolation=None,
                current_leader_epoch=current_leader_epoch, fetch_only_from_leader=True)
            assert found is not None
            offsets.append(found.offset)
    except PartitionError as error:
        return LeaderOffsets(error.error)
    return LeaderOffsets(Errors.NONE, log_start_offset=offsets[1], log_end_offset=offsets[0])


# ---------------------------------------------------------------------------- AlterPartition


def _request_data(item: AlterPartitionItem) -> AlterPartitionData:
    change = item.change
    return AlterPartitionData(
        item.topic_id, item.partition_index, change.leader_epoch, change.partition_epoch,
        tuple(BrokerState(m.broker_id, m.broker_epoch) for m in change.new_isr))


def _result(raw: ControllerAlterPartitionResult) -> AlterPartitionResult:
    """What ``broker.alter_partition.parse_result`` makes of the controller's answer."""
    return AlterPartitionResult(
        error=Errors[raw.error.error.name], leader_id=raw.leader_id,
        leader_epoch=raw.leader_epoch, isr=raw.isr, partition_epoch=raw.partition_epoch)


class SimAlterPartitionManager:
    """The transport of the shipped ``AlterPartitionQueue`` on simulated time: the request goes
    through the simulated network to the controller, a lost answer times out, a failure retries
    after ``ALTER_PARTITION_RETRY_BACKOFF_MS`` (what ``AlterPartitionManager`` does with asyncio
    and HTTP)."""

    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        self.queue = AlterPartitionQueue()

    @property
    def idle(self) -> bool:
        return self.queue.idle

    def submit(self, item: AlterPartitionItem, callback: AlterPartitionCallback) -> None:
        if not self.queue.submit(item, callback):
            callback(AlterPartitionResult(error=Errors.OPERATION_NOT_ATTEMPTED))
            return
        self._maybe_send()

    def _maybe_send(self) -> None:
        batch = self.queue.next_request()
        if batch is None:
            return
        request = AlterPartitionRequest(self.broker.broker_id, self.broker.broker_epoch,
                                        tuple(_request_data(item) for item in batch.items))
        self.broker.call_controller("AlterPartition", request,
                                    lambda answer: self._on_answer(batch, answer))
        self.broker.schedule(self.broker.env.settings.request_timeout_ms,
                             "AlterPartition timeout", lambda: self._on_answer(batch, None))

    def _on_answer(self, batch: AlterPartitionRequestBatch,
                   answer: AlterPartitionResponse | None) -> None:
        if batch.number != self.queue.in_flight:
            return
        if answer is None or answer.error.is_failure():
            self.queue.on_answer(batch, None)
            self.broker.schedule(ALTER_PARTITION_RETRY_BACKOFF_MS, "AlterPartition retry",
                                 self._maybe_send)
            return
        results = {(r.topic_id, r.partition_index): _result(r) for r in answer.partitions}
        for callback, result in self.queue.on_answer(batch, results):
            callback(result)
        self._maybe_send()
