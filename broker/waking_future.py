"""Resolving a future so that the task waiting on it resumes inside the call, not a loop turn
later (issue 18).

Kafka's purgatory completes a delayed operation on the thread that made it completable:
``DelayedOperation.tryComplete`` calls ``onComplete``, which reads and sends the response there
— a leader's append completes its followers' ``DelayedFetch`` and sends their answers before the
append's own request goes on, and the follower fetch that moves the high watermark sends the
``DelayedProduce``'s answer. An asyncio future only schedules its waiter (``call_soon``): the
woken handler runs after the rest of the waking one, and with it any write of its answer.

``wake(future, result)`` sets the result and runs the waiting task's next step right there, so
the woken handler reads, answers and writes before ``wake`` returns. It does so only when that
is safe, else it is ``future.set_result``:

* the only one waiting is a task (a handler still in its first step, started at once, has not
  handed the future to its task yet; any other done callback keeps its loop turn);
* no task is running: asyncio runs one task at a time (``Cannot enter into task``), and a task
  must never resume in the middle of another one's step — so the waking code is a transport
  callback, a handler's first step started outside any task (``broker.request_time``) or a timer;
* the waking step is not timed for a request quota (``broker.request_time.REQUEST_TIME``,
  KIP-124): the woken handler's time must not be charged to the waking request.

The future stays a plain ``asyncio.Future`` (the task's fast path in C): its waiting task is
found in ``_callbacks``, the (callback, context) pairs both asyncio's C and Python futures keep.
When the task's context cannot be entered (the waking code already runs inside it) the step
is scheduled instead. The waking code must be ready for the woken handler to run inside it:
whatever it changed is consistent, and what it does next does not depend on the waiter still
waiting.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

from pykraft.broker.request_time import REQUEST_TIME

T = TypeVar("T")

__all__ = ["wake"]


def wake(future: asyncio.Future[T], result: T) -> None:
    """``future.set_result(result)``, and the waiting task's next step now, when safe."""
    # None or [(callback, context), ...]: asyncio's own record of who waits.
    waiting: list[tuple[Callable[[Any], object], contextvars.Context]] | None = getattr(
        future, "_callbacks", None
    )
    if (
        not waiting
        or len(waiting) != 1
        or not isinstance(getattr(waiting[0][0], "__self__", None), asyncio.Task)
        or asyncio.current_task(future.get_loop()) is not None
        or REQUEST_TIME.get() is not None
    ):
        future.set_result(result)
        return
    wake_up, context = waiting[0]
    future.remove_done_callback(wake_up)  # set_result would schedule it for a later turn
    future.set_result(result)
    try:
        context.run(wake_up, future)
    except RuntimeError:
        # "cannot enter context: already entered" (the waking code runs inside the task's own
        # context), raised before the step starts: without its callback the task would never
        # resume, so it is scheduled as set_result would have.
        future.get_loop().call_soon(wake_up, future, context=context)
