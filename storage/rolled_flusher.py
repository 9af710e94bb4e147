"""Rolled segments flushed on a thread of their own, off the broker's event loop.

Why: a roll leaves the old segment's bytes in the page cache, and Kafka flushes them at once but
asynchronously (``UnifiedLog.roll`` schedules the "flush-log" task on its scheduler). Inline on
the loop, the fsync of a rolled 1 GiB segment (``segment.bytes``' default) took 0.47 s on this
box, during which the broker answered no request; the producer snapshot a roll takes fsynced
there too (file and directory).

Theory of operation: on the loop, ``submit`` has the log prepare a ``RolledFlush`` — which files
to sync, by name — and hands its ``run`` to one worker thread. The outcome comes back through
``call_soon`` (the loop's ``call_soon_threadsafe``) to ``done(flush, error)``, where the log
manager moves the recovery point or takes the dir offline. A partition has one flush on the
thread at a time; what rolls meanwhile is flushed at the next ``submit`` after it. ``shutdown``
waits for the flush under way; the logs' closes flush the rest.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from pykraft.storage.segment_store import RolledFlush

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

Done = Callable[[RolledFlush, BaseException | None], None]


class FlushableLog(Protocol):
    def prepare_rolled_flush(self) -> RolledFlush | None: ...


class RolledFlusher(Generic[K]):
    def __init__(self, call_soon: Callable[[Callable[[], None]], object]) -> None:
        self._call_soon = call_soon
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="log-flusher")
        self._flushing: set[K] = set()  # touched on the loop only

    def submit(self, key: K, log: FlushableLog, done: Done) -> None:
        """Prepare ``log``'s rolled flush and run it on the thread, unless one of ``key`` is
        there already; an ``OSError`` of the preparation is the caller's."""
        if key in self._flushing:
            return
        flush = log.prepare_rolled_flush()
        if flush is None:
            return
        self._flushing.add(key)
        future = self._executor.submit(flush.run)
        future.add_done_callback(
            lambda ran: self._post(functools.partial(self._finish, key, flush, ran, done))
        )

    def _post(self, callback: Callable[[], None]) -> None:
        try:
            self._call_soon(callback)
        except RuntimeError:  # the loop is closed: the broker is stopping, its closes flush
            logger.info("a rolled flush finished after the event loop closed")

    def _finish(
        self, key: K, flush: RolledFlush, ran: concurrent.futures.Future[None], done: Done
    ) -> None:
        self._flushing.discard(key)
        if not ran.cancelled():  # cancelled: by ``shutdown``
            done(flush, ran.exception())

    def shutdown(self) -> None:
        """Wait for the flush under way; no more run."""
        self._executor.shutdown(wait=True, cancel_futures=True)
