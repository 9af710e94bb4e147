"""The connection of each broker's latest metadata long poll, as the active controller saw it.

Why: a dead broker process is told from a silent one by its connections — the kernel closes a
killed process's sockets, a paused or partitioned process keeps them open
(``managers/sessions.py`` has the rule and why it is safe). A broker names itself (id, epoch)
in its long polls (``GET /v1/metadata/records``); ``BrokerChannels`` keeps the transport of the
latest (``polled``) and whether that poll still waits for its answer (until ``answered``).
``closed`` reports the brokers whose latest poll's connection closed while the poll waited on
it — seen by the timer (``runner.watch_broker_channels``, every turn, at most
``TIMER_MAX_DELAY_MS`` apart) or when the poll ended.

Only a waiting poll counts (issue 18, bench/scale.py). Between two polls the connection is the
broker's to use and close: it sits in its HTTP client's pool, which closes it after its
keep-alive time (aiohttp's 15 s) while the broker applies a large delta, or lends it to another
call (a CreateTopics for a topic auto-created on a metadata request) whose timeout closes it.
30,000 partitions created on 3 brokers had a live broker fenced that way 6 times: its latest
poll's connection closed, its next poll waiting for a free connection behind a hundred such
calls, no heartbeat within the second. A poll that waits is the broker's own: it closes only if
the process died or the poll timed out, and a failed poll makes the broker heartbeat at once.
"""

from __future__ import annotations

import asyncio

import attrs

# Bound (STYLE.md §7): one entry per broker id; a cluster has far fewer brokers.
MAX_BROKERS = 100_000


@attrs.define
class _LatestPoll:
    broker_epoch: int
    transport: asyncio.BaseTransport
    waiting: bool = True


class BrokerChannels:
    def __init__(self) -> None:
        self._latest: dict[int, _LatestPoll] = {}

    def polled(self, broker_id: int, broker_epoch: int, transport: asyncio.BaseTransport) -> None:
        """A long poll of this broker arrived on ``transport`` and waits for its answer."""
        if broker_id not in self._latest and len(self._latest) >= MAX_BROKERS:
            return
        self._latest[broker_id] = _LatestPoll(broker_epoch, transport)

    def answered(self, broker_id: int, transport: asyncio.BaseTransport) -> None:
        """The poll on ``transport`` ended; a connection that closed meanwhile still counts."""
        latest = self._latest.get(broker_id)
        if latest is not None and latest.transport is transport and not transport.is_closing():
            latest.waiting = False

    def closed(self) -> list[tuple[int, int]]:
        """(broker id, broker epoch) of every latest poll whose connection closed while it
        waited; forgotten after, as is any latest poll's connection closed after its answer."""
        gone = [
            (broker_id, latest)
            for broker_id, latest in self._latest.items()
            if latest.transport.is_closing()
        ]
        for broker_id, _ in gone:
            del self._latest[broker_id]
        return [(broker_id, latest.broker_epoch) for broker_id, latest in gone if latest.waiting]

    def clear(self) -> None:
        self._latest.clear()
