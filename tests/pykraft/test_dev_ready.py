"""When ``pykraft dev`` calls its cluster ready (``pykraft/dev_ready.py``), what ``cluster.json``
shows before and after (``pykraft/dev_cluster_file.py``), and ``pykraft dev-wait``'s verdicts.

Ready is what Kafka needs for a client's first CreateTopics with replication factor 3 to pass:
an active controller, every broker registered and unfenced in its image
(``ReplicationControlManager.createTopic`` places replicas on unfenced brokers only), and enough
of them for the internal topics (``AutoTopicCreationManager.hasEnoughLiveBrokers``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pykraft.dev_cluster_file import (
    NOT_READY_KEY,
    place_addresses,
    read_cluster_json,
    write_cluster_json,
)
from pykraft.dev_ready import (
    ClusterView,
    RegisteredBroker,
    internal_replication_factor,
    progress_lines,
    readiness,
)
from pykraft.dev_wait import EXIT_READY, EXIT_TIMED_OUT, Verdict, verdict, wait_ready

CONTROLLERS = (1, 2, 3)
BROKERS = (10, 11, 12)


def unfenced(*ids: int) -> tuple[RegisteredBroker, ...]:
    return tuple(RegisteredBroker(broker_id=i, fenced=False) for i in ids)


def view(
    leader: int | None = 2,
    registered: tuple[RegisteredBroker, ...] | None = unfenced(*BROKERS),
    states: dict[int, str | None] | None = None,
    up: tuple[int, ...] = CONTROLLERS,
) -> ClusterView:
    return ClusterView(
        leader_id=leader,
        registered=registered,
        broker_states=states if states is not None else dict.fromkeys(BROKERS, "RUNNING"),
        controllers_up=frozenset(up),
    )


def test_ready_when_a_leader_and_every_broker_is_registered_unfenced_and_running() -> None:
    state = readiness(CONTROLLERS, BROKERS, 3, view())
    assert state.ready and state.waiting_for == ()
    assert dict(state.progress) == {
        "controller-1": "up, following",
        "controller-2": "active controller",
        "controller-3": "up, following",
        "broker-10": "ready",
        "broker-11": "ready",
        "broker-12": "ready",
    }


@pytest.mark.parametrize(
    ("cluster", "waiting"),
    [
        # The race: a broker reports RUNNING before the active controller's image
        # unfences it — a CreateTopics with RF=3 would see 2 brokers.
        (
            view(registered=(*unfenced(10, 11), RegisteredBroker(broker_id=12, fenced=True))),
            "broker-12 (RUNNING, registered, fenced (catching up with the metadata log))",
        ),
        (view(registered=unfenced(10, 11)), "broker-12 (RUNNING, not registered yet)"),
        (
            view(states={10: "RUNNING", 11: "RUNNING", 12: "RECOVERY"}),
            "broker-12 (RECOVERY, unfenced)",
        ),
        (view(states={10: "RUNNING", 11: "RUNNING", 12: None}), "broker-12 (starting)"),
        (
            view(
                registered=(
                    *unfenced(10, 11),
                    RegisteredBroker(broker_id=12, fenced=False, in_controlled_shutdown=True),
                )
            ),
            "broker-12 (RUNNING, in controlled shutdown)",
        ),
        (view(leader=None, registered=None), "the controller quorum to elect a leader"),
        # The controller could not be asked for its brokers: nothing counts as registered.
        (view(registered=None), "broker-10 (RUNNING, not registered yet)"),
    ],
)
def test_not_ready(cluster: ClusterView, waiting: str) -> None:
    state = readiness(CONTROLLERS, BROKERS, 3, cluster)
    assert not state.ready
    assert waiting in state.waiting_for


def test_a_leader_elected_but_not_every_controller_up_is_ready() -> None:
    # KRaft needs a majority, not every voter, for a leader; clients need only the leader.
    state = readiness(CONTROLLERS, BROKERS, 3, view(up=(1, 2)))
    assert state.ready
    assert state.progress["controller-3"] == "starting"


def test_the_internal_topics_replication_factor_must_fit_the_unfenced_brokers() -> None:
    # offsets.topic.replication.factor=3 on 2 brokers: __consumer_offsets can never be made.
    two = (10, 11)
    cluster = view(registered=unfenced(*two), states=dict.fromkeys(two, "RUNNING"))
    assert readiness(CONTROLLERS, two, 2, cluster).ready
    state = readiness(CONTROLLERS, two, 3, cluster)
    assert not state.ready
    assert state.waiting_for == (
        "3 unfenced brokers for the internal topics' replication factor (2 now)",
    )


def test_registered_brokers_outside_the_layout_do_not_count() -> None:
    cluster = view(registered=unfenced(10, 11, 99), states={10: "RUNNING", 11: "RUNNING"})
    state = readiness(CONTROLLERS, (10, 11, 12), 3, cluster)
    assert not state.ready and "broker-12 (starting)" in state.waiting_for


OFFSETS_RF = "offsets.topic.replication.factor"
TXN_RF = "transaction.state.log.replication.factor"


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({}, 3),  # Kafka's defaults
        ({OFFSETS_RF: "1", TXN_RF: "1"}, 1),
        ({OFFSETS_RF: "1", TXN_RF: "2"}, 2),
        ({OFFSETS_RF: "x"}, 3),
        ({OFFSETS_RF: "0", TXN_RF: "0"}, 1),
    ],
)
def test_internal_replication_factor(properties: dict[str, str], expected: int) -> None:
    assert internal_replication_factor(properties) == expected


def test_progress_lines_name_only_the_processes_that_moved() -> None:
    before = {"controller-1": "starting", "broker-10": "starting"}
    after = {"controller-1": "active controller", "broker-10": "starting"}
    assert progress_lines(before, after) == ["pykraft dev: controller-1 active controller"]
    assert progress_lines(after, after) == []
    assert progress_lines({}, {"broker-10": "ready"}) == ["pykraft dev: broker-10 ready"]


ADDRESSES = {
    "bootstrap_servers": "127.0.0.1:9092",
    "admin_url": "http://127.0.0.1:9102",
    "admin_urls": ["http://127.0.0.1:9102"],
}


@pytest.mark.parametrize("state", ["starting", "stopped"])
def test_addresses_stay_under_not_ready_until_running(state: str) -> None:
    body = place_addresses({"cluster_id": "c"}, ADDRESSES, state)
    assert body == {"state": state, "cluster_id": "c", NOT_READY_KEY: ADDRESSES}
    assert "bootstrap_servers" not in body


def test_addresses_are_top_level_once_running() -> None:
    body = place_addresses({"cluster_id": "c"}, ADDRESSES, "running")
    assert body == {"state": "running", "cluster_id": "c", **ADDRESSES}


def test_place_addresses_refuses_unknown_states_and_partial_addresses() -> None:
    with pytest.raises(AssertionError):
        place_addresses({}, ADDRESSES, "ready")
    with pytest.raises(AssertionError):
        place_addresses({}, {"bootstrap_servers": "x"}, "running")


def test_cluster_json_round_trips_and_reads_empty_when_absent_or_torn(tmp_path: Path) -> None:
    assert read_cluster_json(tmp_path) == {}
    body = place_addresses({"dev_pid": 1}, ADDRESSES, "running")
    write_cluster_json(tmp_path, body)
    assert read_cluster_json(tmp_path) == body
    assert not (tmp_path / "cluster.json.partial").exists()
    (tmp_path / "cluster.json").write_text('{"state": "runn')
    assert read_cluster_json(tmp_path) == {}
    (tmp_path / "cluster.json").write_text("[1, 2]")
    assert read_cluster_json(tmp_path) == {}


def info(state: str, dev_pid: int = 7) -> dict[str, Any]:
    return place_addresses({"dev_pid": dev_pid}, ADDRESSES, state)


@pytest.mark.parametrize(
    ("file", "alive", "watched", "expected"),
    [
        ({}, False, set(), Verdict.WAIT),
        (info("starting"), True, {7}, Verdict.WAIT),
        (info("running"), True, {7}, Verdict.READY),
        # An earlier run's files: its pykraft dev is gone; a new one is about to replace them.
        (info("running"), False, set(), Verdict.WAIT),
        (info("stopped"), False, set(), Verdict.WAIT),
        # The run being waited for stopped (failed start-up, Ctrl-C).
        (info("stopped"), False, {7}, Verdict.STOPPED),
        (info("stopped", dev_pid=8), False, {7}, Verdict.WAIT),
    ],
)
def test_dev_wait_verdict(
    file: dict[str, Any], alive: bool, watched: set[int], expected: Verdict
) -> None:
    assert verdict(file, alive, watched) is expected


def test_dev_wait_exit_codes(tmp_path: Path) -> None:
    write_cluster_json(tmp_path, info("running", dev_pid=os.getpid()))
    code, seen = wait_ready(tmp_path, timeout_s=5)
    assert (code, seen["bootstrap_servers"]) == (EXIT_READY, "127.0.0.1:9092")
    write_cluster_json(tmp_path, info("starting", dev_pid=os.getpid()))
    assert wait_ready(tmp_path, timeout_s=0)[0] == EXIT_TIMED_OUT
    # A stopped file of a pid never seen alive is an earlier run's: waited past, not a failure.
    above_pid_max = 2**22 + 1  # Linux's largest pid_max is 2**22
    write_cluster_json(tmp_path, info("stopped", dev_pid=above_pid_max))
    assert wait_ready(tmp_path, timeout_s=0)[0] == EXIT_TIMED_OUT
