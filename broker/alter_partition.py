"""ISR changes to the active controller, one request in flight (Kafka's ``AlterPartitionManager``).

Theory of operation
-------------------
A leader ``Partition`` proposes an ISR change with ``submit(item, callback)``. Like Kafka's
``DefaultAlterPartitionManager``:

* at most one change per partition waits here: a second one for the same partition is refused at
  once with OPERATION_NOT_ATTEMPTED (the partition then returns to its committed ISR);
* at most one request is in flight: every waiting change goes out in it, and changes submitted
  meanwhile wait for the next;
* the answer's per-partition results go to the callbacks (success or a partition-level error);
  a partition missing from the answer stays queued and is sent again;
* a request-level failure (STALE_BROKER_EPOCH, NOT_CONTROLLER, the controller unreachable) keeps
  every change queued and retries after ``ALTER_PARTITION_RETRY_BACKOFF_MS`` (50, Kafka's), with
  no deadline: Kafka retries "until a response is received, or a new LeaderAndIsr overwrites the
  existing isrState which causes the response for those partitions to be ignored".

The transport is the controller's ``POST /v1/alter-partition`` (``quorum/service_brokers.py``),
reached through anything with ``ControllerClient.alter_partition``'s signature.

``RecordedAlterPartitions`` stands where a controller is not wired (and in tests, as Kafka's
``MockAlterPartitionManager``): it records the changes and answers only when told.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from metadata.records import NO_LEADER
from protocol.errors import Errors
from replica.isr import AlterPartitionResult, PendingIsrChange

logger = logging.getLogger(__name__)

ALTER_PARTITION_RETRY_BACKOFF_MS = 50
# Kafka's LeaderRecoveryState.RECOVERED: a leader that sends AlterPartition has recovered.
RECOVERED = 0

AlterPartitionCallback = Callable[[AlterPartitionResult], None]
_Key = tuple[str, int]


@attrs.frozen(kw_only=True)
class AlterPartitionItem:
    """One partition's proposed ISR, as sent (Kafka's ``AlterPartitionItem``)."""

    topic_id: str
    partition_index: int
    # The proposing leader (this broker).
    leader_id: int
    change: PendingIsrChange

    @property
    def key(self) -> _Key:
        return (self.topic_id, self.partition_index)

    def to_json(self) -> dict[str, Any]:
        """The partition entry of ``POST /v1/alter-partition``."""
        return {
            "topic_id": self.topic_id,
            "partition_index": self.partition_index,
            "leader_epoch": self.change.leader_epoch,
            "partition_epoch": self.change.partition_epoch,
            "new_isr": [
                {"broker_id": member.broker_id, "broker_epoch": member.broker_epoch}
                for member in self.change.new_isr
            ],
            "leader_recovery_state": RECOVERED,
        }


class AlterPartitionSubmitter(Protocol):
    """What a Partition needs: hand over a change, hear its result later (maybe at once)."""

    def submit(self, item: AlterPartitionItem, callback: AlterPartitionCallback) -> None: ...


class AlterPartitionChannel(Protocol):
    """``broker.controller_client.ControllerClient.alter_partition``."""

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, partitions: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]: ...


def parse_result(raw: Mapping[str, Any]) -> AlterPartitionResult:
    """One partition of the controller's answer; a malformed one is UNKNOWN_SERVER_ERROR (which
    the partition retries) rather than a crash."""
    error = Errors.__members__.get(str(raw.get("error", "NONE")), Errors.UNKNOWN_SERVER_ERROR)
    try:
        return AlterPartitionResult(
            error=error,
            leader_id=int(raw.get("leader_id", NO_LEADER)),
            leader_epoch=int(raw.get("leader_epoch", -1)),
            isr=tuple(int(member) for member in raw.get("isr", ())),
            partition_epoch=int(raw.get("partition_epoch", -1)),
            message=raw.get("message"),
        )
    except (TypeError, ValueError) as problem:
        return AlterPartitionResult(
            error=Errors.UNKNOWN_SERVER_ERROR, message=f"malformed AlterPartition result: {problem}"
        )


def _key_of(raw: Mapping[str, Any]) -> _Key | None:
    try:
        return (str(raw["topic_id"]), int(raw["partition_index"]))
    except (KeyError, TypeError, ValueError):
        return None


class AlterPartitionManager:
    """The asyncio shell: one request in flight, every queued change in it, retry on failure."""

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
        # Invariant: at most one change per partition (Kafka's unsentIsrUpdates).
        self._unsent: dict[_Key, tuple[AlterPartitionItem, AlterPartitionCallback]] = {}
        self._inflight: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def queued(self) -> int:
        return len(self._unsent)

    def submit(self, item: AlterPartitionItem, callback: AlterPartitionCallback) -> None:
        if item.key in self._unsent or self._closed:
            callback(
                AlterPartitionResult(
                    error=Errors.OPERATION_NOT_ATTEMPTED,
                    message=f"an ISR change for {item.key} is already queued",
                )
            )
            return
        self._unsent[item.key] = (item, callback)
        self._maybe_propagate()

    def _maybe_propagate(self) -> None:
        self._retry = None
        if self._unsent and self._inflight is None and not self._closed:
            items = list(self._unsent.values())
            self._inflight = asyncio.get_running_loop().create_task(self._send(items))

    async def _send(self, items: list[tuple[AlterPartitionItem, AlterPartitionCallback]]) -> None:
        try:
            answer = await self._channel.alter_partition(
                broker_id=self._broker_id,
                broker_epoch=self._broker_epoch(),
                partitions=[item.to_json() for item, _ in items],
            )
        except Exception as error:
            # The client raises ControllerError for refusals and unreachable controllers alike;
            # whatever the transport's failure, Kafka keeps the changes and retries.
            logger.warning("AlterPartition failed (%s); retrying", error)
            self._inflight = None
            self._schedule_retry()
            return
        self._inflight = None
        self._deliver(items, answer)
        self._maybe_propagate()

    def _deliver(
        self,
        items: list[tuple[AlterPartitionItem, AlterPartitionCallback]],
        answer: Sequence[Mapping[str, Any]],
    ) -> None:
        results = {
            key: parse_result(raw)
            for raw in answer
            if isinstance(raw, Mapping) and (key := _key_of(raw)) is not None
        }
        for item, callback in items:
            result = results.get(item.key)
            if result is None:
                logger.warning("%s was sent but is not in the AlterPartition answer", item.key)
                continue
            # Cleared first, so the callback may submit the next change for this partition.
            del self._unsent[item.key]
            callback(result)

    def _schedule_retry(self) -> None:
        if self._retry is None and not self._closed:
            loop = asyncio.get_running_loop()
            self._retry = loop.call_later(self._retry_backoff_s, self._maybe_propagate)

    async def close(self) -> None:
        """Stop sending; queued changes are dropped (new metadata will supersede them)."""
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
        if self._inflight is not None:
            self._inflight.cancel()
            await asyncio.gather(self._inflight, return_exceptions=True)
        self._unsent.clear()


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
