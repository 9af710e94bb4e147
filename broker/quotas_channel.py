"""Which connections are muted, and until when (KIP-219's channel throttling).

A throttled response goes out at once with its ``throttle_time_ms``; then the broker reads
nothing more from that connection until the throttle expires, so a client that ignores the
throttle time is held to it anyway (Kafka's ``SocketServer`` mutes the channel:
``ChannelMuteState.MUTED_AND_THROTTLED``). The quota shell (``broker.quotas_shell``) records a
throttle here by connection id; the listener (``broker.network``) asks before it dispatches the
next request from that connection and waits out the rest (``wait_until_unmuted``, through the
broker's ``Clock.wait`` so tests move simulated time). Times are the broker's monotonic
milliseconds; one entry per muted open connection, dropped when it closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Wait = Callable[[asyncio.Event, int | None], Awaitable[None]]


class ChannelThrottles:
    def __init__(self, wait: Wait, enforcing: Callable[[], bool] = lambda: True) -> None:
        # Clock.wait: a timed wait on an event nobody sets is the clock's sleep.
        self._wait = wait
        # Whether any client quota exists (the image has one): the listener times handlers and
        # lets Produce handlers record first only then, sparing every request the cost.
        self.enforcing = enforcing
        # connection id -> monotonic ms until which it is muted.
        self._until: dict[str, int] = {}

    def throttle(self, connection_id: str, until_ms: int) -> None:
        """Mute ``connection_id`` until ``until_ms`` (a later throttle extends, never
        shortens)."""
        self._until[connection_id] = max(until_ms, self._until.get(connection_id, until_ms))

    def muted_for_ms(self, connection_id: str, now_ms: int) -> int:
        """How long ``connection_id`` stays muted from ``now_ms``; 0 once the throttle expired
        (and the entry is dropped)."""
        until = self._until.get(connection_id)
        if until is None:
            return 0
        if until <= now_ms:
            del self._until[connection_id]
            return 0
        return until - now_ms

    async def wait_until_unmuted(self, connection_id: str, monotonic_ms: Callable[[], int]) -> None:
        while muted_ms := self.muted_for_ms(connection_id, monotonic_ms()):
            await self._wait(asyncio.Event(), muted_ms)

    def forget(self, connection_id: str) -> None:
        """The connection closed."""
        self._until.pop(connection_id, None)

    def __len__(self) -> int:
        return len(self._until)
