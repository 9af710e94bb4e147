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

``heartbeat_decision`` is the pure part: given the state and a heartbeat answer, the transition
to make and when to send the next heartbeat — Kafka's schedule: 10 ms while STARTING (start-up
is quick when there is nothing to recover), 50 ms after the first answer in controlled shutdown,
otherwise ``broker.heartbeat.interval.ms``; after a failure, the interval. A heartbeat asks to
stay fenced (``want_fence``) until the broker is ready to serve (``set_ready_to_unfence``).
Events that want an answer sooner (ready to unfence, shutdown) wake the loop at once.

Failed log dirs (KIP-858): every heartbeat carries the broker's offline log dirs (directory ids)
and its replicas on them (``offline_log_dirs``, read from the broker when the heartbeat is
sent), so the controller moves those leaderships away and takes the broker out of those ISRs.
``propagate_directory_failure`` wakes the loop so the news goes out at once, as Kafka's
``BrokerLifecycleManager.propagateDirectoryFailure`` does. Kafka also halts a broker whose
offline dir the controller has not acknowledged within ``log.dir.failure.timeout.ms``; pykraft
does not (the report repeats in every heartbeat until the controller acts on it).

Registration failures (a controller election, or DUPLICATE_BROKER_REGISTRATION while the
previous incarnation's session is still alive after a kill -9) are retried every heartbeat
interval, as Kafka does. Heartbeat errors are logged and retried; none is fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import attrs

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import BrokerRegistrationReply, HeartbeatReply
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.broker.offline_log_dirs import NO_OFFLINE_LOG_DIRS, OfflineLogDirs
from pykraft.metadata.records import BrokerEndpoint, BrokerFeature

logger = logging.getLogger(__name__)

# Kafka's BrokerLifecycleManager delays.
STARTING_HEARTBEAT_DELAY_MS = 10
FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS = 50
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


@attrs.frozen
class HeartbeatDecision:
    # The lifecycle state to move to, or None to stay.
    target: BrokerState | None
    next_heartbeat_ms: int


def heartbeat_decision(
    state: BrokerState, reply: HeartbeatReply, interval_ms: int, had_shutdown_reply: bool
) -> HeartbeatDecision:
    """Kafka's ``BrokerHeartbeatResponseEvent``: what a successful answer means in ``state``."""
    if state is BrokerState.STARTING:
        target = BrokerState.RECOVERY if reply.is_caught_up else None
        return HeartbeatDecision(target, STARTING_HEARTBEAT_DELAY_MS)
    if state is BrokerState.RECOVERY:
        return HeartbeatDecision(None if reply.is_fenced else BrokerState.RUNNING, interval_ms)
    if state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
        if reply.should_shut_down:
            return HeartbeatDecision(BrokerState.SHUTTING_DOWN, interval_ms)
        delay = interval_ms if had_shutdown_reply else FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS
        return HeartbeatDecision(None, delay)
    return HeartbeatDecision(None, interval_ms)


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
    ) -> None:
        self._client = client
        self._offline_log_dirs = offline_log_dirs
        self.identity = identity
        self.lifecycle = lifecycle
        self._metadata_offset = metadata_offset
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._wait = wait or self._wait_or_wake
        self._wake = asyncio.Event()
        self._stopped = False
        self.broker_epoch = -1
        self.ready_to_unfence = False
        self._had_shutdown_reply = False
        # Set when the broker reached RECOVERY / RUNNING / the controller allowed shutdown.
        self.caught_up = asyncio.Event()
        self.unfenced = asyncio.Event()
        self.shutdown_allowed = asyncio.Event()
        self.last_reply: HeartbeatReply | None = None

    @property
    def registered(self) -> bool:
        return self.broker_epoch >= 0

    # ------------------------------------------------------------------ events from the broker

    def set_ready_to_unfence(self) -> None:
        """The broker can serve (logs loaded, image applied): stop asking to stay fenced."""
        self.ready_to_unfence = True
        self._wake.set()

    def begin_controlled_shutdown(self) -> bool:
        """Ask for shutdown; True when a controlled phase started (the broker was RUNNING)."""
        if not self.lifecycle.maybe_begin_shutdown():
            return False
        if self.lifecycle.state is BrokerState.SHUTTING_DOWN:
            self.shutdown_allowed.set()  # nothing leads here: no controller round trip
            self._wake.set()
            return False
        logger.info("broker %d: beginning controlled shutdown", self.identity.broker_id)
        self._wake.set()
        return True

    def propagate_directory_failure(self) -> None:
        """A log dir failed: heartbeat now, so the controller moves its leaderships away."""
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

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
        return self._stopped or self.lifecycle.state in (
            BrokerState.SHUTTING_DOWN,
            BrokerState.NOT_RUNNING,
        )

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
            try:
                reply = await self._client.register_broker(
                    broker_id=identity.broker_id,
                    incarnation_id=identity.incarnation_id,
                    endpoints=identity.endpoints,
                    rack=identity.rack,
                    features=identity.features,
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
                await self._wait(self.heartbeat_interval_ms / 1000)
                continue
            self.broker_epoch = reply.broker_epoch
            logger.info(
                "broker %d registered with broker epoch %d (incarnation %s)",
                identity.broker_id,
                reply.broker_epoch,
                identity.incarnation_id,
            )
            return

    async def _heartbeat_once(self) -> int:
        """Send one heartbeat and act on the answer; returns the delay to the next one."""
        state = self.lifecycle.state
        try:
            reply = await self._client.heartbeat(
                broker_id=self.identity.broker_id,
                broker_epoch=self.broker_epoch,
                current_metadata_offset=self._metadata_offset(),
                want_fence=not self.ready_to_unfence,
                want_shut_down=state is BrokerState.PENDING_CONTROLLED_SHUTDOWN,
                offline_log_dirs=self._offline_log_dirs(),
                deadline_s=self._deadline_s(),
            )
        except ControllerError as error:
            logger.warning("broker %d: heartbeat failed: %s", self.identity.broker_id, error)
            return self.heartbeat_interval_ms
        self.last_reply = reply
        # The state may have moved while the request was in flight (a shutdown request).
        state = self.lifecycle.state
        decision = heartbeat_decision(
            state, reply, self.heartbeat_interval_ms, self._had_shutdown_reply
        )
        if state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self._had_shutdown_reply = True
        if decision.target is not None:
            self._become(decision.target)
        return decision.next_heartbeat_ms

    def _become(self, target: BrokerState) -> None:
        logger.info(
            "broker %d: %s -> %s", self.identity.broker_id, self.lifecycle.state.name, target.name
        )
        self.lifecycle.become(target)
        if target is BrokerState.RECOVERY:
            self.caught_up.set()
        elif target is BrokerState.RUNNING:
            self.unfenced.set()
        elif target is BrokerState.SHUTTING_DOWN:
            self.shutdown_allowed.set()

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
        if self.lifecycle.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            logger.warning(
                "broker %d: controlled shutdown not confirmed within %.1fs; shutting down anyway",
                self.identity.broker_id,
                timeout_s,
            )
            self.lifecycle.become(BrokerState.SHUTTING_DOWN)
            return False
        return True
