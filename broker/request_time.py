"""How long the event loop spent running one request's handler (Kafka's
``RequestChannel.Request.requestThreadTimeNanos``), for ``request_percentage`` quotas (KIP-124).

Kafka measures the time a request-handler thread spent on a request; waits in purgatory (an
acks=all Produce for its ISR, a Fetch for ``min_bytes``) are not counted. pykraft's handlers are
coroutines on one event loop, so the equivalent is the time the loop spent *running* the
handler's steps: ``timed`` drives the handler's awaitable and adds up the time of each step
(from being resumed to its next suspension), never the time it was suspended. The listener
(``broker.network``) wraps each dispatched request and sets ``REQUEST_TIME`` for its task; the
handler side reads it when it answers (``KafkaApis``' request quota hook).

This module reads the monotonic clock in nanoseconds: a duration, not a time (tests pass their
own ``clock_ns``).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class RequestTime:
    """The nanoseconds a request's handler has run so far."""

    __slots__ = ("nanos",)

    def __init__(self) -> None:
        self.nanos = 0


# Set for each request's task by the listener; None outside a request (tests, internal calls).
REQUEST_TIME: contextvars.ContextVar[RequestTime | None] = contextvars.ContextVar(
    "pykraft_request_time", default=None
)


class _Timed:
    def __init__(
        self, awaitable: Awaitable[T], timer: RequestTime, clock_ns: Callable[[], int]
    ) -> None:
        self._awaitable = awaitable
        self._timer = timer
        self._clock_ns = clock_ns

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._awaitable.__await__()
        sent: Any = None
        error: BaseException | None = None
        while True:
            started = self._clock_ns()
            try:
                yielded = steps.send(sent) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                self._timer.nanos += self._clock_ns() - started
            sent, error = None, None
            try:
                sent = yield yielded
            except BaseException as thrown:  # cancellation too: the handler sees it
                error = thrown


async def timed(
    awaitable: Awaitable[T], timer: RequestTime, clock_ns: Callable[[], int] = time.monotonic_ns
) -> T:
    """``await awaitable``, adding the time each of its steps runs to ``timer``."""
    result: T = await _Timed(awaitable, timer, clock_ns)
    return result


def start_request(response: Coroutine[Any, Any, T], timing: bool) -> asyncio.Future[T]:
    """The listener's task for one request's handler; with ``timing`` (client quotas exist) it
    is timed step by step and its task carries its own ``REQUEST_TIME``."""
    # The loop's create_task, not ensure_future: no type checks and event loop lookups (each
    # a getpid) on every request's path (issue 18).
    loop = asyncio.get_running_loop()
    if not timing:
        return loop.create_task(response)
    timer = RequestTime()
    token = REQUEST_TIME.set(timer)
    try:
        return loop.create_task(timed(response, timer))
    finally:
        REQUEST_TIME.reset(token)
