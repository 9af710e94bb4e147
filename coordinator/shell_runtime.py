"""What both coordinators' asyncio shells share (the event side of Kafka's
``CoordinatorRuntime``): request ids and the futures waiting on them, the background tasks the
shell starts (appends, loads, marker sends), and stopping them all.

A shell hands a request to its pure core under a fresh request id (``call``); the core's
``Effects`` answer it then or later (``answer``), and a request still waiting when the shell
stops gets the answer its caller gave as the fallback (NOT_COORDINATOR and the like).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class ShellRuntime(Generic[R]):
    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._request_ids = itertools.count(1)
        # request id -> (future, what to answer if the shell stops first)
        self._waiters: dict[int, tuple[asyncio.Future[R], R]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def call(self, submit: Callable[[int], None], fallback: R) -> R:
        """``submit(request_id)`` to the core; wait for the request's answer."""
        request_id = next(self._request_ids)
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = (future, fallback)
        try:
            submit(request_id)
            return await future
        finally:
            self._waiters.pop(request_id, None)

    def answer(self, request_id: int, result: R) -> None:
        waiter = self._waiters.pop(request_id, None)
        if waiter is not None and not waiter[0].done():
            waiter[0].set_result(result)

    def spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``coroutine`` in the background; a failure is logged, never lost."""
        task = asyncio.ensure_future(coroutine)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._logger.error("%s failed", task.get_name(), exc_info=task.exception())

    async def stop(self) -> None:
        """Cancel the background tasks, then answer every request still waiting with its
        fallback."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for future, fallback in list(self._waiters.values()):
            if not future.done():
                future.set_result(fallback)
        self._waiters.clear()
