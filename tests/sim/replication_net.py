"""Simulated time and network for the replication sim: one event queue, seeded faults.

``EventQueue`` is the clock: events run in (time, sequence) order, so a run is a function of
the seed alone. ``Network`` carries every message between the controller, the brokers and the
producer: each one is delayed by a seeded amount, dropped with a seeded probability, and lost
when its link is cut — when it is sent or when it arrives. Faults are one broker isolated from
every other node (a network partition of one node) and single links cut between two brokers.

``SimFuture`` and ``SimTask`` run the shipped coroutines (``ReplicaFetcher.run``, the Fetch
handler) without an asyncio loop: every await yields a ``SimFuture``, and the coroutine resumes
when the simulation resolves it, so a run stays a function of the seed.

``SimSettings`` holds the timings (Kafka's defaults where the sim can afford them; the rest are
scaled down so that a few simulated minutes see many elections and ISR changes).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Protocol

import attrs

CONTROLLER = -1
PRODUCER = -2
MAX_TRACE = 40


@attrs.frozen(kw_only=True)
class SimSettings:
    partitions: int = 2
    replication_factor: int = 3
    min_insync_replicas: int = 2
    # KIP-966: the eligible.leader.replicas.version the cluster starts with. 0 (off) here: the
    # Kafka crash rule's runs keep their liveness check (every partition converges), which ELR
    # without Kafka's last-known-leader election cannot promise after kill -9s (a broker that
    # cannot show a clean shutdown leaves the ELR). The KIP-966 runs set 1 (Kafka 4.1's
    # default for new clusters; ``replication_faults.CrashRule.KIP_966``).
    eligible_leader_replicas_version: int = 0
    # broker.session.timeout.ms / broker.heartbeat.interval.ms (Kafka's defaults).
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    # replica.lag.time.max.ms, scaled down from 30000 so ISR shrinks happen within a run.
    replica_lag_time_max_ms: int = 10_000
    # replica.fetch.wait.max.ms: an empty fetch answer is followed by a wait up to this.
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1000
    # How long a request waits for its answer before the sender gives up on it.
    request_timeout_ms: int = 3000
    # replica.high.watermark.checkpoint.interval.ms (Kafka's default).
    high_watermark_checkpoint_interval_ms: int = 5000
    # The metadata long poll: brokers ask for new records this often.
    metadata_poll_interval_ms: int = 300
    # acks=all produce requests fail with REQUEST_TIMED_OUT after this (request.timeout.ms).
    produce_timeout_ms: int = 30_000
    # Network delay bounds and loss.
    min_delay_ms: int = 1
    max_delay_ms: int = 40
    drop_probability: float = 0.01
    # KIP-320 DivergingEpoch (True) or the KIP-101/279 OffsetsForLeaderEpoch path (False).
    truncate_on_fetch: bool = True
    # KIP-455: an operator moves partitions between RF 3 and RF 2 every few seconds (and
    # cancels some moves); at quiesce every partition goes back to all brokers.
    reassign: bool = False
    # The topic's own configs, given at CreateTopics as an operator would (Kafka's topic-level
    # names: ``flush.messages``, ``flush.ms``, ...); the brokers' ``LogManager`` applies them.
    topic_configs: tuple[tuple[str, str], ...] = ()
    # A data-centre outage (``replication_faults.FaultInjector.outage``): every broker loses
    # power at this simulated time, and all come back together a few seconds later.
    outage_at_ms: int | None = None
    # log.flush.scheduler.interval.ms: how often each broker's ``LogManager`` runs its periodic
    # work (the flush.ms check among it); Kafka's default (never) leaves it to the sim's
    # page-cache writeback alone.
    log_flush_scheduler_interval_ms: int | None = None


@attrs.frozen
class Event:
    time_ms: int
    sequence: int
    what: str
    action: Callable[[], None]


class EventQueue:
    """The simulated clock: ``now_ms`` is the time of the event being run."""

    def __init__(self) -> None:
        self.now_ms = 0
        # Ordered by (time, sequence) as plain tuples: attrs' generated comparisons cost a
        # quarter of a run's time.
        self._heap: list[tuple[int, int, Event]] = []
        self._sequence = 0
        self.trace: deque[str] = deque(maxlen=MAX_TRACE)

    def at(self, time_ms: int, what: str, action: Callable[[], None]) -> None:
        assert time_ms >= self.now_ms, f"{what} scheduled in the past ({time_ms} < {self.now_ms})"
        self._sequence += 1
        heapq.heappush(
            self._heap, (time_ms, self._sequence, Event(time_ms, self._sequence, what, action))
        )

    def after(self, delay_ms: int, what: str, action: Callable[[], None]) -> None:
        self.at(self.now_ms + max(0, delay_ms), what, action)

    def run_next(self) -> bool:
        """Run the earliest event; False when none is left."""
        if not self._heap:
            return False
        _, _, event = heapq.heappop(self._heap)
        self.now_ms = event.time_ms
        self.note(event.what)
        event.action()
        return True

    def note(self, what: str) -> None:
        self.trace.append(f"t={self.now_ms} {what}")


class Network:
    def __init__(self, rng: random.Random, queue: EventQueue, settings: SimSettings) -> None:
        self.rng = rng
        self.queue = queue
        self.settings = settings
        # A broker cut from every other node, if any.
        self.isolated: int | None = None
        self.cut_links: set[frozenset[int]] = set()
        # Links with extra latency (ms) on every message, both ways (netem's delay).
        self.slow_links: dict[frozenset[int], int] = {}
        self.drop_probability = settings.drop_probability

    def connected(self, source: int, target: int) -> bool:
        if self.isolated is not None and self.isolated in (source, target):
            return False
        return frozenset((source, target)) not in self.cut_links

    def send(self, source: int, target: int, what: str, deliver: Callable[[], None]) -> None:
        """Deliver later unless the link is down now or then, or the message is dropped."""
        if not self.connected(source, target) or self.rng.random() < self.drop_probability:
            return
        delay = self.rng.randint(self.settings.min_delay_ms, self.settings.max_delay_ms)
        delay += self.slow_links.get(frozenset((source, target)), 0)

        def arrive() -> None:
            if self.connected(source, target):
                deliver()

        self.queue.after(delay, f"{source}->{target} {what}", arrive)

    def heal(self) -> None:
        self.isolated = None
        self.cut_links.clear()
        self.slow_links.clear()


# ---------------------------------------------------------------------------- simulated awaits


class Scheduler(Protocol):
    """Who runs a task's steps: a broker incarnation (its events die with it)."""

    def schedule(self, delay_ms: int, what: str, action: Callable[[], None]) -> None: ...


class SimFuture:
    """What a simulated await waits for: resolved once, with a value or an exception."""

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        self._on_done: Callable[[SimFuture], None] | None = None

    def resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        if self.done:
            return  # a late answer to a request that already timed out
        self.done, self.value, self.error = True, value, error
        if self._on_done is not None:
            self._on_done(self)

    def on_done(self, callback: Callable[[SimFuture], None]) -> None:
        """Call ``callback`` once resolved (at once if it already is); one callback only."""
        assert self._on_done is None, "a SimFuture has one waiter"
        self._on_done = callback
        if self.done:
            callback(self)

    def __await__(self) -> Generator[SimFuture, None, Any]:
        if not self.done:
            yield self
        if self.error is not None:
            raise self.error
        return self.value


class SimTask:
    """One coroutine stepped by the simulation: resumed when the future it waits on resolves.
    ``result`` resolves with what the coroutine returns."""

    def __init__(
        self,
        scheduler: Scheduler,
        name: str,
        start: Callable[[], Coroutine[Any, Any, Any]],
        after_step: Callable[[], None] = lambda: None,
    ) -> None:
        self.scheduler = scheduler
        self.name = name
        # Made at the first step: a task whose broker died first never creates its coroutine.
        self._start: Callable[[], Coroutine[Any, Any, Any]] | None = start
        self._coroutine: Coroutine[Any, Any, Any] | None = None
        self._after_step = after_step
        self.finished = False
        self.result = SimFuture()
        scheduler.schedule(0, f"{name} start", self._step)

    def _step(self) -> None:
        if self.finished:
            return
        if self._coroutine is None:
            assert self._start is not None
            self._coroutine, self._start = self._start(), None
        try:
            awaited = self._coroutine.send(None)
        except StopIteration as stop:
            self.finished = True
            self.result.resolve(stop.value)
            return
        finally:
            self._after_step()
        assert isinstance(awaited, SimFuture), f"{self.name} awaited {awaited!r}"
        awaited.on_done(lambda _: self._step())

    def stop(self) -> None:
        if not self.finished:
            self.finished = True
            if self._coroutine is not None:
                self._coroutine.close()
