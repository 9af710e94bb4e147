"""The I/O boundaries around the shipped ``ReplicaManager`` in the replication sim.

STYLE.md §10: a test double may stand in for an I/O boundary, never for a class that decides.
Each class here replaces one piece of the broker's I/O, and nothing else:

* ``SimFetcherManager`` stands where ``fetcher.ReplicaFetcherManager`` starts asyncio fetcher
  tasks: one shipped ``ReplicaFetcher`` per leader, stepped by the simulation over the simulated
  network (``replication_fetcher``).
* ``SimMetadataSource`` stands where ``ControllerClient`` answers the ``MetadataLoader``: the sim
  delivers the answers itself, over the simulated network, through ``MetadataLoader.on_page``.
* ``SimTimer`` is ``broker.purgatory.DeadlineTimer`` on the simulated clock: the one timer
  ``ReplicaManager`` keeps armed at its core's next deadline, as a scheduled event.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from pykraft.broker.controller_client import RecordsPage
from pykraft.fetcher.fetcher_config import PartitionStart
from pykraft.replica.data_path import InitialFetchState
from pykraft.storage.topic_partition import TopicPartition
from tests.sim.replication_checks import PartitionKey
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


class SimMetadataSource:
    """The loader's ``MetadataSource``; never asked: the sim delivers pages to ``on_page``."""

    async def fetch_records(
        self, from_offset: int, *, max_wait_ms: int, max_records: int
    ) -> RecordsPage:
        raise AssertionError("the simulation delivers metadata through MetadataLoader.on_page")

    async def download_snapshot(self, snapshot_id: str) -> bytes:
        raise AssertionError("the simulation's metadata log is never truncated")


class SimTimer:
    """``DeadlineTimer`` as a simulation event: when the armed deadline comes (and is still the
    armed one), ``on_due`` runs on the broker."""

    def __init__(self, broker: SimBroker, on_due: Callable[[], object]) -> None:
        self.broker = broker
        self.on_due = on_due
        self._deadline_ms: int | None = None

    def arm(self, deadline_ms: int | None) -> None:
        if deadline_ms is None or deadline_ms == self._deadline_ms:
            return
        self._deadline_ms = deadline_ms

        def due() -> None:
            if self._deadline_ms == deadline_ms:
                self.on_due()

        self.broker.schedule(max(0, deadline_ms - self.broker.env.now_ms), "replica tick", due)

    def fired(self) -> None:
        self._deadline_ms = None

    def cancel(self) -> None:
        self._deadline_ms = None
