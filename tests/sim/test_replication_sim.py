"""Deterministic simulation of replication (STYLE.md §10, DESIGN.md §3.4 and §5).

Three brokers (leader shell + pure leader core, pure follower core) and the controller core on
a simulated clock, network and disk; invariants after every event (``replication_checks``).
CI runs fixed seeds; ``PYKRAFT_SIM_SEEDS=200`` runs seeds 0..199, ``PYKRAFT_SIM_SEED=17``
replays one seed, ``PYKRAFT_SIM_STEPS`` changes the number of events per seed (the same
variables as the controller simulation). A failure names its seed and the replay command.
Models: Kafka's ``RaftEventSimulationTest``, Jepsen's Kafka tests (acks=all, RF 3,
min.insync.replicas 2, kill -9, pauses, partitions), KIP-101 / KIP-279 / KIP-320.
"""

from __future__ import annotations

import os

import pytest

from tests.sim.replication_net import SimSettings
from tests.sim.replication_sim import ReplicationSimulation, SimulationFailure

DEFAULT_SEEDS = 10
DEFAULT_STEPS = 8000


def _seeds() -> list[int]:
    if "PYKRAFT_SIM_SEED" in os.environ:
        return [int(os.environ["PYKRAFT_SIM_SEED"])]
    return list(range(int(os.environ.get("PYKRAFT_SIM_SEEDS", DEFAULT_SEEDS))))


STEPS = int(os.environ.get("PYKRAFT_SIM_STEPS", DEFAULT_STEPS))


def settings_for(seed: int) -> SimSettings:
    """Every fourth seed truncates through OffsetsForLeaderEpoch (a pre-KIP-320 leader)."""
    return SimSettings(truncate_on_fetch=seed % 4 != 3)


def simulation(seed: int) -> ReplicationSimulation:
    return ReplicationSimulation(seed, settings_for(seed))


@pytest.mark.parametrize("seed", _seeds())
def test_replication_simulation(seed: int) -> None:
    sim = simulation(seed)
    sim.run(STEPS)
    assert sim.checker.acked, "nothing was acknowledged: the run tested nothing"


def test_same_seed_same_history() -> None:
    def history(seed: int) -> tuple[object, ...]:
        sim = simulation(seed)
        sim.run(1500)
        logs = tuple(tuple(disk.log(key).records()) for disk in sim.disks.values()
                     for key in sim.partition_keys())
        return sim.now_ms, sim.image, logs, tuple(sim.queue.trace)

    assert history(2) == history(2)


def test_failure_names_seed_and_replay_command() -> None:
    sim = simulation(5)

    def broken_check() -> None:
        raise AssertionError("boom")

    sim.check = broken_check  # type: ignore[method-assign]
    with pytest.raises(SimulationFailure) as failure:
        sim.run(10)
    message = str(failure.value)
    assert "seed=5 step=0" in message and "boom" in message
    assert "PYKRAFT_SIM_SEED=5" in message
    assert "last events:" in message
