"""Producer-id blocks on the broker (Kafka's ``RPCProducerIdManager`` and its
``RPCProducerIdManagerTest``): the pure bookkeeping step by step, then the asyncio shell against a
scripted controller. Time is a number; nothing sleeps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.producer_ids import (
    LONG_MAX,
    RETRY_BACKOFF_MS,
    Claim,
    ProducerIdBlocks,
    ProducerIdManager,
    ProducerIdsBlock,
    block_problem,
)
from tests.fake_clock import FakeClock

T0 = 10_000


def blocks_with(*given: tuple[int, int]) -> ProducerIdBlocks:
    """Bookkeeping whose first claim asked for a block and got ``given[0]``; each later block
    arrives when asked for."""
    blocks = ProducerIdBlocks()
    assert blocks.claim(T0) == Claim(None, request_block=True)
    assert blocks.handle_block(ProducerIdsBlock(*given[0]), T0) is None
    return blocks


# ------------------------------------------------------------------ the pure bookkeeping


def test_a_fresh_broker_has_no_id_and_asks_for_one_block_only() -> None:
    # Kafka: generateProducerId on an empty block -> COORDINATOR_LOAD_IN_PROGRESS, one request.
    blocks = ProducerIdBlocks()
    assert blocks.claim(T0) == Claim(None, request_block=True)
    assert blocks.request_in_flight
    assert blocks.claim(T0 + 1) == Claim(None, request_block=False)


def test_ids_come_out_of_the_block_in_order() -> None:
    blocks = blocks_with((0, 1000))
    assert [blocks.claim(T0).producer_id for _ in range(5)] == [0, 1, 2, 3, 4]
    assert not blocks.request_in_flight


def test_the_next_block_is_prefetched_at_90_percent() -> None:
    # RPCProducerIdManagerTest.testGenerateProducerIdWithPrefetch: PidPrefetchThreshold 0.90.
    blocks = blocks_with((0, 1000))
    claims = [blocks.claim(T0) for _ in range(1000)]
    assert [c.producer_id for c in claims] == list(range(1000))
    assert [c.producer_id for c in claims if c.request_block] == [900]
    assert blocks.handle_block(ProducerIdsBlock(1000, 1000), T0) is None
    assert blocks.claim(T0) == Claim(1000, request_block=False)
    assert blocks.current_block == ProducerIdsBlock(1000, 1000) and blocks.next_block is None


def test_a_used_up_block_without_a_successor_has_no_id() -> None:
    blocks = blocks_with((0, 10))
    assert [blocks.claim(T0).producer_id for _ in range(10)] == list(range(10))  # 9 prefetched
    assert blocks.request_in_flight
    assert blocks.claim(T0) == Claim(None, request_block=False)
    assert blocks.handle_block(ProducerIdsBlock(10, 10), T0) is None
    assert blocks.claim(T0) == Claim(10, request_block=False)


def test_a_failed_request_backs_off_before_the_next_one() -> None:
    # RPCProducerIdManager.handleAllocateProducerIdsResponse: an error sets backoffDeadlineMs.
    blocks = ProducerIdBlocks()
    assert blocks.claim(T0).request_block
    blocks.handle_allocation_failed(T0)
    assert not blocks.request_in_flight
    assert blocks.claim(T0 + RETRY_BACKOFF_MS - 1) == Claim(None, request_block=False)
    assert blocks.claim(T0 + RETRY_BACKOFF_MS) == Claim(None, request_block=True)
    assert blocks.claim(T0 + RETRY_BACKOFF_MS) == Claim(None, request_block=False)


def test_a_failed_prefetch_is_retried_by_later_claims_after_the_back_off() -> None:
    blocks = blocks_with((0, 100))
    for _ in range(90):
        blocks.claim(T0)
    assert blocks.claim(T0) == Claim(90, request_block=True)
    blocks.handle_allocation_failed(T0)
    assert blocks.claim(T0 + 1) == Claim(91, request_block=False)
    assert blocks.claim(T0 + RETRY_BACKOFF_MS) == Claim(92, request_block=True)


def check(block: tuple[int, int], previous_last: int, expected: str | None) -> None:
    problem = block_problem(ProducerIdsBlock(*block), previous_last)
    if expected is None:
        assert problem is None, problem
    else:
        assert problem is not None and expected in problem, problem


def test_block_sanity_checks() -> None:
    # RPCProducerIdManager.sanityCheckResponse.
    check((0, 1000), -1, None)
    check((1000, 1000), 999, None)
    check((LONG_MAX - 1000, 1000), -1, None)
    check((0, 0), -1, "size 0 is not positive")
    check((0, -5), -1, "size -5 is not positive")
    check((-1, 1000), -1, "outside the producer-id range")
    # Kafka: producerIdStart > Long.MAX_VALUE - producerIdLen (the controller's "Exhausted").
    check((LONG_MAX - 999, 1000), -1, "outside the producer-id range")
    check((999, 1000), 999, "first id 999 is not above 999")
    check((0, 1000), 1999, "first id 0 is not above 1999")


def test_a_rejected_block_is_not_used_and_counts_as_a_failure() -> None:
    blocks = blocks_with((1000, 1000))
    claims = [blocks.claim(T0) for _ in range(901)]
    assert claims[-1] == Claim(1900, request_block=True)
    problem = blocks.handle_block(ProducerIdsBlock(0, 1000), T0)  # below the current block
    assert problem == "first id 0 is not above 1999, an id this broker already held"
    assert blocks.next_block is None and not blocks.request_in_flight
    assert blocks.claim(T0 + RETRY_BACKOFF_MS).request_block


def test_ids_are_unique_and_increasing_across_many_blocks() -> None:
    blocks = ProducerIdBlocks()
    handed: list[int] = []
    next_first = 0
    for step in range(3500):
        claim = blocks.claim(T0 + step)
        if claim.request_block:
            assert blocks.handle_block(ProducerIdsBlock(next_first, 1000), T0 + step) is None
            next_first += 1000
        if claim.producer_id is not None:
            handed.append(claim.producer_id)
    assert handed == list(range(len(handed))) and len(handed) == 3499


def test_a_one_id_block_prefetches_on_its_only_claim() -> None:
    blocks = blocks_with((7, 1))
    assert blocks.claim(T0) == Claim(7, request_block=True)


# ------------------------------------------------------------------ the asyncio shell


class ScriptedController:
    """``allocate_producer_ids`` answering from a script: (first, size) blocks, exceptions, or
    None for a request that never completes."""

    def __init__(self, *script: tuple[int, int] | Exception | None) -> None:
        self.script = list(script)
        self.calls: list[tuple[int, int]] = []

    async def allocate_producer_ids(self, *, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        self.calls.append((broker_id, broker_epoch))
        answer = self.script.pop(0)
        if answer is None:
            await asyncio.Event().wait()
        if isinstance(answer, Exception):
            raise answer
        assert answer is not None
        return answer


def manager(
    controller: ScriptedController, clock: FakeClock | None = None, max_wait_ms: int = 1000
) -> ProducerIdManager:
    return ProducerIdManager(
        controller,
        broker_id=3,
        broker_epoch=lambda: 17,
        monotonic_ms=(clock or FakeClock(T0)).monotonic_ms,
        max_wait_ms=max_wait_ms,
    )


def run(body: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(body())


def test_the_first_request_waits_for_the_first_block() -> None:
    controller = ScriptedController((0, 1000))
    ids = manager(controller)

    async def body() -> list[int | None]:
        return [await ids.generate_producer_id() for _ in range(3)]

    assert run(body) == [0, 1, 2]
    assert controller.calls == [(3, 17)]


def test_concurrent_requests_share_one_allocation() -> None:
    controller = ScriptedController((5000, 1000))
    ids = manager(controller)

    async def body() -> list[int | None]:
        return list(await asyncio.gather(*(ids.generate_producer_id() for _ in range(5))))

    assert sorted(run(body)) == [5000, 5001, 5002, 5003, 5004]
    assert len(controller.calls) == 1


def test_a_refused_allocation_answers_no_id_then_retries_after_the_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(T0)
    refused = ControllerError("STALE_BROKER_EPOCH", "Expected broker epoch 18, but got 17")
    controller = ScriptedController(refused, (0, 1000))
    ids = manager(controller, clock)

    async def body() -> list[int | None]:
        first = await ids.generate_producer_id()
        too_soon = await ids.generate_producer_id()
        clock.now_ms += RETRY_BACKOFF_MS
        return [first, too_soon, await ids.generate_producer_id()]

    with caplog.at_level(logging.WARNING, logger="pykraft.broker.producer_ids"):
        assert run(body) == [None, None, 0]
    assert len(controller.calls) == 2
    assert "STALE_BROKER_EPOCH: Expected broker epoch 18" in caplog.text


def test_an_unanswered_allocation_answers_no_id_and_close_abandons_it() -> None:
    controller = ScriptedController(None)
    ids = manager(controller, max_wait_ms=0)

    async def body() -> tuple[int | None, int | None, bool]:
        first = await ids.generate_producer_id()
        await asyncio.sleep(0)  # the allocation task sends its request
        second = await ids.generate_producer_id()
        in_flight = ids.blocks.request_in_flight
        await ids.close()
        return first, second, in_flight

    assert run(body) == (None, None, True)
    assert len(controller.calls) == 1


def test_a_broken_answer_backs_off_instead_of_wedging(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(T0)
    controller = ScriptedController(KeyError("producer_id_start"), (0, 1000))
    ids = manager(controller, clock)

    async def body() -> list[int | None]:
        first = await ids.generate_producer_id()
        clock.now_ms += RETRY_BACKOFF_MS
        return [first, await ids.generate_producer_id()]

    with caplog.at_level(logging.ERROR, logger="pykraft.broker.producer_ids"):
        assert run(body) == [None, 0]
    assert "producer-id block request failed" in caplog.text


def test_a_non_monotonic_block_is_rejected(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(T0)
    controller = ScriptedController((1000, 10), (500, 10), (2000, 10))
    ids = manager(controller, clock)

    async def body() -> list[int | None]:
        handed = [await ids.generate_producer_id() for _ in range(11)]
        clock.now_ms += RETRY_BACKOFF_MS
        return [*handed, await ids.generate_producer_id()]

    with caplog.at_level(logging.ERROR, logger="pykraft.broker.producer_ids"):
        assert run(body) == [*range(1000, 1010), None, 2000]
    assert "rejected producer-id block ProducerIdsBlock(first_producer_id=500" in caplog.text


def test_the_prefetched_block_is_there_when_the_current_one_runs_out() -> None:
    controller = ScriptedController((0, 1000), (1000, 1000))
    ids = manager(controller, max_wait_ms=0)

    async def body() -> list[int | None]:
        await ids.generate_producer_id()  # starts the first allocation; no wait allowed
        handed = []
        for _ in range(1001):
            await asyncio.sleep(0)  # requests arrive one loop turn apart at the least
            handed.append(await ids.generate_producer_id())
        return handed

    assert run(body) == list(range(1001))
    assert len(controller.calls) == 2
