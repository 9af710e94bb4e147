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
import contextlib
import contextvars
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")

# The chained exceptions (``__context__``) whose tracebacks ``drop_traceback`` drops.
MAX_CHAINED_TRACEBACKS = 8


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
                error = None  # raised again, its traceback holds this frame: not it too
            sent = None
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


class StartsAtOnce:
    """A handler's coroutine the dispatcher marked safe to start outside any task: up to its
    first ``await`` it enters no ``asyncio.timeout``, ``TaskGroup`` or library timer that asks
    for ``current_task`` (aiohttp's does: a forwarded request must not be marked). Awaiting it
    awaits the coroutine."""

    __slots__ = ("coroutine",)

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self.coroutine = coroutine

    def __await__(self) -> Generator[Any, None, Any]:
        return self.coroutine.__await__()


def start_request(
    response: Coroutine[Any, Any, T], timing: bool, *, at_once: bool = False
) -> asyncio.Future[T]:
    """The listener's future for one request's handler; with ``timing`` (client quotas exist)
    it is timed step by step and carries its own ``REQUEST_TIME``.

    ``at_once`` (the handler is ``StartsAtOnce``): its first step runs now, in a context of its
    own, and only a handler that suspends gets a task; one that finishes without suspending
    (an acks=1 Produce, a Fetch that found data) is a done future: no task, no loop turn
    (issue 18: a task and its step cost ~5 us of the loop's ~16 per request). Python 3.12's
    eager tasks do this; on 3.11 that first step runs outside any task, hence the opt-in.
    Otherwise the handler starts as a task a loop turn later.
    """
    # The loop's create_task, not ensure_future: no type checks and event loop lookups (each
    # a getpid) on every request's path (issue 18).
    loop = asyncio.get_running_loop()
    if not at_once and not timing:
        return loop.create_task(response)
    context = contextvars.copy_context()
    if timing:
        timer = RequestTime()
        context.run(REQUEST_TIME.set, timer)
        response = timed(response, timer)
    if not at_once:
        return loop.create_task(response, context=context)
    try:
        yielded = context.run(response.send, None)
    except StopIteration as done:
        return _done(loop, done.value)
    except Exception as error:
        failed: asyncio.Future[T] = loop.create_future()
        failed.set_exception(error)
        return failed
    except asyncio.CancelledError:
        cancelled: asyncio.Future[T] = loop.create_future()
        cancelled.cancel()
        return cancelled
    return loop.create_task(_Resumed(response, yielded), context=context)


def forget_request(response: asyncio.Future[Any]) -> None:
    """A request's future whose answer nobody will read (its connection ended): the handler
    cancelled, or its failure taken and its traceback dropped, so that reference counting
    frees them (``drop_traceback``)."""
    if not response.done():
        response.cancel()
        response.add_done_callback(_drop_cancellation)
        return
    try:
        response.result()  # a future hands its traceback over to the failure it raises
    except asyncio.CancelledError:
        pass
    except Exception as error:
        drop_traceback(error)


def _drop_cancellation(response: asyncio.Future[Any]) -> None:
    """Take a cancelled handler's CancelledError from its task: kept there, its traceback
    holds the listener's frame awaiting the handler, which holds the task: a cycle only the
    cyclic GC frees (with the handler's frames and the request's buffers)."""
    if response.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            response.result()


def drop_traceback(error: BaseException) -> None:
    """Forget a handler's failure's traceback once it was handled (logged, or nobody's to
    report): it holds the frames the failure passed through, their locals the request's
    future, and the future the failure — a reference cycle only a full collection frees, and
    with it the handler's frames and the request's buffers."""
    chained: BaseException | None = error
    for _ in range(MAX_CHAINED_TRACEBACKS):
        if chained is None:
            return
        chained.__traceback__ = None
        chained = chained.__context__


def _done(loop: asyncio.AbstractEventLoop, value: T) -> asyncio.Future[T]:
    future: asyncio.Future[T] = loop.create_future()
    future.set_result(value)
    return future


class _Resumed(Coroutine[Any, Any, T]):
    """The rest of ``response`` after the first step ``start_request`` ran, for a task: its
    first ``send`` hands the task what that step waits on; everything else goes to the
    handler. A cancellation before that first ``send`` reaches the handler too, as it would in
    a task from the start (a generator would raise it at its own first line: the handler would
    stay suspended, its ``finally`` blocks left to the cyclic GC as GeneratorExit)."""

    __slots__ = ("_response", "_started", "_yielded")

    def __init__(self, response: Coroutine[Any, Any, T], yielded: Any) -> None:
        self._response = response
        self._yielded: Any = yielded
        self._started = False

    def send(self, value: Any) -> Any:
        if self._started:
            return self._response.send(value)
        self._started = True
        yielded, self._yielded = self._yielded, None
        return yielded

    def throw(self, error: Any, value: Any = None, traceback: Any = None) -> Any:
        self._started = True
        self._yielded = None
        try:
            if value is None and traceback is None:
                return self._response.throw(error)
            return self._response.throw(error, value, traceback)
        finally:
            # Raised again, the error's traceback holds this frame: not the error too (a cycle).
            error = value = traceback = None

    def close(self) -> None:
        self._started = True
        self._yielded = None
        self._response.close()

    def __await__(self) -> Generator[Any, None, T]:
        raise TypeError("a task's coroutine: not awaited")
