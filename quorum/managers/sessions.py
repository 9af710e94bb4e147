"""Broker sessions: the active controller's soft state about heartbeats (KIP-631).

Theory of operation. Heartbeats are not written to the metadata log (that would flood it), so
only the active controller knows when each broker last called in. ``BrokerSessions`` holds, per
broker incarnation (broker id + broker epoch): the time of the last contact, the metadata offset
the broker last reported, and the offset at which its controlled shutdown will be complete. A
new active controller starts with no history: every registered broker is treated as having just
called in at activation time, so it gets a full ``broker.session.timeout.ms`` of grace before it
can be fenced (Kafka's ``BrokerHeartbeatManager`` is likewise rebuilt on failover).

A session is valid while ``now_ms <= last_contact_ms + session_timeout_ms`` and the broker is
unfenced; an unfenced broker without a valid session is stale and gets fenced.

A dead process is told from a silent one (issue 18; not in Kafka, whose controller waits out
the session either way). A broker holds two connections to the active controller: its metadata
long poll's (``GET /v1/metadata/records`` with its id and epoch), waiting there most of the
time, and its heartbeat thread's, idle between heartbeats. When the process dies, its kernel
closes both; a paused or partitioned process keeps them open. So the timer reports as
``channel_closed`` a broker whose poll connection closed while the poll waited, or whose
heartbeat connection closed while idle (``quorum/broker_channels.py``: the two states in which
a live broker never closes them), and unless the same incarnation calls in again — a new long
poll (``channel_opened``) or a heartbeat (``heard_from``) — within
``pykraft.broker.channel.closed.timeout.ms`` (default 1000; -1 turns this off, and the next
rule), the session ends there instead of at ``broker.session.timeout.ms``. When both closed —
the idle heartbeat connection and the latest poll's, waiting or idle — the process exited: the
kernel closes every socket of a process that ends, while a live broker never closes its idle
heartbeat connection, so the session ends after only ``pykraft.broker.exited.grace.ms``
(default 200; ``exited_ms``). Not at once: a proxy, sidecar or load balancer between broker and
controller may close both connections of a live broker, whose poll then fails and which
heartbeats and polls again at once; the grace lets that call-in land (one side alone closed
gets the longer timeout). Issue 18: the timeout alone kept a killed leader's partitions and
every ISR it was in waiting a second, and clients asking in that second were told the dead
broker still led; the grace keeps the move well under its 2 s goal.

A close counts only if the timer saw it after the incarnation's last call-in
(``last_call_in_ms``): the timer takes its look (``BrokerChannels.closed``, stamped with the
time) and then waits for the write lock to mark it, while call-ins (``heard_from``,
``channel_opened``) do not wait for that lock — a call-in landing in between is newer than the
close. A close seen in the same millisecond as a call-in is taken as older: the live broker's
cost would be a fencing, the dead one's only the session timeout.

A poll that failed (timed out on a slow controller, reset) makes the broker heartbeat at once
(``MetadataLoader.run``'s ``on_failure``), because its retry may go to a standby controller,
which this one never hears of.

Why ending a session early cannot elect a replica that lacks acknowledged data: it only brings
the fencing forward; fencing is the same batch as on expiry (``cluster.fence_records``: the
broker leaves every ISR and its leaderships move), and elections pick from the remaining ISR
(or the ELR), each member of which holds every record acknowledged with acks=all — an
acknowledgement needs the whole ISR. Nothing is elected that the session timeout would not
have elected a few seconds later. A live broker fenced by mistake (its connection reset and
none of its calls reached this controller within the timeout) costs availability only: its
next heartbeat finds it fenced, it catches up, and it is unfenced and rejoins the ISRs.

Broker states (Kafka's ``BrokerControlState``) and the heartbeat transitions
(``next_broker_state``, Kafka's ``BrokerHeartbeatManager.calculateNextBrokerState``):

    FENCED              -> SHUTDOWN_NOW         wants shutdown
                        -> UNFENCED             caught up to its registration offset
                                                (and not asking to stay fenced)
    UNFENCED            -> SHUTDOWN_NOW         wants fence and shutdown; or wants shutdown and
                                                leads nothing
                        -> FENCED               wants fence
                        -> CONTROLLED_SHUTDOWN  wants shutdown and still leads partitions
    CONTROLLED_SHUTDOWN -> SHUTDOWN_NOW         leads nothing and every active broker has caught
                                                up to the offset of the shutdown's records
    SHUTDOWN_NOW        (terminal: the broker is fenced and told to exit)

A broker fenced after a controlled shutdown (fenced and in controlled shutdown in the image)
stays FENCED: it must come back as a new incarnation.

Each session also remembers the replicas the broker last reported on offline log dirs
(KIP-858); elections skip them (``replica_offline``). Kafka keeps this in the metadata (the
registration's online ``LogDirs`` and each partition's ``Directories``); here it is soft state,
re-learnt from the next heartbeat after a failover and forgotten when the broker re-registers
(a restarted broker reads its dirs afresh).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs

from pykraft.metadata.image import BrokerRegistration, MetadataImage

# Kafka's Long.MAX_VALUE answer of lowestActiveOffset() when no broker is active.
_NO_ACTIVE_OFFSET = 2**63 - 1


class BrokerControlState(enum.Enum):
    FENCED = "FENCED"
    UNFENCED = "UNFENCED"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    SHUTDOWN_NOW = "SHUTDOWN_NOW"

    @property
    def fenced(self) -> bool:
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)

    @property
    def in_controlled_shutdown(self) -> bool:
        return self is BrokerControlState.CONTROLLED_SHUTDOWN

    @property
    def should_shut_down(self) -> bool:
        return self is BrokerControlState.SHUTDOWN_NOW


def current_broker_state(registration: BrokerRegistration) -> BrokerControlState:
    if registration.fenced:
        return BrokerControlState.FENCED
    if registration.in_controlled_shutdown:
        return BrokerControlState.CONTROLLED_SHUTDOWN
    return BrokerControlState.UNFENCED


@attrs.define
class BrokerSession:
    broker_epoch: int
    last_contact_ms: int
    # The metadata offset the broker last reported; -1 until its first heartbeat.
    metadata_offset: int = -1
    # Offset of the last record of the batch that started its controlled shutdown, -1 if none.
    controlled_shutdown_offset: int = -1
    # (topic id, partition id) of the replicas on offline log dirs, as last reported.
    offline_replicas: frozenset[tuple[str, int]] = frozenset()
    # When a call of this incarnation last arrived (a heartbeat or a long poll), None if none
    # since this controller's activation. Invariant: every close below was seen after it.
    last_call_in_ms: int | None = None
    # When a connection of it was seen closed as only a dead process closes it, None while it
    # is connected (or called in since).
    channel_closed_ms: int | None = None
    # Which of its connections were seen closed since it last called in (any state).
    poll_closed: bool = False
    heartbeat_closed: bool = False
    # When both were: the process exited. None while either is open (or it called in since).
    exited_ms: int | None = None

    def called_in(self, arrived_ms: int) -> None:
        """A call of this incarnation arrived: whatever closed before, it is connected. One no
        newer than the last call-in changes nothing: every close kept was seen after that."""
        if self.last_call_in_ms is not None and arrived_ms <= self.last_call_in_ms:
            return
        self.last_call_in_ms = arrived_ms
        self.channel_closed_ms = self.exited_ms = None
        self.poll_closed = self.heartbeat_closed = False


@attrs.frozen
class HeartbeatInput:
    """What ``next_broker_state`` needs from a heartbeat and the controller's view."""

    current: BrokerControlState
    want_fence: bool
    want_shut_down: bool
    current_metadata_offset: int
    # Kafka: the offset of the broker's RegisterBrokerRecord — its broker epoch.
    registration_offset: int
    controlled_shutdown_offset: int
    lowest_active_offset: int
    in_controlled_shutdown_in_image: bool


def next_broker_state(
    heartbeat: HeartbeatInput, has_leaderships: Callable[[], bool]
) -> BrokerControlState:
    """Kafka's ``BrokerHeartbeatManager.calculateNextBrokerState``."""
    state = BrokerControlState
    if heartbeat.current is state.FENCED:
        if heartbeat.want_shut_down:
            return state.SHUTDOWN_NOW
        if (
            not heartbeat.want_fence
            and not heartbeat.in_controlled_shutdown_in_image
            and heartbeat.current_metadata_offset >= heartbeat.registration_offset
        ):
            return state.UNFENCED
        return state.FENCED
    if heartbeat.current is state.UNFENCED:
        if heartbeat.want_fence:
            return state.SHUTDOWN_NOW if heartbeat.want_shut_down else state.FENCED
        if heartbeat.want_shut_down:
            return state.CONTROLLED_SHUTDOWN if has_leaderships() else state.SHUTDOWN_NOW
        return state.UNFENCED
    if heartbeat.current is state.CONTROLLED_SHUTDOWN:
        if has_leaderships():
            return state.CONTROLLED_SHUTDOWN
        if heartbeat.controlled_shutdown_offset <= heartbeat.lowest_active_offset:
            return state.SHUTDOWN_NOW
        return state.CONTROLLED_SHUTDOWN
    return state.SHUTDOWN_NOW


class BrokerSessions:
    """Heartbeat soft state of the active controller; see the module docstring."""

    def __init__(
        self,
        session_timeout_ms: int,
        activated_ms: int,
        channel_closed_timeout_ms: int = -1,
        exited_grace_ms: int = 0,
    ) -> None:
        self.session_timeout_ms = session_timeout_ms
        # pykraft.broker.channel.closed.timeout.ms; negative: a closed channel changes nothing.
        self.channel_closed_timeout_ms = channel_closed_timeout_ms
        # pykraft.broker.exited.grace.ms: how long after both connections closed it ends.
        self.exited_grace_ms = exited_grace_ms
        self.activated_ms = activated_ms
        self._sessions: dict[int, BrokerSession] = {}

    def session(self, registration: BrokerRegistration) -> BrokerSession:
        """The session of this incarnation; one that began at activation if none is known."""
        session = self._sessions.get(registration.id)
        if session is None or session.broker_epoch != registration.epoch:
            last_contact = self.activated_ms
            if session is not None:
                last_contact = max(last_contact, session.last_contact_ms)
            session = BrokerSession(broker_epoch=registration.epoch, last_contact_ms=last_contact)
            self._sessions[registration.id] = session
        return session

    def register(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A (re-)registration starts a new session for the new broker epoch."""
        self._sessions[broker_id] = BrokerSession(broker_epoch=broker_epoch, last_contact_ms=now_ms)

    def touch(
        self,
        registration: BrokerRegistration,
        now_ms: int,
        metadata_offset: int,
        received_ms: int | None = None,
    ) -> None:
        """A heartbeat's write at ``now_ms``; its call-in is its arrival (``received_ms``): a
        close seen between the two (the broker died meanwhile) still counts."""
        session = self.session(registration)
        session.last_contact_ms = max(session.last_contact_ms, now_ms)
        session.metadata_offset = metadata_offset
        session.called_in(now_ms if received_ms is None else received_ms)

    def heard_from(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, now_ms: int
    ) -> None:
        """A heartbeat of this incarnation arrived: its contact time, before the write that
        handles it (Kafka's ``BrokerHeartbeatTracker``, updated from the request handler threads
        "so that heartbeats always get through, even if the main controller thread is busy").
        Here the write may wait for the write lock behind a large commit (a CreateTopics of
        thousands of partitions), and a fencing queued before it would not see it."""
        registration = image.cluster.brokers.get(broker_id)
        if registration is not None and registration.epoch == broker_epoch:
            session = self.session(registration)
            session.last_contact_ms = max(session.last_contact_ms, now_ms)
            session.called_in(now_ms)

    def channel_opened(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, now_ms: int
    ) -> None:
        """A long poll of this incarnation arrived: it is connected."""
        registration = image.cluster.brokers.get(broker_id)
        if registration is not None and registration.epoch == broker_epoch:
            self.session(registration).called_in(now_ms)

    def channel_closed(
        self,
        image: MetadataImage,
        broker_id: int,
        broker_epoch: int,
        seen_ms: int,
        *,
        suspect: bool = True,
        poll_closed: bool = False,
        heartbeat_closed: bool = False,
    ) -> None:
        """Connections of this incarnation were seen closed at ``seen_ms``: ``suspect`` if one
        closed as only a dead process closes it; ``poll_closed`` (its latest long poll's, in
        any state) and ``heartbeat_closed`` (its heartbeat's, while idle) say which. Ignored
        if it called in since (see the module docstring)."""
        registration = image.cluster.brokers.get(broker_id)
        if registration is None or registration.epoch != broker_epoch:
            return
        session = self.session(registration)
        if session.last_call_in_ms is not None and seen_ms <= session.last_call_in_ms:
            return
        session.poll_closed = session.poll_closed or poll_closed
        session.heartbeat_closed = session.heartbeat_closed or heartbeat_closed
        if session.channel_closed_ms is None and suspect:
            session.channel_closed_ms = seen_ms
        if session.exited_ms is None and session.poll_closed and session.heartbeat_closed:
            session.exited_ms = seen_ms

    def report_offline_replicas(
        self, registration: BrokerRegistration, replicas: frozenset[tuple[str, int]]
    ) -> None:
        self.session(registration).offline_replicas = replicas

    def replica_offline(self, image: MetadataImage) -> Callable[[int, str, int], bool]:
        """Whether a broker (its registered incarnation) reported the replica offline."""

        def offline(broker_id: int, topic_id: str, partition_id: int) -> bool:
            registration = image.cluster.brokers.get(broker_id)
            session = self._sessions.get(broker_id)
            return (
                registration is not None
                and session is not None
                and session.broker_epoch == registration.epoch
                and (topic_id, partition_id) in session.offline_replicas
            )

        return offline

    def remove(self, broker_id: int) -> None:
        self._sessions.pop(broker_id, None)

    def has_valid_session(self, registration: BrokerRegistration, now_ms: int) -> bool:
        """Kafka: a fenced broker has no valid session; otherwise the timeout decides."""
        if registration.fenced:
            return False
        return now_ms < self._expiry_ms(self.session(registration))

    def _expiry_ms(self, session: BrokerSession) -> int:
        """The first time at which the session is no longer valid."""
        expiry = session.last_contact_ms + self.session_timeout_ms + 1
        if self.channel_closed_timeout_ms < 0:
            return expiry
        if session.exited_ms is not None:
            expiry = min(expiry, session.exited_ms + self.exited_grace_ms + 1)
        closed = session.channel_closed_ms
        if closed is not None:
            expiry = min(expiry, closed + self.channel_closed_timeout_ms + 1)
        return expiry

    def why_stale(self, registration: BrokerRegistration, now_ms: int) -> str:
        """Why this broker's session ended (or would end) by ``now_ms``, for the log."""
        session = self.session(registration)
        silent_ms = now_ms - session.last_contact_ms
        closed = session.channel_closed_ms
        if now_ms > session.last_contact_ms + self.session_timeout_ms or closed is None:
            return f"no heartbeat for {silent_ms} ms (broker.session.timeout.ms)"
        if session.exited_ms is not None:
            return (
                f"its process exited {now_ms - session.exited_ms} ms ago (its long-poll and idle "
                f"heartbeat connections closed), no heartbeat for {silent_ms} ms"
            )
        return (
            f"its connection closed {now_ms - closed} ms ago, no heartbeat for "
            f"{silent_ms} ms (pykraft.broker.channel.closed.timeout.ms)"
        )

    def stale_brokers(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose session expired, longest silent first."""
        stale = [
            registration
            for registration in image.cluster.brokers.values()
            if not registration.fenced and not self.has_valid_session(registration, now_ms)
        ]
        stale.sort(key=lambda r: (self.session(r).last_contact_ms, r.id))
        return [registration.id for registration in stale]

    def next_expiry_ms(self, image: MetadataImage) -> int | None:
        """The earliest time an unfenced broker becomes stale, if any broker is unfenced."""
        deadlines = [
            self._expiry_ms(self.session(r)) for r in image.cluster.brokers.values() if not r.fenced
        ]
        return min(deadlines) if deadlines else None

    def lowest_active_offset(self, image: MetadataImage) -> int:
        """Lowest metadata offset reported by an active (unfenced, not shutting down) broker."""
        offsets = [
            self.session(r).metadata_offset
            for r in image.cluster.brokers.values()
            if not r.fenced and not r.in_controlled_shutdown
        ]
        return min(offsets) if offsets else _NO_ACTIVE_OFFSET

    def begin_controlled_shutdown(self, registration: BrokerRegistration, offset: int) -> None:
        self.session(registration).controlled_shutdown_offset = offset

    def controlled_shutdown_offset(
        self, registration: BrokerRegistration, image_offset: int
    ) -> int:
        """Where this broker's shutdown completes; the image's end if this controller did
        not start it (failover: every record so far must be seen by active brokers)."""
        offset = self.session(registration).controlled_shutdown_offset
        return offset if offset >= 0 else image_offset
