"""The clock contract: the one way a shell learns the time (STYLE.md §2).

Two times, never mixed, under different names (Kafka's ``Time``: ``nanoseconds()`` for
deadlines, ``milliseconds()`` for what is dated):

* ``monotonic_ms()`` — deadlines, timeouts, backoffs, lags, session expiry. It never goes back
  and means nothing across processes or restarts.
* ``wall_clock_ms()`` — Unix time in milliseconds for what is written down or compared with
  something written down: record and append timestamps, segment and snapshot dates, offset
  commit times, retention.

``wait(event, timeout_ms)`` is Kafka's ``Time.waitObject``: the one way a shell waits with a
deadline, so a simulated clock can move time instead of sleeping.

The real clock (``storage.system_clock``) is built once at each process's composition root
and passed down; tests use ``tests.fake_clock.FakeClock``. Cores never see a clock: they take
``now_ms: int``. This module imports nothing of ours, so every package may depend on it
(tests/test_architecture.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio


class Clock(Protocol):
    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never goes back: for deadlines only."""
        ...

    def wall_clock_ms(self) -> int:
        """Milliseconds since the Unix epoch: for timestamps that are stored or compared."""
        ...

    async def wait(self, event: asyncio.Event, timeout_ms: int | None) -> None:
        """Return when ``event`` is set or ``timeout_ms`` (None: no limit) has passed."""
        ...
