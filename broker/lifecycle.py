"""The broker's lifecycle state (Kafka's ``org.apache.kafka.metadata.BrokerState``).

Theory of operation. A broker process walks one path, KIP-631's broker lifecycle:

* ``NOT_RUNNING`` → ``STARTING``: the process started; it registers with the controller and
  replays the metadata log.
* ``STARTING`` → ``RECOVERY``: it caught up with the metadata log up to its registration record
  but the controller has not unfenced it yet.
* ``RECOVERY`` → ``RUNNING``: the controller unfenced it; it serves clients.
* ``RUNNING`` → ``PENDING_CONTROLLED_SHUTDOWN``: shutdown was asked for; the controller moves
  leadership away before the process exits.
* ``PENDING_CONTROLLED_SHUTDOWN`` → ``SHUTTING_DOWN``: the controller allowed the shutdown.
* ``STARTING`` / ``RECOVERY`` / ``RUNNING`` → ``SHUTTING_DOWN``: shutdown without a controlled
  phase — a broker that is not RUNNING leads nothing, so there is nothing to move (Kafka's
  ``BrokerLifecycleManager.BeginControlledShutdownEvent`` "Skipping controlled shutdown because
  we are in state …"), and a fatal error shuts a RUNNING broker down directly.
* ``SHUTTING_DOWN`` → ``NOT_RUNNING``: every component stopped.

Every other change raises ``IllegalBrokerStateTransition`` naming both states. The values are
Kafka's (they appear in its metrics and on the wire). ``BrokerLifecycle`` is pure: no clock, no
I/O; the broker shell calls ``become`` when the corresponding event happened.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType


class BrokerState(enum.Enum):
    """Kafka's BrokerState names and numeric values.

    Kafka's ``UNKNOWN`` (127) only stands for an undecodable value; a broker is never in it.
    """

    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


LEGAL_TRANSITIONS: Mapping[BrokerState, frozenset[BrokerState]] = MappingProxyType(
    {
        BrokerState.NOT_RUNNING: frozenset({BrokerState.STARTING}),
        BrokerState.STARTING: frozenset({BrokerState.RECOVERY, BrokerState.SHUTTING_DOWN}),
        BrokerState.RECOVERY: frozenset({BrokerState.RUNNING, BrokerState.SHUTTING_DOWN}),
        BrokerState.RUNNING: frozenset(
            {BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.SHUTTING_DOWN}
        ),
        BrokerState.PENDING_CONTROLLED_SHUTDOWN: frozenset({BrokerState.SHUTTING_DOWN}),
        BrokerState.SHUTTING_DOWN: frozenset({BrokerState.NOT_RUNNING}),
    }
)


class BrokerStartupError(Exception):
    """The broker cannot get past STARTING (bad log dir, port in use, unreadable key material,
    mismatched meta.properties...)."""


class IllegalBrokerStateTransition(Exception):
    """A transition the lifecycle does not allow: a bug in the caller."""

    def __init__(self, current: BrokerState, target: BrokerState) -> None:
        allowed = ", ".join(sorted(state.name for state in LEGAL_TRANSITIONS[current])) or "none"
        super().__init__(
            f"broker cannot go from {current.name} to {target.name} (from {current.name} only "
            f"to: {allowed})"
        )
        self.current = current
        self.target = target


def is_legal_transition(current: BrokerState, target: BrokerState) -> bool:
    return target in LEGAL_TRANSITIONS[current]


def shutdown_target(current: BrokerState) -> BrokerState:
    """Where a shutdown request leads: a controlled shutdown only from RUNNING (Kafka's
    ``BeginControlledShutdownEvent``); any earlier state shuts down at once."""
    if current is BrokerState.RUNNING:
        return BrokerState.PENDING_CONTROLLED_SHUTDOWN
    if current in (BrokerState.STARTING, BrokerState.RECOVERY):
        return BrokerState.SHUTTING_DOWN
    return current


class BrokerLifecycle:
    """The current state and the one place it changes."""

    def __init__(self, state: BrokerState = BrokerState.NOT_RUNNING) -> None:
        self._state = state

    @property
    def state(self) -> BrokerState:
        return self._state

    @property
    def is_running(self) -> bool:
        """Serving clients: /healthz answers 200 only in this state."""
        return self._state is BrokerState.RUNNING

    def become(self, target: BrokerState) -> None:
        if not is_legal_transition(self._state, target):
            raise IllegalBrokerStateTransition(self._state, target)
        self._state = target

    def maybe_begin_shutdown(self) -> bool:
        """Apply ``shutdown_target``; False when already shutting down or not started."""
        target = shutdown_target(self._state)
        if target is self._state:
            return False
        self.become(target)
        return True
