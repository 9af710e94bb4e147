"""The controller process's timer (quorum/runner.py) runs the timed operations when
``QuorumController.next_deadline_ms`` says they are due, within its named bounds — not on a
fixed period. Driven on a fake clock: each wait moves time instead of sleeping."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import TypeVar, cast

import pytest
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from pykraft.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
)
from pykraft.quorum.broker_channels import BrokerChannels
from pykraft.quorum.controller import ControllerSettings, QuorumController
from pykraft.quorum.metadata_view import MetadataView
from pykraft.quorum.node import Operation, ServiceError
from pykraft.quorum.runner import (
    TIMER_MAX_DELAY_MS,
    TIMER_MIN_DELAY_MS,
    run_timer,
    timer_delay_ms,
    wake_on_connection_lost,
)
from tests.fake_clock import FakeClock
from tests.quorum.helpers import apply, endpoint, image_with, incarnation

T = TypeVar("T")


@pytest.mark.parametrize(
    ("deadline_ms", "now_ms", "expected_ms"),
    [
        (1_200, 1_000, 200),  # due later: wait for it
        (1_003, 1_000, TIMER_MIN_DELAY_MS),  # too close to wait for exactly: never spin
        (900, 1_000, TIMER_MIN_DELAY_MS),  # already past (a write that failed): never spin
        (61_000, 1_000, TIMER_MAX_DELAY_MS),  # far off: look again, never stall
        (1_000 + TIMER_MAX_DELAY_MS, 1_000, TIMER_MAX_DELAY_MS),
    ],
)
def test_timer_delay(deadline_ms: int, now_ms: int, expected_ms: int) -> None:
    assert timer_delay_ms(deadline_ms, now_ms) == expected_ms


class TimedNode:
    """The active controller with its committed image, writing at the fake clock's time."""

    def __init__(
        self, clock: FakeClock, settings: ControllerSettings, brokers: dict[int, str] | None = None
    ) -> None:
        self.clock = clock
        self.view = MetadataView(window_records=100)
        self.image = image_with({1: "unfenced", 2: "unfenced"} if brokers is None else brokers)
        self.controller = QuorumController(
            rng=random.Random(1), now_ms=clock.now_ms, settings=settings
        )
        self.leader = True
        self.settings = settings
        self.term = self.controller_term = 1
        self.written: list[tuple[int, MetadataRecord]] = []
        self.broker_channels = BrokerChannels()

    def is_leader(self) -> bool:
        return self.leader

    def next_deadline_ms(self) -> int:
        return self.controller.next_deadline_ms(self.image)

    def active_controller(self) -> QuorumController:
        # ControllerNode.active_controller's contract: a new term, a new controller and no
        # connections watched from before.
        if self.term != self.controller_term:
            self.controller = QuorumController(
                rng=random.Random(1), now_ms=self.clock.now_ms, settings=self.settings
            )
            self.controller_term = self.term
            self.broker_channels.clear()
        return self.controller

    async def write(self, operation: Operation[T]) -> T:
        outcome = operation(self.controller, self.image, self.clock.now_ms)
        self.image = apply(self.image, outcome.records)
        self.written.extend((self.clock.now_ms, record) for record in outcome.records)
        return outcome.response

    def unfence_new_broker(self, broker_id: int) -> None:
        """A broker registers and is unfenced by its first heartbeat: the log moves."""
        epoch = self.image.offset + 1
        self.image = apply(
            self.image,
            [
                RegisterBrokerRecord(
                    broker_id=broker_id,
                    incarnation_id=incarnation(broker_id),
                    broker_epoch=epoch,
                    end_points=(endpoint(broker_id),),
                ),
                BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=-1),
            ],
        )
        self.controller.sessions.register(broker_id, epoch, self.clock.now_ms)
        for observer in self.view.observers:
            observer(None)

    def heartbeat(self, broker_id: int) -> None:
        self.controller.sessions.touch(
            self.image.cluster.brokers[broker_id],
            self.clock.now_ms,
            metadata_offset=self.image.offset,
        )


async def run_until(
    node: TimedNode, clock: FakeClock, end_ms: int, rearm: asyncio.Event | None = None
) -> None:
    timer = asyncio.ensure_future(run_timer(node, clock, rearm))
    while clock.now_ms < end_ms:  # each of the timer's waits moves the clock and yields
        await asyncio.sleep(0)
        assert not timer.done()
    timer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await timer


def fencings(node: TimedNode) -> list[tuple[int, int]]:
    return [
        (at_ms, record.broker_id)
        for at_ms, record in node.written
        if isinstance(record, BrokerRegistrationChangeRecord) and record.fenced == 1
    ]


def test_a_broker_is_fenced_when_its_session_expires_not_a_fixed_period_later() -> None:
    # KIP-631: fenced once broker.session.timeout.ms passed without a heartbeat. The old timer
    # ran every metadata.max.idle.interval.ms / 2 (here 30 s) and fenced at 30,000.
    clock = FakeClock(now_ms=0)
    node = TimedNode(
        clock,
        ControllerSettings(broker_session_timeout_ms=9_000, metadata_max_idle_interval_ms=60_000),
    )
    clock.now_ms = 2_000
    node.heartbeat(2)
    asyncio.run(run_until(node, clock, 20_000))
    assert [broker for _, broker in fencings(node)] == [1, 2]
    (fenced_1_ms, _), (fenced_2_ms, _) = fencings(node)
    assert 9_001 <= fenced_1_ms <= 9_001 + TIMER_MIN_DELAY_MS
    assert 11_001 <= fenced_2_ms <= 11_001 + TIMER_MIN_DELAY_MS


class Connection:
    """What the controller keeps of a broker's long-poll connection: whether it is closing."""

    def __init__(self) -> None:
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed


def poll_closing_at_3_000(*, answered: bool) -> tuple[TimedNode, ArrivalClock]:
    """Broker 1's long poll watched on a connection that closes at 3,000 ms — while the poll
    waits, or after it was ``answered``; broker 2 heartbeats at 0 (9,000 ms sessions)."""
    connection = Connection()

    def arrive() -> None:
        connection.closed = True

    clock = ArrivalClock(3_000, arrive)
    node = TimedNode(
        clock,
        ControllerSettings(broker_session_timeout_ms=9_000, metadata_max_idle_interval_ms=100),
    )
    node.broker_channels.polled(1, node.image.cluster.brokers[1].epoch, connection)  # type: ignore[arg-type]
    if answered:
        node.broker_channels.answered(1, connection)  # type: ignore[arg-type]
    node.heartbeat(2)
    return node, clock


def test_a_broker_whose_connection_closed_is_fenced_a_second_later_not_at_its_session_end() -> None:
    # pykraft.broker.channel.closed.timeout.ms (1000): the timer notices the closed long-poll
    # connection on its next turn; broker 2's heartbeat keeps it in (its session ends at 11,000).
    node, clock = poll_closing_at_3_000(answered=False)
    asyncio.run(run_until(node, clock, 6_000))
    [(fenced_ms, broker)] = fencings(node)
    assert broker == 1
    assert 4_001 <= fenced_ms <= 4_001 + TIMER_MAX_DELAY_MS


def test_a_live_broker_whose_idle_connection_closed_keeps_its_session() -> None:
    # Issue 18: its poll was answered and the connection then closed in the broker's own pool
    # (keep-alive expiry, or lent to a call that timed out); the next poll comes late. Not a
    # dead process: fenced only at its session's end (9,000), not a second after the close.
    node, clock = poll_closing_at_3_000(answered=True)
    asyncio.run(run_until(node, clock, 9_000))
    assert fencings(node) == []
    asyncio.run(run_until(node, clock, 9_500))
    # With broker 2, silent as long (since 0).
    assert [broker for _, broker in fencings(node)] == [1, 2]
    assert all(9_001 <= at_ms <= 9_001 + TIMER_MAX_DELAY_MS for at_ms, _ in fencings(node))


EXITED_GRACE_MS = 200  # pykraft.broker.exited.grace.ms


def test_a_lost_connection_wakes_the_timer_and_an_exited_broker_is_fenced_after_the_grace() -> None:
    # Issue 18: broker 1 is killed at 2,900; the kernel closes its long poll's and its idle
    # heartbeat's connections, and the server's connection_lost sets the timer's re-arm event
    # (runner.wake_on_connection_lost). The timer looks at once, sees both closed (an exit) and
    # fences when pykraft.broker.exited.grace.ms passed — before: on its next periodic turn
    # (3,000 here, up to TIMER_MAX_DELAY_MS late) plus pykraft.broker.channel.closed.timeout.ms.
    poll, heartbeat = Connection(), Connection()
    rearm = asyncio.Event()

    def arrive() -> None:
        poll.closed = heartbeat.closed = True
        rearm.set()

    clock = ArrivalClock(2_900, arrive)
    node = TimedNode(
        clock,
        ControllerSettings(broker_session_timeout_ms=9_000, metadata_max_idle_interval_ms=60_000),
    )
    epoch = node.image.cluster.brokers[1].epoch
    node.broker_channels.polled(1, epoch, poll)  # type: ignore[arg-type]
    node.broker_channels.heartbeat_arrived(1, epoch, heartbeat)  # type: ignore[arg-type]
    node.broker_channels.heartbeat_answered(1, heartbeat)  # type: ignore[arg-type]
    node.heartbeat(2)
    asyncio.run(run_until(node, clock, 4_000, rearm))
    [(fenced_ms, broker)] = fencings(node)
    assert broker == 1
    exited_ms = 2_900 + EXITED_GRACE_MS + 1
    assert exited_ms <= fenced_ms <= exited_ms + TIMER_MIN_DELAY_MS


class SlowWriteNode(TimedNode):
    """A node whose next write, once ``during_next_write`` is set, takes 10 ms, in which that
    happens (as a write waits for the write lock and the Raft commit)."""

    def __init__(self, clock: FakeClock, settings: ControllerSettings) -> None:
        super().__init__(clock, settings, {1: "unfenced", 2: "unfenced", 3: "unfenced"})
        self.during_next_write: Callable[[], None] | None = None

    async def write(self, operation: Operation[T]) -> T:
        during, self.during_next_write = self.during_next_write, None
        if during is not None:
            self.clock.now_ms += 10
            during()
        return await super().write(operation)


def test_a_connection_lost_during_a_write_of_the_timer_wakes_its_next_turn() -> None:
    # Brokers 1 and 2 killed 10 ms apart: broker 2's closes arrive while the timer's turn waits
    # for its write marking broker 1's. Before, the turn cleared the wake-up when it ended and
    # looked again only at broker 1's fencing (its next deadline): broker 2 was marked 200 ms
    # late and fenced 200 ms after broker 1.
    connections = {b: (Connection(), Connection()) for b in (1, 2)}
    rearm = asyncio.Event()

    def kill(broker_id: int) -> None:
        poll, heartbeat = connections[broker_id]
        poll.closed = heartbeat.closed = True
        rearm.set()

    def kill_1_then_2() -> None:
        kill(1)
        node.during_next_write = lambda: kill(2)

    clock = ArrivalClock(2_900, kill_1_then_2)
    node = SlowWriteNode(
        clock,
        ControllerSettings(broker_session_timeout_ms=9_000, metadata_max_idle_interval_ms=60_000),
    )
    for broker_id, (poll, heartbeat) in connections.items():
        epoch = node.image.cluster.brokers[broker_id].epoch
        node.broker_channels.polled(broker_id, epoch, poll)  # type: ignore[arg-type]
        node.broker_channels.heartbeat_arrived(broker_id, epoch, heartbeat)  # type: ignore[arg-type]
        node.broker_channels.heartbeat_answered(broker_id, heartbeat)  # type: ignore[arg-type]
    node.heartbeat(3)
    asyncio.run(run_until(node, clock, 4_000, rearm))
    assert [broker for _, broker in fencings(node)] == [1, 2]
    (fenced_1_ms, _), (fenced_2_ms, _) = fencings(node)
    assert fenced_2_ms - fenced_1_ms <= 50


def test_connections_watched_in_an_earlier_term_do_not_count_in_a_new_one() -> None:
    # Leadership left and came back: the broker's idle heartbeat connection to us closed in
    # between (keep-alive expiry, or it moved to the new leader). Our new term starts with a full
    # session of grace (KIP-631), not a fence a second after its first timer turn.
    clock = FakeClock(now_ms=0)
    node = TimedNode(
        clock,
        ControllerSettings(broker_session_timeout_ms=9_000, metadata_max_idle_interval_ms=100),
    )
    connection = Connection()
    epoch = node.image.cluster.brokers[1].epoch
    node.broker_channels.heartbeat_arrived(1, epoch, connection)  # type: ignore[arg-type]
    node.broker_channels.heartbeat_answered(1, connection)  # type: ignore[arg-type]
    connection.closed = True
    node.term = 3
    clock.now_ms = 5_000
    node.heartbeat(2)
    node.controller.sessions.register(1, epoch, 0)
    asyncio.run(run_until(node, clock, 7_000))
    assert fencings(node) == []


def test_the_noop_is_written_when_the_log_was_idle_for_the_interval() -> None:
    clock = FakeClock(now_ms=0)
    node = TimedNode(
        clock,
        ControllerSettings(broker_session_timeout_ms=600_000, metadata_max_idle_interval_ms=2_500),
    )
    asyncio.run(run_until(node, clock, 6_000))
    noops = [at_ms for at_ms, record in node.written if isinstance(record, NoOpRecord)]
    assert len(noops) == 2
    assert 2_500 <= noops[0] <= 2_500 + TIMER_MIN_DELAY_MS
    assert 2_500 <= noops[1] - noops[0] <= 2_500 + TIMER_MIN_DELAY_MS


def test_a_standby_writes_nothing_and_looks_again_within_the_bound() -> None:
    clock = FakeClock(now_ms=0)
    node = TimedNode(
        clock,
        ControllerSettings(broker_session_timeout_ms=1_000, metadata_max_idle_interval_ms=500),
    )
    node.leader = False
    asyncio.run(run_until(node, clock, 5_000))
    assert node.written == []
    assert clock.now_ms <= 5_000 + TIMER_MAX_DELAY_MS


class ArrivalClock(FakeClock):
    """A fake clock on which something happens once, at ``arrive_at_ms``, during a wait."""

    def __init__(self, arrive_at_ms: int, arrive: Callable[[], None]) -> None:
        super().__init__(now_ms=0)
        self.arrive_at_ms = arrive_at_ms
        self.arrive: Callable[[], None] | None = arrive

    async def wait(self, event: asyncio.Event, timeout_ms: int | None) -> None:
        arrive = self.arrive
        if (
            arrive is not None
            and timeout_ms is not None
            and self.now_ms + timeout_ms >= self.arrive_at_ms
        ):
            self.now_ms, self.arrive = self.arrive_at_ms, None
            arrive()
        await super().wait(event, timeout_ms)


def test_a_session_that_starts_during_a_long_wait_re_arms_the_timer() -> None:
    # broker.session.timeout.ms under the timer's longest wait: the unfencing write wakes the
    # timer, which waits for the new session's expiry (1,500 + 100 + 1), not the wait's end.
    def arrive() -> None:
        node.unfence_new_broker(1)

    clock = ArrivalClock(1_500, arrive)
    node = TimedNode(
        clock,
        ControllerSettings(broker_session_timeout_ms=100, metadata_max_idle_interval_ms=60_000),
        {},
    )
    asyncio.run(run_until(node, clock, 3_000))
    [(fenced_ms, broker)] = fencings(node)
    assert broker == 1
    assert 1_601 <= fenced_ms <= 1_601 + TIMER_MIN_DELAY_MS


def test_leaders_return_to_preferred_replicas_at_the_check_interval() -> None:
    # auto.leader.rebalance.enable: after a full restart broker 1 leads everything; the timer
    # runs the PREFERRED elections one leader.imbalance.check.interval after the first write.
    clock = FakeClock(now_ms=0)
    node = TimedNode(
        clock,
        ControllerSettings(
            broker_session_timeout_ms=600_000,
            metadata_max_idle_interval_ms=1_000,
            leader_imbalance_check_interval_ms=5_000,
        ),
    )
    rotated = [(1, 2), (2, 1), (1, 2), (2, 1)]
    node.image = image_with(
        {1: "unfenced", 2: "unfenced"}, {"t": [(replicas, (1, 2), 1) for replicas in rotated]}
    )
    asyncio.run(run_until(node, clock, 8_000))
    elections = [
        (at_ms, record.partition_id, record.leader)
        for at_ms, record in node.written
        if isinstance(record, PartitionChangeRecord)
    ]
    assert [(partition, leader) for _, partition, leader in elections] == [(1, 2), (3, 2)]
    # The timer's first turn (at 0) is a write event (the fencing check, writing nothing):
    # balancing is due one interval later.
    assert all(5_000 <= at_ms <= 5_000 + TIMER_MIN_DELAY_MS for at_ms, _, _ in elections)
    topic = node.image.topics.by_name["t"]
    assert [topic.partitions[i].leader for i in range(4)] == [1, 2, 1, 2]


class FlakyBalanceNode(TimedNode):
    """A node whose first balancing write goes STALE (the write path runs the operation again
    over the newer image, as ``ControllerNode.write`` does) or fails (``ServiceError``)."""

    def __init__(self, clock: FakeClock, settings: ControllerSettings, failure: str) -> None:
        super().__init__(clock, settings)
        self.failure: str | None = failure

    async def write(self, operation: Operation[T]) -> T:
        outcome = operation(self.controller, self.image, self.clock.now_ms)
        balancing = any(isinstance(r, PartitionChangeRecord) for r in outcome.records)
        if balancing and self.failure == "stale":
            self.failure = None
            outcome = operation(self.controller, self.image, self.clock.now_ms)
        elif balancing and self.failure == "not controller":
            self.failure = None
            raise ServiceError(503, "NOT_CONTROLLER", "the leadership moved")
        self.image = apply(self.image, outcome.records)
        self.written.extend((self.clock.now_ms, record) for record in outcome.records)
        return outcome.response


def balanced_at(failure: str) -> list[int]:
    clock = FakeClock(now_ms=0)
    settings = ControllerSettings(
        broker_session_timeout_ms=600_000,
        metadata_max_idle_interval_ms=1_000,
        leader_imbalance_check_interval_ms=5_000,
    )
    node = FlakyBalanceNode(clock, settings, failure)
    node.image = image_with({1: "unfenced", 2: "unfenced"}, {"t": [((2, 1), (1, 2), 1)]})
    asyncio.run(run_until(node, clock, 9_000))
    assert node.image.topics.by_name["t"].partitions[0].leader == 2
    return [at_ms for at_ms, r in node.written if isinstance(r, PartitionChangeRecord)]


def test_a_balancing_write_retried_after_stale_still_balances() -> None:
    # Before: the first attempt marked the run done, the retry found nothing due and wrote
    # nothing; the partition waited a whole check interval more.
    [at_ms] = balanced_at("stale")
    assert 5_000 <= at_ms <= 5_000 + TIMER_MIN_DELAY_MS


def test_a_failed_balancing_write_runs_again_after_the_next_write() -> None:
    # The failed run comes back IMMEDIATELY after the next write (the NoOp, within the idle
    # interval), not leader.imbalance.check.interval later (at 10 s, past the end here).
    [at_ms] = balanced_at("not controller")
    assert 5_000 < at_ms <= 6_000 + 2 * TIMER_MIN_DELAY_MS + 10


def test_the_server_wakes_the_timer_when_a_connection_is_lost() -> None:
    # What the controller process installs on its aiohttp server (runner.serve): the server
    # still forgets the connection, and the timer's re-arm event is set.
    class Handler:
        _task_handler = None

    async def answer(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    async def scenario() -> None:
        server = web.Server(answer)
        wake = asyncio.Event()
        wake_on_connection_lost(server, wake)
        handler = cast(RequestHandler, Handler())
        server.connection_made(handler, cast(asyncio.Transport, object()))
        assert server.connections == [handler]
        assert not wake.is_set()
        server.connection_lost(handler, ConnectionResetError())
        assert server.connections == []
        assert wake.is_set()

    asyncio.run(scenario())
