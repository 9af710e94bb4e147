"""Delayed produces (Kafka's DelayedProduce / DelayedProduceTest behaviour): completion when
every partition is done, per-partition errors, REQUEST_TIMED_OUT at the deadline, with a fake
clock — nothing sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from pykraft.broker.delayed_produce import DelayedProduces
from pykraft.protocol.errors import Errors
from pykraft.replica.produce_waiters import ProducePurgatory
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock

A = TopicPartition("a", 0)
B = TopicPartition("b", 0)


class Replicas:
    """A checker over settable high watermarks / errors (Partition.checkEnoughReplicas...)."""

    def __init__(self) -> None:
        self.high_watermarks: dict[TopicPartition, int] = {A: 0, B: 0}
        self.errors: dict[TopicPartition, Errors] = {}
        self.after_append: set[TopicPartition] = set()

    def __call__(self, tp: TopicPartition, required_offset: int) -> tuple[bool, Errors]:
        if tp in self.errors:
            return False, self.errors[tp]
        if self.high_watermarks[tp] < required_offset:
            return False, Errors.NONE
        if tp in self.after_append:
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, Errors.NONE


# ------------------------------------------------------------------ the pure core


def test_completes_once_every_partition_is_done() -> None:
    purgatory, replicas = ProducePurgatory(), Replicas()
    waiter = purgatory.try_watch({A: 5, B: 3}, deadline_ms=1000)
    assert waiter is not None
    assert purgatory.try_complete(waiter, replicas) is None
    replicas.high_watermarks[A] = 5
    assert purgatory.check(A, replicas) == {}  # B still waits
    replicas.high_watermarks[B] = 4
    assert purgatory.check(B, replicas) == {waiter: {A: Errors.NONE, B: Errors.NONE}}
    assert len(purgatory) == 0 and purgatory.watching(A) == 0


def test_an_error_ends_a_partition_wait_with_that_error() -> None:
    # DelayedProduce.tryComplete: "Case B || C.1 || C.2" — any error, or enough replicas.
    purgatory, replicas = ProducePurgatory(), Replicas()
    waiter = purgatory.try_watch({A: 5, B: 3}, deadline_ms=1000)
    assert waiter is not None
    replicas.errors[A] = Errors.NOT_LEADER_OR_FOLLOWER
    replicas.high_watermarks[B] = 3
    replicas.after_append.add(B)
    assert purgatory.try_complete(waiter, replicas) == {
        A: Errors.NOT_LEADER_OR_FOLLOWER,
        B: Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    }


def test_partitions_still_waiting_at_the_deadline_time_out() -> None:
    # DelayedProduce.onExpiration: REQUEST_TIMED_OUT for what is still pending.
    purgatory, replicas = ProducePurgatory(), Replicas()
    waiter = purgatory.try_watch({A: 5, B: 3}, deadline_ms=1000)
    assert waiter is not None
    replicas.high_watermarks[A] = 9
    assert purgatory.check(A, replicas) == {}
    assert purgatory.expire(999) == {}
    assert purgatory.expire(1000) == {waiter: {A: Errors.NONE, B: Errors.REQUEST_TIMED_OUT}}
    assert purgatory.next_deadline_ms() is None


def test_the_produce_purgatory_is_bounded() -> None:
    purgatory = ProducePurgatory(max_waiters=1)
    first = purgatory.try_watch({A: 1}, deadline_ms=10)
    assert purgatory.try_watch({A: 1}, deadline_ms=10) is None
    assert first is not None
    purgatory.remove(first)
    assert purgatory.try_watch({A: 1}, deadline_ms=10) is not None


def test_try_complete_else_watch_adds_a_waiter_only_when_one_must_wait() -> None:
    # Kafka tryCompleteElseWatch: a produce the ISR already has is answered, never watched.
    purgatory, replicas = ProducePurgatory(max_waiters=1), Replicas()
    replicas.high_watermarks[A] = 5
    assert purgatory.try_complete_else_watch({A: 5}, 1000, replicas) == ({A: Errors.NONE}, None)
    assert len(purgatory) == 0 and purgatory.watching(A) == 0
    assert purgatory.next_deadline_ms() is None
    answers, waiter = purgatory.try_complete_else_watch({A: 5, B: 3}, 1000, replicas)
    assert answers is None and waiter is not None
    assert purgatory.watching(A) == 1 and purgatory.watching(B) == 1
    # Full: one check, what is not done answers its deadline's answer.
    assert purgatory.try_complete_else_watch({A: 5, B: 3}, 1000, replicas) == (
        {A: Errors.NONE, B: Errors.REQUEST_TIMED_OUT},
        None,
    )
    replicas.high_watermarks[B] = 3  # A was checked once already and is not asked again
    replicas.errors[A] = Errors.NOT_LEADER_OR_FOLLOWER
    assert purgatory.check(B, replicas) == {waiter: {A: Errors.NONE, B: Errors.NONE}}


# ------------------------------------------------------------------ the asyncio shell


async def started(
    coroutine: Coroutine[Any, Any, dict[TopicPartition, Errors]],
) -> asyncio.Task[dict[TopicPartition, Errors]]:
    task = asyncio.ensure_future(coroutine)
    await asyncio.sleep(0)  # let it register (a yield to the loop, not a wait)
    return task


def test_a_produce_already_replicated_never_waits() -> None:
    async def scenario() -> None:
        produces = DelayedProduces(monotonic_ms=FakeClock(10_000).monotonic_ms)
        replicas = Replicas()
        replicas.high_watermarks[A] = 5
        assert await produces.wait({A: 5}, timeout_ms=100, checker=replicas) == {A: Errors.NONE}
        assert len(produces.purgatory) == 0

    asyncio.run(scenario())


def test_high_watermark_moves_complete_a_waiting_produce() -> None:
    async def scenario() -> None:
        produces = DelayedProduces(monotonic_ms=FakeClock(10_000).monotonic_ms)
        replicas = Replicas()
        task = await started(produces.wait({A: 5}, timeout_ms=100, checker=replicas))
        replicas.high_watermarks[A] = 4
        produces.check_and_complete(A, replicas)
        await asyncio.sleep(0)
        assert not task.done()
        replicas.high_watermarks[A] = 5
        produces.check_and_complete(A, replicas)
        assert await task == {A: Errors.NONE}
        produces.close()

    asyncio.run(scenario())


def test_the_request_timeout_answers_request_timed_out() -> None:
    async def scenario() -> None:
        clock, replicas = FakeClock(10_000), Replicas()
        produces = DelayedProduces(monotonic_ms=clock.monotonic_ms)
        task = await started(produces.wait({A: 5}, timeout_ms=300, checker=replicas))
        clock.now_ms += 299
        assert produces.expire_due() == 0
        clock.now_ms += 1
        assert produces.expire_due() == 1
        assert await task == {A: Errors.REQUEST_TIMED_OUT}
        produces.close()

    asyncio.run(scenario())


def test_a_full_purgatory_answers_at_once() -> None:
    async def scenario() -> None:
        produces = DelayedProduces(max_waiters=1, monotonic_ms=FakeClock(10_000).monotonic_ms)
        replicas = Replicas()
        waiting = await started(produces.wait({A: 5}, timeout_ms=300, checker=replicas))
        replicas.high_watermarks[B] = 1
        assert await produces.wait({A: 5, B: 1}, timeout_ms=300, checker=replicas) == {
            A: Errors.REQUEST_TIMED_OUT,
            B: Errors.NONE,
        }
        produces.close()  # shutdown answers the waiting one
        assert await waiting == {A: Errors.REQUEST_TIMED_OUT}

    asyncio.run(scenario())


def test_a_cancelled_produce_wait_leaves_no_waiter() -> None:
    async def scenario() -> None:
        produces = DelayedProduces(monotonic_ms=FakeClock(10_000).monotonic_ms)
        task = await started(produces.wait({A: 5}, timeout_ms=300, checker=Replicas()))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(produces.purgatory) == 0
        produces.close()

    asyncio.run(scenario())


# ------------------------------------------------------------------ the synchronous half


def test_watch_answers_now_or_later_through_its_callback_and_forget_drops_the_waiter() -> None:
    """``watch`` is what the simulation drives: no future, no event loop."""
    produces, replicas = DelayedProduces(monotonic_ms=FakeClock(0).monotonic_ms), Replicas()
    moved: list[int] = []
    produces.on_deadline_moved = lambda: moved.append(produces.purgatory.next_deadline_ms() or 0)
    answers: list[dict[TopicPartition, Errors]] = []
    replicas.high_watermarks[A] = 9
    now = produces.watch({A: 5}, timeout_ms=100, checker=replicas, on_done=answers.append)
    assert now.answers == {A: Errors.NONE} and now.waiter_id is None and answers == []
    later = produces.watch({B: 5}, timeout_ms=100, checker=replicas, on_done=answers.append)
    assert later.answers is None and later.waiter_id is not None and answers == []
    assert moved == [100]  # the timer's owner hears of the new deadline
    replicas.high_watermarks[B] = 5
    produces.check_and_complete(B, replicas)
    assert answers == [{B: Errors.NONE}]
    dropped = produces.watch({B: 7}, timeout_ms=100, checker=replicas, on_done=answers.append)
    assert dropped.waiter_id is not None
    produces.forget(dropped.waiter_id)
    replicas.high_watermarks[B] = 7
    produces.check_and_complete(B, replicas)
    assert answers == [{B: Errors.NONE}] and len(produces.purgatory) == 0


def test_try_complete_else_watch_answers_through_on_done_now_or_at_the_deadline() -> None:
    """Kafka's ``tryCompleteElseWatch``, as ``ReplicaManager`` and DeleteRecords start waits."""
    clock, replicas = FakeClock(0), Replicas()
    produces = DelayedProduces(max_waiters=1, monotonic_ms=clock.monotonic_ms)
    produces.on_deadline_moved = lambda: None  # the test owns the timer: no event loop
    answers: list[dict[TopicPartition, Errors]] = []
    replicas.high_watermarks[A] = 9
    start = produces.try_complete_else_watch
    assert start({A: 5}, timeout_ms=100, checker=replicas, on_done=answers.append) is None
    assert answers == [{A: Errors.NONE}]
    waiter = start({B: 5}, timeout_ms=100, checker=replicas, on_done=answers.append)
    assert waiter is not None and len(answers) == 1
    # Full: checked once and answered at once, unfinished partitions REQUEST_TIMED_OUT.
    assert start({A: 5, B: 1}, timeout_ms=100, checker=replicas, on_done=answers.append) is None
    assert answers[1] == {A: Errors.NONE, B: Errors.REQUEST_TIMED_OUT}
    clock.now_ms += 100
    assert produces.expire_due() == 1
    assert answers[2] == {B: Errors.REQUEST_TIMED_OUT} and len(produces.purgatory) == 0
