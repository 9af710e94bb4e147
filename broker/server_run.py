"""The broker process's lifetime around one ``BrokerServer`` (Kafka's ``KafkaRaftServer``
``startup`` / ``awaitShutdown``): start it, serve until asked to stop or until a background task
dies, always shut it down, and answer the exit code.

Why a module of its own: ``BrokerServer`` (``server.py``) is the composition and its start-up
and shutdown order; what ends a process and with which code — a start-up that fails, a task
that stops unexpectedly, a bug — is the process's concern, called by ``pykraft broker``
(``pykraft/broker_cmd.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from typing import Any

from pykraft.broker.lifecycle import BrokerStartupError
from pykraft.broker.server import BrokerServer

logger = logging.getLogger(__name__)

# The broker process's collector policy (issue 18), the controller's thresholds
# (``quorum/node.py``). CPython runs a young collection every 700 net container allocations and
# a full one about every 100 young ones; under acks=all RF=3 a broker's full collection walked
# its whole start-up heap (modules, schemas, the metadata image) for ~60 ms of CPU mid-run, and
# collections were 5.6-7.3% of the servers' CPU in bench.replication's acks=all runs (none with
# this). After start-up that heap is frozen (``gc.freeze``): collections walk only what came
# after.
# Closed connections leave no reference cycles (``tests/broker/test_network_cycles.py``), so
# collecting seldom keeps no memory waiting for a full collection.
GC_THRESHOLDS = (10_000, 10, 10)


def set_collector_policy() -> None:
    """The process's thresholds; at start, before the server is built."""
    gc.set_threshold(*GC_THRESHOLDS)


def freeze_start_up_heap() -> None:
    """Once started: what start-up built lives as long as the process, so the collector stops
    walking it (a full collection then costs the objects made since, not the whole heap).
    Collected first: start-up's own garbage is not frozen with it."""
    gc.collect()
    gc.freeze()


async def run_broker(server: BrokerServer, stop: asyncio.Event) -> int:
    """Start ``server``, serve until ``stop`` is set (or a background task dies), shut down;
    returns the exit code."""
    code = 0
    startup = asyncio.ensure_future(server.startup())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([startup, stopping], return_when=asyncio.FIRST_COMPLETED)
        if startup.done():
            startup.result()  # raises BrokerStartupError
            freeze_start_up_heap()
            code = await _serve(server, stopping)
        else:
            startup.cancel()
            with contextlib.suppress(asyncio.CancelledError, BrokerStartupError):
                await startup
    except BrokerStartupError as error:
        logger.error("broker %d cannot start: %s", server.config.node_id, error)
        code = 1
    except Exception:
        logger.exception("broker %d failed", server.config.node_id)  # a bug: keep the trace
        code = 1
    finally:
        stopping.cancel()
        await server.shutdown()
    return code


async def _serve(server: BrokerServer, stopping: asyncio.Future[Any]) -> int:
    watched: list[asyncio.Future[Any]] = [stopping, *server.background_tasks]
    await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    for task in server.background_tasks:
        if task.done() and not task.cancelled():
            logger.error(
                "broker %d: %s stopped unexpectedly: %r",
                server.config.node_id,
                task.get_name(),
                task.exception(),
            )
            return 1
    return 0
