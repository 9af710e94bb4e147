"""``broker.waking_future.wake``: the task waiting on a future takes its next step inside the
call when no task runs and no request is timed (Kafka's purgatory completes an operation on
the completing thread), else it is ``set_result`` and the task resumes a loop turn later."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from pykraft.broker.request_time import REQUEST_TIME, RequestTime
from pykraft.broker.waking_future import wake

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def run(loop_name: str, scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        runner.run(asyncio.wait_for(scenario(), timeout=10))


async def waiter(future: asyncio.Future[str], log: list[str]) -> None:
    log.append(f"woken with {await future}")


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_wake_from_a_callback_runs_the_waiting_task_inside_it(loop_name: str) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        log: list[str] = []
        task = loop.create_task(waiter(future, log))
        await settle()  # the task waits on the future

        def waking() -> None:
            wake(future, "bytes")
            log.append("wake returned")

        loop.call_soon(waking)
        await settle()
        assert log == ["woken with bytes", "wake returned"]
        assert task.done() and task.result() is None

    run(loop_name, scenario)


def test_a_wake_from_inside_a_task_resumes_the_waiter_a_turn_later() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        log: list[str] = []
        task = loop.create_task(waiter(future, log))
        await settle()
        wake(future, "bytes")  # this scenario is a task: asyncio runs one at a time
        log.append("wake returned")
        await settle()
        assert log == ["wake returned", "woken with bytes"] and task.done()

    run("asyncio", scenario)


def test_a_wake_while_a_request_is_timed_resumes_the_waiter_a_turn_later() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        log: list[str] = []
        task = loop.create_task(waiter(future, log))
        await settle()

        def timed_wake() -> None:  # a quota-timed handler's step: the woken one is not its time
            REQUEST_TIME.set(RequestTime())
            wake(future, "bytes")
            log.append("wake returned")

        loop.call_soon(timed_wake)
        await settle()
        assert log == ["wake returned", "woken with bytes"] and task.done()

    run("asyncio", scenario)


def test_a_wake_before_anyone_waits_is_a_result() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        loop.call_soon(wake, future, "early")
        await settle()
        assert future.done() and await future == "early"

    run("asyncio", scenario)


def test_a_future_with_other_callbacks_is_a_result() -> None:
    # Only a lone waiting task is resumed inside wake: a plain done callback (or a task
    # waiting beside one) keeps its loop turn, in the order it was added.
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        log: list[str] = []
        task = loop.create_task(waiter(future, log))
        await settle()
        future.add_done_callback(lambda done: log.append(f"callback saw {done.result()}"))

        def waking() -> None:
            wake(future, "bytes")
            log.append("wake returned")

        loop.call_soon(waking)
        await settle()
        assert log == ["wake returned", "woken with bytes", "callback saw bytes"] and task.done()

    run("asyncio", scenario)


def test_a_cancelled_waiter_is_never_woken() -> None:
    # Cancelling the task cancels the future it waits on: a wake after that is refused as
    # set_result refuses it (the purgatories check done() first), and the task never runs on.
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        log: list[str] = []
        task = loop.create_task(waiter(future, log))
        await settle()

        def cancel_then_wake() -> None:
            task.cancel()
            try:
                wake(future, "late")
            except asyncio.InvalidStateError:
                log.append("wake refused")

        loop.call_soon(cancel_then_wake)
        await settle()
        assert task.cancelled() and future.cancelled() and log == ["wake refused"]

    run("asyncio", scenario)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_wake_inside_the_waiting_tasks_own_context_resumes_it_a_turn_later(
    loop_name: str,
) -> None:
    # The task's context is already entered (a callback scheduled in it): running its step
    # there raises "cannot enter context", so it is scheduled as set_result would — not lost.
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        log: list[str] = []
        context = contextvars.copy_context()
        task = loop.create_task(waiter(future, log), context=context)
        await settle()

        def waking() -> None:
            wake(future, "bytes")
            log.append("wake returned")

        loop.call_soon(waking, context=context)
        await settle()
        assert log == ["wake returned", "woken with bytes"] and task.done()

    # Not ``run``: its shutdown would wait forever for a task that was never scheduled.
    loop = LOOPS[loop_name]()
    try:
        loop.run_until_complete(asyncio.wait_for(scenario(), timeout=10))
    finally:
        loop.close()


def test_a_lone_plain_callback_keeps_its_loop_turn() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        log: list[str] = []
        future.add_done_callback(lambda done: log.append(done.result()))

        def waking() -> None:
            wake(future, "bytes")
            log.append("wake returned")

        loop.call_soon(waking)
        await settle()
        assert log == ["wake returned", "bytes"]

    run("asyncio", scenario)
