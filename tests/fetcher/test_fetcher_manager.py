"""ReplicaFetcherManager: fetcher assignment, reuse, restart and idle shutdown, and replication
through running fetcher tasks (Kafka's AbstractFetcherManagerTest, ReplicaFetcherManager).

The manager is driven exactly as ``broker.replica_manager.ReplicaManager`` drives it, with the
broker's own ``InitialFetchState`` values; leaders are in-memory ``FakeLeaderEndpoint``s on a
simulated clock, followers real ``PartitionLog``s in ``tmp_path``. Nothing sleeps or opens a port.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from pykraft.fetcher.fetcher_config import FetcherConfig
from pykraft.fetcher.fetcher_id import fetcher_id
from pykraft.fetcher.fetcher_manager import FetcherKey, ReplicaFetcherManager, parse_topic_id
from pykraft.fetcher.leader_endpoint import LeaderEndpoint
from pykraft.fetcher.responses import FailureReason
from pykraft.metadata.records import BrokerEndpoint, uuid_to_kafka_string
from pykraft.replica.data_path import FetcherManager, InitialFetchState
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock
from tests.fetcher.fake_leader import FakeLeaderEndpoint, leader_of, open_log, records_of
from tests.fetcher.harness import MockLeader

TOPIC_ID = uuid_to_kafka_string(uuid.UUID(int=7).bytes)


class Cluster:
    """Leaders by broker id, the fake endpoints the manager opened, and the follower's logs."""

    def __init__(self, tmp_path: Path, num_replica_fetchers: int = 1) -> None:
        self.tmp_path = tmp_path
        self.clock = FakeClock()
        self.leaders: dict[int, dict[TopicPartition, MockLeader]] = {}
        self.endpoints: list[FakeLeaderEndpoint] = []
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.manager = ReplicaFetcherManager(
            FetcherConfig(replica_id=9, num_replica_fetchers=num_replica_fetchers),
            self.logs.get,
            endpoint_factory=self.endpoint,
            clock=self.clock,
        )

    def endpoint(self, leader_id: int, host: str, port: int, fetcher: int) -> LeaderEndpoint:
        endpoint = FakeLeaderEndpoint(
            leader_id,
            self.leaders.setdefault(leader_id, {}),
            host=host,
            port=port,
            clock=self.clock,
        )
        self.endpoints.append(endpoint)
        return endpoint

    def start(
        self,
        tp: TopicPartition,
        leader_id: int,
        epoch: int = 0,
        port: int | None = None,
        known: bool = True,
    ) -> InitialFetchState:
        if tp not in self.logs:
            self.logs[tp] = open_log(self.tmp_path / tp.dir_name())
        address = BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=port or 9000 + leader_id)
        return InitialFetchState(
            topic_id=TOPIC_ID,
            leader_id=leader_id,
            leader_endpoint=address if known else None,
            current_leader_epoch=epoch,
            init_offset=self.logs[tp].log_end_offset,
        )

    def add(self, *tps: TopicPartition, leader_id: int = 1, **options: Any) -> None:
        self.manager.add_fetcher_for_partitions(
            {tp: self.start(tp, leader_id, **options) for tp in tps}
        )


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def turns(count: int = 3) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def until(condition: Callable[[], bool], max_turns: int = 2000) -> None:
    for _ in range(max_turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


def tps(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def test_partitions_spread_over_fetchers_by_kafkas_fetcher_id(tmp_path: Path) -> None:
    # AbstractFetcherManager.getFetcherId: Utils.abs(31 * topic.hashCode + partition) % n,
    # one fetcher per (leader, fetcher id), at most num.replica.fetchers per leader.
    async def test() -> None:
        cluster = Cluster(tmp_path, num_replica_fetchers=3)
        partitions = tps("orders", 12) + tps("payments", 5)
        cluster.add(*partitions[:9], leader_id=1)
        cluster.add(*partitions[9:], leader_id=2)
        manager = cluster.manager
        for index, tp in enumerate(partitions):
            fetcher = manager.fetcher_for(tp)
            assert fetcher is not None
            expected = FetcherKey(1 if index < 9 else 2, fetcher_id(tp.topic, tp.partition, 3))
            assert manager.fetchers[expected] is fetcher
            assert tp in fetcher.partition_states
        assert {key.leader_id for key in manager.fetchers} == {1, 2}
        assert len(manager.fetchers) <= 6
        assert len({key.fetcher_id for key in manager.fetchers if key.leader_id == 1}) == 3
        await manager.shutdown()

    run(test)


def test_a_fetcher_is_reused_while_the_leader_endpoint_is_unchanged(tmp_path: Path) -> None:
    # AbstractFetcherManager.addFetcherForPartitions: same broker end point -> reuse.
    async def test() -> None:
        cluster = Cluster(tmp_path)
        t0, t1 = tps("t", 2)
        cluster.add(t0)
        first = cluster.manager.fetcher_for(t0)
        cluster.add(t1)
        assert cluster.manager.fetcher_for(t1) is first
        assert len(cluster.endpoints) == 1
        await cluster.manager.shutdown()
        assert cluster.endpoints[0].closed

    run(test)


def test_a_moved_leader_gets_a_new_fetcher_that_takes_the_partitions_along(
    tmp_path: Path,
) -> None:
    # Same leader id at a new address (restarted elsewhere): the old fetcher stops and its
    # partitions move, fetch state and all, to a fetcher for the new address.
    async def test() -> None:
        cluster = Cluster(tmp_path)
        t0, t1 = tps("t", 2)
        cluster.leaders[1] = {t0: leader_of([0, 0], 0, hw=2, max_records=2)}
        cluster.add(t0)
        await until(lambda: cluster.logs[t0].log_end_offset == 2)
        old = cluster.manager.fetcher_for(t0)
        assert old is not None
        state = old.partition_states[t0]
        cluster.add(t1, port=9500)
        new = cluster.manager.fetcher_for(t0)
        assert new is not None and new is not old and cluster.manager.fetcher_for(t1) is new
        assert new.partition_states[t0] == state
        assert old.partition_count == 0
        await until(lambda: cluster.endpoints[0].closed)
        assert (cluster.endpoints[1].host, cluster.endpoints[1].port) == ("127.0.0.1", 9500)
        await cluster.manager.shutdown()

    run(test)


def test_idle_fetchers_shut_down_but_survive_a_remove_and_re_add(tmp_path: Path) -> None:
    # ReplicaManager removes and re-adds a partition in one metadata delta when its leader
    # epoch moves; the fetcher (and its connection) must survive that, and stop once idle.
    async def test() -> None:
        cluster = Cluster(tmp_path)
        (t0,) = tps("t", 1)
        cluster.add(t0, epoch=0)
        fetcher = cluster.manager.fetcher_for(t0)
        cluster.manager.remove_fetcher_for_partitions([t0])
        cluster.add(t0, epoch=1)
        await turns()
        assert cluster.manager.fetcher_for(t0) is fetcher and len(cluster.endpoints) == 1
        assert fetcher is not None and fetcher.partition_states[t0].current_leader_epoch == 1
        cluster.manager.remove_fetcher_for_partitions([t0])
        await until(lambda: cluster.endpoints[0].closed)
        assert cluster.manager.fetchers == {}
        assert cluster.manager.fetcher_for(t0) is None

    run(test)


def test_a_partition_whose_leader_changes_leaves_its_old_fetcher(tmp_path: Path) -> None:
    async def test() -> None:
        cluster = Cluster(tmp_path)
        (t0,) = tps("t", 1)
        cluster.add(t0, leader_id=1, epoch=0)
        cluster.add(t0, leader_id=2, epoch=1)
        fetcher = cluster.manager.fetcher_for(t0)
        assert fetcher is not None and fetcher.leader_id == 2
        await until(lambda: cluster.endpoints[0].closed)
        assert list(cluster.manager.fetchers) == [FetcherKey(2, 0)]
        await cluster.manager.shutdown()

    run(test)


def test_a_leader_without_an_endpoint_is_not_fetched_from(tmp_path: Path) -> None:
    # ReplicaManager.applyLocalFollowersDelta: "Unable to start fetching ... not alive".
    async def test() -> None:
        cluster = Cluster(tmp_path)
        (t0,) = tps("t", 1)
        cluster.add(t0, known=False)
        assert cluster.manager.fetcher_for(t0) is None and cluster.endpoints == []

    run(test)


def test_failed_partitions_are_recorded_and_cleared_when_added_again(tmp_path: Path) -> None:
    # AbstractFetcherManager.failedPartitions: a fenced partition leaves its fetcher; adding
    # it again (new metadata) or removing it clears the record.
    async def test() -> None:
        cluster = Cluster(tmp_path)
        (t0,) = tps("t", 1)
        cluster.leaders[1] = {t0: leader_of([0], 1, hw=1)}
        cluster.add(t0, epoch=0)  # the leader is already on epoch 1: FENCED_LEADER_EPOCH
        await until(lambda: t0 in cluster.manager.failed_partitions)
        assert cluster.manager.failed_partitions[t0] is FailureReason.FENCED_LEADER_EPOCH
        assert cluster.manager.fetcher_for(t0) is None
        cluster.add(t0, epoch=1)
        assert t0 not in cluster.manager.failed_partitions
        await until(lambda: records_of(cluster.logs[t0]) == [(0, 0)])
        await cluster.manager.shutdown()

    run(test)


def test_running_fetchers_replicate_from_several_leaders(tmp_path: Path) -> None:
    # The whole loop: tasks started by the manager, long polls on the simulated clock, two
    # leaders with two fetchers each, a divergent follower log among them.
    async def test() -> None:
        cluster = Cluster(tmp_path, num_replica_fetchers=2)
        a, b = tps("a", 3), tps("b", 3)
        cluster.leaders[1] = {tp: leader_of([0, 0, 1, 1], 1, hw=3, max_records=2) for tp in a}
        cluster.leaders[2] = {tp: leader_of([1, 3, 5], 5, hw=2) for tp in b}
        cluster.logs[b[0]] = open_log(tmp_path / "b-0", [0, 2, 4])
        cluster.add(*a, leader_id=1, epoch=1)
        cluster.add(*b, leader_id=2, epoch=5)

        def in_sync() -> bool:
            return all(
                records_of(cluster.logs[tp]) == leader.log.records
                for leaders in cluster.leaders.values()
                for tp, leader in leaders.items()
            )

        await until(in_sync)
        assert [cluster.logs[tp].high_watermark for tp in a + b] == [3, 3, 3, 2, 2, 2]
        await cluster.manager.shutdown()
        assert all(endpoint.closed for endpoint in cluster.endpoints)
        assert cluster.manager.fetchers == {}

    run(test)


def test_the_manager_is_the_broker_fetcher_manager(tmp_path: Path) -> None:
    # replica.data_path.FetcherManager is the contract ReplicaManager calls.
    manager: FetcherManager = ReplicaFetcherManager(
        FetcherConfig(replica_id=1), lambda tp: None, clock=FakeClock()
    )
    assert manager is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (TOPIC_ID, uuid.UUID(int=7)),
        ("AAAAAAAAAAAAAAAAAAAAAA", None),  # Uuid.ZERO_UUID: no topic id
        ("", None),
        ("not-a-uuid", None),
        ("!!!!!!!!!!!!!!!!!!!!!!", None),
    ],
)
def test_parse_topic_id(text: str, expected: uuid.UUID | None) -> None:
    assert parse_topic_id(text) == expected


def test_a_follower_log_that_fails_on_disk_is_reported_for_its_log_dir(tmp_path: Path) -> None:
    # Kafka: a KafkaStorageException while appending fetched data marks the partition failed
    # and goes to the LogDirFailureChannel; here the broker's on_storage_error hook.
    async def test() -> None:
        cluster = Cluster(tmp_path)
        reported: list[TopicPartition] = []
        cluster.manager.on_storage_error = reported.append
        (t0,) = tps("t", 1)
        cluster.leaders[1] = {t0: leader_of([0, 0], 0, hw=2)}
        cluster.add(t0)
        cluster.logs[t0].close_handlers()  # its files are gone: appends raise OSError
        await until(lambda: t0 in cluster.manager.failed_partitions)
        assert cluster.manager.failed_partitions[t0] is FailureReason.STORAGE_ERROR
        assert reported == [t0]
        await cluster.manager.shutdown()

    run(test)
