"""Registration, heartbeats and controlled shutdown against a fake controller (no ports, no
sleeping): Kafka's BrokerLifecycleManager (server/src/main/java/org/apache/kafka/server/
BrokerLifecycleManager.java) and its BrokerLifecycleManagerTest scenarios."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import attrs
import pytest

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import BrokerRegistrationReply, HeartbeatReply
from pykraft.broker.heartbeat import (
    FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS,
    STARTING_HEARTBEAT_DELAY_MS,
    BrokerIdentity,
    BrokerLifecycleManager,
    HeartbeatDecision,
    heartbeat_decision,
)
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.offline_log_dirs import NO_OFFLINE_LOG_DIRS, OfflineLogDirs
from pykraft.metadata.api.brokers import BrokerTopicCounters
from pykraft.metadata.records import BrokerEndpoint, BrokerFeature
from tests.fake_clock import FakeClock

INTERVAL_MS = 2000
S = BrokerState


def reply(
    caught_up: bool = True,
    fenced: bool = True,
    in_shutdown: bool = False,
    should_shut_down: bool = False,
) -> HeartbeatReply:
    return HeartbeatReply(
        is_caught_up=caught_up,
        is_fenced=fenced,
        in_controlled_shutdown=in_shutdown,
        should_shut_down=should_shut_down,
    )


def check(
    state: BrokerState,
    answer: HeartbeatReply,
    expected: HeartbeatDecision,
    had_shutdown_reply: bool = False,
) -> None:
    assert heartbeat_decision(state, answer, INTERVAL_MS, had_shutdown_reply) == expected


def test_heartbeat_decisions() -> None:
    # STARTING: RECOVERY once caught up; 10 ms either way ("we start up a bit quicker").
    check(S.STARTING, reply(caught_up=False), HeartbeatDecision(None, STARTING_HEARTBEAT_DELAY_MS))
    check(S.STARTING, reply(caught_up=True), HeartbeatDecision(S.RECOVERY, 10))
    # RECOVERY: RUNNING once unfenced.
    check(S.RECOVERY, reply(fenced=True), HeartbeatDecision(None, INTERVAL_MS))
    check(S.RECOVERY, reply(fenced=False), HeartbeatDecision(S.RUNNING, INTERVAL_MS))
    # RUNNING: nothing changes, even if the controller fenced us (it unfences on the next beat).
    check(S.RUNNING, reply(fenced=False), HeartbeatDecision(None, INTERVAL_MS))
    check(S.RUNNING, reply(fenced=True), HeartbeatDecision(None, INTERVAL_MS))
    # PENDING_CONTROLLED_SHUTDOWN: 50 ms after the first answer, then the interval.
    check(
        S.PENDING_CONTROLLED_SHUTDOWN,
        reply(fenced=False, in_shutdown=True),
        HeartbeatDecision(None, FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS),
    )
    check(
        S.PENDING_CONTROLLED_SHUTDOWN,
        reply(fenced=False, in_shutdown=True),
        HeartbeatDecision(None, INTERVAL_MS),
        had_shutdown_reply=True,
    )
    check(
        S.PENDING_CONTROLLED_SHUTDOWN,
        reply(should_shut_down=True),
        HeartbeatDecision(S.SHUTTING_DOWN, INTERVAL_MS),
    )


@attrs.frozen
class Sent:
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool
    broker_epoch: int
    offline_log_dirs: OfflineLogDirs = NO_OFFLINE_LOG_DIRS
    counters: BrokerTopicCounters | None = None
    counters_sampled_ms: int | None = None


class FakeController:
    """Scripted answers; a ControllerError in the script is raised instead of answered."""

    def __init__(
        self,
        registrations: Sequence[BrokerRegistrationReply | ControllerError],
        heartbeats: Sequence[HeartbeatReply | ControllerError],
    ) -> None:
        self.registrations = list(registrations)
        self.heartbeats = list(heartbeats)
        self.registered: list[tuple[int, str, tuple[BrokerEndpoint, ...]]] = []
        self.previous_broker_epochs: list[int] = []
        self.sent: list[Sent] = []

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
        self.registered.append((broker_id, incarnation_id, tuple(endpoints)))
        self.previous_broker_epochs.append(previous_broker_epoch)
        answer = self.registrations.pop(0)
        if isinstance(answer, ControllerError):
            raise answer
        return answer

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
        self.sent.append(
            Sent(
                current_metadata_offset,
                want_fence,
                want_shut_down,
                broker_epoch,
                offline_log_dirs,
                counters,
                counters_sampled_ms,
            )
        )
        answer = self.heartbeats.pop(0)
        if isinstance(answer, ControllerError):
            raise answer
        return answer


IDENTITY = BrokerIdentity(
    broker_id=10,
    incarnation_id="AAAAAAAAAAAAAAAAAAAAAA",
    endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092),),
)
REGISTERED = BrokerRegistrationReply(
    broker_id=1, broker_epoch=42, heartbeat_interval_ms=INTERVAL_MS, session_timeout_ms=9000
)


class Harness:
    """Drives the manager with a fake wait that records delays and runs a hook per wait."""

    def __init__(
        self,
        controller: FakeController,
        metadata_offset: int = 41,
        identity: BrokerIdentity = IDENTITY,
    ) -> None:
        self.controller = controller
        self.lifecycle = BrokerLifecycle(BrokerState.STARTING)
        self.metadata_offset = metadata_offset
        self.delays: list[float] = []
        self.hooks: dict[int, list[object]] = {}
        self.manager = BrokerLifecycleManager(
            controller,
            identity,
            self.lifecycle,
            lambda: self.metadata_offset,
            heartbeat_interval_ms=INTERVAL_MS,
            wait=self.wait,
        )

    async def wait(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)  # yield to the scenario, as a real wait would (no time passes)
        # The broker reacts to states like BrokerServer does.
        if self.lifecycle.state is BrokerState.RECOVERY:
            self.manager.set_ready_to_unfence()
        if not self.controller.heartbeats:
            self.manager.stop()

    def run(self) -> None:
        asyncio.run(asyncio.wait_for(self.manager.run(), timeout=5))


def test_registers_then_heartbeats_to_running() -> None:
    controller = FakeController(
        [REGISTERED],
        [
            reply(caught_up=False),
            reply(caught_up=True),
            reply(fenced=True),
            reply(fenced=False),
            reply(fenced=False),
        ],
    )
    harness = Harness(controller)
    harness.run()
    assert controller.registered == [(10, IDENTITY.incarnation_id, IDENTITY.endpoints)]
    assert controller.previous_broker_epochs == [-1]  # KIP-966: no clean shutdown known
    assert harness.lifecycle.state is BrokerState.RUNNING
    assert harness.manager.caught_up.is_set() and harness.manager.unfenced.is_set()
    # Asks to stay fenced until ready, carries the metadata offset and the broker epoch.
    assert [s.want_fence for s in controller.sent] == [True, True, False, False, False]
    assert {(s.current_metadata_offset, s.broker_epoch) for s in controller.sent} == {(41, 42)}
    # First beat right after registering, 10 ms while STARTING, then the interval.
    assert harness.delays[:3] == [0.0, 0.01, 0.01]
    assert harness.delays[3:] == [2.0, 2.0, 2.0]


def test_registration_sends_the_epoch_of_the_last_clean_shutdown() -> None:
    # KIP-966 PreviousBrokerEpoch, read from the clean-shutdown markers, on every attempt.
    busy = ControllerError("REQUEST_TIMED_OUT", "no controller answered")
    controller = FakeController([busy, REGISTERED], [reply(caught_up=False)])
    Harness(controller, identity=attrs.evolve(IDENTITY, previous_broker_epoch=7)).run()
    assert controller.previous_broker_epochs == [7, 7]


def test_registration_is_retried_every_interval_until_the_old_session_expires() -> None:
    # After kill -9 the previous incarnation's session is still alive for a while.
    duplicate = ControllerError(
        "DUPLICATE_BROKER_REGISTRATION", "Another broker is registered with that broker id."
    )
    controller = FakeController([duplicate, duplicate, REGISTERED], [reply(caught_up=False)])
    harness = Harness(controller)
    harness.run()
    assert len(controller.registered) == 3
    assert len({incarnation for _, incarnation, _ in controller.registered}) == 1
    assert harness.delays[:2] == [2.0, 2.0]
    assert harness.manager.broker_epoch == 42


def test_heartbeat_failures_are_retried_after_the_interval() -> None:
    timeout = ControllerError("REQUEST_TIMED_OUT", "no controller answered")
    controller = FakeController([REGISTERED], [timeout, reply(caught_up=True)])
    harness = Harness(controller)
    harness.run()
    assert harness.delays[:2] == [0.0, 2.0]
    assert harness.lifecycle.state is BrokerState.RECOVERY


def test_controlled_shutdown_waits_for_should_shut_down() -> None:
    controller = FakeController(
        [REGISTERED],
        [
            reply(fenced=False),
            reply(fenced=False, in_shutdown=True),
            reply(fenced=False, in_shutdown=True),
            reply(should_shut_down=True),
        ],
    )
    harness = Harness(controller)
    harness.lifecycle = BrokerLifecycle(BrokerState.RUNNING)
    harness.manager.lifecycle = harness.lifecycle
    harness.manager.set_ready_to_unfence()

    async def scenario() -> bool:
        runner = asyncio.ensure_future(harness.manager.run())
        await asyncio.sleep(0)
        allowed = await harness.manager.controlled_shutdown(timeout_s=5)
        await asyncio.wait_for(runner, timeout=5)
        return allowed

    assert asyncio.run(scenario())
    assert harness.lifecycle.state is BrokerState.SHUTTING_DOWN
    assert [s.want_shut_down for s in controller.sent][-3:] == [True, True, True]
    assert FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS / 1000 in harness.delays


def test_shutdown_before_running_skips_the_controlled_phase() -> None:
    # Kafka: "Skipping controlled shutdown because we are in state RECOVERY".
    harness = Harness(FakeController([REGISTERED], []))
    harness.lifecycle.become(BrokerState.RECOVERY)
    assert harness.manager.begin_controlled_shutdown() is False
    assert harness.lifecycle.state is BrokerState.SHUTTING_DOWN
    assert harness.manager.shutdown_allowed.is_set()
    assert asyncio.run(harness.manager.controlled_shutdown(timeout_s=5)) is True


def test_an_unconfirmed_controlled_shutdown_times_out_into_shutting_down() -> None:
    harness = Harness(FakeController([REGISTERED], []))
    harness.lifecycle.become(BrokerState.RECOVERY)
    harness.lifecycle.become(BrokerState.RUNNING)

    async def scenario() -> bool:
        return await harness.manager.controlled_shutdown(timeout_s=0)

    assert asyncio.run(scenario()) is False
    assert harness.lifecycle.state is BrokerState.SHUTTING_DOWN


@pytest.mark.parametrize("state", [BrokerState.SHUTTING_DOWN, BrokerState.NOT_RUNNING])
def test_a_second_shutdown_request_returns_at_once(state: BrokerState) -> None:
    harness = Harness(FakeController([REGISTERED], []))
    harness.lifecycle = BrokerLifecycle(state)
    harness.manager.lifecycle = harness.lifecycle
    assert asyncio.run(harness.manager.controlled_shutdown(timeout_s=60)) is True


FAILED_DIR = OfflineLogDirs(
    directory_ids=("AAAAAAAAAAAAAAAAAAAD6A",), replicas=(("AAAAAAAAAAAAAAAAAAAAAg", 0),)
)


def test_every_heartbeat_reports_the_offline_log_dirs_of_its_time() -> None:
    # KIP-858: BrokerHeartbeat v1 OfflineLogDirs, read when each heartbeat is sent.
    controller = FakeController([REGISTERED], [reply(fenced=False)] * 3)
    harness = Harness(controller)
    harness.lifecycle = BrokerLifecycle(BrokerState.RUNNING)
    harness.manager.lifecycle = harness.lifecycle
    reports = iter([NO_OFFLINE_LOG_DIRS, FAILED_DIR, FAILED_DIR])
    harness.manager = BrokerLifecycleManager(
        controller,
        IDENTITY,
        harness.lifecycle,
        lambda: 41,
        heartbeat_interval_ms=INTERVAL_MS,
        wait=harness.wait,
        offline_log_dirs=lambda: next(reports),
    )
    harness.run()
    assert [s.offline_log_dirs for s in controller.sent] == [
        NO_OFFLINE_LOG_DIRS,
        FAILED_DIR,
        FAILED_DIR,
    ]


@pytest.mark.parametrize("wake", ["propagate_directory_failure", "call_in_now"])
def test_a_wake_up_heartbeats_at_once(wake: str) -> None:
    # Kafka's BrokerLifecycleManager.propagateDirectoryFailure: no waiting for the interval.
    # call_in_now: a failed metadata poll closed its connection, and the active controller ends
    # the session pykraft.broker.channel.closed.timeout.ms later unless the broker calls in.
    controller = FakeController([REGISTERED], [reply(fenced=False)] * 2)
    lifecycle = BrokerLifecycle(BrokerState.RUNNING)
    manager = BrokerLifecycleManager(
        controller,
        IDENTITY,
        lifecycle,
        lambda: 41,
        heartbeat_interval_ms=60_000,
        offline_log_dirs=lambda: FAILED_DIR,
    )

    async def scenario() -> None:
        runner = asyncio.ensure_future(manager.run())
        while len(controller.sent) < 1:  # the first heartbeat goes at once after registering
            await asyncio.sleep(0)
        getattr(manager, wake)()  # the 60 s interval is not waited for
        while len(controller.sent) < 2:
            await asyncio.sleep(0)
        manager.stop()
        await runner

    asyncio.run(asyncio.wait_for(scenario(), timeout=5))
    assert [s.offline_log_dirs for s in controller.sent] == [FAILED_DIR, FAILED_DIR]


def test_every_heartbeat_carries_the_broker_topic_counters_of_its_time() -> None:
    # Issue 16: the active controller's console turns these into live rates.
    controller = FakeController([REGISTERED], [reply(fenced=False)] * 2)
    metrics = BrokerMetrics()
    clock = FakeClock(5_000)
    manager = BrokerLifecycleManager(
        controller,
        IDENTITY,
        BrokerLifecycle(BrokerState.RUNNING),
        lambda: 41,
        heartbeat_interval_ms=60_000,
        counters=metrics.heartbeat_counters,
        monotonic_ms=clock.monotonic_ms,
    )

    async def scenario() -> None:
        runner = asyncio.ensure_future(manager.run())
        while len(controller.sent) < 1:
            await asyncio.sleep(0)
        metrics.broker_topic_stats.record_append("t", 300, 4)
        metrics.broker_topic_stats.record_bytes_out("t", 120, follower=False)
        metrics.broker_topic_stats.record_bytes_out("t", 80, follower=True)
        metrics.broker_topic_stats.record_replication_bytes_in(50)
        metrics.record_request(1, 16, 0.001)  # a Fetch
        metrics.record_request(0, 9, 0.001)  # a Produce: not a fetch
        clock.now_ms += 1_234
        manager.propagate_directory_failure()  # heartbeat now
        while len(controller.sent) < 2:
            await asyncio.sleep(0)
        manager.stop()
        await runner

    asyncio.run(asyncio.wait_for(scenario(), timeout=5))
    assert [s.counters for s in controller.sent] == [
        BrokerTopicCounters(),
        BrokerTopicCounters(
            messages_in=4,
            bytes_in=300,
            bytes_out=120,
            replication_bytes_in=50,
            replication_bytes_out=80,
            fetch_requests=1,
        ),
    ]
    # Review 2: each with the broker's own time of reading them, for the controller's rates.
    assert [s.counters_sampled_ms for s in controller.sent] == [5_000, 6_234]
