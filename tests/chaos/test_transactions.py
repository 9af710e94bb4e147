"""Transactions under chaos (issue 12; KIP-98): transactional producers move money between
accounts kept on different partitions while the transaction coordinators' brokers and the
accounts' partition leaders are killed with SIGKILL and restarted, or paused with SIGSTOP past
``broker.session.timeout.ms`` (so their leaderships move while they still believe they hold
them), on the real chaos cluster (3 controllers, 3 brokers, ``__transaction_state`` RF=3).

Each transaction writes a debit and a credit of one amount to two partitions and is committed or
aborted at random; now and then its producer is replaced mid-transaction, and the new instance
must fence it (its commit refused, its records aborted). A read_committed consumer reads
throughout. Once each fault is healed the last stable offset must catch up with the high
watermark at each partition within ``LSO_BOUND_S`` (a transaction left open by a dead producer
instance ends at its ``transaction.timeout.ms`` at the latest), and the producers must commit
again. At the end a producer writes a transfer and vanishes: the coordinator must abort it at
its timeout. Then the topic is read back read_committed: ``history_checker.check`` judges the
run's history in Jepsen's terms (aborted reads, duplicates, records read during the run and gone
at the end, lost and unseen writes, poll skips, the consumer's nonmonotonic polls; the
transactions here only write and the consumer only reads, so the history has no write-read
edges between transactions and no G1c to find: G0, which it can hold, is expected of Kafka and
tolerated), ``txn_checker.check_transactions`` reports
lost committed transactions, partial transactions, and whether the committed total still equals
the deposits: zero of each.

Bounds: ``CHAOS_TXN_FAULTS`` faults (default 4, one of each kind when there are at least 4),
stopping early once ``CHAOS_TXN_SECONDS`` of faults have passed (default 45);
``CHAOS_SEED=<seed>`` replays a fault schedule (which broker is hit depends on the leaders of
the moment, so timing can still differ).
"""

from __future__ import annotations

import enum
import os
import random
import time

import attrs
import pytest

from pykraft.coordinator.transaction.config import partition_for
from tests.chaos.checker import compare_replicas, segment_batches
from tests.chaos.election_checker import check_cluster
from tests.chaos.harness import (
    SESSION_TIMEOUT_MS,
    TRANSACTION_STATE_PARTITIONS,
    ChaosBroker,
    ChaosCluster,
)
from tests.chaos.history_checker import check
from tests.chaos.txn_checker import (
    LsoStall,
    Outcome,
    check_transactions,
    deposit,
    format_txn_report,
    lso_behind,
    transfer,
)
from tests.chaos.txn_workload import (
    TRANSACTION_TIMEOUT_MS,
    TransferWorkload,
    discard,
    offsets,
    read_log,
)

pytestmark = pytest.mark.chaos

TOPIC = "bank"
STATE_TOPIC = "__transaction_state"
PARTITIONS = 4
ACCOUNTS = 8
PRODUCERS = 3
DEPOSIT = 1000
WARM_UP_COMMITTED = 20
FAULTS = int(os.environ.get("CHAOS_TXN_FAULTS", "4"))
FAULT_BUDGET_S = float(os.environ.get("CHAOS_TXN_SECONDS", "45"))
# A transaction open when the cluster heals ends by its timeout at the latest, found by the
# coordinator's next check (harness: every 1 s); the rest is markers, retries and polling.
LSO_BOUND_S = TRANSACTION_TIMEOUT_MS / 1000 + 1 + 9
PROGRESS_COMMITS = 5  # commits the producers must make after each heal, within LSO_BOUND_S


class FaultKind(enum.Enum):
    KILL_COORDINATOR = "kill -9 a transaction coordinator's broker, restart it"
    PAUSE_COORDINATOR = "SIGSTOP a transaction coordinator's broker past the session, SIGCONT it"
    KILL_LEADER = "kill -9 a leader of the accounts' partitions, restart it"
    PAUSE_LEADER = "SIGSTOP a leader of the accounts' partitions past the session, SIGCONT it"


@attrs.frozen
class Fault:
    kind: FaultKind
    hold_s: float  # how long the broker stays dead or paused
    settle_s: float  # how long the workload runs undisturbed after the checks
    pick: float  # which candidate broker, in [0, 1)

    def choose(self, candidates: set[int]) -> int:
        ordered = sorted(candidates)
        return ordered[int(self.pick * len(ordered))]


def fault_schedule(seed: int, count: int) -> list[Fault]:
    """``count`` faults; every kind once when ``count`` allows, then drawn at random."""
    rng = random.Random(seed)
    kinds = list(FaultKind)[:count]
    kinds += [rng.choice(list(FaultKind)) for _ in range(count - len(kinds))]
    rng.shuffle(kinds)
    faults = []
    for kind in kinds:
        if kind in (FaultKind.PAUSE_COORDINATOR, FaultKind.PAUSE_LEADER):
            hold_s = SESSION_TIMEOUT_MS / 1000 + rng.uniform(1.0, 2.0)
        else:
            hold_s = rng.uniform(0.2, 3.0)
        faults.append(Fault(kind, round(hold_s, 2), round(rng.uniform(0.5, 1.5), 2), rng.random()))
    return faults


def coordinators(cluster: ChaosCluster, transactional_ids: list[str]) -> set[int]:
    """The brokers leading the ``__transaction_state`` partitions of ``transactional_ids``."""
    leaders = cluster.leaders(STATE_TOPIC)
    return {
        leaders[partition_for(tid, TRANSACTION_STATE_PARTITIONS)] for tid in transactional_ids
    } - {-1}


def inject(cluster: ChaosCluster, workload: TransferWorkload, fault: Fault) -> str:
    """Hit one broker and heal it; returns what happened, for the log."""
    if fault.kind in (FaultKind.KILL_COORDINATOR, FaultKind.PAUSE_COORDINATOR):
        candidates = coordinators(cluster, workload.transactional_ids)
    else:
        candidates = set(cluster.leaders(TOPIC).values()) - {-1}
    victim = cluster.broker(fault.choose(candidates))
    if fault.kind in (FaultKind.KILL_COORDINATOR, FaultKind.KILL_LEADER):
        victim.kill()
        time.sleep(fault.hold_s)
        cluster.restart(victim)
    else:
        victim.pause()
        time.sleep(fault.hold_s)
        victim.resume()
    return f"{fault.kind.value} ({fault.hold_s}s): broker {victim.node_id} of {sorted(candidates)}"


def wait_full_isr(cluster: ChaosCluster) -> float:
    return cluster.eventually(
        lambda: all(
            sorted(p["isr"]) == sorted(p["replicas"]) and p["leader"] >= 0
            for topic in (TOPIC, STATE_TOPIC)
            for p in cluster.topic(topic)
        ),
        "every replica back in the ISR",
    )


def wait_stable(cluster: ChaosCluster, when: str, stalls: list[LsoStall]) -> float:
    """Poll until each partition's last stable offset reaches its high watermark of now;
    a stall is recorded (not raised) when that takes longer than ``LSO_BOUND_S``."""
    servers = ",".join(cluster.bootstrap_servers)
    target = offsets(servers, TOPIC, PARTITIONS, "read_uncommitted")
    assert len(target) == PARTITIONS, f"no high watermark from every leader: {target}"
    started = time.monotonic()
    while behind := lso_behind(offsets(servers, TOPIC, PARTITIONS, "read_committed"), target):
        waited_s = time.monotonic() - started
        if waited_s > LSO_BOUND_S:
            stalls.append(LsoStall(when, round(waited_s, 1), behind))
            break
        time.sleep(0.2)
    return time.monotonic() - started


def wait_progress(cluster: ChaosCluster, workload: TransferWorkload) -> float:
    committed = workload.ended(Outcome.COMMITTED)
    return cluster.eventually(
        lambda: workload.ended(Outcome.COMMITTED) >= committed + PROGRESS_COMMITS,
        "the producers commit again",
        timeout_s=LSO_BOUND_S,
    )


def open_accounts(cluster: ChaosCluster, workload: TransferWorkload) -> None:
    """One committed deposit into every account (it also creates ``__transaction_state``)."""
    producer = workload.new_instance("chaos-bank-deposit")
    assert producer is not None
    assert workload.run_one(producer, deposit("deposit", ACCOUNTS, DEPOSIT), commit=True)
    discard(producer)
    assert workload.outcomes["deposit"] is Outcome.COMMITTED, workload.errors
    cluster.eventually(lambda: len(cluster.topic(STATE_TOPIC)) > 0, f"{STATE_TOPIC} exists")
    wait_full_isr(cluster)


def test_transfers_stay_atomic_through_coordinator_and_leader_failures(
    cluster: ChaosCluster,
) -> None:
    seed = int(os.environ.get("CHAOS_SEED", random.SystemRandom().randrange(2**32)))
    print(f"\nchaos seed: {seed} (replay with CHAOS_SEED={seed})")
    started = time.monotonic()
    cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    workload = TransferWorkload(
        ",".join(cluster.bootstrap_servers),
        TOPIC,
        partitions=PARTITIONS,
        accounts=ACCOUNTS,
        producers=PRODUCERS,
        seed=seed,
    )
    open_accounts(cluster, workload)
    stalls: list[LsoStall] = []
    workload.start()
    try:
        cluster.eventually(
            lambda: workload.ended(Outcome.COMMITTED) >= WARM_UP_COMMITTED, "transfers get going"
        )
        faults_started = time.monotonic()
        for fault in fault_schedule(seed, FAULTS):
            if time.monotonic() - faults_started > FAULT_BUDGET_S:
                print(f"fault budget of {FAULT_BUDGET_S}s spent; stopping early")
                break
            what = inject(cluster, workload, fault)
            isr_s = wait_full_isr(cluster)
            stable_s = wait_stable(cluster, what, stalls)
            progress_s = wait_progress(cluster, workload)
            print(
                f"{time.monotonic() - started:6.1f}s {what}; full ISRs {isr_s:.1f}s later, "
                f"LSO at the high watermark {stable_s:.1f}s after, commits {progress_s:.1f}s after"
            )
            time.sleep(fault.settle_s)
    finally:
        workload.stop()
    cluster.eventually(lambda: cluster.in_sync(TOPIC), "replicas converge")
    # A producer that writes and then vanishes: only the coordinator's timeout frees the LSO.
    abandoned = transfer("abandoned", 0, 1, DEPOSIT)
    producer = workload.leave_open("chaos-bank-abandoned", abandoned)
    stable_s = wait_stable(cluster, "the end (a transaction left open)", stalls)
    print(f"LSO at the high watermark {stable_s:.1f}s after a transaction was left open")
    workload.mark(abandoned, Outcome.TIMED_OUT)
    discard(producer)

    servers = ",".join(cluster.bootstrap_servers)
    high_watermarks = offsets(servers, TOPIC, PARTITIONS, "read_uncommitted")
    committed_log = read_log(servers, TOPIC, high_watermarks, "read_committed")
    report = check_transactions(
        transactions=workload.transactions,
        outcomes=workload.outcomes,
        committed_log=committed_log,
        uncommitted_log=read_log(servers, TOPIC, high_watermarks, "read_uncommitted"),
    )
    history = check(workload.history(committed_log))
    elections = check_cluster(cluster.controllers)  # every topic's, __transaction_state too
    summary = history.render() + "\n" + format_txn_report(report, stalls)
    summary += "\n" + elections.render()
    print(summary)
    print(
        f"fenced instances' commits acknowledged {len(workload.zombie_commits)}, refused "
        f"{dict(workload.zombie_errors)}; producer instances {workload.instances}; "
        f"errors {len(workload.errors)}"
        f"{': ' + '; '.join(workload.errors[:5]) if workload.errors else ''}; "
        f"run time {time.monotonic() - started:.1f}s"
    )
    # G0 is expected of Kafka's transactions (writes are not isolated from each other).
    assert report.anomalies == 0 and history.bad() == {} and stalls == [], summary
    assert elections.violations == (), summary
    assert workload.zombie_commits == [], "a fenced instance's commit was acknowledged"
    assert report.committed_total == DEPOSIT * ACCOUNTS
    # The run exercised both ends: commits, and aborted records really in the log.
    assert report.outcomes[Outcome.COMMITTED] > WARM_UP_COMMITTED and report.aborted_in_log > 0
    assert replica_divergences(cluster) == []


def replica_divergences(cluster: ChaosCluster) -> list[object]:
    """The accounts' partitions (markers included) byte for byte on every replica below its
    high watermark."""
    out: list[object] = []
    for partition in cluster.topic(TOPIC):
        index = partition["partition"]
        replicas: list[ChaosBroker] = [cluster.broker(r) for r in partition["replicas"]]
        out += compare_replicas(
            partition=index,
            leader_id=partition["leader"],
            logs={b.node_id: segment_batches(b.data_dir / f"{TOPIC}-{index}") for b in replicas},
            high_watermarks={
                b.node_id: b.partitions(TOPIC)[index]["high_watermark"] for b in replicas
            },
        )
    return out


def test_fault_schedules_repeat_from_a_seed_and_hold_every_kind() -> None:
    assert fault_schedule(7, 4) == fault_schedule(7, 4)
    assert fault_schedule(7, 6) != fault_schedule(8, 6)
    for seed in range(20):
        assert {f.kind for f in fault_schedule(seed, 4)} == set(FaultKind)
        assert len(fault_schedule(seed, 2)) == 2
        pauses = [f for f in fault_schedule(seed, 6) if f.kind.name.startswith("PAUSE")]
        assert all(f.hold_s > SESSION_TIMEOUT_MS / 1000 for f in pauses)
