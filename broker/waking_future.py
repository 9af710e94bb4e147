"""A future whose waiting task resumes inside ``wake``, not a loop turn later (issue 18).

Kafka's purgatory completes a delayed operation on the thread that made it completable:
``DelayedOperation.tryComplete`` calls ``onComplete``, which reads and sends the response there
— a leader's append completes its followers' ``DelayedFetch`` and sends their answers before the
append's own request goes on, and the follower fetch that moves the high watermark sends the
``DelayedProduce``'s answer. An asyncio future only schedules its waiter (``call_soon``): the
woken handler runs after the rest of the waking one, and with it any write of its answer.

``WakingFuture.wake(result)`` sets the result and runs the waiting task's next step right
there, so the woken handler reads, answers and writes before ``wake`` returns. It does so only
when that is safe, else it is ``set_result``:

* a task is waiting on it (a handler still in its first step, started at once, has not given it
  to its task yet);
* no task is running: asyncio runs one task at a time (``Cannot enter into task``), and a task
  must never resume in the middle of another one's step — so the waking code is a transport
  callback, a handler's first step started outside any task (``broker.request_time``) or a timer;
* the waking step is not timed for a request quota (``broker.request_time.REQUEST_TIME``, KIP-124):
  the woken handler's time must not be charged to the waking request.

The waking code must be ready for the woken handler to run inside it: whatever it changed is
consistent, and what it does next does not depend on the waiter still waiting.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

from pykraft.broker.request_time import REQUEST_TIME

T = TypeVar("T")

__all__ = ["WakingFuture"]


class WakingFuture(asyncio.Future[T]):
    """An ``asyncio.Future`` whose ``wake`` resumes the task awaiting it at once (when safe)."""

    __slots__ = ("_waker",)

    def __init__(self, *, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        # The first done callback: a task awaiting this future adds its wake-up, with its context.
        self._waker: tuple[Callable[[Any], object], contextvars.Context | None] | None = None

    def add_done_callback(
        self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None
    ) -> None:
        if self._waker is None and not self.done():
            self._waker = (fn, context)
        super().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        if self._waker is not None and self._waker[0] is fn:
            self._waker = None
        return super().remove_done_callback(fn)

    def wake(self, result: T) -> None:
        """``set_result``, and the waiting task's next step now, inside this call, when safe."""
        waker = self._waker
        if (
            waker is None
            or asyncio.current_task(self.get_loop()) is not None
            or REQUEST_TIME.get() is not None
        ):
            self.set_result(result)
            return
        wake_up, context = waker
        self._waker = None
        super().remove_done_callback(wake_up)  # set_result would schedule it for a later turn
        self.set_result(result)
        if context is None:
            wake_up(self)
        else:
            context.run(wake_up, self)
