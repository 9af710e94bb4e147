"""LifecycleCore: registration, heartbeats and controlled shutdown of one broker process as a
script of answers (KIP-631; Kafka's BrokerLifecycleManager schedule), no clock and no I/O."""

from __future__ import annotations

import attrs
import pytest

from pykraft.broker.lifecycle import BrokerState
from pykraft.broker.lifecycle_core import (
    FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS,
    STARTING_HEARTBEAT_DELAY_MS,
    HeartbeatRequest,
    LifecycleCore,
    LifecycleStep,
    RegistrationRequest,
)

INTERVAL_MS = 2000
S = BrokerState


@attrs.frozen
class Answer:
    is_caught_up: bool = True
    is_fenced: bool = True
    should_shut_down: bool = False


def started() -> LifecycleCore:
    core = LifecycleCore(7, "incarnation-a", heartbeat_interval_ms=INTERVAL_MS)
    core.start()
    return core


def running() -> LifecycleCore:
    core = started()
    core.on_registration(42)
    core.on_heartbeat(Answer())
    core.set_ready_to_unfence()
    core.on_heartbeat(Answer(is_fenced=False))
    assert core.state is S.RUNNING
    return core


def test_registers_with_its_incarnation_until_it_succeeds_then_heartbeats_quickly() -> None:
    core = started()
    assert core.request(5) == RegistrationRequest(7, "incarnation-a")
    assert core.on_registration(None) == LifecycleStep(INTERVAL_MS)  # retried
    assert core.request(5) == RegistrationRequest(7, "incarnation-a")
    assert core.on_registration(42) == LifecycleStep(STARTING_HEARTBEAT_DELAY_MS)
    assert core.request(5) == HeartbeatRequest(7, 42, 5, want_fence=True, want_shut_down=False)


def test_caught_up_installs_the_publisher_and_only_then_asks_to_be_unfenced() -> None:
    core = started()
    core.on_registration(42)
    assert core.on_heartbeat(Answer(is_caught_up=False)) == LifecycleStep(10)
    step = core.on_heartbeat(Answer(is_caught_up=True))
    assert step == LifecycleStep(10, S.RECOVERY, install_publisher=True)
    assert core.request(9) == HeartbeatRequest(7, 42, 9, want_fence=True, want_shut_down=False)
    core.set_ready_to_unfence()
    assert core.request(9) == HeartbeatRequest(7, 42, 9, want_fence=False, want_shut_down=False)
    assert core.on_heartbeat(Answer(is_fenced=True)) == LifecycleStep(INTERVAL_MS)
    assert core.on_heartbeat(Answer(is_fenced=False)) == LifecycleStep(INTERVAL_MS, S.RUNNING)


def test_a_failed_heartbeat_is_retried_after_the_interval_and_changes_nothing() -> None:
    core = running()
    assert core.on_heartbeat(None) == LifecycleStep(INTERVAL_MS)
    assert core.state is S.RUNNING


def test_controlled_shutdown_heartbeats_want_shut_down_until_allowed() -> None:
    core = running()
    assert core.begin_shutdown()
    assert core.request(3).want_shut_down  # type: ignore[union-attr]
    assert core.on_heartbeat(Answer(is_fenced=False)) == LifecycleStep(
        FIRST_SHUTDOWN_HEARTBEAT_DELAY_MS
    )
    assert core.on_heartbeat(Answer(is_fenced=False)) == LifecycleStep(INTERVAL_MS)
    assert core.on_heartbeat(Answer(should_shut_down=True)) == LifecycleStep(
        INTERVAL_MS, S.SHUTTING_DOWN, shutdown_allowed=True
    )
    assert core.done
    assert not core.begin_shutdown()  # already shutting down


@pytest.mark.parametrize("state", [S.STARTING, S.RECOVERY])
def test_shutdown_before_running_needs_no_controller(state: BrokerState) -> None:
    core = started()
    core.on_registration(42)
    if state is S.RECOVERY:
        core.on_heartbeat(Answer())
    assert not core.begin_shutdown()
    assert core.state is S.SHUTTING_DOWN and core.done


def test_giving_up_a_controlled_shutdown_shuts_down_anyway() -> None:
    core = running()
    core.begin_shutdown()
    core.give_up_controlled_shutdown()
    assert core.state is S.SHUTTING_DOWN


def test_a_process_registers_once() -> None:
    core = started()
    core.on_registration(42)
    with pytest.raises(AssertionError):
        core.on_registration(43)


def test_ready_to_unfence_before_catching_up_is_a_bug() -> None:
    core = started()
    with pytest.raises(AssertionError):
        core.set_ready_to_unfence()
