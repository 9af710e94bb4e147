"""Heartbeats on their own thread (issue 18): a broker loop held by a long metadata apply does not
hold the heartbeats back, as Kafka's BrokerLifecycleManager (its own event-queue thread)
guarantees. A live fake controller on the heartbeat thread; no ports."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import pytest

from pykraft.broker.controller_client import BrokerRegistrationReply, HeartbeatReply
from pykraft.broker.heartbeat import BrokerIdentity, BrokerLifecycleManager
from pykraft.broker.heartbeat_thread import HeartbeatThread
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.broker.offline_log_dirs import NO_OFFLINE_LOG_DIRS, OfflineLogDirs
from pykraft.metadata.api.brokers import BrokerTopicCounters
from pykraft.metadata.records import BrokerEndpoint, BrokerFeature

INTERVAL_MS = 20
BROKER_EPOCH = 42
IDENTITY = BrokerIdentity(
    broker_id=10,
    incarnation_id="AAAAAAAAAAAAAAAAAAAAAA",
    endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092),),
)


class LiveController:
    """Answers like an active controller: caught up at the broker epoch, unfenced once asked.
    ``hold`` (when set) keeps each heartbeat answer until ``release`` is set."""

    def __init__(self) -> None:
        self.beats: list[tuple[float, int, str]] = []  # (monotonic s, offset, thread name)
        self.closed_on: str | None = None
        self.hold = threading.Event()
        self.release = threading.Event()
        self.in_flight = threading.Event()

    async def register_broker(
        self,
        *,
        broker_id: int,
        incarnation_id: str,
        endpoints: Sequence[BrokerEndpoint],
        rack: str | None,
        features: Sequence[BrokerFeature] = (),
        previous_broker_epoch: int = -1,
        deadline_s: float | None = None,
    ) -> BrokerRegistrationReply:
        return BrokerRegistrationReply(
            broker_id=broker_id,
            broker_epoch=BROKER_EPOCH,
            heartbeat_interval_ms=INTERVAL_MS,
            session_timeout_ms=INTERVAL_MS * 5,
        )

    async def heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        offline_log_dirs: OfflineLogDirs = NO_OFFLINE_LOG_DIRS,
        counters: BrokerTopicCounters | None = None,
        counters_sampled_ms: int | None = None,
        deadline_s: float | None = None,
    ) -> HeartbeatReply:
        self.beats.append(
            (time.monotonic(), current_metadata_offset, threading.current_thread().name)
        )
        if self.hold.is_set():
            self.in_flight.set()
            await asyncio.to_thread(self.release.wait, 5)
        return HeartbeatReply(
            is_caught_up=current_metadata_offset >= broker_epoch,
            is_fenced=want_fence,
            in_controlled_shutdown=want_shut_down,
            should_shut_down=want_shut_down,
        )

    async def close(self) -> None:
        self.closed_on = threading.current_thread().name


class Broker:
    def __init__(self, controller: LiveController) -> None:
        self.offset = BROKER_EPOCH
        self.lifecycle = BrokerLifecycle(BrokerState.STARTING)
        self.manager = BrokerLifecycleManager(
            controller,
            IDENTITY,
            self.lifecycle,
            lambda: self.offset,
            heartbeat_interval_ms=INTERVAL_MS,
        )
        self.thread = HeartbeatThread(self.manager, lambda: controller)

    async def until_running(self) -> None:
        async with asyncio.timeout(5):
            await self.manager.caught_up.wait()
            self.manager.set_ready_to_unfence()
            await self.manager.unfenced.wait()


def test_heartbeats_go_on_while_the_broker_loop_is_held() -> None:
    asyncio.run(_heartbeats_go_on_while_the_broker_loop_is_held())


async def _heartbeats_go_on_while_the_broker_loop_is_held() -> None:
    controller = LiveController()
    broker = Broker(controller)
    broker.thread.start()
    await broker.until_running()
    assert broker.lifecycle.state is BrokerState.RUNNING
    # A metadata apply that holds the loop for 25 heartbeat intervals (the broker's session is
    # 5): on the loop, no heartbeat would go out until it ends.
    broker.offset = 7_000
    held_from = time.monotonic()
    time.sleep(INTERVAL_MS * 25 / 1000)
    held_until = time.monotonic()
    during = [beat for beat in controller.beats if held_from <= beat[0] <= held_until]
    assert len(during) >= 5, during
    assert {offset for _, offset, _ in during} == {7_000}  # the offset applied, read live
    assert all(name == "broker-10-heartbeats" for _, _, name in controller.beats)
    # Controlled shutdown: the answer comes on the thread, the event on this loop.
    assert await broker.manager.controlled_shutdown(5.0)
    assert broker.manager.lifecycle.state is BrokerState.SHUTTING_DOWN
    async with asyncio.timeout(5):
        await broker.thread.wait()  # run ended (SHUTTING_DOWN), its client closed there
    assert controller.closed_on == "broker-10-heartbeats"


def test_an_answer_after_stop_moves_nothing() -> None:
    asyncio.run(_an_answer_after_stop_moves_nothing())


async def _an_answer_after_stop_moves_nothing() -> None:
    controller = LiveController()
    broker = Broker(controller)
    broker.thread.start()
    async with asyncio.timeout(5):
        await broker.manager.caught_up.wait()
    assert broker.lifecycle.state is BrokerState.RECOVERY
    controller.hold.set()
    broker.manager.set_ready_to_unfence()  # the next answer would unfence: RECOVERY -> RUNNING
    await asyncio.to_thread(controller.in_flight.wait, 5)
    broker.thread.stop()
    controller.release.set()
    async with asyncio.timeout(5):
        await broker.thread.wait()
    assert broker.lifecycle.state is BrokerState.RECOVERY
    assert not broker.manager.unfenced.is_set()
    broker.lifecycle.become(BrokerState.SHUTTING_DOWN)  # the broker's own step, never raced


def test_a_failure_on_the_thread_is_raised_to_the_broker() -> None:
    asyncio.run(_a_failure_on_the_thread_is_raised_to_the_broker())


async def _a_failure_on_the_thread_is_raised_to_the_broker() -> None:
    controller = LiveController()
    lifecycle = BrokerLifecycle(BrokerState.STARTING)
    manager = BrokerLifecycleManager(
        controller, IDENTITY, lifecycle, lambda: 0, heartbeat_interval_ms=INTERVAL_MS
    )

    def no_client() -> LiveController:
        raise OSError("cannot build the client")

    thread = HeartbeatThread(manager, no_client)
    thread.start()
    with pytest.raises(OSError, match="cannot build the client"):
        async with asyncio.timeout(5):
            await thread.wait()
