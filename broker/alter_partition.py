"""ISR changes to the active controller: the asyncio shell over ``replica.alter_partition_queue``
(Kafka's ``AlterPartitionManager``; the queue's rules — one change per partition, one request in
flight, retry after 50 ms without deadline — are described there).

The transport is the controller's ``POST /v1/alter-partition`` (``quorum/service_brokers.py``),
reached through anything with ``ControllerClient.alter_partition``'s signature.

``RecordedAlterPartitions`` stands where a controller is not wired (and in tests, as Kafka's
``MockAlterPartitionManager``): it records the changes and answers only when told.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from pykraft.metadata.api import brokers as api
from pykraft.metadata.api.brokers import AlterPartitionData, BrokerState
from pykraft.metadata.records import LeaderRecoveryState
from pykraft.protocol.errors import Errors
from pykraft.replica.alter_partition_queue import (
    ALTER_PARTITION_RETRY_BACKOFF_MS,
    AlterPartitionCallback,
    AlterPartitionItem,
    AlterPartitionQueue,
    AlterPartitionRequestBatch,
)
from pykraft.replica.isr import AlterPartitionResult

logger = logging.getLogger(__name__)


class AlterPartitionSubmitter(Protocol):
    """What a Partition needs: hand over a change, hear its result later (maybe at once)."""

    def submit(self, item: AlterPartitionItem, callback: AlterPartitionCallback) -> None: ...


class AlterPartitionChannel(Protocol):
    """``broker.controller_client.ControllerClient.alter_partition``."""

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, partitions: Sequence[AlterPartitionData]
    ) -> tuple[api.AlterPartitionResult, ...]: ...


def request_of(item: AlterPartitionItem) -> AlterPartitionData:
    """One partition's entry of the request (the contract's ``AlterPartitionData``)."""
    return AlterPartitionData(
        topic_id=item.topic_id,
        partition_index=item.partition_index,
        leader_epoch=item.change.leader_epoch,
        partition_epoch=item.change.partition_epoch,
        new_isr_with_epochs=tuple(
            BrokerState(member.broker_id, member.broker_epoch) for member in item.change.new_isr
        ),
        leader_recovery_state=LeaderRecoveryState.RECOVERED.value,
    )


def parse_result(result: api.AlterPartitionResult) -> AlterPartitionResult:
    """One partition of the controller's answer, as the partition's ISR state reads it."""
    return AlterPartitionResult(
        error=result.error.error,
        leader_id=result.leader_id,
        leader_epoch=result.leader_epoch,
        isr=result.isr,
        partition_epoch=result.partition_epoch,
        message=result.error.message,
    )


class AlterPartitionManager:
    """The asyncio shell: sends the queue's requests, retries failures after a backoff."""

    def __init__(
        self,
        channel: AlterPartitionChannel,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        retry_backoff_ms: int = ALTER_PARTITION_RETRY_BACKOFF_MS,
    ) -> None:
        self._channel = channel
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._queue = AlterPartitionQueue()
        self._inflight: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None

    @property
    def queued(self) -> int:
        return self._queue.queued

    def submit(self, item: AlterPartitionItem, callback: AlterPartitionCallback) -> None:
        if not self._queue.submit(item, callback):
            callback(
                AlterPartitionResult(
                    error=Errors.OPERATION_NOT_ATTEMPTED,
                    message=f"an ISR change for {item.key} is already queued",
                )
            )
            return
        self._maybe_propagate()

    def _maybe_propagate(self) -> None:
        self._retry = None
        batch = self._queue.next_request()
        if batch is not None:
            self._inflight = asyncio.get_running_loop().create_task(self._send(batch))

    async def _send(self, batch: AlterPartitionRequestBatch) -> None:
        try:
            answer = await self._channel.alter_partition(
                broker_id=self._broker_id,
                broker_epoch=self._broker_epoch(),
                partitions=[request_of(item) for item in batch.items],
            )
        except Exception as error:
            # The client raises ControllerError for refusals and unreachable controllers alike;
            # whatever the transport's failure, Kafka keeps the changes and retries.
            logger.warning("AlterPartition failed (%s); retrying", error)
            self._inflight = None
            self._queue.on_answer(batch, None)
            self._schedule_retry()
            return
        self._inflight = None
        results = {
            (result.topic_id, result.partition_index): parse_result(result) for result in answer
        }
        for key in self._queue.missing(batch, results):
            logger.warning("%s was sent but is not in the AlterPartition answer", key)
        for callback, result in self._queue.on_answer(batch, results):
            callback(result)
        self._maybe_propagate()

    def _schedule_retry(self) -> None:
        if self._retry is None and not self._queue.closed:
            loop = asyncio.get_running_loop()
            self._retry = loop.call_later(self._retry_backoff_s, self._maybe_propagate)

    async def close(self) -> None:
        """Stop sending; queued changes are dropped (new metadata will supersede them)."""
        self._queue.close()
        if self._retry is not None:
            self._retry.cancel()
        if self._inflight is not None:
            self._inflight.cancel()
            await asyncio.gather(self._inflight, return_exceptions=True)


class RecordedAlterPartitions:
    """Records changes and answers only when told (Kafka's ``MockAlterPartitionManager``)."""

    def __init__(self) -> None:
        self.items: list[tuple[AlterPartitionItem, AlterPartitionCallback]] = []

    def submit(self, item: AlterPartitionItem, callback: AlterPartitionCallback) -> None:
        if any(queued.key == item.key for queued, _ in self.items):
            callback(AlterPartitionResult(error=Errors.OPERATION_NOT_ATTEMPTED))
            return
        self.items.append((item, callback))

    def complete(self, partition_epoch: int, index: int = 0) -> None:
        """Answer the ``index``-th change as committed at ``partition_epoch``."""
        item, callback = self.items.pop(index)
        callback(
            AlterPartitionResult(
                error=Errors.NONE,
                leader_id=item.leader_id,
                leader_epoch=item.change.leader_epoch,
                isr=item.change.new_isr_ids,
                partition_epoch=partition_epoch,
            )
        )

    def fail(self, error: Errors, index: int = 0) -> None:
        _, callback = self.items.pop(index)
        callback(AlterPartitionResult(error=error))
