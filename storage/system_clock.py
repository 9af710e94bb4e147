"""The real clock: ``storage.clock.Clock`` on ``time`` and asyncio.

Built once per process, at its composition root — ``pykraft.broker_cmd``,
``pykraft.controller_cmd``, the other ``pykraft`` commands, and the Spark jobs' entry points
(``spark-submit`` runs them as processes of their own) — and passed down from there. No other
module may import it (``COMPOSITION_ROOTS`` in tests/test_architecture.py), and no other
module reads ``time`` for a timestamp or a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time


class SystemClock:
    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_clock_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def wait(self, event: asyncio.Event, timeout_ms: int | None) -> None:
        if timeout_ms is None:
            await event.wait()
            return
        # asyncio.timeout, not asyncio.wait_for: Python 3.11's wait_for awaits the event in a
        # task of its own and, when a cancellation reaches the caller in the loop turn after
        # that task finished (the event was set just before), returns normally instead of
        # raising CancelledError (CPython gh-86296, bpo-42130; 3.12 rebuilt wait_for on
        # asyncio.timeout). A retired ReplicaFetcher idling here would keep running, and the
        # broker's shutdown would wait out its 5 s bound for it.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0, timeout_ms) / 1000):
                await event.wait()
