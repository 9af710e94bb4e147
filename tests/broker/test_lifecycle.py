"""BrokerState transitions: Kafka's BrokerState.java path plus the shutdown shortcuts of
BrokerLifecycleManager.BeginControlledShutdownEvent (KIP-631)."""

from __future__ import annotations

import itertools

import pytest

from pykraft.broker.lifecycle import (
    BrokerLifecycle,
    BrokerState,
    IllegalBrokerStateTransition,
    is_legal_transition,
    shutdown_target,
)

S = BrokerState
LEGAL = {
    (S.NOT_RUNNING, S.STARTING),
    (S.STARTING, S.RECOVERY),
    (S.STARTING, S.SHUTTING_DOWN),
    (S.RECOVERY, S.RUNNING),
    (S.RECOVERY, S.SHUTTING_DOWN),
    (S.RUNNING, S.PENDING_CONTROLLED_SHUTDOWN),
    (S.RUNNING, S.SHUTTING_DOWN),
    (S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN),
    (S.SHUTTING_DOWN, S.NOT_RUNNING),
}


def test_values_are_kafkas() -> None:
    # org.apache.kafka.metadata.BrokerState: the numbers appear in metrics and on the wire.
    assert {state.name: state.value for state in S} == {
        "NOT_RUNNING": 0,
        "STARTING": 1,
        "RECOVERY": 2,
        "RUNNING": 3,
        "PENDING_CONTROLLED_SHUTDOWN": 6,
        "SHUTTING_DOWN": 7,
    }


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_transition_table(current: BrokerState, target: BrokerState) -> None:
    lifecycle = BrokerLifecycle(current)
    if (current, target) in LEGAL:
        assert is_legal_transition(current, target)
        lifecycle.become(target)
        assert lifecycle.state is target
    else:
        assert not is_legal_transition(current, target)
        with pytest.raises(IllegalBrokerStateTransition) as raised:
            lifecycle.become(target)
        assert current.name in str(raised.value) and target.name in str(raised.value)
        assert lifecycle.state is current


def test_the_normal_life_of_a_broker() -> None:
    lifecycle = BrokerLifecycle()
    path = [
        S.STARTING,
        S.RECOVERY,
        S.RUNNING,
        S.PENDING_CONTROLLED_SHUTDOWN,
        S.SHUTTING_DOWN,
        S.NOT_RUNNING,
    ]
    running = []
    for state in path:
        lifecycle.become(state)
        running.append(lifecycle.is_running)
    assert running == [False, False, True, False, False, False]


def check_shutdown(current: BrokerState, expected: BrokerState) -> None:
    assert shutdown_target(current) is expected


def test_shutdown_is_controlled_only_from_running() -> None:
    check_shutdown(S.RUNNING, S.PENDING_CONTROLLED_SHUTDOWN)
    check_shutdown(S.STARTING, S.SHUTTING_DOWN)
    check_shutdown(S.RECOVERY, S.SHUTTING_DOWN)
    check_shutdown(S.PENDING_CONTROLLED_SHUTDOWN, S.PENDING_CONTROLLED_SHUTDOWN)
    check_shutdown(S.SHUTTING_DOWN, S.SHUTTING_DOWN)
    check_shutdown(S.NOT_RUNNING, S.NOT_RUNNING)


def test_maybe_begin_shutdown_reports_whether_it_moved() -> None:
    lifecycle = BrokerLifecycle(S.RUNNING)
    assert lifecycle.maybe_begin_shutdown() is True
    assert lifecycle.state is S.PENDING_CONTROLLED_SHUTDOWN
    # Asking twice is harmless ("already in that state" in Kafka).
    assert lifecycle.maybe_begin_shutdown() is False
    assert lifecycle.state is S.PENDING_CONTROLLED_SHUTDOWN
