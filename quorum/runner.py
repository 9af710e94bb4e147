"""Run one controller process: the Raft node, the HTTP service and the active controller's
timed work, until SIGTERM/SIGINT.

The timer runs on every controller but acts only while it is the active controller (Kafka's
QuorumController schedules the same events on activation):
  * a NoOpRecord every ``metadata.max.idle.interval.ms``, so brokers that long-poll an idle log
    still see it advance (KIP-835);
  * fencing brokers whose session expired (``broker.session.timeout.ms``, KIP-631);
  * moving leaderships back to preferred replicas (``auto.leader.rebalance.enable``, every
    ``leader.imbalance.check.interval.seconds``; a run bounded by its elections is followed by
    another 10 ms later, as Kafka's ``maybeScheduleNextBalancePartitionLeaders``).
It is armed from ``QuorumController.next_deadline_ms`` — the pure controller says when its
timed operations are next due, as the simulations drive it — and re-armed whenever the
metadata log moves, since only a write brings a deadline closer (a broker unfenced, whose
session now counts). Kafka's QuorumController likewise re-schedules its ``maybeFenceReplicas``
event at the heartbeat manager's ``nextCheckTimeNs`` after each registration and heartbeat
(``rescheduleMaybeFenceStaleBrokers``).

Snapshots are not timed work here: every controller writes its own from the Raft thread after
``metadata.log.max.records.between.snapshots`` records, as every KRaft node does.

The process's one clock is built by its composition root (``pykraft.controller_cmd``) and
handed to ``run_controller``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Protocol, TypeVar

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from pykraft.metadata.auth.tls_context import server_context
from pykraft.metadata.image import MetadataImage
from pykraft.quorum.auth_http import Doors
from pykraft.quorum.broker_channels import BrokerChannels
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller import ControllerResult, QuorumController
from pykraft.quorum.metadata_view import MetadataView
from pykraft.quorum.node import ControllerNode, Operation, ServiceError
from pykraft.quorum.raft import RaftBindError
from pykraft.quorum.service import build_app
from pykraft.storage.clock import Clock

logger = logging.getLogger(__name__)

HEALTH_CHECK_INTERVAL_S = 0.2
# In-flight requests get this long to finish on SIGTERM (long polls are released at once).
SHUTDOWN_TIMEOUT_S = 5.0
AIOHTTP_KEEPALIVE_TIMEOUT_S = 75.0  # aiohttp's server default


# Fencing writes one broker per batch (Kafka's maybeFenceOneStaleBroker); bound one round.
MAX_FENCINGS_PER_ROUND = 100
# The timer's bounds (STYLE.md §7): it never waits less than the minimum, so a deadline that
# stays in the past (a write that keeps failing) cannot make it spin, and never more than the
# maximum, so a deadline too far off cannot stall fencing or the NoOp — nor a standby, which
# has no deadline and no word from pysyncobj, notice late that it became the active controller
# (the maximum is the old fixed period at Kafka's default metadata.max.idle.interval.ms).
TIMER_MIN_DELAY_MS = 10
TIMER_MAX_DELAY_MS = 250
_NOTHING: ControllerResult[None] = ControllerResult((), None)

T = TypeVar("T")


class TimedNode(Protocol):
    """What the timer needs of a ``ControllerNode``."""

    view: MetadataView
    broker_channels: BrokerChannels

    @property
    def clock(self) -> Clock: ...

    def is_leader(self) -> bool: ...

    def next_deadline_ms(self) -> int: ...

    def active_controller(self) -> QuorumController: ...

    async def write(self, operation: Operation[T]) -> T: ...


def timer_delay_ms(deadline_ms: int, now_ms: int) -> int:
    """How long the timer waits for ``deadline_ms``, within its bounds."""
    return min(TIMER_MAX_DELAY_MS, max(TIMER_MIN_DELAY_MS, deadline_ms - now_ms))


async def write_noop(node: TimedNode) -> None:
    await node.write(
        lambda controller, image, now_ms: controller.maybe_noop(image, now_ms) or _NOTHING
    )


async def fence_stale_brokers(node: TimedNode) -> None:
    why: list[str] = []  # of the attempt that ran last (a write may run it again)

    def fence(
        controller: QuorumController, image: MetadataImage, now_ms: int
    ) -> ControllerResult[tuple[int, ...]]:
        result = controller.fence_stale_brokers(image, now_ms)
        brokers = image.cluster.brokers
        why[:] = [controller.sessions.why_stale(brokers[b], now_ms) for b in result.response]
        return result

    for _ in range(MAX_FENCINGS_PER_ROUND):
        fenced = await node.write(fence)
        if not fenced:
            return
        logger.info("fenced broker(s) %s: %s", list(fenced), "; ".join(why))


async def watch_broker_channels(node: TimedNode) -> None:
    """Tell the active controller which brokers' connections closed as only a dead process
    closes them since the last turn (quorum/broker_channels.py); their sessions end soon after
    unless they call in."""
    # The term's controller first: a new term clears the channels a past term of ours watched
    # (their connections may have closed for any reason while we stood by).
    node.active_controller()
    closed = node.broker_channels.closed(node.clock.monotonic_ms())
    if not closed:
        return

    def mark(
        controller: QuorumController, image: MetadataImage, now_ms: int
    ) -> ControllerResult[None]:
        for each in closed:
            controller.broker_channel_closed(
                image,
                each.broker_id,
                each.broker_epoch,
                each.seen_ms,
                suspect=each.suspect,
                poll_closed=each.poll_closed,
                heartbeat_closed=each.heartbeat_closed,
            )
        return _NOTHING

    await node.write(mark)
    logger.info("connection closed by broker(s) %s", [each.broker_id for each in closed])


async def sweep_expired_delegation_tokens(node: TimedNode) -> None:
    def sweep(
        controller: QuorumController, image: MetadataImage, now_ms: int
    ) -> ControllerResult[int]:
        wall_clock_ms = node.clock.wall_clock_ms()
        result = controller.maybe_sweep_expired_delegation_tokens(image, now_ms, wall_clock_ms)
        return ControllerResult((), 0) if result is None else result

    removed = await node.write(sweep)
    if removed:
        logger.info("removed %d expired delegation token(s)", removed)


async def balance_partition_leaders(node: TimedNode) -> None:
    """One balancing run when due; the schedule hears whether its write committed, so a run
    whose write failed or was retried is not lost for a whole check interval."""
    attempt: list[tuple[QuorumController, int]] = []  # the last attempt that ran, and when

    def balance(
        controller: QuorumController, image: MetadataImage, now_ms: int
    ) -> ControllerResult[bool | None]:
        # None: not due; "nothing left" writes nothing. node.write may call this again over a
        # newer image (STALE): the run stays due until reported below.
        attempt.clear()
        result = controller.maybe_balance_partition_leaders(image, now_ms)
        if result is None:
            return ControllerResult((), None)
        attempt.append((controller, now_ms))
        return ControllerResult(result.records, result.response)

    try:
        more_left = await node.write(balance)
    except Exception:
        for controller, _ in attempt:
            controller.leader_balance.failed()
        raise
    if more_left is not None:
        for controller, ran_ms in attempt:
            controller.leader_balance.committed(more_left, ran_ms)


def wake_on_connection_lost(server: web.Server, wake: asyncio.Event) -> None:
    """Set ``wake`` whenever a connection ``server`` accepted is lost: the timer then looks at
    the brokers' connections at once (``watch_broker_channels``), not on its next turn up to
    ``TIMER_MAX_DELAY_MS`` later (issue 18: a killed broker's closed connections were noticed
    230-260 ms after the kill). aiohttp's ``Server`` hears of every lost connection from its
    handlers; it offers no other hook."""
    lost = server.connection_lost

    def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
        lost(handler, exc)
        wake.set()

    server.connection_lost = connection_lost  # type: ignore[method-assign]


async def run_timer(node: TimedNode, clock: Clock, rearm: asyncio.Event | None = None) -> None:
    """The active controller's timed operations, each time they are due; errors are logged
    and the loop goes on. Each turn first looks at the brokers' connections; ``rearm`` (set
    when the log moves, and by ``wake_on_connection_lost``) starts a turn that only does that
    and re-arms."""
    log_moved = asyncio.Event() if rearm is None else rearm
    node.view.observers.append(lambda _applied: log_moved.set())
    while True:  # until cancelled; turns are TIMER_MIN_DELAY_MS apart at least unless woken
        # Cleared as the turn starts, not as it ends: a connection lost (or the log moved)
        # while this turn awaits its writes starts the next turn at once, not up to
        # TIMER_MAX_DELAY_MS later. A turn that never yields cannot be woken: no spin.
        woken = log_moved.is_set()
        log_moved.clear()
        delay_ms = TIMER_MAX_DELAY_MS
        if node.is_leader():
            # Every turn, busy log or not: a dead broker's closed connection starts its short
            # way out at once.
            try:
                await watch_broker_channels(node)
            except ServiceError as error:
                logger.info("watching broker connections skipped: %s", error.message)
            # The operations run when the timer fired (at the deadline, or after the longest
            # wait) or are due; a wake-up by the log only re-arms, so a busy log does not
            # queue them behind every write.
            if not woken or clock.monotonic_ms() >= node.next_deadline_ms():
                await run_timed_operations(node)
            delay_ms = timer_delay_ms(node.next_deadline_ms(), clock.monotonic_ms())
        await clock.wait(log_moved, delay_ms)


async def run_timed_operations(node: TimedNode) -> None:
    for task in (
        write_noop,
        fence_stale_brokers,
        balance_partition_leaders,
        sweep_expired_delegation_tokens,
    ):
        try:
            await task(node)
        except ServiceError as error:
            logger.info("timed %s skipped: %s", task.__name__, error.message)
        except Exception:
            logger.exception("timed %s failed", task.__name__)


async def serve(config: ControllerConfig, stop: asyncio.Event, clock: Clock) -> int:
    loop = asyncio.get_running_loop()
    try:
        node = ControllerNode(config, loop, clock)
    except RaftBindError as error:
        logger.error("%s", error)
        return 1
    runner = web.AppRunner(
        build_app(node, Doors.of(config, lambda: node.view.image)),
        access_log=None,
        # A broker's heartbeat connection idles between beats (below broker.session.timeout.ms
        # apart) and must not be closed by us then: one closed while idle fences the broker
        # (quorum/broker_channels.py).
        keepalive_timeout=max(
            AIOHTTP_KEEPALIVE_TIMEOUT_S, 2 * config.broker_session_timeout_ms / 1000
        ),
    )
    timer: asyncio.Task[None] | None = None
    try:
        await runner.setup()
        site = web.TCPSite(
            runner,
            config.http_listener.host,
            config.http_listener.port,
            reuse_address=True,
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
            # listener.security.protocol.map=CONTROLLER:SSL (quorum/auth_http.py).
            ssl_context=None if config.http_tls is None else server_context(config.http_tls),
        )
        try:
            await site.start()
        except OSError as error:
            logger.error(
                "cannot listen on %s (listeners): %s",
                config.http_url(config.node_id),
                error.strerror,
            )
            return 1
        logger.info(
            "controller %d serving %s, Raft on %s",
            config.node_id,
            config.http_url(config.node_id),
            config.self_raft_address,
        )
        rearm = asyncio.Event()
        assert runner.server is not None  # set up above
        wake_on_connection_lost(runner.server, rearm)
        timer = asyncio.create_task(run_timer(node, clock, rearm))
        return await _wait_until_stopped(node, stop)
    finally:
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        node.view.close()
        await runner.cleanup()
        node.stop()


async def _wait_until_stopped(node: ControllerNode, stop: asyncio.Event) -> int:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), HEALTH_CHECK_INTERVAL_S)
        if node.raft.fatal_error is not None:
            logger.error("stopping: %s", node.raft.fatal_error)
            return 1
        if not node.raft.tick_thread_alive():
            logger.error("stopping: the Raft thread died")
            return 1
    logger.info("controller %d stopping", node.config.node_id)
    return 0


def run_controller(
    config: ControllerConfig,
    clock: Clock,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> int:
    """Run until SIGTERM or SIGINT on a loop of ``loop_factory`` (asyncio's default when None);
    returns the process exit code."""

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        logger.info("event loop %s.%s", type(loop).__module__, type(loop).__qualname__)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        return await serve(config, stop, clock)

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main())
