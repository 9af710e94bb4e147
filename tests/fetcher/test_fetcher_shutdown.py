"""Stopping a ReplicaFetcher when its cancellation races a wake-up.

Python 3.11's ``asyncio.wait_for`` awaits in a task of its own; when the caller is cancelled in
the loop turn after that task finished (the awaited event was set just before), it returns the
result instead of raising CancelledError (CPython gh-86296 / bpo-42130). The fetchers' clock
wait (``MonotonicClock.wait``, now ``storage.system_clock.SystemClock.wait``) was built on it,
and so are the leader endpoint's request timeouts: a fetcher retired as its leader answered
(both follow the same leadership change) kept running,
``ReplicaFetcherManager.shutdown`` never returned, and most broker shutdowns waited out
``broker.server.SHUTDOWN_STEP_TIMEOUT_S`` (5 s) for it.

The races are staged step by step with zero-length yields (``asyncio.sleep(0)``), so they happen
on every run; nothing sleeps, and the real timeouts (seconds) never expire within a test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from pykraft.fetcher.fetcher_config import FetcherConfig, PartitionStart
from pykraft.fetcher.follower_log import ReplicaLog
from pykraft.fetcher.leader_codecs import LeaderFeatures
from pykraft.fetcher.leader_endpoint import ReplicaFetch
from pykraft.fetcher.replica_fetcher import ReplicaFetcher
from pykraft.fetcher.state import FetchState
from pykraft.protocol.fetch import PartitionData
from pykraft.storage.clock import Clock
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.system_clock import SystemClock
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock
from tests.fetcher.fake_leader import MODERN, FakeLeaderEndpoint, open_log

T0 = TopicPartition("t", 0)
# Far beyond the few loop turns a test takes: the timeout never fires in these tests.
BACKOFF_MS = 60_000
# Loop turns a stopping task gets to finish; a working stop needs two or three.
MAX_TURNS = 20


async def turns(task: asyncio.Future[Any], limit: int = MAX_TURNS) -> None:
    """Yield to the loop until ``task`` is done, at most ``limit`` times."""
    for _ in range(limit):
        if task.done():
            return
        await asyncio.sleep(0)


async def reap(task: asyncio.Future[Any]) -> None:
    """Stop a task a failed assertion left behind (a second cancel meets no race)."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_system_clock_wait_is_cancelled_when_the_cancel_follows_the_wakeup() -> None:
    # The fetcher's idle loop: clear the wake-up event, wait for it with a timeout, repeat.
    clock = SystemClock()
    wakeup = asyncio.Event()

    async def idle_loop() -> None:
        while True:
            wakeup.clear()
            await clock.wait(wakeup, BACKOFF_MS)

    async def scenario() -> tuple[bool, bool]:
        loop_task = asyncio.ensure_future(idle_loop())
        await asyncio.sleep(0)  # the loop is now waiting on the event
        wakeup.set()  # add_partitions wakes the fetcher...
        await asyncio.sleep(0)  # ...the event's waiter runs (wait_for's inner task finishes)...
        accepted = loop_task.cancel()  # ...and the shutdown's cancel arrives in the next turn
        await turns(loop_task)
        stopped = loop_task.done() and loop_task.cancelled()
        if not loop_task.done():
            await reap(loop_task)
        return accepted, stopped

    accepted, stopped = asyncio.run(scenario())
    assert accepted
    assert stopped, "the cancellation was swallowed and the loop kept waiting"


def test_system_clock_wait_returns_on_the_event_or_at_once_for_a_past_deadline() -> None:
    clock = SystemClock()

    async def scenario() -> None:
        event = asyncio.Event()
        event.set()
        await clock.wait(event, BACKOFF_MS)  # already set: no waiting
        await clock.wait(asyncio.Event(), 0)  # deadline now: times out without raising
        await clock.wait(asyncio.Event(), -5)  # deadline passed: the same

    asyncio.run(scenario())


def backed_off_fetcher(tmp_path: Path, clock: Clock) -> tuple[ReplicaFetcher, PartitionLog]:
    """A fetcher whose one partition is DELAYED: its first ApiVersions fails, so ``run``
    idles in ``clock.wait`` with the back-off as timeout."""
    log = open_log(tmp_path / T0.dir_name())
    endpoint = FakeLeaderEndpoint(1, {}, failures=1)
    fetcher = ReplicaFetcher(
        0,
        endpoint,
        lambda tp: cast(ReplicaLog, log) if tp == T0 else None,
        FetcherConfig(replica_id=2, fetch_backoff_ms=BACKOFF_MS),
        clock=clock,
    )
    fetcher.add_partitions({T0: PartitionStart(None, 1)})
    return fetcher, log


def test_a_fetcher_stops_when_shutdown_races_a_partition_change(tmp_path: Path) -> None:
    # ReplicaFetcherManager: a partition is re-added (waking the fetcher), then the fetcher is
    # retired in the next loop turn — the manager's shutdown must not hang on it.
    fetcher, log = backed_off_fetcher(tmp_path, SystemClock())

    async def scenario() -> bool:
        fetcher.start()
        await asyncio.sleep(0)  # round 1: ApiVersions fails, the partition backs off
        assert fetcher.partition_states[T0].state is FetchState.DELAYED
        fetcher.add_partitions({T0: PartitionStart(None, 1)})  # same epoch: stays DELAYED
        await asyncio.sleep(0)
        stopping = asyncio.ensure_future(fetcher.shutdown())
        await turns(stopping)
        stopped = stopping.done()
        if not stopped:
            await reap(stopping)
        return stopped

    try:
        assert asyncio.run(scenario()), "ReplicaFetcher.shutdown hung"
        assert cast(FakeLeaderEndpoint, fetcher.endpoint).closed
    finally:
        log.close()


class CancelSwallowingClock(FakeClock):
    """A clock whose wait loses the first cancellation, as any 3.11 ``wait_for`` on the
    fetcher's path can (the leader endpoint's request timeouts use it too)."""

    def __init__(self) -> None:
        super().__init__()
        self.swallowed = 0

    async def wait(self, event: asyncio.Event, timeout_ms: int | None) -> None:
        try:
            await event.wait()
        except asyncio.CancelledError:
            if self.swallowed:
                raise
            self.swallowed += 1


def test_the_stop_flag_ends_the_fetcher_even_when_a_cancellation_is_lost(
    tmp_path: Path,
) -> None:
    # Kafka's ShutdownableThread: initiateShutdown flips isRunning, which doWork's loop checks,
    # so a lost interrupt cannot keep the thread alive.
    clock = CancelSwallowingClock()
    fetcher, log = backed_off_fetcher(tmp_path, clock)

    async def scenario() -> bool:
        fetcher.start()
        await asyncio.sleep(0)  # idle in clock.wait
        stopping = asyncio.ensure_future(fetcher.shutdown())
        await turns(stopping)
        stopped = stopping.done()
        if not stopped:
            await reap(stopping)
        return stopped

    try:
        assert asyncio.run(scenario()), "ReplicaFetcher.shutdown hung"
        assert clock.swallowed == 1
    finally:
        log.close()


class CancelSwallowingEndpoint(FakeLeaderEndpoint):
    """A leader whose ApiVersions completes in the loop turn the cancellation arrives (the
    cancel is lost, as in ``KafkaLeaderEndpoint``'s ``wait_for``) and whose Fetch long-polls
    until cancelled."""

    async def features(self) -> LeaderFeatures:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.requests.append("ApiVersions (cancel lost)")
        return MODERN

    async def fetch(self, request: ReplicaFetch) -> dict[TopicPartition, PartitionData]:
        self.requests.append("Fetch")
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_cancellation_lost_inside_a_request_ends_the_round_before_the_next_one(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / T0.dir_name())
    endpoint = CancelSwallowingEndpoint(1, {})
    fetcher = ReplicaFetcher(
        0,
        endpoint,
        lambda tp: cast(ReplicaLog, log) if tp == T0 else None,
        FetcherConfig(replica_id=2),
        clock=SystemClock(),
    )
    fetcher.add_partitions({T0: PartitionStart(None, 1)})

    async def scenario() -> bool:
        fetcher.start()
        await asyncio.sleep(0)  # round 1 waits for ApiVersions
        stopping = asyncio.ensure_future(fetcher.shutdown())
        await turns(stopping)
        stopped = stopping.done()
        if not stopped:
            await reap(stopping)
        return stopped

    try:
        assert asyncio.run(scenario()), "ReplicaFetcher.shutdown hung in the Fetch long poll"
        assert endpoint.requests == ["ApiVersions (cancel lost)"]
    finally:
        log.close()
