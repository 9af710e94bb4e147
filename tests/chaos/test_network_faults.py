"""Network faults between real processes (issue 17): each controller and broker in its own
network namespace (``tests/chaos/netns.py``), an ``acks=all``, RF=3, ``min.insync.replicas=2``
workload, and Jepsen's partitions — one node cut off, a minority/majority split, one-way loss,
a bridge, flapping — a bandwidth limit, and added latency on every link
(``tests/chaos/net_faults.py``; the delay comes from relays in the namespaces,
``tests/chaos/relay.py``, as this kernel has no netem; an acks=all produce round trip must rise
by 2 to 4 x the delay while it holds). After every heal, every partition must take an
``acks=all`` write again within ``broker.session.timeout.ms`` + 2 s (measured); at the end
nothing acknowledged is lost, nothing inconsistent was read, and the replicas are identical
below the high watermark (``tests/chaos/checker.py``).

CI runs one run of latency and ``CI_KINDS`` other kinds drawn from the seed.
``PYKRAFT_CHAOS_RUNS=N`` makes N runs of every kind; ``PYKRAFT_CHAOS_NET_FAULTS=split,bridge``
(``FaultKind`` names) picks the kinds; ``CHAOS_SEED`` replays a schedule.
Without namespaces the module skips, saying why.
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from kafka import KafkaProducer

from tests.chaos.checker import format_report
from tests.chaos.election_checker import check_cluster
from tests.chaos.harness import SESSION_TIMEOUT_MS, ChaosCluster, Workload, read_to_end
from tests.chaos.history import Op, Poll
from tests.chaos.history_checker import check
from tests.chaos.net_faults import (
    BANDWIDTH_LIMIT,
    FaultKind,
    NetFault,
    bridge,
    flap_phases,
    isolate,
    net_schedule,
    one_way,
    split,
)
from tests.chaos.netns import Network, place, unavailable_reason
from tests.chaos.test_chaos import replica_divergences

pytestmark = pytest.mark.chaos

PARTITIONS = 3
CI_KINDS = 3
WARM_UP_ACKNOWLEDGED = 50
AVAILABLE_WITHIN_S = SESSION_TIMEOUT_MS / 1000 + 2.0
PROBE_PREFIX = b"probe-"
RUNS = int(os.environ.get("PYKRAFT_CHAOS_RUNS", "1"))
ELR_ON = {"feature": "eligible.leader.replicas.version", "max_version_level": 1}
ROUND_TRIPS = 7  # acks=all sends timed one after another, before and during the latency fault


@pytest.fixture(scope="module")
def netns_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ChaosCluster, Network]]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"network faults and latency relays NOT run (no network namespaces: {reason})")
    network = Network()
    try:
        network.create()
        network.start_relays()
        print(
            f"\nnetwork faults run in network namespaces + nftables on {network.subnet}.0/24 "
            "(latency: a relay in every namespace, no netem here; bandwidth: tc tbf)"
        )
        cluster = ChaosCluster(Path(tmp_path_factory.mktemp("netns")))
        place(cluster, network)
        try:
            cluster.start()
            # KIP-966 on here (new clusters start with it off; the kill -9 chaos cluster keeps
            # Kafka's older rule): the election checker then also sees elections from the ELR.
            cluster.request("POST", "/v1/features", {"feature_updates": [ELR_ON]})
            yield cluster, network
        finally:
            cluster.stop()
    finally:
        network.destroy()


def kinds_of_run(rng: random.Random) -> list[FaultKind]:
    named = os.environ.get("PYKRAFT_CHAOS_NET_FAULTS")
    if named:
        return [FaultKind[name.strip().upper()] for name in named.split(",")]
    if RUNS > 1:
        return list(FaultKind)
    # Latency in every CI run (its round-trip check proves the relays work; ~5 s), with
    # CI_KINDS partition kinds drawn from the seed.
    others = [kind for kind in FaultKind if kind is not FaultKind.LATENCY]
    return [FaultKind.LATENCY, *rng.sample(others, CI_KINDS)]


@pytest.mark.parametrize("run", range(RUNS))
def test_acknowledged_writes_survive_network_faults(
    netns_cluster: tuple[ChaosCluster, Network], run: int
) -> None:
    cluster, network = netns_cluster
    seed = int(os.environ.get("CHAOS_SEED", random.SystemRandom().randrange(2**32))) + run
    print(f"\nnetwork chaos seed: {seed} (replay with CHAOS_SEED={seed - run})")
    topic = f"netchaos-{run}"
    started = time.monotonic()
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    faults = net_schedule(seed, kinds_of_run(random.Random(seed)), SESSION_TIMEOUT_MS / 1000)
    workload = Workload(cluster.bootstrap_servers, topic, PARTITIONS)
    availability: list[tuple[FaultKind, float]] = []
    silent: list[str] = []  # faults whose cut links dropped nothing
    slowed: list[str] = []  # latency faults whose round trips did not rise as they must
    # Each cleanup runs even if one before it raises (the workload's threads would hang pytest).
    with contextlib.ExitStack() as cleanup:
        probe = availability_probe(cluster)
        cleanup.callback(probe.close, timeout=5)
        workload.start()
        cleanup.callback(workload.stop)
        cleanup.callback(network.heal)
        cluster.eventually(
            lambda: workload.acknowledged_count() >= WARM_UP_ACKNOWLEDGED, "the producer gets going"
        )
        for fault in faults:
            before = network.dropped.copy()
            if fault.kind is FaultKind.LATENCY:
                what, expected = slow_links(cluster, network, probe, topic, fault, slowed)
            else:
                what, expected = inject(cluster, network, topic, fault)
            dropped = network.dropped - before
            what += f"; packets dropped {dict(sorted(dropped.items()))}"
            if expected and sum(dropped[n] for n in expected) == 0:
                silent.append(f"{fault.kind.name}: none at {sorted(expected)}")
            healed = time.monotonic()
            took = wait_available(probe, topic)
            time.sleep(fault.settle_s)
            # Still available after the settle: a fencing that lands late shows here.
            leaderless = sorted(p for p, leader in cluster.leaders(topic).items() if leader < 0)
            if leaderless:
                cluster.eventually(lambda: min(cluster.leaders(topic).values()) >= 0, "leaders")
                took = max(took, time.monotonic() - healed)
                what += f"; partitions {leaderless} leaderless {fault.settle_s}s after the heal"
            availability.append((fault.kind, took))
            print(
                f"{time.monotonic() - started:6.1f}s {fault.kind.name} ({fault.hold_s}s): {what}; "
                f"every partition took an acks=all write {took:.2f}s after the heal"
            )
    try:
        cluster.eventually(lambda: cluster.in_sync(topic), "replicas converge")
        converged = True
    except AssertionError as error:
        print(error)
        converged = False
    final_log = read_to_end(cluster.bootstrap_servers, topic, PARTITIONS)
    # The availability probes share the topic: their records are not the workload's, so they
    # leave the history (its polls and its final read) before it is judged.
    report = check(without_probes(workload.history(final_log)))
    divergences = replica_divergences(cluster, final_log, topic)
    elections = check_cluster(cluster.controllers)
    print(format_report(report, divergences, converged))
    print(elections.of_topic(topic).render())
    print(f"run time {time.monotonic() - started:.1f}s; send failures {len(workload.failures)}")
    assert report.bad() == {}, report.render()
    assert elections.violations == (), elections.render()
    assert divergences == [] and converged
    assert report.operations["send ok"] >= WARM_UP_ACKNOWLEDGED
    slow = [(kind.name, round(took, 2)) for kind, took in availability if took > AVAILABLE_WITHIN_S]
    assert slow == [], f"partitions unavailable for over {AVAILABLE_WITHIN_S}s after a heal"
    assert silent == [], "a fault dropped no packet where traffic had to cross it"
    assert slowed == [], "added latency did not slow an acks=all round trip by 2 to 4 x the delay"


def slow_links(
    cluster: ChaosCluster,
    network: Network,
    probe: KafkaProducer,
    topic: str,
    fault: NetFault,
    slowed: list[str],
) -> tuple[str, set[str]]:
    """Every link ``fault.delay_ms`` slower each way for ``fault.hold_s``, and the proof: the
    round trip of an acks=all produce to a partition (from the test process, which no relay
    slows) rises by 2 to 4 x the delay. The leader acknowledges once each follower has fetched
    past the record: the fetch that picks it up reaches the leader up to one fetch cycle
    (2 x delay: the follower's relay holds both the fetch and its answer) after the produce, its
    answer takes one delay, and the next fetch, which tells the leader, another."""
    leaders = cluster.leaders(topic)
    partition = fault.choose(p for p, leader in leaders.items() if leader >= 0)
    before_stats = network.relay_stats()
    baseline = statistics.median(round_trips_s(probe, topic, partition))
    started = time.monotonic()
    network.set_delay(fault.delay_ms)
    try:
        during = statistics.median(round_trips_s(probe, topic, partition))
        time.sleep(max(0.0, fault.hold_s - (time.monotonic() - started)))
    finally:
        network.heal()
    carried = {n: c - before_stats[n] for n, c in network.relay_stats().items()}
    delayed = {n: c["bytes delayed"] for n, c in carried.items() if c["bytes delayed"]}
    rise_ms, delay_ms = (during - baseline) * 1000, fault.delay_ms
    if not 1.8 * delay_ms <= rise_ms <= 4 * delay_ms + 300:
        slowed.append(f"+{rise_ms:.0f} ms at {delay_ms} ms each way (baseline {baseline:.3f}s)")
    if not delayed:
        slowed.append("the relays delayed no byte")
    what = (
        f"{delay_ms} ms each way on every link; acks=all round trip to partition {partition} "
        f"(leader b{leaders[partition]}) {baseline * 1000:.0f} -> {during * 1000:.0f} ms; "
        f"bytes delayed {dict(sorted(delayed.items()))}"
    )
    return what, set()


def round_trips_s(probe: KafkaProducer, topic: str, partition: int) -> list[float]:
    """Seconds each of ``ROUND_TRIPS`` acks=all sends to ``partition`` took, one at a time."""
    out = []
    for _ in range(ROUND_TRIPS):
        start = time.monotonic()
        probe.send(topic, value=PROBE_PREFIX + b"rtt", partition=partition).get(timeout=10)
        out.append(time.monotonic() - start)
    return out


def inject(
    cluster: ChaosCluster, network: Network, topic: str, fault: NetFault
) -> tuple[str, set[str]]:
    """Apply ``fault`` for its hold, then heal; returns what it hit, and the nodes of which at
    least one must have dropped packets (traffic that had to cross the cut): the leader, which
    its followers fetch from; the active controller, which every broker heartbeats to; under
    one-way loss the other brokers, the leader's followers, whose fetch responses it sends.
    A bridge cuts nodes that need not talk to each other: nothing is expected of it."""
    leader = f"b{fault.choose(set(cluster.leaders(topic).values()) - {-1})}"
    controller = f"c{cluster.controllers.wait_for_leader().node_id}"
    nodes = network.names
    if fault.kind is FaultKind.BANDWIDTH:
        network.limit(leader, BANDWIDTH_LIMIT)
        time.sleep(fault.hold_s)
        network.heal()
        return f"{leader} at {BANDWIDTH_LIMIT}", set()
    others = [n for n in nodes if n not in (leader, controller)]
    drops = {
        FaultKind.ISOLATE_LEADER: isolate(leader, nodes),
        FaultKind.ISOLATE_CONTROLLER: isolate(controller, nodes),
        FaultKind.SPLIT: split({leader, controller}, nodes),
        FaultKind.ONE_WAY: one_way({leader}, set(nodes) - {leader}),
        FaultKind.BRIDGE: bridge(others[::2], {leader, controller}, others[1::2]),
        FaultKind.FLAP: isolate(leader, nodes),
    }[fault.kind]
    phases = flap_phases(fault.hold_s) if fault.kind is FaultKind.FLAP else [(True, fault.hold_s)]
    for partitioned, seconds in phases:
        network.apply(drops if partitioned else frozenset())
        time.sleep(seconds)
    # The fault is real: a leader whose heartbeats stopped reaching the (still reachable) active
    # controller for longer than the session, plus a second to fence it, leads nothing by now.
    # (Not under SPLIT: the controllers of the majority first elect a new active controller,
    # which starts every broker's session afresh, as Kafka's does on failover.)
    cut_off = fault.kind in (FaultKind.ISOLATE_LEADER, FaultKind.ONE_WAY)
    if cut_off and fault.hold_s > SESSION_TIMEOUT_MS / 1000 + 1.0:
        leaders = cluster.leaders(topic)
        assert int(leader[1:]) not in leaders.values(), f"{leader} still leads: {leaders}"
    network.heal()
    expected = {
        FaultKind.ISOLATE_CONTROLLER: {controller},
        FaultKind.ONE_WAY: {n for n in nodes if n.startswith("b")} - {leader},
        FaultKind.BRIDGE: set(),
    }.get(fault.kind, {leader})
    what = f"leader {leader}, active controller {controller}, {len(drops)} directed links cut"
    return what, expected


def availability_probe(cluster: ChaosCluster) -> KafkaProducer:
    """A producer of its own for the availability probes (not idempotent: one record each)."""
    return KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        acks="all",
        enable_idempotence=False,
        linger_ms=0,
        request_timeout_ms=1000,
        delivery_timeout_ms=int(AVAILABLE_WITHIN_S * 1000) + 5000,
        retry_backoff_ms=50,
        metadata_max_age_ms=1000,
        max_block_ms=2000,
    )


def wait_available(probe: KafkaProducer, topic: str) -> float:
    """Seconds from now (the heal) until every partition has acknowledged an ``acks=all`` write
    sent after it; a probe that fails is sent again."""
    healed = time.monotonic()
    done: dict[int, float] = {}
    lock = threading.Lock()

    def record(partition: int) -> None:
        with lock:
            done.setdefault(partition, time.monotonic() - healed)

    def send(partition: int) -> Any:
        future = probe.send(topic, value=PROBE_PREFIX + b"%d" % partition, partition=partition)
        return future.add_callback(lambda _: record(partition))

    pending = {partition: send(partition) for partition in range(PARTITIONS)}
    deadline = healed + 30
    while True:
        with lock:
            if len(done) == PARTITIONS:
                return max(done.values())
        assert time.monotonic() < deadline, f"partitions still unavailable 30s after heal: {done}"
        for partition, future in pending.items():
            if future.is_done and future.failed():
                pending[partition] = send(partition)
        time.sleep(0.02)


def without_probes(history: list[Op]) -> list[Op]:
    """The history with every poll of a probe record left out."""
    return [
        attrs.evolve(op, value=tuple(
            m for m in op.value if not (isinstance(m, Poll) and m.value.startswith(PROBE_PREFIX))
        ))
        for op in history
    ]  # fmt: skip
