"""Checkpoint files written on a thread of their own, off the broker's event loop.

Why: ``atomic_file.write_atomically`` fsyncs the new file and then its directory. Under produce
load one such write of ``replication-offset-checkpoint`` took 7 to 134 ms on this 2-core box
(issue 18: 30 writes in a 40 s acks=all run of ``bench/replication.py``). The high-watermark
checkpoint runs every ``replica.high.watermark.checkpoint.interval.ms`` (5 s), so each broker
stopped answering every request for that long every 5 s. Kafka writes it on its scheduler thread
(``ReplicaManager``'s ``highwatermark-checkpoint`` task), and the log manager's recovery-point and
log-start-offset checkpoints too.

Theory of operation
-------------------
The event loop takes the offsets (a dict, in microseconds) and ``submit``s the write of one file,
named by its ``key`` (log dir, file name). One worker thread writes in submission order, so two
writes of one file never share its temp file. A file's write still queued when a newer one is
submitted is dropped: only the newest offsets matter.

``write_now`` writes on the calling thread (shutdown's final checkpoints, a log-dir move's),
after any write of the same file already under way. Every write carries a generation taken when
it was asked for; a write older than the file's last written one is skipped, so a file never
goes back to older offsets — a log start offset checkpoint that went back would bring records
deleted with DeleteRecords back after a restart.

A failed background write is handed to ``on_error`` through ``call_soon`` (the event loop's
``call_soon_threadsafe``): the log manager takes the dir offline there, as it did when it wrote
inline. ``discard`` drops the queued writes of a dir gone offline. ``close`` (the log manager's
shutdown, on its own thread) writes what is queued, stops the thread and returns the writes that
failed meanwhile, for the caller to handle: posted to the loop they would race the shutdown.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

Write = Callable[[], None]


class CheckpointWriter(Generic[K]):
    def __init__(
        self,
        call_soon: Callable[[Callable[[], None]], object],
        on_error: Callable[[K, OSError], None],
    ) -> None:
        self._call_soon = call_soon
        self._on_error = on_error
        self._lock = threading.Lock()  # guards every field below
        self._changed = threading.Condition(self._lock)
        self._generation = 0
        self._queued: dict[K, tuple[int, Write]] = {}
        self._written: dict[K, int] = {}
        self._file_locks: dict[K, threading.Lock] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failed_while_closing: list[tuple[K, OSError]] = []

    def submit(self, key: K, write: Write) -> None:
        """Write on the worker thread, replacing a queued write of the same file; on the
        calling thread once closed."""
        with self._lock:
            if not self._closed:
                self._generation += 1
                self._queued[key] = (self._generation, write)
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="checkpoint-writer", daemon=True
                    )
                    self._thread.start()
                self._changed.notify()
                return
        self.write_now(key, write)

    def write_now(self, key: K, write: Write) -> None:
        """Write on the calling thread, after a write of the same file under way; an
        ``OSError`` is the caller's."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            self._queued.pop(key, None)  # older than this one
        self._write(key, generation, write)

    def discard(self, dropped: Callable[[K], bool]) -> None:
        """Forget the queued writes whose key is ``dropped`` (a dir gone offline)."""
        with self._lock:
            for key in [key for key in self._queued if dropped(key)]:
                del self._queued[key]

    def close(self) -> list[tuple[K, OSError]]:
        """Write what is queued, then stop the worker; later writes run on the caller.
        Returns the writes that failed after ``close`` began (their dirs are the caller's to
        take offline)."""
        with self._lock:
            self._closed = True
            self._changed.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._lock:
            failed, self._failed_while_closing = self._failed_while_closing, []
        return failed

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queued and not self._closed:
                    self._changed.wait()
                if not self._queued:
                    return
                key = next(iter(self._queued))
                generation, write = self._queued.pop(key)
            try:
                self._write(key, generation, write)
            except OSError as error:
                self._report(key, error)
            except Exception:  # a bug: logged, and the next checkpoints still get written
                logger.exception("writing checkpoint %s failed", key)

    def _write(self, key: K, generation: int, write: Write) -> None:
        with self._lock:
            file_lock = self._file_locks.setdefault(key, threading.Lock())
        with file_lock:
            with self._lock:
                if self._written.get(key, 0) > generation:
                    return  # a newer write of this file came first
            write()
            with self._lock:
                self._written[key] = generation

    def _report(self, key: K, error: OSError) -> None:
        with self._lock:
            if self._closed:
                self._failed_while_closing.append((key, error))
                return
        try:
            self._call_soon(lambda: self._on_error(key, error))
        except RuntimeError:  # the loop is closed: the broker is stopping anyway
            logger.error("writing checkpoint %s failed: %s", key, error)
