"""Jepsen-style chaos (DESIGN.md §5): with ``acks=all``, RF=3 and ``min.insync.replicas=2``, no
acknowledged write is lost and no replica diverges while brokers — partition leaders among them —
are killed with SIGKILL and restarted, one is paused with SIGSTOP for longer than
``broker.session.timeout.ms`` (so the controller fences it and moves its leaderships while it
still believes it leads), a leader dies straight after a restarted replica rejoins or while a
follower is stopped, and the active controller is killed (``FaultKind`` lists them all).

The fault schedule is drawn from a seed, printed at the start; ``CHAOS_SEED=<seed>`` replays the
same schedule (which broker is hit is chosen among the leaders of the moment, so timing can still
differ). The run's history is judged by ``tests.chaos.history_checker`` (pinned by
``test_history_checker.py``), and its metadata log by ``tests.chaos.election_checker``: no leader
elected from outside the ISR. The replica comparison is pinned at the end.
"""

from __future__ import annotations

import enum
import os
import random
import time
from collections.abc import Callable, Iterable

import attrs
import pytest

from tests.chaos.checker import (
    Batch,
    Placed,
    ReplicaDivergence,
    batch_values,
    compare_replicas,
    format_report,
    replica_divergence,
    segment_batches,
)
from tests.chaos.election_checker import check_cluster
from tests.chaos.harness import (
    SESSION_TIMEOUT_MS,
    ChaosBroker,
    ChaosCluster,
    Workload,
    read_to_end,
)
from tests.chaos.history_checker import check

pytestmark = pytest.mark.chaos

TOPIC = "chaos"
PARTITIONS = 3
FAULTS = 7
WARM_UP_ACKNOWLEDGED = 50


class FaultKind(enum.Enum):
    KILL_LEADER = "kill -9 a partition leader, restart it"
    KILL_ANY = "kill -9 any broker, restart it"
    PAUSE_LEADER = "SIGSTOP a partition leader beyond the session timeout, SIGCONT it"
    # KIP-101 / KIP-279: a restarted replica rejoins the ISR, then its partition's leader dies
    # at once, so the newcomer may be elected straight after truncating and catching up.
    BACK_TO_BACK = "kill -9 a leader, restart it, kill -9 the next leader once it rejoins"
    # The stopped follower may or may not have left the ISR (fenced after the session timeout)
    # when the leader dies; only an ISR member may take over.
    PAUSE_FOLLOWER_KILL_LEADER = "SIGSTOP a follower, kill -9 its leader, SIGCONT, restart"
    KILL_CONTROLLER = "kill -9 the active controller, restart it"


@attrs.frozen
class Fault:
    kind: FaultKind
    hold_s: float  # how long the process stays dead or paused
    settle_s: float  # how long the workload runs undisturbed once the ISR is full again
    pick: float  # which candidate, in [0, 1)

    def choose(self, candidates: Iterable[int]) -> int:
        ordered = sorted(candidates)
        return ordered[int(self.pick * len(ordered))]


def fault_schedule(seed: int, count: int) -> list[Fault]:
    """``count`` faults; at least one of each kind."""
    rng = random.Random(seed)
    kinds = [*FaultKind, *(rng.choice(list(FaultKind)) for _ in range(count - len(FaultKind)))]
    rng.shuffle(kinds)
    faults = []
    for kind in kinds:
        if kind is FaultKind.PAUSE_LEADER:
            hold_s = SESSION_TIMEOUT_MS / 1000 + rng.uniform(1.0, 2.0)
        elif kind is FaultKind.PAUSE_FOLLOWER_KILL_LEADER:  # on either side of the session
            hold_s = rng.uniform(0.5, SESSION_TIMEOUT_MS / 1000 + 1.5)
        else:
            hold_s = rng.uniform(0.2, 4.0)
        faults.append(Fault(kind, round(hold_s, 2), round(rng.uniform(0.5, 2.0), 2), rng.random()))
    return faults


Leaders = dict[int, int]  # partition -> leader broker id


def inject(cluster: ChaosCluster, fault: Fault) -> str:
    """Apply one fault and undo it; returns what happened, for the log."""
    leaders = cluster.leaders(TOPIC)
    what = f"{fault.kind.value} ({fault.hold_s}s; leaders {leaders}): "
    what += ACTIONS[fault.kind](cluster, fault, leaders)
    took = wait_full_isr(cluster)
    time.sleep(fault.settle_s)
    return f"{what}; full ISRs {took:.1f}s later"


def kill_leader(cluster: ChaosCluster, fault: Fault, leaders: Leaders) -> str:
    victim = cluster.broker(fault.choose(set(leaders.values())))
    kill_and_restart(cluster, victim, fault.hold_s)
    return f"broker {victim.node_id}"


def kill_any(cluster: ChaosCluster, fault: Fault, leaders: Leaders) -> str:
    victim = cluster.broker(fault.choose(b.node_id for b in cluster.brokers))
    kill_and_restart(cluster, victim, fault.hold_s)
    return f"broker {victim.node_id}"


def pause_leader(cluster: ChaosCluster, fault: Fault, leaders: Leaders) -> str:
    victim = cluster.broker(fault.choose(set(leaders.values())))
    victim.pause()
    time.sleep(fault.hold_s)
    victim.resume()
    return f"broker {victim.node_id}"


def back_to_back(cluster: ChaosCluster, fault: Fault, leaders: Leaders) -> str:
    partition = fault.choose(leaders)
    first = cluster.broker(leaders[partition])
    kill_and_restart(cluster, first, fault.hold_s)
    wait_full_isr(cluster)
    successor = cluster.broker(cluster.leaders(TOPIC)[partition])
    kill_and_restart(cluster, successor, fault.hold_s)
    return f"partition {partition}: broker {first.node_id}, then {successor.node_id}"


def pause_follower_kill_leader(cluster: ChaosCluster, fault: Fault, leaders: Leaders) -> str:
    partition = fault.choose(leaders)
    leader = cluster.broker(leaders[partition])
    [replicas] = [p["replicas"] for p in cluster.topic(TOPIC) if p["partition"] == partition]
    follower = cluster.broker(fault.choose(r for r in replicas if r != leader.node_id))
    follower.pause()
    time.sleep(fault.hold_s)
    leader.kill()
    follower.resume()
    cluster.restart(leader)
    return f"partition {partition}: follower {follower.node_id}, leader {leader.node_id}"


def kill_controller(cluster: ChaosCluster, fault: Fault, leaders: Leaders) -> str:
    victim = cluster.controllers.wait_for_leader()
    victim.kill()
    time.sleep(fault.hold_s)
    victim.start()
    return f"controller {victim.node_id}"


ACTIONS: dict[FaultKind, Callable[[ChaosCluster, Fault, Leaders], str]] = {
    FaultKind.KILL_LEADER: kill_leader,
    FaultKind.KILL_ANY: kill_any,
    FaultKind.PAUSE_LEADER: pause_leader,
    FaultKind.BACK_TO_BACK: back_to_back,
    FaultKind.PAUSE_FOLLOWER_KILL_LEADER: pause_follower_kill_leader,
    FaultKind.KILL_CONTROLLER: kill_controller,
}


def kill_and_restart(cluster: ChaosCluster, victim: ChaosBroker, hold_s: float) -> None:
    victim.kill()
    time.sleep(hold_s)
    cluster.restart(victim)


def wait_full_isr(cluster: ChaosCluster) -> float:
    return cluster.eventually(
        lambda: all(sorted(p["isr"]) == sorted(p["replicas"]) for p in cluster.topic(TOPIC)),
        "every replica back in the ISR",
    )


def test_acknowledged_writes_survive_kills_and_pauses(cluster: ChaosCluster) -> None:
    seed = int(os.environ.get("CHAOS_SEED", random.SystemRandom().randrange(2**32)))
    print(f"\nchaos seed: {seed} (replay with CHAOS_SEED={seed})")
    started = time.monotonic()
    cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    workload = Workload(cluster.bootstrap_servers, TOPIC, PARTITIONS)
    workload.start()
    try:
        cluster.eventually(
            lambda: workload.acknowledged_count() >= WARM_UP_ACKNOWLEDGED, "the producer gets going"
        )
        for fault in fault_schedule(seed, FAULTS):
            print(f"{time.monotonic() - started:6.1f}s {inject(cluster, fault)}")
    finally:
        workload.stop()
    try:
        cluster.eventually(lambda: cluster.in_sync(TOPIC), "replicas converge")
        converged = True
    except AssertionError as error:
        print(error)
        converged = False

    final_log = read_to_end(cluster.bootstrap_servers, TOPIC, PARTITIONS)
    report = check(workload.history(final_log))
    divergences = replica_divergences(cluster, final_log)
    elections = check_cluster(cluster.controllers)
    print(format_report(report, divergences, converged))
    print(elections.of_topic(TOPIC).render())
    print(
        f"send failures (never acknowledged; may be lost): {len(workload.failures)}; "
        f"run time {time.monotonic() - started:.1f}s"
    )
    # Nothing acknowledged lost (lost-write, unseen: the final read saw everything), nothing
    # read and then gone (inconsistent-offsets); the producer is idempotent: no retry
    # duplicates, no reordering in a partition (duplicate, nonmonotonic-send; KIP-98).
    assert report.bad() == {}, report.render()
    assert divergences == [] and converged
    # No leader from outside the ISR, in this test's topic or any other (tests/chaos/
    # election_checker.py, over the metadata log).
    assert elections.violations == (), elections.render()
    assert report.operations["send ok"] >= WARM_UP_ACKNOWLEDGED


def replica_divergences(
    cluster: ChaosCluster, final_log: dict[int, list[Placed]], topic: str = TOPIC
) -> list[ReplicaDivergence]:
    """Every replica's segment files against the leader's, below each one's high watermark;
    and the leader's files against what a consumer read from it."""
    out = []
    for partition in cluster.topic(topic):
        index, leader_id = partition["partition"], partition["leader"]
        logs = {
            b.node_id: segment_batches(b.data_dir / f"{topic}-{index}")
            for b in cluster.brokers
            if b.node_id in partition["replicas"]
        }
        high_watermarks = {
            b.node_id: b.partitions(topic)[index]["high_watermark"]
            for b in cluster.brokers
            if b.node_id in partition["replicas"]
        }
        out += compare_replicas(
            partition=index, leader_id=leader_id, logs=logs, high_watermarks=high_watermarks
        )
        on_disk = [
            p for p in batch_values(index, logs[leader_id]) if p.offset < high_watermarks[leader_id]
        ]
        if on_disk != final_log[index]:
            out.append(
                ReplicaDivergence(
                    partition=index,
                    broker_id=leader_id,
                    detail="a consumer read other records than the leader's segment files hold",
                )
            )
    return out


# ---------------------------------------------------------------- the checker itself


def batch(base: int, last: int, tag: bytes = b"") -> Batch:
    return Batch(base, last, b"%d-%d" % (base, last) + tag)


LEADER = [batch(0, 2), batch(3, 3), batch(4, 7), batch(8, 9)]


@pytest.mark.parametrize(
    ("replica", "high_watermark", "expected"),
    [
        (LEADER, 10, None),
        (LEADER, 8, None),  # the tail above the high watermark is not compared
        (LEADER[:3], 8, None),
        ([*LEADER[:2], batch(4, 7, b"other")], 8, "batch 2 (4-7) differs from the leader's (4-7)"),
        (LEADER[:2], 8, "log ends at 4, below the high watermark 8"),
        ([LEADER[0], LEADER[2]], 8, "hole or overlap: batch at 4, expected 3"),
        (LEADER, 6, "batch 4-7 straddles 6"),
        ([], 0, None),
        ([], 3, "log ends at 0, below the high watermark 3"),
    ],
)
def test_replica_divergence(
    replica: list[Batch], high_watermark: int, expected: str | None
) -> None:
    assert replica_divergence(LEADER, replica, high_watermark) == expected


def test_compare_replicas_names_the_divergent_broker() -> None:
    logs = {10: LEADER, 11: LEADER[:3], 12: [batch(0, 2, b"x")]}
    assert compare_replicas(
        partition=1, leader_id=10, logs=logs, high_watermarks={10: 10, 11: 8, 12: 3}
    ) == [
        ReplicaDivergence(
            partition=1, broker_id=12, detail="batch 0 (0-2) differs from the leader's (0-2)"
        )
    ]


def test_fault_schedules_repeat_from_a_seed_and_hold_every_kind() -> None:
    assert fault_schedule(7, FAULTS) == fault_schedule(7, FAULTS)
    assert fault_schedule(7, FAULTS) != fault_schedule(8, FAULTS)
    for seed in range(20):
        faults = fault_schedule(seed, FAULTS)
        assert {f.kind for f in faults} == set(FaultKind)
        assert all(
            f.hold_s > SESSION_TIMEOUT_MS / 1000 for f in faults if f.kind is FaultKind.PAUSE_LEADER
        )
