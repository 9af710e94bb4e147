"""Run one controller process: the Raft node, the HTTP service and the active controller's
periodic work, until SIGTERM/SIGINT.

Periodic work runs on every controller but acts only while it is the active controller
(Kafka's QuorumController schedules the same tasks on activation):
  * a NoOpRecord every ``metadata.max.idle.interval.ms``, so brokers that long-poll an idle log
    still see it advance (KIP-835);
  * fencing brokers whose session expired (``broker.session.timeout.ms``, KIP-631).
Snapshots are not periodic work here: every controller writes its own from the Raft thread
after ``metadata.log.max.records.between.snapshots`` records, as every KRaft node does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from aiohttp import web

from quorum.config import ControllerConfig
from quorum.controller import ControllerResult
from quorum.node import ControllerNode, ServiceError
from quorum.raft import RaftBindError
from quorum.service import build_app

logger = logging.getLogger(__name__)

HEALTH_CHECK_INTERVAL_S = 0.2
# In-flight requests get this long to finish on SIGTERM (long polls are released at once).
SHUTDOWN_TIMEOUT_S = 5.0


# Fencing writes one broker per batch (Kafka's maybeFenceOneStaleBroker); bound one round.
MAX_FENCINGS_PER_ROUND = 100
_NOTHING: ControllerResult[None] = ControllerResult((), None)


async def write_noop(node: ControllerNode) -> None:
    await node.write(lambda controller, image, now_ms:
                     controller.maybe_noop(image, now_ms) or _NOTHING)


async def fence_stale_brokers(node: ControllerNode) -> None:
    for _ in range(MAX_FENCINGS_PER_ROUND):
        fenced = await node.write(lambda controller, image, now_ms:
                                  controller.fence_stale_brokers(image, now_ms))
        if not fenced:
            return
        logger.info("fenced broker(s) %s: session expired", list(fenced))


async def run_periodic(node: ControllerNode) -> None:
    """The active controller's timers; errors are logged and the loop goes on."""
    # Half the idle interval: maybe_noop decides whether the log has been idle long enough.
    interval_s = node.config.metadata_max_idle_interval_ms / 2000
    while True:
        await asyncio.sleep(interval_s)
        if not node.is_leader():
            continue
        for task in (write_noop, fence_stale_brokers):
            try:
                await task(node)
            except ServiceError as error:
                logger.info("periodic %s skipped: %s", task.__name__, error.message)
            except Exception:
                logger.exception("periodic %s failed", task.__name__)


async def serve(config: ControllerConfig, stop: asyncio.Event) -> int:
    loop = asyncio.get_running_loop()
    try:
        node = ControllerNode(config, loop)
    except RaftBindError as error:
        logger.error("%s", error)
        return 1
    runner = web.AppRunner(build_app(node), access_log=None)
    periodic: asyncio.Task[None] | None = None
    try:
        await runner.setup()
        site = web.TCPSite(runner, config.http_listener.host, config.http_listener.port,
                           reuse_address=True, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        try:
            await site.start()
        except OSError as error:
            logger.error("cannot listen on %s (listeners): %s", config.http_listener.url,
                         error.strerror)
            return 1
        logger.info("controller %d serving %s, Raft on %s", config.node_id,
                    config.http_listener.url, config.self_raft_address)
        periodic = asyncio.create_task(run_periodic(node))
        return await _wait_until_stopped(node, stop)
    finally:
        if periodic is not None:
            periodic.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await periodic
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


def run_controller(config: ControllerConfig) -> int:
    """Run until SIGTERM or SIGINT; returns the process exit code."""

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        return await serve(config, stop)

    return asyncio.run(main())
