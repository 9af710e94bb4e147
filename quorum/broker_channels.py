"""The connection of each broker's latest metadata long poll, as the active controller saw it.

Why: a dead broker process is told from a silent one by its connections — the kernel closes a
killed process's sockets, a paused or partitioned process keeps them open
(``managers/sessions.py`` has the rule and why it is safe). A broker names itself (id, epoch)
in its long polls (``GET /v1/metadata/records``); ``BrokerChannels`` keeps the transport of the
latest, and ``closed`` reports the brokers whose connection has closed since — whether a poll was
waiting on it at that moment or it sat between two polls in the broker's connection pool. The
timer (``runner.watch_broker_channels``) asks every turn, at most ``TIMER_MAX_DELAY_MS`` apart.
"""

from __future__ import annotations

import asyncio

# Bound (STYLE.md §7): one entry per broker id; a cluster has far fewer brokers.
MAX_BROKERS = 100_000


class BrokerChannels:
    def __init__(self) -> None:
        # broker id -> (broker epoch, transport of its latest long poll)
        self._latest: dict[int, tuple[int, asyncio.BaseTransport]] = {}

    def polled(self, broker_id: int, broker_epoch: int, transport: asyncio.BaseTransport) -> None:
        if broker_id not in self._latest and len(self._latest) >= MAX_BROKERS:
            return
        self._latest[broker_id] = (broker_epoch, transport)

    def closed(self) -> list[tuple[int, int]]:
        """(broker id, broker epoch) of every watched connection now closed; forgotten after."""
        gone = [
            (broker_id, epoch)
            for broker_id, (epoch, transport) in self._latest.items()
            if transport.is_closing()
        ]
        for broker_id, _ in gone:
            del self._latest[broker_id]
        return gone

    def clear(self) -> None:
        self._latest.clear()
