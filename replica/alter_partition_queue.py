"""ISR changes on their way to the controller, one request in flight (the decisions of Kafka's
``DefaultAlterPartitionManager``), as a pure queue.

Theory of operation
-------------------
A leader's proposed ISR change is ``submit``-ted with the callback its result goes to:

* at most one change per partition waits (Kafka's ``unsentIsrUpdates``): a second one for the
  same partition is refused (``submit`` answers False; the shell answers the callback with
  OPERATION_NOT_ATTEMPTED, and the partition returns to its committed ISR);
* at most one request is in flight: ``next_request`` hands out every waiting change at once,
  numbered, and nothing more until that request is answered; changes submitted meanwhile wait
  for the next;
* ``on_answer`` takes the per-partition results of request ``number`` (None = the request
  failed or timed out): each answered change leaves the queue and its callback is returned with
  its result; a partition missing from the answer stays and is sent again. After a failure every
  change stays and the shell retries after ``ALTER_PARTITION_RETRY_BACKOFF_MS`` (50, Kafka's),
  with no deadline: Kafka retries "until a response is received, or a new LeaderAndIsr
  overwrites the existing isrState". An answer to any other request number is ignored.

The shells (``broker.alter_partition.AlterPartitionManager`` over the controller's HTTP API, and
the simulation's transport in ``tests/sim``) do the sending, the timers and the callbacks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pykraft.replica.isr import AlterPartitionResult, PendingIsrChange

ALTER_PARTITION_RETRY_BACKOFF_MS = 50

AlterPartitionCallback = Callable[[AlterPartitionResult], None]
AlterPartitionKey = tuple[str, int]


@attrs.frozen(kw_only=True)
class AlterPartitionItem:
    """One partition's proposed ISR, as sent (Kafka's ``AlterPartitionItem``)."""

    topic_id: str
    partition_index: int
    # The proposing leader (this broker).
    leader_id: int
    change: PendingIsrChange

    @property
    def key(self) -> AlterPartitionKey:
        return (self.topic_id, self.partition_index)


@attrs.frozen
class AlterPartitionRequestBatch:
    """The changes of one request, with the number its answer must carry."""

    number: int
    items: tuple[AlterPartitionItem, ...]


class AlterPartitionQueue:
    def __init__(self) -> None:
        # Invariant: at most one change per partition; bounded by the partitions this broker
        # leads (one entry each).
        self._unsent: dict[AlterPartitionKey, tuple[AlterPartitionItem, AlterPartitionCallback]]
        self._unsent = {}
        # Invariant: in_flight is the number of the one request not answered yet.
        self.in_flight: int | None = None
        self._last_number = 0
        self.closed = False

    @property
    def queued(self) -> int:
        return len(self._unsent)

    @property
    def idle(self) -> bool:
        return not self._unsent and self.in_flight is None

    def submit(self, item: AlterPartitionItem, callback: AlterPartitionCallback) -> bool:
        """Queue a change; False (refused) while one for the partition waits, or once closed."""
        if item.key in self._unsent or self.closed:
            return False
        self._unsent[item.key] = (item, callback)
        return True

    def next_request(self) -> AlterPartitionRequestBatch | None:
        """Every waiting change in one request, when none is in flight; None otherwise."""
        if not self._unsent or self.in_flight is not None or self.closed:
            return None
        self._last_number += 1
        self.in_flight = self._last_number
        items = tuple(item for item, _ in self._unsent.values())
        return AlterPartitionRequestBatch(self._last_number, items)

    def on_answer(
        self,
        batch: AlterPartitionRequestBatch,
        results: Mapping[AlterPartitionKey, AlterPartitionResult] | None,
    ) -> list[tuple[AlterPartitionCallback, AlterPartitionResult]]:
        """The answer to ``batch`` (None = failed): the callbacks to call, in request order.

        Answered changes leave the queue first, so a callback may submit the next change for
        its partition.
        """
        if batch.number != self.in_flight:
            return []  # a late answer to a request already given up on
        self.in_flight = None
        if results is None:
            return []
        delivered = []
        for item in batch.items:
            result = results.get(item.key)
            if result is None:
                continue
            queued, callback = self._unsent.pop(item.key)
            assert queued is item, f"{item.key}: another change queued while one was in flight"
            delivered.append((callback, result))
        return delivered

    def missing(
        self,
        batch: AlterPartitionRequestBatch,
        results: Mapping[AlterPartitionKey, AlterPartitionResult],
    ) -> list[AlterPartitionKey]:
        """The partitions of ``batch`` its answer left out (they stay queued)."""
        return [item.key for item in batch.items if item.key not in results]

    def close(self) -> None:
        """Stop: queued changes are dropped (new metadata will supersede them)."""
        self.closed = True
        self.in_flight = None
        self._unsent.clear()
