"""One asyncio timer kept armed for a core's earliest deadline: the shells of the replica layer,
the purgatories and both coordinators each keep one (STYLE: pure cores return their next
deadline; the shell arms one timer for it). It reads the clock it is handed — monotonic for the
replica layer, wall time for the coordinators, whose cores date their deadlines by the wall clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    """One timer kept armed for a core's earliest deadline; it calls its ``on_due`` then."""

    def arm(self, deadline_ms: int | None) -> None: ...

    def fired(self) -> None: ...

    def cancel(self) -> None: ...


class DeadlineTimer:
    """One asyncio timer kept armed for a core's earliest deadline (the shells use it)."""

    def __init__(self, now_ms: Callable[[], int], on_due: Callable[[], object]) -> None:
        self._now_ms = now_ms
        self._on_due = on_due
        self._handle: asyncio.TimerHandle | None = None
        self._deadline_ms: int | None = None

    def arm(self, deadline_ms: int | None) -> None:
        """Fire ``on_due`` at ``deadline_ms`` (None: no deadline, nothing armed); re-arms only
        when the earliest deadline moved."""
        if deadline_ms == self._deadline_ms:
            return
        self.cancel()
        if deadline_ms is None:
            return
        delay_s = max(0, deadline_ms - self._now_ms()) / 1000
        self._handle = asyncio.get_running_loop().call_later(delay_s, self._on_due)
        self._deadline_ms = deadline_ms

    def fired(self) -> None:
        """``on_due`` ran: the next ``arm`` arms afresh."""
        self._handle, self._deadline_ms = None, None

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle, self._deadline_ms = None, None
