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

import collections
import logging
import threading
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
        self._flushing: set[K] = set()  # on the thread or queued for it; the loop's only
        self._lock = threading.Lock()  # guards the fields below
        self._queued: collections.deque[tuple[K, RolledFlush, Done]] = collections.deque()
        self._changed = threading.Condition(self._lock)
        self._stopped = False
        # A daemon, as the checkpoint writer's: a stuck fsync of a failing disk must not hold
        # the interpreter's exit (shutdown waits for the flush under way).
        self._thread = threading.Thread(target=self._run, name="log-flusher", daemon=True)
        self._thread.start()

    def submit(self, key: K, log: FlushableLog, done: Done) -> None:
        """Prepare ``log``'s rolled flush and queue it for the thread, unless one of ``key``
        is there already; an ``OSError`` of the preparation is the caller's."""
        if key in self._flushing:
            return
        flush = log.prepare_rolled_flush()
        if flush is None:
            return
        with self._lock:
            if self._stopped:
                return  # the logs' closes flush it
            self._flushing.add(key)
            self._queued.append((key, flush, done))
            self._changed.notify()

    def shutdown(self) -> None:
        """Wait for the flush under way and drop the queued ones (what they would have synced
        is still pending in their logs, for the closes)."""
        with self._lock:
            self._stopped = True
            self._queued.clear()
            self._changed.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queued and not self._stopped:
                    self._changed.wait()
                if self._stopped:
                    return
                key, flush, done = self._queued.popleft()
            error: BaseException | None = None
            try:
                flush.run()
            except Exception as failed:  # an OSError takes the dir offline; others are logged
                error = failed
            self._post(key, flush, done, error)

    def _post(self, key: K, flush: RolledFlush, done: Done, error: BaseException | None) -> None:
        def finish() -> None:
            self._flushing.discard(key)
            done(flush, error)

        try:
            self._call_soon(finish)
        except RuntimeError:  # the loop is closed: the broker is stopping, its closes flush
            logger.info("a rolled flush finished after the event loop closed")
