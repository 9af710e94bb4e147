"""The connections of each broker's latest metadata long poll and latest heartbeat, as the
active controller saw them.

Why: a dead broker process is told from a silent one by its connections — the kernel closes a
killed process's sockets, a paused or partitioned process keeps them open
(``managers/sessions.py`` has the rule and why it is safe). A broker names itself (id, epoch)
in its long polls (``GET /v1/metadata/records``) and heartbeats; ``BrokerChannels`` keeps the
transport of the latest of each and whether that request is still in flight (from ``polled`` /
``heartbeat_arrived`` until ``answered`` / ``heartbeat_answered``). ``closed(now_ms)``, called
by the timer (``runner.watch_broker_channels``, every turn, at most ``TIMER_MAX_DELAY_MS``
apart, and at once when the server loses a connection), reports each broker incarnation whose
latest poll's or heartbeat's connection closed since the last look, stamped with when it was
seen (``seen_ms``: the session ignores a close seen before the broker's last call-in): which
of the two closed, and whether one closed in the state where only a dead process closes it
(``suspect``) — checked by the timer or when the request ended:

* the long poll's, while the poll waited on it. Between two polls the connection is the broker's
  to use and close: it sits in the main HTTP client's pool, which closes it after its keep-alive
  time (aiohttp's 15 s) while the broker applies a large delta, or lends it to another call (a
  CreateTopics for a topic auto-created on a metadata request) whose timeout closes it (issue 18:
  15,000 partitions created on 3 brokers had a live broker fenced twice that way in
  ``bench/scale.py``: its latest poll's connection closed, no poll failed, no heartbeat within
  the second). A waiting poll closes only if the process died or the poll timed out, and a
  failed poll makes the broker heartbeat at once.
* the heartbeat's, while no heartbeat was in flight on it. The heartbeat thread's client is its
  own (``broker/heartbeat_thread.py``) and calls every ``broker.heartbeat.interval.ms`` (2 s,
  below aiohttp's keep-alive), so its idle connection is never closed by a live broker; one in
  flight closes when the broker's deadline for it passed, and the broker heartbeats again.

The poll alone missed a killed broker whose loop was between two polls (busy with produce
traffic in ``bench/failover.py``: fenced only at the session timeout); the heartbeat connection
is idle almost all the time.

Each report says which connections closed (``Closed``): ``suspect`` when one of them closed in
its telling state, ``poll_closed`` / ``heartbeat_closed`` for each connection seen closed in any
state. A process that exits closes both at once (the latest poll's, waiting or idle in the pool,
and the idle heartbeat's); ``managers/sessions.py`` ends the session
``pykraft.broker.exited.grace.ms`` (200 ms) after both closed unless the broker calls in, and
waits longer for a call-in otherwise.
"""

from __future__ import annotations

import asyncio

import attrs

# Bound (STYLE.md §7): one entry per broker id; a cluster has far fewer brokers.
MAX_BROKERS = 100_000


@attrs.frozen
class Closed:
    """What closed of one broker incarnation's connections since the last look."""

    broker_id: int
    broker_epoch: int
    # When the timer saw the close(s) (monotonic ms): the mark counts only if the broker has
    # not called in since (its write waits for the write lock; call-ins do not).
    seen_ms: int
    # One closed in the state where only a dead process closes it: its session ends soon.
    suspect: bool = False
    # The latest long poll's connection closed, waiting or idle.
    poll_closed: bool = False
    # The heartbeat connection closed while idle (never by a live broker).
    heartbeat_closed: bool = False


@attrs.define
class _Latest:
    broker_epoch: int
    transport: asyncio.BaseTransport
    in_flight: bool = True


class BrokerChannels:
    def __init__(self) -> None:
        self._polls: dict[int, _Latest] = {}
        self._heartbeats: dict[int, _Latest] = {}

    def polled(self, broker_id: int, broker_epoch: int, transport: asyncio.BaseTransport) -> None:
        """A long poll of this broker arrived on ``transport`` and waits for its answer."""
        _remember(self._polls, broker_id, _Latest(broker_epoch, transport))

    def answered(self, broker_id: int, transport: asyncio.BaseTransport) -> None:
        """The poll on ``transport`` ended; a connection that closed meanwhile still counts."""
        latest = self._polls.get(broker_id)
        if latest is not None and latest.transport is transport and not transport.is_closing():
            latest.in_flight = False

    def heartbeat_arrived(
        self, broker_id: int, broker_epoch: int, transport: asyncio.BaseTransport
    ) -> None:
        _remember(self._heartbeats, broker_id, _Latest(broker_epoch, transport))

    def heartbeat_answered(self, broker_id: int, transport: asyncio.BaseTransport) -> None:
        """The heartbeat on ``transport`` was handled; its connection idles until the next."""
        latest = self._heartbeats.get(broker_id)
        if latest is not None and latest.transport is transport:
            if transport.is_closing():  # the broker gave up on it: it calls again
                del self._heartbeats[broker_id]
            else:
                latest.in_flight = False

    def closed(self, now_ms: int) -> list[Closed]:
        """Every broker (incarnation) whose latest poll's or latest heartbeat's connection
        closed since the last call, by broker id, seen at ``now_ms``; each connection closed is
        forgotten after."""
        found: dict[tuple[int, int], Closed] = {}
        for broker_id, request in _closed(self._polls):
            key = (broker_id, request.broker_epoch)
            previous = found.get(key, Closed(broker_id, request.broker_epoch, now_ms))
            # Telling only while the poll waited: between polls the broker's pool may close it.
            found[key] = attrs.evolve(
                previous, suspect=previous.suspect or request.in_flight, poll_closed=True
            )
        for broker_id, request in _closed(self._heartbeats):
            key = (broker_id, request.broker_epoch)
            previous = found.get(key, Closed(broker_id, request.broker_epoch, now_ms))
            # Telling only while idle: one in flight closes when the broker's deadline passed.
            idle = not request.in_flight
            found[key] = attrs.evolve(
                previous,
                suspect=previous.suspect or idle,
                heartbeat_closed=previous.heartbeat_closed or idle,
            )
        # A heartbeat connection closed under its heartbeat tells nothing.
        return [found[key] for key in sorted(found) if found[key] != Closed(*key, now_ms)]

    def clear(self) -> None:
        self._polls.clear()
        self._heartbeats.clear()


def _remember(latest: dict[int, _Latest], broker_id: int, request: _Latest) -> None:
    if broker_id in latest or len(latest) < MAX_BROKERS:
        latest[broker_id] = request


def _closed(latest: dict[int, _Latest]) -> list[tuple[int, _Latest]]:
    gone = [(broker_id, r) for broker_id, r in latest.items() if r.transport.is_closing()]
    for broker_id, _ in gone:
        del latest[broker_id]
    return gone
