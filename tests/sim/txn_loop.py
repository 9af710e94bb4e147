"""asyncio's event loop on the simulation's clock: the scheduler double for the shipped shells
that are written for asyncio (``TransactionCoordinatorShell``, ``ReplicaManager.append_records``,
``broker.txn_markers.append_txn_markers``, the WriteTxnMarkers handler).

STYLE.md §10: a double may stand in for an I/O boundary (network, disk, clock), never for a class
that decides. The event loop is the clock and the scheduler, nothing more: ``SimLoop`` keeps no
queue of its own. ``call_soon`` / ``call_later`` become events of the broker incarnation that owns
the loop (``Scheduler.schedule``), so they run in the simulation's (time, sequence) order, die with
the incarnation, and wait out a pause like every other event of that broker. ``asyncio.Future``
and ``asyncio.Task`` — the real ones — run on it unchanged: they only ask their loop for
``call_soon``, ``get_debug`` and ``call_exception_handler``; ``asyncio.wait_for`` and
``asyncio.sleep`` add ``call_later`` and ``time``. While one of the broker's events runs, its loop
is the running loop (``asyncio.events._set_running_loop``, the hook asyncio keeps for other loop
implementations), so ``asyncio.get_running_loop()`` and ``asyncio.ensure_future`` in the shipped
code find it.

A callback that raises, or a future whose exception nobody retrieved, is a bug in the code under
test: ``call_exception_handler`` keeps it in ``errors``, which the simulation checks after every
event, and raises it when a callback of this loop raised (failing that event at once; what a
destructor reports is only kept: raising there would land in whatever code the garbage
collector interrupted). A process that is gone reports nothing: a killed process's tasks are
destroyed pending, as they are when a process dies.
"""

from __future__ import annotations

import asyncio
import contextvars
from asyncio import events
from collections.abc import Callable, Coroutine
from typing import Any

from tests.sim.replication_net import Scheduler


class SimLoopError(AssertionError):
    """Something under the simulated event loop failed where nothing could see it."""


class SimLoop:
    """Just enough of ``asyncio.AbstractEventLoop`` for asyncio's own futures and tasks."""

    def __init__(
        self,
        scheduler: Scheduler,
        now_ms: Callable[[], int],
        name: str,
        *,
        alive: Callable[[], bool],
    ) -> None:
        self._scheduler = scheduler
        self._now_ms = now_ms
        self.name = name
        # False once the process is gone: what its loop reports then (its tasks destroyed
        # while pending, from the garbage collector) is the process dying, not a bug.
        self._alive = alive
        self.errors: list[str] = []

    def __repr__(self) -> str:
        return f"SimLoop({self.name})"

    # ------------------------------------------------------------------ running

    def run(self, action: Callable[[], None]) -> None:
        """Run ``action`` with this loop as the running loop (nested runs keep the outer one)."""
        previous = events._get_running_loop()
        events._set_running_loop(self)  # type: ignore[arg-type]
        try:
            action()
        finally:
            events._set_running_loop(previous)

    # ------------------------------------------------------------------ the loop's API

    def time(self) -> float:
        return self._now_ms() / 1000

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return True

    def is_closed(self) -> bool:
        return False

    def call_soon(
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)  # type: ignore[arg-type]
        self._scheduler.schedule(0, "asyncio callback", lambda: self._run_handle(handle))
        return handle

    def call_later(
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        delay_ms = max(0, round(delay * 1000))
        when = (self._now_ms() + delay_ms) / 1000
        handle = asyncio.TimerHandle(when, callback, args, self, context)  # type: ignore[arg-type]
        self._scheduler.schedule(delay_ms, "asyncio timer", lambda: self._run_handle(handle))
        return handle

    def call_at(
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_later(when - self.time(), callback, *args, context=context)

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        """A cancelled timer's event still comes; ``_run_handle`` skips it."""

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)  # type: ignore[arg-type]

    def create_task(
        self,
        coroutine: Coroutine[Any, Any, Any],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        return asyncio.Task(coroutine, loop=self, name=name, context=context)  # type: ignore[arg-type]

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        if not self._alive():
            return
        error = context.get("exception")
        message = f"{self.name}: {context.get('message')}: {error!r}"
        self.errors.append(message)
        if "handle" in context:  # a callback of this loop raised: fail its event now
            raise SimLoopError(message) from error

    def _run_handle(self, handle: asyncio.Handle) -> None:
        if not handle.cancelled():
            self.run(handle._run)
