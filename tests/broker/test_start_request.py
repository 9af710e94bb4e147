"""``broker.request_time.start_request``: a handler started at once runs up to its first
suspension right then, outside any task, and only one that suspends continues in a task
(issue 18); any other starts as a task."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from pykraft.broker.request_time import REQUEST_TIME, start_request

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


def from_a_callback(
    make: Callable[[], Coroutine[Any, Any, Any]], timing: bool = False, at_once: bool = True
) -> Callable[[], Coroutine[Any, Any, asyncio.Future[Any]]]:
    """Start the handler from a plain loop callback, as the listener's read callback does."""

    async def scenario() -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[asyncio.Future[Any]] = loop.create_future()
        loop.call_soon(lambda: started.set_result(start_request(make(), timing, at_once=at_once)))
        return await started

    return scenario


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=10))


def test_a_handler_that_never_suspends_is_done_at_once_without_a_task() -> None:
    seen: list[asyncio.Task[Any] | None] = []

    async def handler() -> int:
        seen.append(asyncio.current_task())
        return 7

    async def scenario() -> None:
        future = await from_a_callback(handler)()
        assert future.done() and future.result() == 7
        assert not isinstance(future, asyncio.Task) and seen == [None]

    run(scenario)


@pytest.mark.parametrize("timing", [False, True])
def test_a_handler_not_started_at_once_starts_as_a_task(timing: bool) -> None:
    seen: list[asyncio.Task[Any] | None] = []

    async def handler() -> int:
        seen.append(asyncio.current_task())
        async with asyncio.timeout(5):  # a task's construct: fine here
            return 3

    async def scenario() -> None:
        future = await from_a_callback(handler, timing, at_once=False)()
        assert isinstance(future, asyncio.Task)
        assert await future == 3 and seen == [future]

    run(scenario)


def test_a_handler_that_suspends_ran_its_first_step_and_continues_in_a_task() -> None:
    steps: list[str] = []
    gate: list[asyncio.Future[int]] = []

    async def handler() -> int:
        steps.append("first")
        gate.append(asyncio.get_running_loop().create_future())
        value = await gate[0]
        steps.append("rest")
        await asyncio.sleep(0)
        return value + 1

    async def scenario() -> None:
        future = await from_a_callback(handler)()
        assert steps == ["first"] and isinstance(future, asyncio.Task) and not future.done()
        gate[0].set_result(41)
        assert await future == 42 and steps == ["first", "rest"]

    run(scenario)


def test_a_failure_in_the_first_step_is_the_futures_exception() -> None:
    async def handler() -> int:
        raise ValueError("bad request")

    async def scenario() -> None:
        future = await from_a_callback(handler)()
        with pytest.raises(ValueError, match="bad request"):
            future.result()

    run(scenario)


def test_cancelling_a_handler_suspended_in_its_first_wait_reaches_the_handler() -> None:
    cleaned_up: list[bool] = []

    async def handler() -> int:
        try:
            await asyncio.get_running_loop().create_future()  # never answered
        finally:
            cleaned_up.append(True)
        return 0

    async def scenario() -> None:
        future = await from_a_callback(handler)()
        await asyncio.sleep(0)
        future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await future
        assert cleaned_up == [True]

    run(scenario)


def test_the_handler_has_a_context_of_its_own_across_its_steps() -> None:
    # As a task's: what a handler sets (KafkaApis' request quota) never leaks to the listener.
    seen: list[str] = []

    async def handler() -> None:
        MARK.set("handler")
        await asyncio.sleep(0)
        seen.append(MARK.get())

    async def scenario() -> None:
        await (await from_a_callback(handler)())
        assert seen == ["handler"] and MARK.get() == "unset"

    run(scenario)


@pytest.mark.parametrize("timing", [False, True])
def test_with_timing_the_handler_sees_its_own_request_time(timing: bool) -> None:
    seen: list[object] = []

    async def handler() -> None:
        seen.append(REQUEST_TIME.get())
        await asyncio.sleep(0)
        seen.append(REQUEST_TIME.get())

    async def scenario() -> None:
        await (await from_a_callback(handler, timing)())
        assert REQUEST_TIME.get() is None
        if timing:
            assert seen[0] is not None and seen[0] is seen[1]
            assert seen[0].nanos > 0  # type: ignore[attr-defined]
        else:
            assert seen == [None, None]

    run(scenario)


@pytest.mark.parametrize("timing", [False, True])
def test_cancelling_a_handler_before_its_task_stepped_reaches_the_handler(timing: bool) -> None:
    # The listener's _cancel_queued may cancel it in the read callback that started it (a
    # failed request, or expire(), then a read in the same loop turn): the handler must see
    # CancelledError at its first wait and run its finally blocks now (purgatory waiters,
    # delayed produces), not leave them to the cyclic GC as GeneratorExit; and nothing keeps
    # the handler's frame in a reference cycle after.
    seen: list[str] = []
    frames_alive: list[weakref.ref[Any]] = []

    async def handler() -> int:
        request = Request()
        frames_alive.append(weakref.ref(request))
        seen.append("first step")
        try:
            await asyncio.get_running_loop().create_future()  # e.g. a delayed produce
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("finally")
        del request
        return 0

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[asyncio.Future[int]] = loop.create_future()

        def callback() -> None:
            future = start_request(handler(), timing, at_once=True)
            future.cancel()  # before the task's first step
            started.set_result(future)

        loop.call_soon(callback)
        future = await started
        with pytest.raises(asyncio.CancelledError):
            await future
        del future
        assert seen == ["first step", "cancelled", "finally"]
        assert frames_alive[0]() is None

    gc.collect()
    gc.disable()
    try:
        run(scenario)
    finally:
        gc.enable()


class Request:
    """What a handler's frame holds (its request)."""
