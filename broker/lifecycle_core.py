"""One broker process's lifecycle decisions as a synchronous, clock-free core (the decisions of
Kafka's ``BrokerLifecycleManager`` and of ``BrokerServer``'s start-up, without their I/O).

Theory of operation
-------------------
A process registers once with a fresh **incarnation id** and gets a **broker epoch**, then
heartbeats with the offset of the last metadata record it applied; the answers walk
``broker.lifecycle``'s states (KIP-631). The shell — ``broker.heartbeat.BrokerLifecycleManager``
in production, ``tests/sim/replication_broker.SimBroker`` in the simulation — asks ``request``
what to send next, sends it, and feeds the answer (or the failure, as None) to
``on_registration`` / ``on_heartbeat``. Each answer returns a ``LifecycleStep``: the state
reached (None: unchanged), when to send the next request, and what the shell does now:

* ``install_publisher`` (STARTING -> RECOVERY: the controller says the broker caught up with the
  metadata log up to its own registration): start applying metadata, the whole image first
  (``broker.metadata_publisher``); then ``set_ready_to_unfence`` — until then every heartbeat
  asks to stay fenced (``want_fence``), so the controller never unfences a broker that has not
  applied the image that took its previous incarnation's leaderships away;
* ``shutdown_allowed`` (PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN: should_shut_down, after
  the controller moved the leaderships away): stop.

``begin_shutdown`` (SIGTERM) starts a controlled shutdown from RUNNING (heartbeats now carry
want_shut_down; send one at once) or shuts down at once from an earlier state, which leads
nothing (``broker.lifecycle.shutdown_target``).

The schedule is Kafka's: 10 ms between heartbeats while STARTING (start-up is quick when there
is nothing to recover), 50 ms after the first answer in a controlled shutdown, otherwise
``broker.heartbeat.interval.ms``; a failed registration or heartbeat is retried after the
interval. None of this reads a clock: delays are returned, the shell waits.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState

# Kafka's BrokerLifecycleManager delays.
STARTING_HEARTBEAT_DELAY_MS = 10
FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS = 50
NO_BROKER_EPOCH = -1


class HeartbeatAnswer(Protocol):
    """The fields of Kafka's BrokerHeartbeatResponse the lifecycle reads."""

    @property
    def is_caught_up(self) -> bool: ...

    @property
    def is_fenced(self) -> bool: ...

    @property
    def should_shut_down(self) -> bool: ...


@attrs.frozen
class HeartbeatDecision:
    # The lifecycle state to move to, or None to stay.
    target: BrokerState | None
    next_heartbeat_ms: int


def heartbeat_decision(
    state: BrokerState, reply: HeartbeatAnswer, interval_ms: int, had_shutdown_reply: bool
) -> HeartbeatDecision:
    """Kafka's ``BrokerHeartbeatResponseEvent``: what a successful answer means in ``state``."""
    if state is BrokerState.STARTING:
        target = BrokerState.RECOVERY if reply.is_caught_up else None
        return HeartbeatDecision(target, STARTING_HEARTBEAT_DELAY_MS)
    if state is BrokerState.RECOVERY:
        return HeartbeatDecision(None if reply.is_fenced else BrokerState.RUNNING, interval_ms)
    if state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
        if reply.should_shut_down:
            return HeartbeatDecision(BrokerState.SHUTTING_DOWN, interval_ms)
        delay = interval_ms if had_shutdown_reply else FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS
        return HeartbeatDecision(None, delay)
    return HeartbeatDecision(None, interval_ms)


@attrs.frozen
class RegistrationRequest:
    """Kafka's BrokerRegistrationRequest: this process's identity."""

    broker_id: int
    incarnation_id: str


@attrs.frozen
class HeartbeatRequest:
    """Kafka's BrokerHeartbeatRequest fields the lifecycle decides."""

    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool


@attrs.frozen
class LifecycleStep:
    """What one answer calls for; the shell acts in this order, then waits ``next_request_ms``."""

    next_request_ms: int
    # The state reached (None: unchanged).
    target: BrokerState | None = None
    # RECOVERY: apply the whole image, then every new batch; then ``set_ready_to_unfence``.
    install_publisher: bool = False
    # SHUTTING_DOWN after the controller moved the leaderships away.
    shutdown_allowed: bool = False


class LifecycleCore:
    """Registration, heartbeats and controlled shutdown of one incarnation; no clock, no I/O."""

    def __init__(
        self,
        broker_id: int,
        incarnation_id: str,
        *,
        heartbeat_interval_ms: int,
        lifecycle: BrokerLifecycle | None = None,
    ) -> None:
        assert heartbeat_interval_ms > 0
        self.broker_id = broker_id
        self.incarnation_id = incarnation_id
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.lifecycle = lifecycle or BrokerLifecycle()
        # Invariant: NO_BROKER_EPOCH until the one successful registration of this process.
        self.broker_epoch = NO_BROKER_EPOCH
        # Invariant: once True, stays True (the broker applied the image and serves).
        self.ready_to_unfence = False
        self._had_shutdown_reply = False

    @property
    def state(self) -> BrokerState:
        return self.lifecycle.state

    @property
    def registered(self) -> bool:
        return self.broker_epoch != NO_BROKER_EPOCH

    @property
    def done(self) -> bool:
        """No more heartbeats: the process is shutting down or stopped."""
        return self.state in (BrokerState.SHUTTING_DOWN, BrokerState.NOT_RUNNING)

    def start(self) -> None:
        """The process started: NOT_RUNNING -> STARTING."""
        self.lifecycle.become(BrokerState.STARTING)

    # ------------------------------------------------------------------ requests

    def request(self, metadata_offset: int) -> RegistrationRequest | HeartbeatRequest:
        """What to send now: the registration until it succeeded, then heartbeats."""
        if not self.registered:
            return RegistrationRequest(self.broker_id, self.incarnation_id)
        return HeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=metadata_offset,
            want_fence=not self.ready_to_unfence,
            want_shut_down=self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN,
        )

    # ------------------------------------------------------------------ answers

    def on_registration(self, broker_epoch: int | None) -> LifecycleStep:
        """The registration's answer (None: it failed — a controller election, or
        DUPLICATE_BROKER_REGISTRATION while the last incarnation's session lives)."""
        if broker_epoch is None:
            return LifecycleStep(self.heartbeat_interval_ms)
        assert not self.registered, "a process registers once"
        assert broker_epoch >= 0, f"broker epoch {broker_epoch}"
        self.broker_epoch = broker_epoch
        return LifecycleStep(STARTING_HEARTBEAT_DELAY_MS)

    def on_heartbeat(self, reply: HeartbeatAnswer | None) -> LifecycleStep:
        """A heartbeat's answer (None: it failed; retried after the interval)."""
        if reply is None:
            return LifecycleStep(self.heartbeat_interval_ms)
        # The state may have moved while the request was in flight (a shutdown request).
        state = self.state
        decision = heartbeat_decision(
            state, reply, self.heartbeat_interval_ms, self._had_shutdown_reply
        )
        if state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self._had_shutdown_reply = True
        target = decision.target
        if target is not None:
            self.lifecycle.become(target)
        return LifecycleStep(
            decision.next_heartbeat_ms,
            target,
            install_publisher=target is BrokerState.RECOVERY,
            shutdown_allowed=target is BrokerState.SHUTTING_DOWN,
        )

    # ------------------------------------------------------------------ events

    def set_ready_to_unfence(self) -> None:
        """The broker applied the image and serves: heartbeats stop asking to stay fenced."""
        assert self.state is not BrokerState.STARTING, "ready before catching up"
        self.ready_to_unfence = True

    def begin_shutdown(self) -> bool:
        """SIGTERM: True when a controlled shutdown started (heartbeat at once); False when
        the broker goes straight to SHUTTING_DOWN (or already is, or never started)."""
        if not self.lifecycle.maybe_begin_shutdown():
            return False
        return self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN

    def give_up_controlled_shutdown(self) -> None:
        """The controller did not allow the shutdown in time: shut down anyway (its session
        expires and the controller fences the broker then), as Kafka's BrokerServer does."""
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self.lifecycle.become(BrokerState.SHUTTING_DOWN)
