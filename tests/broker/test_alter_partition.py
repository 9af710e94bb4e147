"""AlterPartitionManager (Kafka's DefaultAlterPartitionManager / AlterPartitionManagerTest):
one change per partition, one request in flight batching the queue, per-partition results to
the callbacks, request-level failures retried — against a scripted channel, no sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from pykraft.broker.alter_partition import AlterPartitionManager, parse_result, request_of
from pykraft.broker.controller_api import ControllerError
from pykraft.metadata.api import brokers as api
from pykraft.metadata.api.brokers import AlterPartitionData
from pykraft.metadata.api.errors import ApiError
from pykraft.protocol.errors import Errors
from pykraft.replica.alter_partition_queue import AlterPartitionItem
from pykraft.replica.isr import AlterPartitionResult, BrokerState, IsrState, PendingIsrChange

TOPIC_ID = "ThIaNwRnSM2Nt9Mx1v0RvA"


def item(partition: int, isr: tuple[int, ...] = (1, 2)) -> AlterPartitionItem:
    change = PendingIsrChange(
        kind=IsrState.PENDING_EXPAND,
        leader_epoch=5,
        partition_epoch=1,
        new_isr=tuple(BrokerState(broker_id=b, broker_epoch=100 + b) for b in isr),
        changed=frozenset({isr[-1]}),
    )
    return AlterPartitionItem(
        topic_id=TOPIC_ID, partition_index=partition, leader_id=1, change=change
    )


class Channel:
    """Answers each request from a script: an exception to raise, or the partitions' errors."""

    def __init__(self, *script: Exception | dict[int, str]) -> None:
        self.script = list(script)
        self.requests: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, partitions: Sequence[AlterPartitionData]
    ) -> tuple[api.AlterPartitionResult, ...]:
        assert (broker_id, broker_epoch) == (1, 101)
        self.requests.append([p.partition_index for p in partitions])
        await self.gate.wait()
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return tuple(
            api.AlterPartitionResult(
                topic_id=p.topic_id,
                partition_index=p.partition_index,
                error=ApiError(Errors[answer[p.partition_index]]),
                leader_id=1,
                leader_epoch=5,
                isr=tuple(m.broker_id for m in p.new_isr_with_epochs),
                partition_epoch=2,
            )
            for p in partitions
            if p.partition_index in answer
        )


def recorder(
    results: list[tuple[int, AlterPartitionResult]], partition: int
) -> Callable[[AlterPartitionResult], None]:
    return lambda result: results.append((partition, result))


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def test_one_request_in_flight_batches_the_rest() -> None:
    async def scenario() -> None:
        channel = Channel({0: "NONE"}, {1: "NONE", 2: "INELIGIBLE_REPLICA"})
        channel.gate.clear()
        manager = AlterPartitionManager(channel, broker_id=1, broker_epoch=lambda: 101)
        results: list[tuple[int, AlterPartitionResult]] = []
        for partition in range(3):
            manager.submit(item(partition), recorder(results, partition))
            await settle()
        channel.gate.set()
        await settle()
        assert channel.requests == [[0], [1, 2]]
        assert [(p, r.error) for p, r in results] == [
            (0, Errors.NONE),
            (1, Errors.NONE),
            (2, Errors.INELIGIBLE_REPLICA),
        ]
        assert results[0][1].isr == (1, 2) and results[0][1].partition_epoch == 2
        await manager.close()

    asyncio.run(scenario())


def test_a_second_change_for_a_queued_partition_is_not_attempted() -> None:
    async def scenario() -> None:
        channel = Channel({0: "NONE"})
        channel.gate.clear()
        manager = AlterPartitionManager(channel, broker_id=1, broker_epoch=lambda: 101)
        seen: list[Errors] = []
        manager.submit(item(0), lambda r: seen.append(r.error))
        manager.submit(item(0, (1, 3)), lambda r: seen.append(r.error))
        assert seen == [Errors.OPERATION_NOT_ATTEMPTED]
        channel.gate.set()
        await settle()
        assert seen == [Errors.OPERATION_NOT_ATTEMPTED, Errors.NONE]
        await manager.close()

    asyncio.run(scenario())


def test_request_level_failures_and_missing_partitions_are_sent_again() -> None:
    async def scenario() -> None:
        channel = Channel(ControllerError("STALE_BROKER_EPOCH", "stale"), {}, {0: "NONE"})
        manager = AlterPartitionManager(
            channel, broker_id=1, broker_epoch=lambda: 101, retry_backoff_ms=0
        )
        seen: list[Errors] = []
        manager.submit(item(0), lambda r: seen.append(r.error))
        for _ in range(5):
            await settle()  # the zero back-off timer is due at once: yields suffice
            if seen:
                break
        assert channel.requests == [[0], [0], [0]]
        assert seen == [Errors.NONE] and manager.queued == 0
        await manager.close()

    asyncio.run(scenario())


def test_the_request_carries_the_change_with_its_epochs() -> None:
    # KIP-903: each new ISR member with its broker epoch; a leader sending it has recovered.
    assert request_of(item(3, isr=(1, 2))) == AlterPartitionData(
        topic_id=TOPIC_ID,
        partition_index=3,
        leader_epoch=5,
        partition_epoch=1,
        new_isr_with_epochs=(api.BrokerState(1, 101), api.BrokerState(2, 102)),
        leader_recovery_state=0,
    )


def test_parse_result_keeps_the_error_and_the_new_state() -> None:
    # An unknown error name or a malformed result is refused by the contract's decoder
    # (tests/metadata/test_api_codec.py); what reaches the partition is typed.
    result = api.AlterPartitionResult(
        topic_id=TOPIC_ID,
        partition_index=0,
        error=ApiError(Errors.FENCED_LEADER_EPOCH, "stale"),
        leader_id=2,
        leader_epoch=6,
        isr=(2, 3),
        partition_epoch=9,
    )
    assert parse_result(result) == AlterPartitionResult(
        error=Errors.FENCED_LEADER_EPOCH,
        leader_id=2,
        leader_epoch=6,
        isr=(2, 3),
        partition_epoch=9,
        message="stale",
    )
