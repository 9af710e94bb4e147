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
import logging
from typing import Any

from pykraft.broker.lifecycle import BrokerStartupError
from pykraft.broker.server import BrokerServer

logger = logging.getLogger(__name__)


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
