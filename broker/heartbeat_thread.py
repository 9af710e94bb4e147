"""Heartbeats on a thread of their own (issue 18), as Kafka's ``BrokerLifecycleManager`` runs on
its own event-queue thread so that a slow metadata publish never delays a heartbeat.

Theory of operation: ``start`` (on the broker's loop) starts a daemon thread that runs
``BrokerLifecycleManager.run`` on a new event loop, with a ``ControllerClient`` made there (an
aiohttp session belongs to one loop) and closed there when ``run`` ends. ``wait`` (on the
broker's loop) ends when the thread's ``run`` ended and raises what it raised, so
``BrokerServer`` watches it like any background task.

What crosses threads, and why it is safe:

* the core (``LifecycleCore`` and the ``BrokerLifecycle`` it moves) is read and changed only
  under ``_lock``, from either thread (a request built, an answer applied, an event from the
  broker); ``stop`` sets ``_stopped`` under the same lock, and an answer that arrives after it is
  dropped, so once ``stop`` returns no heartbeat moves the lifecycle (the broker's own
  ``become(SHUTTING_DOWN)`` cannot race one);
* the events ``BrokerServer`` awaits (``caught_up``, ``unfenced``, ``shutdown_allowed``) belong to
  the broker's loop and are set there (``call_soon_threadsafe``); the wake-up event belongs to
  the heartbeat loop and is set there the same way;
* the metadata offset is ``loader.image.offset``: one reference read (atomic under the GIL) of
  an image the loader assigns only after every listener applied it, so the offset reported was
  applied. Stale while the broker's loop is busy, which is what the controller should hear;
* the offline log dirs and counters are read from the broker's structures while its loop may
  change them: a read that meets a change (``RuntimeError``: changed size during iteration)
  sends the last value read, and the next heartbeat the new one.

Why a thread and not an apply that yields to the loop in slices: becoming leader for 10,000
partitions is one ``MetadataDelta`` whose parts must stay in order with every request the loop
serves (a produce must not see half the leaderships), and slicing it would need that proven for
every publisher; the heartbeat needs none of it (it reads the applied offset, a single
reference). The GIL still hands the heartbeat thread a turn at least every
``sys.getswitchinterval()`` (5 ms) of pure-Python apply, and at every fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Protocol

from pykraft.broker.heartbeat import BrokerLifecycleManager, HeartbeatClient

BIND_TIMEOUT_S = 5.0


class ClosableHeartbeatClient(HeartbeatClient, Protocol):
    async def close(self) -> None: ...


class HeartbeatThread:
    """Runs one ``BrokerLifecycleManager`` on its own thread and loop."""

    def __init__(
        self,
        manager: BrokerLifecycleManager,
        client_factory: Callable[[], ClosableHeartbeatClient],
    ) -> None:
        self.manager = manager
        self._client_factory = client_factory
        self._thread: threading.Thread | None = None
        self._done: asyncio.Future[None] | None = None
        self._bound = threading.Event()

    def start(self) -> None:
        """Start the thread; call on the broker's loop (the one awaiting the manager's events)."""
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        self._thread = threading.Thread(
            target=self._main,
            args=(loop, self._done),
            name=f"broker-{self.manager.identity.broker_id}-heartbeats",
            daemon=True,
        )
        self._thread.start()
        # Until the manager knows its loops, an event from the broker could be set on the wrong
        # loop; the thread binds them before its first await (milliseconds).
        self._bound.wait(BIND_TIMEOUT_S)

    def _main(self, events_loop: asyncio.AbstractEventLoop, done: asyncio.Future[None]) -> None:
        error: BaseException | None = None
        try:
            asyncio.run(self._run(events_loop))
        except BaseException as raised:  # handed to the broker's loop, raised by ``wait``
            error = raised
        finally:
            self._bound.set()  # a failure before binding: ``start`` waits no longer

        def finish() -> None:
            if done.done():  # the broker stopped waiting
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        if not events_loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile: nobody waits
                events_loop.call_soon_threadsafe(finish)

    async def _run(self, events_loop: asyncio.AbstractEventLoop) -> None:
        client = self._client_factory()
        self.manager.use_client(client)
        self.manager.bind_loops(events_loop=events_loop, run_loop=asyncio.get_running_loop())
        self._bound.set()
        try:
            await self.manager.run()
        finally:
            await client.close()

    async def wait(self) -> None:
        """Until the thread's ``run`` ended (after ``stop`` or SHUTTING_DOWN); raises its error."""
        assert self._done is not None, "start first"
        await asyncio.shield(self._done)

    def stop(self) -> None:
        self.manager.stop()
