"""Registration and heartbeats: the broker side of KIP-631 (Kafka's ``BrokerLifecycleManager``).

Theory of operation
-------------------
A broker process registers once per start with a fresh **incarnation id** and gets a **broker
epoch** (the offset of its RegisterBrokerRecord). It then heartbeats, carrying the offset of the
last metadata record it applied. The answers drive ``broker.lifecycle``:

    STARTING -> RECOVERY       the controller says it is caught up (offset >= broker epoch)
    RECOVERY -> RUNNING        the controller unfenced it (it asked to be, ready_to_unfence)
    RUNNING  -> PENDING_CONTROLLED_SHUTDOWN   shutdown was asked for (SIGTERM): heartbeats now
                               carry want_shut_down; the controller moves leadership away
    PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN   the controller answers should_shut_down
    STARTING / RECOVERY -> SHUTTING_DOWN      shutdown before serving: nothing to hand over

The decisions are ``broker.lifecycle_core.LifecycleCore`` (pure, driven by the simulation too):
what to send, what an answer means (``heartbeat_decision``: the transition and when to send the
next heartbeat — Kafka's schedule: 10 ms while STARTING, 50 ms after the first answer in
controlled shutdown, otherwise ``broker.heartbeat.interval.ms``; after a failure, the
interval). This module is its asyncio shell: it sends, waits, and turns the core's steps into
events for ``BrokerServer``. A heartbeat asks to stay fenced (``want_fence``) until the broker is
ready to serve (``set_ready_to_unfence``). Events that want an answer sooner (ready to unfence,
shutdown) wake the loop at once.

Failed log dirs (KIP-858): every heartbeat carries the broker's offline log dirs (directory ids)
and its replicas on them (``offline_log_dirs``, read from the broker when the heartbeat is
sent), so the controller moves those leaderships away and takes the broker out of those ISRs.
``propagate_directory_failure`` wakes the loop so the news goes out at once, as Kafka's
``BrokerLifecycleManager.propagateDirectoryFailure`` does. Kafka also halts a broker whose
offline dir the controller has not acknowledged within ``log.dir.failure.timeout.ms``; pykraft
does not (the report repeats in every heartbeat until the controller acts on it).

Throughput counters (issue 16): every heartbeat also carries the broker's cumulative
``BrokerTopicMetrics`` counts (``counters``, read when it is sent, with the broker's own monotonic
time then, ``counters_sampled_ms``, so a heartbeat the controller handles late skews no rate), so
the active controller's web console shows live per-broker rates. The heartbeat is the channel
because the controller already hears from every broker on it every ``broker.heartbeat.interval.ms``,
authenticated, while it knows no broker's metrics endpoint; the counts are not written to the
metadata log.

Threads (issue 18): ``broker/heartbeat_thread.py`` runs ``run`` on a thread and loop of its
own; the core is read and changed under ``_lock``, and each event is set on the loop it belongs
to. Why that is safe is argued there.

Registration failures (a controller election, or DUPLICATE_BROKER_REGISTRATION while the
previous incarnation's session is still alive after a kill -9) are retried every heartbeat
interval, as Kafka does. Heartbeat errors are logged and retried; none is fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import attrs

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import BrokerRegistrationReply, HeartbeatReply
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.broker.lifecycle_core import (
    FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS,
    STARTING_HEARTBEAT_DELAY_MS,
    HeartbeatDecision,
    HeartbeatRequest,
    LifecycleCore,
    LifecycleStep,
    RegistrationRequest,
    heartbeat_decision,
)
from pykraft.broker.offline_log_dirs import NO_OFFLINE_LOG_DIRS, OfflineLogDirs
from pykraft.metadata.api.brokers import BrokerTopicCounters
from pykraft.metadata.records import BrokerEndpoint, BrokerFeature

logger = logging.getLogger(__name__)

__all__ = [
    "FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS",
    "STARTING_HEARTBEAT_DELAY_MS",
    "BrokerIdentity",
    "BrokerLifecycleManager",
    "HeartbeatDecision",
    "heartbeat_decision",
]

# Repeated registration failures are logged once every this many (the loop keeps trying).
LOG_EVERY_FAILURES = 10

Wait = Callable[[float], Awaitable[None]]


class HeartbeatClient(Protocol):
    async def register_broker(
        self,
        *,
        broker_id: int,
        incarnation_id: str,
        endpoints: Sequence[BrokerEndpoint],
        rack: str | None,
        features: Sequence[BrokerFeature] = (),
        previous_broker_epoch: int = -1,
        deadline_s: float | None = None,
    ) -> BrokerRegistrationReply: ...

    async def heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        offline_log_dirs: OfflineLogDirs = NO_OFFLINE_LOG_DIRS,
        counters: BrokerTopicCounters | None = None,
        counters_sampled_ms: int | None = None,
        deadline_s: float | None = None,
    ) -> HeartbeatReply: ...


@attrs.frozen(kw_only=True)
class BrokerIdentity:
    """What a registration says about this process."""

    broker_id: int
    incarnation_id: str
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    features: tuple[BrokerFeature, ...] = ()
    # KIP-966: the epoch of the last clean shutdown (LogManager.previous_broker_epoch), or -1.
    previous_broker_epoch: int = -1


class BrokerLifecycleManager:
    """Registers, then heartbeats until the broker is SHUTTING_DOWN or ``stop`` is called."""

    def __init__(
        self,
        client: HeartbeatClient,
        identity: BrokerIdentity,
        lifecycle: BrokerLifecycle,
        metadata_offset: Callable[[], int],
        *,
        heartbeat_interval_ms: int,
        wait: Wait | None = None,
        offline_log_dirs: Callable[[], OfflineLogDirs] = lambda: NO_OFFLINE_LOG_DIRS,
        counters: Callable[[], BrokerTopicCounters | None] = lambda: None,
        monotonic_ms: Callable[[], int] | None = None,
    ) -> None:
        self._client = client
        self._offline_log_dirs = offline_log_dirs
        self._counters = counters
        # The broker's Clock.monotonic_ms: when the counters were read (None: not sent).
        self._monotonic_ms = monotonic_ms
        self.identity = identity
        self.core = LifecycleCore(
            identity.broker_id,
            identity.incarnation_id,
            heartbeat_interval_ms=heartbeat_interval_ms,
            lifecycle=lifecycle,
        )
        self._metadata_offset = metadata_offset
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._wait = wait or self._wait_or_wake
        self._wake = asyncio.Event()
        self._stopped = False
        # broker/heartbeat_thread.py: the core under _lock; each event set on its own loop
        # (None: the caller's, when everything runs on one loop).
        self._lock = threading.Lock()
        self._events_loop: asyncio.AbstractEventLoop | None = None
        self._run_loop: asyncio.AbstractEventLoop | None = None
        self._last_offline_log_dirs = NO_OFFLINE_LOG_DIRS
        self._last_counters: BrokerTopicCounters | None = None
        # Set when the broker reached RECOVERY / RUNNING / the controller allowed shutdown.
        self.caught_up = asyncio.Event()
        self.unfenced = asyncio.Event()
        self.shutdown_allowed = asyncio.Event()
        self.last_reply: HeartbeatReply | None = None

    @property
    def lifecycle(self) -> BrokerLifecycle:
        return self.core.lifecycle

    @lifecycle.setter
    def lifecycle(self, lifecycle: BrokerLifecycle) -> None:
        self.core.lifecycle = lifecycle

    @property
    def broker_epoch(self) -> int:
        return self.core.broker_epoch

    @property
    def ready_to_unfence(self) -> bool:
        return self.core.ready_to_unfence

    @property
    def registered(self) -> bool:
        return self.core.registered

    # ------------------------------------------------------------------ threads

    def bind_loops(
        self, *, events_loop: asyncio.AbstractEventLoop, run_loop: asyncio.AbstractEventLoop
    ) -> None:
        """``run`` goes on ``run_loop``; the broker awaits the events on ``events_loop``."""
        self._events_loop = events_loop
        self._run_loop = run_loop

    def use_client(self, client: HeartbeatClient) -> None:
        """The client ``run`` sends with (one made on the loop that runs it)."""
        self._client = client

    @staticmethod
    def _set_on(loop: asyncio.AbstractEventLoop | None, event: asyncio.Event) -> None:
        if loop is None or _running_loop() is loop:
            event.set()
        elif not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile: nobody waits
                loop.call_soon_threadsafe(event.set)

    def _signal(self, event: asyncio.Event) -> None:
        """Set one of the events the broker awaits, on the broker's loop."""
        self._set_on(self._events_loop, event)

    def _wake_up(self) -> None:
        self._set_on(self._run_loop, self._wake)

    # ------------------------------------------------------------------ events from the broker

    def set_ready_to_unfence(self) -> None:
        """The broker can serve (logs loaded, image applied): stop asking to stay fenced."""
        with self._lock:
            self.core.set_ready_to_unfence()
        self._wake_up()

    def begin_controlled_shutdown(self) -> bool:
        """Ask for shutdown; True when a controlled phase started (the broker was RUNNING)."""
        with self._lock:
            began = self.core.begin_shutdown()
            state = self.lifecycle.state
        if not began:
            if state is BrokerState.SHUTTING_DOWN:
                self._signal(self.shutdown_allowed)  # nothing leads here: no round trip
                self._wake_up()
            return False
        logger.info("broker %d: beginning controlled shutdown", self.identity.broker_id)
        self._wake_up()
        return True

    def propagate_directory_failure(self) -> None:
        """A log dir failed: heartbeat now, so the controller moves its leaderships away."""
        self._wake_up()

    def call_in_now(self) -> None:
        """Heartbeat now: a metadata poll failed, and the active controller may have seen its
        connection close (``MetadataLoader.run``)."""
        self._wake_up()

    def stop(self) -> None:
        """No heartbeat answer moves the lifecycle once this returns."""
        with self._lock:
            self._stopped = True
        self._wake_up()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        await self._register()
        delay_ms = 0
        while not self._done():
            await self._wait(delay_ms / 1000)
            if self._done():
                break
            delay_ms = await self._heartbeat_once()

    def _done(self) -> bool:
        return self._stopped or self.core.done

    async def _wait_or_wake(self, seconds: float) -> None:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can lose a cancellation that
        # arrives as the wake-up does.
        if seconds > 0 and not self._wake.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self._wake.wait()
        self._wake.clear()

    def _deadline_s(self) -> float:
        return max(1.0, self.heartbeat_interval_ms / 1000)

    async def _register(self) -> None:
        identity = self.identity
        failures = 0
        while not self._done():
            with self._lock:
                request = self.core.request(self._metadata_offset())
            assert isinstance(request, RegistrationRequest)
            try:
                reply = await self._client.register_broker(
                    broker_id=request.broker_id,
                    incarnation_id=request.incarnation_id,
                    endpoints=identity.endpoints,
                    rack=identity.rack,
                    features=identity.features,
                    previous_broker_epoch=identity.previous_broker_epoch,
                    deadline_s=self._deadline_s(),
                )
            except ControllerError as error:
                failures += 1
                if failures == 1 or failures % LOG_EVERY_FAILURES == 0:
                    logger.info(
                        "broker %d: registration failed (%d so far), retrying: %s",
                        identity.broker_id,
                        failures,
                        error,
                    )
                with self._lock:
                    delay_ms = self.core.on_registration(None).next_request_ms
                await self._wait(delay_ms / 1000)
                continue
            with self._lock:
                if self._stopped:
                    return
                self.core.on_registration(reply.broker_epoch)
            logger.info(
                "broker %d registered with broker epoch %d (incarnation %s)",
                identity.broker_id,
                reply.broker_epoch,
                identity.incarnation_id,
            )
            return

    async def _heartbeat_once(self) -> int:
        """Send one heartbeat and act on the answer; returns the delay to the next one."""
        with self._lock:
            request = self.core.request(self._metadata_offset())
        assert isinstance(request, HeartbeatRequest)
        counters = self._read_counters()
        sampled_ms = None
        if counters is not None and self._monotonic_ms is not None:
            sampled_ms = self._monotonic_ms()
        try:
            reply = await self._client.heartbeat(
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                current_metadata_offset=request.current_metadata_offset,
                want_fence=request.want_fence,
                want_shut_down=request.want_shut_down,
                offline_log_dirs=self._read_offline_log_dirs(),
                counters=counters,
                counters_sampled_ms=sampled_ms,
                deadline_s=self._deadline_s(),
            )
        except ControllerError as error:
            logger.warning("broker %d: heartbeat failed: %s", self.identity.broker_id, error)
            with self._lock:
                return self.core.on_heartbeat(None).next_request_ms
        with self._lock:
            if self._stopped:
                return 0
            self.last_reply = reply
            before = self.lifecycle.state
            step = self.core.on_heartbeat(reply)
        self._announce(before, step)
        return step.next_request_ms

    def _read_offline_log_dirs(self) -> OfflineLogDirs:
        with contextlib.suppress(RuntimeError):  # changed while read: heartbeat_thread.py
            self._last_offline_log_dirs = self._offline_log_dirs()
        return self._last_offline_log_dirs

    def _read_counters(self) -> BrokerTopicCounters | None:
        with contextlib.suppress(RuntimeError):
            self._last_counters = self._counters()
        return self._last_counters

    def _announce(self, before: BrokerState, step: LifecycleStep) -> None:
        """Log the transition the core made and set the event ``BrokerServer`` waits on."""
        if step.target is None:
            return
        logger.info("broker %d: %s -> %s", self.identity.broker_id, before.name, step.target.name)
        if step.install_publisher:
            self._signal(self.caught_up)
        elif step.target is BrokerState.RUNNING:
            self._signal(self.unfenced)
        elif step.shutdown_allowed:
            self._signal(self.shutdown_allowed)

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Run the controlled shutdown; True when the controller allowed it in time.

        On timeout the broker shuts down anyway (its session will expire and the controller
        fences it then), as Kafka's BrokerServer does after waiting for the controlled shutdown.
        """
        if self.lifecycle.state in (BrokerState.SHUTTING_DOWN, BrokerState.NOT_RUNNING):
            return True
        self.begin_controlled_shutdown()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.shutdown_allowed.wait()
        with self._lock:
            pending = self.lifecycle.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
            if pending:
                self.core.give_up_controlled_shutdown()
        if pending:
            logger.warning(
                "broker %d: controlled shutdown not confirmed within %.1fs; shutting down anyway",
                self.identity.broker_id,
                timeout_s,
            )
            return False
        return True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
