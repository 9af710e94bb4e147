"""The tests' clock: ``storage.clock.Clock`` on simulated time (one for every test; the
replication simulation's clock yields to its own scheduler, tests/sim/replication_fetcher.py).

Time moves only when a test moves it (``clock.now_ms += 500``) or when a ``wait`` runs out:
a wait with a timeout returns at once, that much later. Wall time moves with monotonic time,
a fixed distance apart, so a test can date records and expire deadlines on one clock.
"""

from __future__ import annotations

import asyncio

# 2023-11-14T22:13:20Z: a plausible wall time for records and commits.
WALL_CLOCK_START_MS = 1_700_000_000_000


class FakeClock:
    def __init__(self, now_ms: int = 0, *, wall_clock_start_ms: int = WALL_CLOCK_START_MS) -> None:
        # The monotonic time; tests set or advance it directly.
        self.now_ms = now_ms
        self._wall_clock_offset_ms = wall_clock_start_ms - now_ms

    def monotonic_ms(self) -> int:
        return self.now_ms

    def wall_clock_ms(self) -> int:
        return self.now_ms + self._wall_clock_offset_ms

    async def wait(self, event: asyncio.Event, timeout_ms: int | None) -> None:
        if event.is_set():
            return
        if timeout_ms is None:
            await event.wait()
            return
        self.now_ms += max(0, timeout_ms)
        await asyncio.sleep(0)  # a yield to the loop, not a wait
