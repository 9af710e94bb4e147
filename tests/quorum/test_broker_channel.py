"""A dead broker process is fenced after ``pykraft.broker.channel.closed.timeout.ms``, a silent one
after ``broker.session.timeout.ms`` (quorum/managers/sessions.py, issue 18).

The active controller hears of a closed metadata long-poll connection (``broker_channel_closed``)
and of every new long poll (``broker_channel_opened``); these tests drive the pure core with
those calls and the clock, as the service does. The last ones check which closed connections
``BrokerChannels`` reports: only those closed while a poll waited on them.
"""

from __future__ import annotations

import pytest

from pykraft.metadata.records import BrokerRegistrationChangeRecord, PartitionChangeRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.broker_channels import BrokerChannels, Closed
from pykraft.quorum.controller import BrokerHeartbeatRequest
from pykraft.quorum.managers.settings import ControllerSettings
from tests.quorum.helpers import Harness, image_with, partition, topic_id

SESSION_MS = 9000  # broker.session.timeout.ms
CLOSED_MS = 1000  # pykraft.broker.channel.closed.timeout.ms
EXITED_GRACE_MS = 200  # pykraft.broker.exited.grace.ms


def harness(closed_timeout_ms: int = CLOSED_MS) -> Harness:
    """Brokers 1 and 2 unfenced; partition t-0 led by 1 with ISR (1, 2); sessions from 0 ms."""
    image = image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1)]})
    settings = ControllerSettings(broker_channel_closed_timeout_ms=closed_timeout_ms)
    return Harness(image, now_ms=0, settings=settings)


def epoch(h: Harness, broker_id: int) -> int:
    return h.image.cluster.brokers[broker_id].epoch


def test_a_closed_channel_fences_the_broker_after_the_closed_timeout() -> None:
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    assert h.controller.sessions.next_expiry_ms(h.image) == 2000 + CLOSED_MS + 1
    assert h.controller.fence_stale_brokers(h.image, 2000 + CLOSED_MS).records == ()
    result = h.controller.fence_stale_brokers(h.image, 2000 + CLOSED_MS + 1)
    assert result.response == (1,)
    # The same batch as a session expiry: out of the ISR, leadership to the ISR's other member.
    assert result.records == (
        PartitionChangeRecord(partition_id=0, topic_id=topic_id("t"), isr=(2,), leader=2),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch(h, 1), fenced=1),
    )
    h.commit(result)
    assert partition(h.image, "t", 0).leader == 2
    # Broker 2 keeps its whole session.
    assert h.controller.fence_stale_brokers(h.image, SESSION_MS).records == ()


def test_the_first_close_counts_and_a_second_does_not_extend_it() -> None:
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2900)
    assert h.controller.fence_stale_brokers(h.image, 3001).response == (1,)


def test_a_new_long_poll_of_the_same_incarnation_keeps_the_broker() -> None:
    # A live broker whose connection dropped polls again at once.
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    h.controller.broker_channel_opened(h.image, 1, epoch(h, 1), 2050)
    assert h.controller.fence_stale_brokers(h.image, 5000).records == ()
    assert h.controller.fence_stale_brokers(h.image, SESSION_MS + 1).response == (1,)


def test_a_heartbeat_keeps_the_broker() -> None:
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    h.now_ms = 2500
    answer = h.run(
        BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch(h, 1), current_metadata_offset=0)
    )
    assert answer.error.code == Errors.NONE.code
    assert h.controller.fence_stale_brokers(h.image, 3001).records == ()
    # Broker 2 (silent since 0) is fenced at its session's end; broker 1 at 2500 + its session.
    h.commit(result := h.controller.fence_stale_brokers(h.image, SESSION_MS + 1))
    assert result.response == (2,)
    assert h.controller.fence_stale_brokers(h.image, 2500 + SESSION_MS).records == ()
    assert h.controller.fence_stale_brokers(h.image, 2500 + SESSION_MS + 1).response == (1,)


def test_a_heartbeat_counts_from_its_arrival_not_from_its_write() -> None:
    # The service calls broker_heartbeat_arrived before its write, which may wait behind a large
    # commit while the timer's fencing runs (Kafka's BrokerHeartbeatTracker).
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    h.controller.broker_heartbeat_arrived(h.image, 1, epoch(h, 1), 2500)
    assert h.controller.fence_stale_brokers(h.image, 3001).records == ()
    h.controller.broker_heartbeat_arrived(h.image, 2, epoch(h, 2), 8000)
    h.commit(result := h.controller.fence_stale_brokers(h.image, 2500 + SESSION_MS + 1))
    assert result.response == (1,)
    assert h.controller.fence_stale_brokers(h.image, 8000 + SESSION_MS).records == ()
    # Another incarnation's heartbeat is not this one's contact.
    h.controller.broker_heartbeat_arrived(h.image, 2, epoch(h, 2) + 7, 16_000)
    assert h.controller.fence_stale_brokers(h.image, 8000 + SESSION_MS + 1).response == (2,)


def test_a_closed_channel_of_another_incarnation_changes_nothing() -> None:
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1) + 7, 2000)
    h.controller.broker_channel_closed(h.image, 3, 0, 2000)  # not registered at all
    assert h.controller.fence_stale_brokers(h.image, 5000).records == ()


def test_an_open_channel_of_another_incarnation_does_not_cancel_the_close() -> None:
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    h.controller.broker_channel_opened(h.image, 1, epoch(h, 1) + 7, 2050)
    assert h.controller.fence_stale_brokers(h.image, 3001).response == (1,)


def exited(h: Harness, broker_id: int, now_ms: int) -> None:
    """Both connections of the broker closed, as when its process ends."""
    h.controller.broker_channel_closed(
        h.image, broker_id, epoch(h, broker_id), now_ms, poll_closed=True, heartbeat_closed=True
    )


def test_a_broker_whose_process_exited_is_fenced_once_the_grace_passed() -> None:
    # Issue 18: the kernel closed its long-poll and idle heartbeat connections together; the
    # closed timeout (a second) kept its partitions leaderless and every ISR it was in stalled.
    h = harness()
    exited(h, 1, 2000)
    assert h.controller.sessions.next_expiry_ms(h.image) == 2000 + EXITED_GRACE_MS + 1
    assert h.controller.fence_stale_brokers(h.image, 2000 + EXITED_GRACE_MS).records == ()
    assert h.controller.fence_stale_brokers(h.image, 2000 + EXITED_GRACE_MS + 1).response == (1,)
    assert h.controller.sessions.why_stale(h.image.cluster.brokers[1], 2201) == (
        "its process exited 201 ms ago (its long-poll and idle heartbeat connections closed), "
        "no heartbeat for 2201 ms"
    )


@pytest.mark.parametrize("call_in", ["poll", "heartbeat"])
def test_a_live_broker_whose_two_connections_a_middlebox_closed_keeps_its_session(
    call_in: str,
) -> None:
    # A proxy or load balancer closed both connections of a live broker: its poll fails, and it
    # heartbeats (MetadataLoader.run's on_failure) and polls again within a few tens of ms.
    h = harness()
    exited(h, 1, 2000)
    assert h.controller.fence_stale_brokers(h.image, 2010).records == ()
    if call_in == "poll":
        h.controller.broker_channel_opened(h.image, 1, epoch(h, 1), 2030)
    else:
        h.controller.broker_heartbeat_arrived(h.image, 1, epoch(h, 1), 2030)
    assert h.controller.fence_stale_brokers(h.image, 2000 + CLOSED_MS + 1).records == ()


@pytest.mark.parametrize("call_in", ["poll", "heartbeat"])
def test_a_close_seen_before_a_call_in_does_not_count_when_marked_after_it(call_in: str) -> None:
    # runner.watch_broker_channels saw the closes at 2000, then its mark waited for the write
    # lock; the broker's call-in (not behind the lock) landed at 2005, the mark at 2010.
    h = harness()
    if call_in == "poll":
        h.controller.broker_channel_opened(h.image, 1, epoch(h, 1), 2005)
    else:
        h.controller.broker_heartbeat_arrived(h.image, 1, epoch(h, 1), 2005)
    exited(h, 1, 2000)
    assert h.controller.sessions.next_expiry_ms(h.image) == SESSION_MS + 1  # broker 2's
    assert h.controller.fence_stale_brokers(h.image, 2000 + CLOSED_MS + 1).records == ()
    # Nor one seen in the call-in's millisecond (which came first is unknown: taken as older).
    exited(h, 1, 2005)
    assert h.controller.fence_stale_brokers(h.image, 2000 + CLOSED_MS + 1).records == ()
    # A close seen after the call-in counts.
    exited(h, 1, 2006)
    assert h.controller.fence_stale_brokers(h.image, 2006 + EXITED_GRACE_MS + 1).response == (1,)


def test_a_close_seen_after_a_heartbeats_arrival_counts_when_its_write_comes_later() -> None:
    # The broker died with a heartbeat in flight: it arrived at 2000, its connections closed at
    # 2010, and its write (behind the write lock, at 2030) came before the timer's mark.
    h = harness()
    heartbeat = BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=epoch(h, 1), current_metadata_offset=0
    )
    h.controller.broker_heartbeat_arrived(h.image, 1, epoch(h, 1), 2000)
    h.controller.broker_heartbeat(h.image, heartbeat, 2030, received_ms=2000)
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2010)
    assert h.controller.fence_stale_brokers(h.image, 2010 + CLOSED_MS + 1).response == (1,)


def test_the_two_closes_count_when_seen_apart() -> None:
    # The idle heartbeat connection's close seen on one look, the poll's (idle in the broker's
    # pool: not suspect alone) on the next: exited then.
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000, heartbeat_closed=True)
    assert h.controller.sessions.next_expiry_ms(h.image) == 2000 + CLOSED_MS + 1
    h.controller.broker_channel_closed(
        h.image, 1, epoch(h, 1), 2100, suspect=False, poll_closed=True
    )
    assert h.controller.fence_stale_brokers(h.image, 2100 + EXITED_GRACE_MS).records == ()
    assert h.controller.fence_stale_brokers(h.image, 2100 + EXITED_GRACE_MS + 1).response == (1,)


@pytest.mark.parametrize("call_in", ["poll", "heartbeat"])
def test_a_call_in_between_the_two_closes_keeps_the_broker(call_in: str) -> None:
    # Alive after all (the first close was a middlebox's reset): the second close, of a pool's
    # idle connection, is not an exit.
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000, heartbeat_closed=True)
    if call_in == "poll":
        h.controller.broker_channel_opened(h.image, 1, epoch(h, 1), 2050)
    else:
        h.controller.broker_heartbeat_arrived(h.image, 1, epoch(h, 1), 2050)
    h.controller.broker_channel_closed(
        h.image, 1, epoch(h, 1), 2100, suspect=False, poll_closed=True
    )
    assert h.controller.fence_stale_brokers(h.image, 2000 + CLOSED_MS + 1).records == ()


def test_minus_one_turns_it_off() -> None:
    h = harness(closed_timeout_ms=-1)
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    exited(h, 1, 2000)
    assert h.controller.fence_stale_brokers(h.image, SESSION_MS).records == ()
    assert h.controller.fence_stale_brokers(h.image, SESSION_MS + 1).response == (1,)


def test_the_session_timeout_still_applies_when_it_comes_first() -> None:
    h = harness(closed_timeout_ms=60_000)
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    assert h.controller.fence_stale_brokers(h.image, SESSION_MS + 1).response == (1,)


def test_the_fence_log_says_which_timeout_ended_the_session() -> None:
    h = harness()
    h.controller.broker_channel_closed(h.image, 1, epoch(h, 1), 2000)
    one, two = h.image.cluster.brokers[1], h.image.cluster.brokers[2]
    assert h.controller.sessions.why_stale(one, 3001) == (
        "its connection closed 1001 ms ago, no heartbeat for 3001 ms "
        "(pykraft.broker.channel.closed.timeout.ms)"
    )
    assert h.controller.sessions.why_stale(two, SESSION_MS + 1) == (
        "no heartbeat for 9001 ms (broker.session.timeout.ms)"
    )


@pytest.mark.parametrize("value", [-2, -1000])
def test_a_timeout_below_minus_one_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match="broker_channel_closed_timeout_ms must be -1"):
        ControllerSettings(broker_channel_closed_timeout_ms=value)


# ---- which closed connections count (quorum/broker_channels.py)

SEEN_MS = 3000  # when the timer looked (BrokerChannels.closed)


class Connection:
    """What ``BrokerChannels`` keeps of a long poll's connection: whether it is closing."""

    def __init__(self) -> None:
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed


def channels_with_poll(broker_id: int = 1, epoch_: int = 5) -> tuple[BrokerChannels, Connection]:
    channels, connection = BrokerChannels(), Connection()
    channels.polled(broker_id, epoch_, connection)  # type: ignore[arg-type]
    return channels, connection


def test_a_connection_closed_under_a_waiting_poll_is_reported_once() -> None:
    # A killed broker: the kernel closes the connection its long poll waits on.
    channels, connection = channels_with_poll()
    assert channels.closed(SEEN_MS) == []
    connection.closed = True
    assert channels.closed(SEEN_MS) == [Closed(1, 5, SEEN_MS, suspect=True, poll_closed=True)]
    assert channels.closed(SEEN_MS) == []


def test_a_close_during_the_wait_counts_when_the_poll_ends_before_the_timer_looks() -> None:
    channels, connection = channels_with_poll()
    connection.closed = True
    channels.answered(1, connection)  # type: ignore[arg-type]
    assert channels.closed(SEEN_MS) == [Closed(1, 5, SEEN_MS, suspect=True, poll_closed=True)]


def test_a_connection_closed_after_its_poll_was_answered_is_not_suspect() -> None:
    # Issue 18 (bench/scale.py, 30,000 partitions on 3 brokers): between two polls the
    # connection sits in the broker's HTTP pool, which closes it after its keep-alive time or
    # lends it to a call that times out; the broker is alive, its next poll just late. Reported
    # only as one half of an exit (with the idle heartbeat connection's close).
    channels, connection = channels_with_poll()
    channels.answered(1, connection)  # type: ignore[arg-type]
    connection.closed = True
    assert channels.closed(SEEN_MS) == [Closed(1, 5, SEEN_MS, suspect=False, poll_closed=True)]
    # Forgotten: the next poll is watched afresh.
    assert channels.closed(SEEN_MS) == []
    later = Connection()
    channels.polled(1, 5, later)  # type: ignore[arg-type]
    later.closed = True
    assert channels.closed(SEEN_MS) == [Closed(1, 5, SEEN_MS, suspect=True, poll_closed=True)]


def test_an_older_polls_connection_closing_is_not_reported() -> None:
    # A poll that timed out at the broker ends at the controller after its retry arrived.
    channels, first = channels_with_poll()
    second = Connection()
    channels.polled(1, 5, second)  # type: ignore[arg-type]
    first.closed = True
    channels.answered(1, first)  # type: ignore[arg-type]
    assert channels.closed(SEEN_MS) == []
    second.closed = True
    assert channels.closed(SEEN_MS) == [Closed(1, 5, SEEN_MS, suspect=True, poll_closed=True)]


def test_an_idle_heartbeat_connection_closed_is_reported() -> None:
    # A killed broker between two polls (bench/failover.py: its loop busy with produce traffic):
    # its heartbeat connection, idle between heartbeats, closes with the process.
    channels, poll = channels_with_poll()
    channels.answered(1, poll)  # type: ignore[arg-type]
    heartbeat = Connection()
    channels.heartbeat_arrived(1, 5, heartbeat)  # type: ignore[arg-type]
    channels.heartbeat_answered(1, heartbeat)  # type: ignore[arg-type]
    assert channels.closed(SEEN_MS) == []
    poll.closed = heartbeat.closed = True
    assert channels.closed(SEEN_MS) == [
        Closed(1, 5, SEEN_MS, suspect=True, poll_closed=True, heartbeat_closed=True)
    ]
    assert channels.closed(SEEN_MS) == []


def test_each_broker_is_reported_once_with_what_closed() -> None:
    # Broker 1 killed while its poll waited (both close); broker 2's idle heartbeat connection
    # reset alone (its poll waits on, open); broker 3's heartbeat timed out at the broker.
    channels, poll_1 = channels_with_poll(1, 5)
    poll_2, heartbeats = Connection(), {b: Connection() for b in (1, 2, 3)}
    channels.polled(2, 6, poll_2)  # type: ignore[arg-type]
    for broker_id, connection in heartbeats.items():
        channels.heartbeat_arrived(broker_id, broker_id + 4, connection)  # type: ignore[arg-type]
        if broker_id != 3:
            channels.heartbeat_answered(broker_id, connection)  # type: ignore[arg-type]
        connection.closed = True
    poll_1.closed = True
    assert channels.closed(SEEN_MS) == [
        Closed(1, 5, SEEN_MS, suspect=True, poll_closed=True, heartbeat_closed=True),
        Closed(2, 6, SEEN_MS, suspect=True, heartbeat_closed=True),
    ]


def test_a_heartbeat_connection_closed_under_its_heartbeat_is_not_reported() -> None:
    # The broker's deadline for that heartbeat passed (a slow controller): it calls again.
    channels, heartbeat = BrokerChannels(), Connection()
    channels.heartbeat_arrived(1, 5, heartbeat)  # type: ignore[arg-type]
    heartbeat.closed = True
    assert channels.closed(SEEN_MS) == []
    later = Connection()
    channels.heartbeat_arrived(1, 5, later)  # type: ignore[arg-type]
    heartbeat_closed_late = Connection()
    channels.heartbeat_answered(1, heartbeat_closed_late)  # type: ignore[arg-type]  # not the latest
    later.closed = True
    channels.heartbeat_answered(1, later)  # type: ignore[arg-type]
    assert channels.closed(SEEN_MS) == []
