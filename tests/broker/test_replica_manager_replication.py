"""Replication through ReplicaManagers: three brokers in one process, the followers fetching
from the leader with ``fetch_messages`` (replica ids and broker epochs, as the fetcher sends
them) and appending what they get, and AlterPartition going through the real QuorumController,
whose records every broker then applies — no sockets, a fake clock, nothing sleeps.

Scenarios: acks=all waits for the ISR (Kafka's DelayedProduce) and a waiting consumer wakes on
the high-watermark move; a stuck follower is shrunk out of the ISR after
replica.lag.time.max.ms and rejoins once caught up (Partition.maybeShrinkIsr / maybeExpandIsr);
min.insync.replicas refuses or times out acks=all; a leader change answers a waiting produce.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.alter_partition import AlterPartitionManager
from pykraft.broker.replica_manager import (
    AppendResult,
    FetchParams,
    LogReadResult,
    PartitionFetch,
    RecordedFetcherManager,
    ReplicaManager,
)
from pykraft.metadata.api.brokers import (
    AlterPartitionResult,
    alter_partition_request_from_json,
    alter_partition_request_to_json,
    alter_partition_response_from_json,
    alter_partition_response_to_json,
)
from pykraft.metadata.api.json_fields import Fields
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import local_changes
from pykraft.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionChangeRecord,
    TopicRecord,
)
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    AlterPartitionData,
    AlterPartitionRequest,
    QuorumController,
)
from pykraft.replica.partition_core import LogView
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import (
    NOW_MS,
    PETS0,
    PETS_ID,
    batch,
    broker,
    partition_record,
)
from tests.fake_clock import FakeClock

BROKERS = (1, 2, 3)
LEADER, F2, F3 = BROKERS
LAG_MS = 10_000


def _epoch_of(broker_id: int) -> Callable[[], int]:
    return lambda: 100 + broker_id  # the epoch replica_harness.broker() registers


class InProcessControllerChannel:
    """``ControllerClient.alter_partition`` over the real QuorumController: the answer is what
    ``quorum/service_brokers.py`` would send, and the records reach every broker."""

    def __init__(self, cluster: ReplicatedCluster) -> None:
        self.cluster = cluster
        self.controller = QuorumController(rng=random.Random(7), now_ms=NOW_MS)
        self.requests: list[list[tuple[int, ...]]] = []

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, partitions: Sequence[AlterPartitionData]
    ) -> tuple[AlterPartitionResult, ...]:
        sent = AlterPartitionRequest(broker_id, broker_epoch, tuple(partitions))
        # Through the contract's JSON both ways, as over HTTP.
        request = alter_partition_request_from_json(
            Fields(json.loads(json.dumps(alter_partition_request_to_json(sent))))
        )
        self.requests.append(
            [tuple(m.broker_id for m in p.new_isr_with_epochs) for p in partitions]
        )
        result = self.controller.alter_partition(self.cluster.image, request, NOW_MS)
        assert result.response.error.is_success()
        if result.records:
            self.cluster.publish(*result.records)
        answer = json.loads(json.dumps(alter_partition_response_to_json(result.response)))
        return alter_partition_response_from_json(Fields(answer)).partitions


class RecordedTimer:
    """The one timer a ``ReplicaManager`` keeps at its core's next deadline; a test fires it."""

    def __init__(self, on_due: Callable[[], object]) -> None:
        self.on_due = on_due
        self.armed_ms: int | None = None

    def arm(self, deadline_ms: int | None) -> None:
        if deadline_ms is not None:
            self.armed_ms = deadline_ms

    def fired(self) -> None:
        self.armed_ms = None

    def cancel(self) -> None:
        self.armed_ms = None

    def fire(self, clock: FakeClock) -> None:
        """The clock reaches the armed deadline and the timer calls back."""
        assert self.armed_ms is not None, "the timer is not armed"
        clock.now_ms = self.armed_ms
        self.on_due()


class ReplicatedCluster:
    def __init__(self, tmp_path: Path, *, timed: bool = False) -> None:
        self.clock = FakeClock(50_000)
        self.timers: dict[int, RecordedTimer] = {}
        self.image = MetadataImage.EMPTY
        self.channel = InProcessControllerChannel(self)
        self.managers: dict[int, ReplicaManager] = {}
        self.alter_managers: list[AlterPartitionManager] = []
        for broker_id in BROKERS:
            log_manager = LogManager.open([tmp_path / f"b{broker_id}"], LogConfig(), now_ms=0)
            alter = AlterPartitionManager(
                self.channel, broker_id=broker_id, broker_epoch=_epoch_of(broker_id)
            )
            self.alter_managers.append(alter)
            self.managers[broker_id] = ReplicaManager(
                broker_id=broker_id,
                log_manager=log_manager,
                fetcher_manager=RecordedFetcherManager(),
                alter_partition=alter,
                replica_lag_time_max_ms=LAG_MS,
                monotonic_ms=self.clock.monotonic_ms,
                timer=self._timer_of(broker_id) if timed else None,
            )

    def _timer_of(self, broker_id: int) -> Callable[[Callable[[], object]], RecordedTimer]:
        def build(on_due: Callable[[], object]) -> RecordedTimer:
            self.timers[broker_id] = RecordedTimer(on_due)
            return self.timers[broker_id]

        return build

    def publish(self, *records: MetadataRecord) -> None:
        delta = MetadataDelta(self.image)
        for record in records:
            delta.replay(record)
        self.image = delta.apply()
        for broker_id, manager in self.managers.items():
            manager.apply_delta(local_changes(delta, broker_id), self.image, NOW_MS)

    def start(self, *extra: MetadataRecord, isr: tuple[int, ...] = BROKERS) -> None:
        self.publish(
            *(broker(b) for b in BROKERS),
            *extra,
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 0, BROKERS, leader=LEADER, isr=isr),
        )

    @property
    def leader(self) -> ReplicaManager:
        return self.managers[LEADER]

    def isr(self) -> tuple[int, ...]:
        return self.image.topics.by_name["pets"].partitions[0].isr

    async def replicate(self, follower: int, *, max_wait_ms: int = 0) -> LogReadResult:
        """One fetch by ``follower`` from the leader, appended to its log (the fetcher's job)."""
        log = self.managers[follower].partition_or_error(PETS0).log
        latest = log.leader_epoch_cache.latest_epoch
        params = FetchParams(
            replica_id=follower,
            replica_epoch=100 + follower,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=1 << 20,
            partitions=(
                PartitionFetch(
                    topic_partition=PETS0,
                    fetch_offset=log.log_end_offset,
                    partition_max_bytes=1 << 20,
                    current_leader_epoch=self.image.topics.by_name["pets"]
                    .partitions[0]
                    .leader_epoch,
                    last_fetched_epoch=-1 if latest is None else latest,
                    log_start_offset=log.log_start_offset,
                ),
            ),
        )
        (result,) = await self.leader.fetch_messages(params)
        assert result.error is Errors.NONE and result.diverging_epoch is None
        data = b"".join(piece.read_bytes() for piece in result.slices)
        if data:
            log.append_as_follower(data, NOW_MS)
        log.update_high_watermark(min(result.high_watermark, log.log_end_offset))
        return result

    async def produce(
        self, *values: bytes, acks: int = -1, timeout_ms: int = 5000
    ) -> asyncio.Task[dict[TopicPartition, AppendResult]]:
        """Start a produce; the append is done when this returns, the answer may wait."""
        task = asyncio.ensure_future(
            self.leader.append_records(
                {PETS0: batch(*values)}, required_acks=acks, timeout_ms=timeout_ms, now_ms=NOW_MS
            )
        )
        await asyncio.sleep(0)  # a yield: the append runs before the task's first await
        return task

    async def close(self) -> None:
        for alter in self.alter_managers:
            await alter.close()
        for manager in self.managers.values():
            manager.shutdown()
            manager.log_manager.shutdown()


async def settle() -> None:
    """Let queued callbacks and the AlterPartition task run (yields, not waits)."""
    for _ in range(10):
        await asyncio.sleep(0)


def run(tmp_path: Path, scenario: Any, *, timed: bool = False) -> None:
    async def main() -> None:
        cluster = ReplicatedCluster(tmp_path, timed=timed)
        try:
            await scenario(cluster)
        finally:
            await cluster.close()

    asyncio.run(main())


def test_acks_all_completes_when_the_isr_has_the_batch(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        cluster.start()
        produce = await cluster.produce(b"a", b"b")
        await settle()
        assert not produce.done()
        partition = cluster.leader.partition_or_error(PETS0)
        assert (partition.log_end_offset, partition.high_watermark) == (2, 0)
        await cluster.replicate(F2)  # fetches the batch
        await cluster.replicate(F2)  # says it has it
        await settle()
        assert not produce.done()  # F3 is in the ISR too
        await cluster.replicate(F3)
        await cluster.replicate(F3)
        assert partition.high_watermark == 2
        results = await produce
        assert results[PETS0].error is Errors.NONE and results[PETS0].base_offset == 0
        # The followers learn the high watermark on their next fetch.
        await cluster.replicate(F2)
        assert cluster.managers[F2].partition_or_error(PETS0).high_watermark == 2

    run(tmp_path, scenario)


def test_a_waiting_consumer_wakes_when_the_high_watermark_moves(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        cluster.start(isr=(LEADER, F2))
        consumer = asyncio.ensure_future(
            cluster.leader.fetch_messages(
                FetchParams(
                    replica_id=-1,
                    max_wait_ms=60_000,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    partitions=(
                        PartitionFetch(
                            topic_partition=PETS0, fetch_offset=0, partition_max_bytes=1 << 20
                        ),
                    ),
                )
            )
        )
        await settle()
        await (await cluster.produce(b"a", acks=1))
        await settle()
        assert not consumer.done()  # appended, but not below the high watermark yet
        await cluster.replicate(F2)
        await cluster.replicate(F2)
        (result,) = await consumer
        assert result.high_watermark == 1 and result.size_in_bytes == len(batch(b"a"))

    run(tmp_path, scenario)


def test_a_stuck_follower_leaves_the_isr_and_rejoins_once_caught_up(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        cluster.start()
        produce = await cluster.produce(b"a")
        for follower in (F2, F2):
            await cluster.replicate(follower)
        await settle()
        assert not produce.done()  # F3 never fetches
        cluster.clock.now_ms += LAG_MS + 1
        await cluster.replicate(F2)  # F2 stays caught up
        assert cluster.leader.maybe_shrink_isr() == 1
        await settle()
        assert cluster.channel.requests == [[(LEADER, F2)]]
        assert cluster.isr() == (LEADER, F2)
        assert (await produce)[PETS0].error is Errors.NONE  # HW moved with the shrink
        # F3 comes back and catches up: the leader proposes it and the controller commits.
        await cluster.replicate(F3)
        await cluster.replicate(F3)
        await settle()
        assert cluster.channel.requests[-1] == [(LEADER, F2, F3)]
        assert cluster.isr() == (LEADER, F2, F3)
        assert cluster.leader.partition_or_error(PETS0).state.isr == (LEADER, F2, F3)

    run(tmp_path, scenario)


def test_min_insync_replicas_refuses_and_times_out_acks_all(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        min_isr = ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="pets",
            name="min.insync.replicas",
            value="2",
        )
        cluster.start(min_isr, isr=(LEADER, F2))
        waiting = await cluster.produce(b"a", timeout_ms=3000)
        await settle()
        # F2 stops fetching and is shrunk out: the ISR is below min.insync.replicas.
        cluster.clock.now_ms += LAG_MS + 1
        assert cluster.leader.maybe_shrink_isr() == 1
        await settle()
        assert cluster.isr() == (LEADER,)
        partition = cluster.leader.partition_or_error(PETS0)
        assert partition.high_watermark == 0  # KIP-966: frozen under min ISR
        refused = await (await cluster.produce(b"b"))
        assert refused[PETS0].error is Errors.NOT_ENOUGH_REPLICAS
        assert (await (await cluster.produce(b"c", acks=1)))[PETS0].error is Errors.NONE
        cluster.clock.now_ms += 3000
        cluster.leader.delayed_produces.expire_due()
        timed_out = await waiting
        assert timed_out[PETS0].error is Errors.REQUEST_TIMED_OUT
        assert timed_out[PETS0].base_offset == 0  # Kafka keeps the append's offsets

    run(tmp_path, scenario)


def test_a_leader_change_answers_a_waiting_produce(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        cluster.start()
        produce = await cluster.produce(b"a")
        await settle()
        cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=F2))
        results = await produce
        assert results[PETS0].error is Errors.NOT_LEADER_OR_FOLLOWER

    run(tmp_path, scenario)


def test_offsets_for_leader_epoch_only_from_the_leader(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        cluster.start()
        await (await cluster.produce(b"a", b"b", acks=1))
        answer = cluster.leader.last_offset_for_leader_epoch(PETS0, 0, 0)
        assert (answer.error, answer.leader_epoch, answer.end_offset) == (Errors.NONE, 0, 2)
        follower = cluster.managers[F2].last_offset_for_leader_epoch(PETS0, 0, 0)
        assert follower.error is Errors.NOT_LEADER_OR_FOLLOWER
        unknown = cluster.leader.last_offset_for_leader_epoch(TopicPartition("x", 0), -1, 0)
        assert unknown.error is Errors.UNKNOWN_TOPIC_OR_PARTITION

    run(tmp_path, scenario)


def test_one_timer_at_the_next_deadline_runs_the_isr_expiration_and_the_produce_timeouts(
    tmp_path: Path,
) -> None:
    """Kafka's isr-expiration task (every replica.lag.time.max.ms / 2) and DelayedProduce's
    expiry come from one timer kept at ``ReplicaCore.next_deadline_ms``, not sleeping loops."""

    async def scenario(cluster: ReplicatedCluster) -> None:
        start_ms, timer = cluster.clock.now_ms, cluster.timers[LEADER]
        cluster.start()
        assert timer.armed_ms == start_ms + LAG_MS // 2
        produce = await cluster.produce(b"a", timeout_ms=10 * LAG_MS)
        assert timer.armed_ms == start_ms + LAG_MS // 2  # the produce's deadline is later
        for _ in range(2):  # F2 keeps up, F3 never fetches
            await cluster.replicate(F2)
            timer.fire(cluster.clock)
            await settle()
        assert cluster.channel.requests == []  # F3 lags exactly replica.lag.time.max.ms
        assert timer.armed_ms == start_ms + 3 * LAG_MS // 2
        await cluster.replicate(F2)
        timer.fire(cluster.clock)
        await settle()
        assert cluster.channel.requests == [[(LEADER, F2)]]
        assert (await produce)[PETS0].error is Errors.NONE  # the HW moved with the shrink
        late = await cluster.produce(b"b", timeout_ms=1000)
        assert timer.armed_ms == cluster.clock.now_ms + 1000
        timer.fire(cluster.clock)
        assert (await late)[PETS0].error is Errors.REQUEST_TIMED_OUT
        assert timer.armed_ms == start_ms + 2 * LAG_MS

    run(tmp_path, scenario, timed=True)


def test_the_timer_stays_armed_when_a_tick_fails(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicatedCluster) -> None:
        timer, leader = cluster.timers[LEADER], cluster.leader
        cluster.start()

        def broken(topic_partition: TopicPartition) -> LogView:
            raise RuntimeError("a bug in the ISR expiration")

        leader._log_view = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            timer.fire(cluster.clock)
        assert timer.armed_ms == cluster.clock.now_ms + LAG_MS // 2

    run(tmp_path, scenario, timed=True)
