"""The transaction coordinator's shell over doubles of its I/O edges: real partition logs for
``__transaction_state`` (shared by the brokers as if replicated), a marker channel that loses
requests when told, and a fake clock. Scenarios: a whole commit, markers lost and retried, a
leader that moves, a deleted topic, coordinator failover in the middle of a commit, resigning
while a write is in flight, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from pykraft.coordinator.transaction.effects import InitProducerIdResult, ProducerIdAndEpoch
from pykraft.coordinator.transaction.markers import RETRY_BACKOFF_MS
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import local_changes
from pykraft.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.transaction.fakes import (
    FakeChannel,
    FakeProducerIds,
    FakeReplicas,
    SharedLogs,
    replay_log,
)
from tests.fake_clock import FakeClock

S = TransactionState
TXN = "payments"
TP0 = TopicPartition("pets", 0)
TP1 = TopicPartition("pets", 1)
OFFSETS = TopicPartition("__consumer_offsets", 3)
TIMEOUT_MS = 60_000
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAg"


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


async def settle() -> None:
    """Let the shell's tasks (loads, appends, marker requests) run."""
    for _ in range(30):
        await asyncio.sleep(0)


class Broker:
    """One broker's transaction coordinator over the shared logs."""

    def __init__(
        self, logs: SharedLogs, channel: FakeChannel, clock: FakeClock, **config: Any
    ) -> None:
        config.setdefault("transaction_state_log_num_partitions", 1)
        self.replicas = FakeReplicas(logs)
        self.producer_ids = FakeProducerIds()
        self.clock = clock
        self.shell = TransactionCoordinatorShell(
            self.replicas,
            self.producer_ids,
            channel,
            TransactionConfig(**config),
            wall_clock_ms=clock.wall_clock_ms,
        )

    async def lead(self, epoch: int, partition: int = 0) -> None:
        self.replicas.lead(partition, epoch)
        self.shell.on_leadership({partition: epoch}, {})
        await settle()

    async def resign(self, new_epoch: int | None, partition: int = 0) -> None:
        self.replicas.leader_epochs.pop(partition, None)
        self.shell.on_leadership({}, {partition: new_epoch})
        await settle()

    async def advance(self, ms: int) -> None:
        self.clock.now_ms += ms
        self.shell.poll()
        await settle()

    async def begin(self, partitions: tuple[TopicPartition, ...] = (TP0, TP1)) -> tuple[int, int]:
        init = await self.shell.init_producer_id(TXN, TIMEOUT_MS)
        assert init.error is Errors.NONE, init
        added = await self.shell.add_partitions_to_txn(
            TXN, init.producer_id, init.producer_epoch, partitions
        )
        assert set(added.values()) == {Errors.NONE}, added
        return init.producer_id, init.producer_epoch

    def state(self) -> str:
        [description] = self.shell.describe_transactions([TXN])
        return description.state


def world(**config: Any) -> tuple[SharedLogs, FakeChannel, FakeClock, Broker]:
    logs = SharedLogs()
    channel = FakeChannel({TP0: 1, TP1: 2, OFFSETS: 1})
    clock = FakeClock()
    return logs, channel, clock, Broker(logs, channel, clock, **config)


def test_a_whole_commit_through_the_shell() -> None:
    async def scenario() -> None:
        logs, channel, _, broker = world()
        await broker.lead(epoch=3)
        pid, epoch = await broker.begin()
        assert pid == 5000 and epoch == 0
        offsets = await broker.shell.add_offsets_to_txn(TXN, pid, epoch, OFFSETS)
        assert offsets is Errors.NONE
        verified = await broker.shell.add_partitions_to_txn(
            TXN, pid, epoch, [TP0, TopicPartition("pets", 9)], verify_only=True
        )
        assert verified == {
            TP0: Errors.NONE,
            TopicPartition("pets", 9): Errors.TRANSACTION_ABORTABLE,
        }
        assert await broker.shell.end_txn(TXN, pid, epoch, commit=True) is Errors.NONE
        await settle()
        # One request per leader, the markers carrying the coordinator epoch.
        assert sorted(broker_id for broker_id, _ in channel.requests) == [1, 2]
        assert {m.coordinator_epoch for _, ms in channel.requests for m in ms} == {3}
        assert channel.written == {tp: [(True, pid, epoch)] for tp in (TP0, TP1, OFFSETS)}
        assert broker.state() == "CompleteCommit"
        statuses = [v.transaction_status for v in (await replay_log(logs.log(0))).values.values()]
        assert statuses == [S.COMPLETE_COMMIT]
        # Empty, Ongoing (the partitions), Ongoing (the offsets), PrepareCommit, CompleteCommit.
        assert logs.log(0).log_end_offset == 5
        await broker.shell.shutdown()

    run(scenario)


def test_lost_markers_are_retried_after_a_backoff_to_the_new_leader() -> None:
    async def scenario() -> None:
        _, channel, _, broker = world()
        await broker.lead(epoch=0)
        pid, epoch = await broker.begin()
        channel.fail = 2  # both first requests are lost
        assert await broker.shell.end_txn(TXN, pid, epoch, commit=False) is Errors.NONE
        await settle()
        assert channel.written == {} and broker.state() == "PrepareAbort"
        channel.leaders[TP1] = 3  # the leader of pets-1 moved meanwhile
        channel.errors[TP0] = Errors.NOT_ENOUGH_REPLICAS
        await broker.advance(RETRY_BACKOFF_MS)
        assert sorted(b for b, _ in channel.requests[2:]) == [1, 3]
        assert channel.written == {TP1: [(False, pid, epoch)]}
        del channel.errors[TP0]
        await broker.advance(RETRY_BACKOFF_MS)  # not yet: this is the second attempt's wait
        await broker.advance(RETRY_BACKOFF_MS)
        assert channel.written[TP0] == [(False, pid, epoch)]
        assert broker.state() == "CompleteAbort"
        await broker.shell.shutdown()

    run(scenario)


def test_a_partition_without_a_leader_waits_and_a_deleted_one_is_skipped() -> None:
    async def scenario() -> None:
        _, channel, _, broker = world()
        await broker.lead(epoch=0)
        pid, epoch = await broker.begin()
        channel.leaders[TP0] = -1  # being elected
        channel.leaders[TP1] = None  # its topic was deleted
        assert await broker.shell.end_txn(TXN, pid, epoch, commit=True) is Errors.NONE
        await settle()
        assert channel.requests == [] and broker.state() == "PrepareCommit"
        channel.leaders[TP0] = 2
        await broker.advance(RETRY_BACKOFF_MS)
        assert channel.written == {TP0: [(True, pid, epoch)]}
        assert broker.state() == "CompleteCommit"
        await broker.shell.shutdown()

    run(scenario)


def test_coordinator_failover_mid_commit_the_new_coordinator_finishes_it() -> None:
    async def scenario() -> None:
        logs, channel, clock, old = world()
        await old.lead(epoch=4)
        pid, epoch = await old.begin()
        channel.fail = 10  # the old coordinator's markers never arrive
        assert await old.shell.end_txn(TXN, pid, epoch, commit=True) is Errors.NONE
        await settle()
        await old.resign(new_epoch=5)
        new = Broker(logs, channel, clock)
        channel.fail = 0
        await new.lead(epoch=5)
        # The new coordinator replayed PrepareCommit and wrote the markers under its epoch.
        assert channel.written == {TP0: [(True, pid, epoch)], TP1: [(True, pid, epoch)]}
        assert {m.coordinator_epoch for _, ms in channel.requests[-2:] for m in ms} == {5}
        assert new.state() == "CompleteCommit"
        # The old one's retries are gone with the partition.
        requests = len(channel.requests)
        await old.advance(10 * RETRY_BACKOFF_MS)
        assert len(channel.requests) == requests
        assert old.shell.describe_transactions([TXN])[0].error is Errors.NOT_COORDINATOR
        # The producer continues with the new coordinator.
        again = await new.shell.init_producer_id(TXN, TIMEOUT_MS, ProducerIdAndEpoch(pid, epoch))
        assert again == InitProducerIdResult(Errors.NONE, pid, epoch + 1)
        await old.shell.shutdown()
        await new.shell.shutdown()

    run(scenario)


def test_failover_before_the_decision_is_written_aborts_by_timeout() -> None:
    async def scenario() -> None:
        logs, channel, clock, old = world()
        await old.lead(epoch=1)
        pid, epoch = await old.begin()
        await old.resign(new_epoch=2)
        new = Broker(logs, channel, clock)
        await new.lead(epoch=2)
        assert new.state() == "Ongoing"
        await new.advance(TIMEOUT_MS + 10_000)
        assert channel.written == {TP0: [(False, pid, epoch + 1)], TP1: [(False, pid, epoch + 1)]}
        assert new.state() == "CompleteAbort"
        await new.shell.shutdown()
        await old.shell.shutdown()

    run(scenario)


def test_resigning_while_an_append_is_in_flight_answers_not_coordinator() -> None:
    async def scenario() -> None:
        _, _, _, broker = world()
        await broker.lead(epoch=0)
        broker.replicas.gate.clear()  # appends wait for the ISR
        waiting = asyncio.ensure_future(broker.shell.init_producer_id(TXN, TIMEOUT_MS))
        await settle()
        assert not waiting.done()
        await broker.resign(new_epoch=1)
        assert (await waiting).error is Errors.NOT_COORDINATOR
        broker.replicas.gate.set()
        await settle()
        await broker.shell.shutdown()

    run(scenario)


def test_a_failed_append_answers_the_coordinator_error() -> None:
    async def scenario() -> None:
        _, _, _, broker = world()
        await broker.lead(epoch=0)
        broker.replicas.fail_with = Errors.NOT_ENOUGH_REPLICAS
        result = await broker.shell.init_producer_id(TXN, TIMEOUT_MS)
        assert result == InitProducerIdResult(Errors.COORDINATOR_NOT_AVAILABLE)
        await broker.shell.shutdown()

    run(scenario)


def test_producer_ids_and_leadership_errors() -> None:
    async def scenario() -> None:
        _, _, _, broker = world(transaction_state_log_num_partitions=2)
        assert (await broker.shell.init_producer_id(TXN, TIMEOUT_MS)).error is (
            Errors.NOT_COORDINATOR
        )
        broker.producer_ids.available = False
        assert (await broker.shell.init_producer_id(None, TIMEOUT_MS)).error is (
            Errors.COORDINATOR_LOAD_IN_PROGRESS
        )
        broker.producer_ids.available = True
        assert await broker.shell.init_producer_id(None, TIMEOUT_MS) == InitProducerIdResult(
            Errors.NONE, 5000, 0
        )
        # Elected in an epoch the replica layer no longer has: the load is given up.
        partition = broker.shell.partition_for(TXN)
        broker.shell.on_leadership({partition: 9}, {})
        await settle()
        assert (await broker.shell.init_producer_id(TXN, TIMEOUT_MS)).error is (
            Errors.NOT_COORDINATOR
        )
        await broker.shell.shutdown()

    run(scenario)


def test_on_metadata_reads_the_partition_count_and_leaderships() -> None:
    # The broker's metadata publisher hands over its local changes: __transaction_state-0
    # (one partition) led here in leader epoch 6, then moved to broker 2 in epoch 7.
    async def scenario() -> None:
        _, _, _, broker = world(transaction_state_log_num_partitions=50)
        broker.replicas.lead(0, 6)
        delta = MetadataDelta(MetadataImage.EMPTY)
        delta.replay(TopicRecord(name=TRANSACTION_STATE_TOPIC, topic_id=TOPIC_ID))
        delta.replay(
            PartitionRecord(
                topic_id=TOPIC_ID,
                partition_id=0,
                replicas=(1, 2),
                isr=(1, 2),
                leader=1,
                leader_epoch=6,
                partition_epoch=6,
            )
        )
        broker.shell.on_metadata(local_changes(delta, 1), delta.apply())
        await settle()
        assert broker.shell.core.manager.num_partitions == 1  # the topic's, not the config's
        assert (await broker.shell.init_producer_id(TXN, TIMEOUT_MS)).error is Errors.NONE
        moved = MetadataDelta(delta.apply())
        moved.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2))
        broker.shell.on_metadata(local_changes(moved, 1), moved.apply())
        assert broker.shell.describe_transactions([TXN])[0].error is Errors.NOT_COORDINATOR
        await broker.shell.shutdown()

    run(scenario)


def test_shutdown_answers_waiting_callers() -> None:
    async def scenario() -> None:
        _, _, _, broker = world()
        await broker.lead(epoch=0)
        broker.replicas.gate.clear()
        waiting = asyncio.ensure_future(broker.shell.init_producer_id(TXN, TIMEOUT_MS))
        await settle()
        await broker.shell.shutdown()
        assert (await waiting).error is Errors.NOT_COORDINATOR
        listing = broker.shell.list_transactions()
        assert listing.error is Errors.COORDINATOR_NOT_AVAILABLE

    run(scenario)
