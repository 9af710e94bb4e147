"""The I/O boundaries around the shipped ``ReplicaManager`` in the replication sim.

STYLE.md §10: a test double may stand in for an I/O boundary, never for a class that decides.
Each class here replaces one piece of the broker's I/O, and nothing else:

* ``SimFetcherManager`` stands where ``fetcher.ReplicaFetcherManager`` starts asyncio fetcher
  tasks: one shipped ``ReplicaFetcher`` per leader, stepped by the simulation over the simulated
  network (``replication_fetcher``).
* ``SimDelayedProduces`` is ``broker.delayed_produce.DelayedProduces`` without asyncio: the same
  shipped ``ProducePurgatory``, its answers recorded as acknowledgements instead of resolving
  futures, its deadlines expired by the simulation's clock.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

import attrs

from pykraft.fetcher.fetcher_config import PartitionStart
from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import InitialFetchState
from pykraft.replica.produce_waiters import ProducePurgatory, ReplicaChecker
from pykraft.storage.topic_partition import TopicPartition
from tests.sim.replication_checks import Checker, PartitionKey
from tests.sim.replication_fetcher import (
    ObservedReplicaFetcher,
    SimFetcherClock,
    start_fetcher,
)
from tests.sim.replication_net import SimTask

if TYPE_CHECKING:
    from tests.sim.replication_broker import SimBroker


def key_of(topic_partition: TopicPartition) -> PartitionKey:
    return (topic_partition.topic, topic_partition.partition)


class SimFetcherManager:
    """``ReplicaFetcherManager.add/remove_fetcher_for_partitions``: one shipped
    ``ReplicaFetcher`` per leader, stepped on the simulated network (``replication_fetcher``)."""

    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        self.fetchers: dict[int, tuple[ObservedReplicaFetcher, SimTask, SimFetcherClock]] = {}

    def add_fetcher_for_partitions(
        self, partitions: Mapping[TopicPartition, InitialFetchState]
    ) -> None:
        by_leader: dict[int, dict[TopicPartition, PartitionStart]] = {}
        for topic_partition, start in partitions.items():
            by_leader.setdefault(start.leader_id, {})[topic_partition] = PartitionStart(
                None, start.current_leader_epoch
            )
        for leader_id, starts in sorted(by_leader.items()):
            if leader_id not in self.fetchers:
                self.fetchers[leader_id] = start_fetcher(self.broker, leader_id)
            fetcher, _, clock = self.fetchers[leader_id]
            fetcher.add_partitions(starts)
            clock.wake()

    def remove_fetcher_for_partitions(self, partitions: Collection[TopicPartition]) -> None:
        for leader_id, (fetcher, task, _) in list(self.fetchers.items()):
            fetcher.remove_partitions(partitions)
            if fetcher.partition_count == 0:
                task.stop()
                del self.fetchers[leader_id]


@attrs.frozen
class PendingProduce:
    key: PartitionKey
    base_offset: int
    required_offset: int
    values: tuple[str, ...]
    deadline_ms: int


class SimDelayedProduces:
    """``DelayedProduces`` on simulated time: an answer with no error is an acknowledgement."""

    def __init__(self, checker: Checker) -> None:
        self.purgatory = ProducePurgatory()
        self.checker = checker
        self.produces: dict[int, PendingProduce] = {}

    def watch(self, produce: PendingProduce, checker: ReplicaChecker) -> None:
        """``DelayedProduces.wait`` up to its first await: watch, then check once."""
        waiter_id = self.purgatory.try_watch(
            {TopicPartition(*produce.key): produce.required_offset}, produce.deadline_ms
        )
        if waiter_id is None:
            return  # the purgatory is full: REQUEST_TIMED_OUT
        self.produces[waiter_id] = produce
        errors = self.purgatory.try_complete(waiter_id, checker)
        if errors is not None:
            self._answer(waiter_id, errors)

    def check_and_complete(self, topic_partition: TopicPartition, checker: ReplicaChecker) -> None:
        if self.purgatory.watching(topic_partition):
            for waiter_id, errors in self.purgatory.check(topic_partition, checker).items():
                self._answer(waiter_id, errors)

    def expire_due(self, now_ms: int) -> None:
        for waiter_id, errors in self.purgatory.expire(now_ms).items():
            self._answer(waiter_id, errors)

    def close(self) -> None:
        self.produces.clear()

    def _answer(self, waiter_id: int, errors: Mapping[TopicPartition, Errors]) -> None:
        produce = self.produces.pop(waiter_id)
        if all(error is Errors.NONE for error in errors.values()):
            self.checker.on_ack(produce.key, produce.base_offset, produce.values)
