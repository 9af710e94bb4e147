"""Network faults as plain values (pure; applied by ``tests/chaos/netns.py``).

A fault between cluster nodes is a set of **directed drops**: ``(source, destination)`` means
packets from ``source`` to ``destination`` are silently discarded (``destination``'s namespace
drops them on input), while the reverse direction still flows. Jepsen's partitions are then:

* ``isolate(n)``: ``n`` neither sends to nor hears from anyone else;
* ``split(minority)``: the two sides cannot reach each other, both ways;
* ``one_way(sources, destinations)``: only packets from ``sources`` to ``destinations`` are lost
  (TCP then stalls in both directions on those links, as a real one-way loss does);
* ``bridge(left, middle, right)``: two halves that cannot reach each other, each still reaching
  the middle nodes (Jepsen's "bridge" nemesis);
* flapping: one of the above switched on and off on a schedule (``FaultKind.FLAP``);
* a bandwidth limit on one node's outgoing link (a token bucket, ``tc tbf``);
* added latency on every link between two nodes (``FaultKind.LATENCY``): each way delayed by
  ``delay_ms``, drawn from ``LATENCY_MS``. Jepsen's ``slow`` nemesis puts netem's delay (50 ms
  by default) on every node, so every link slows, not one node; this kernel lacks netem
  ("Specified qdisc kind is unknown"), so the delay comes from a user-space relay in every node's
  namespace (``tests/chaos/relay.py``), idle until the fault.

The test client (the test process, outside every node's namespace) is never cut off nor
slowed: the faults are between the cluster's own nodes, so what the checker sees is what the
cluster did with them.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Collection, Iterable

import attrs

Drops = frozenset[tuple[str, str]]
BANDWIDTH_LIMIT = "256kbit"  # one node's outgoing link under FaultKind.BANDWIDTH
LATENCY_MS = (50, 150)  # the one-way delay of every link under FaultKind.LATENCY


def one_way(sources: Iterable[str], destinations: Iterable[str]) -> Drops:
    targets = set(destinations)
    return frozenset((s, d) for s in set(sources) for d in targets if s != d)


def split(minority: Collection[str], nodes: Collection[str]) -> Drops:
    majority = set(nodes) - set(minority)
    return one_way(minority, majority) | one_way(majority, minority)


def isolate(node: str, nodes: Collection[str]) -> Drops:
    return split({node}, nodes)


def bridge(left: Collection[str], middle: Collection[str], right: Collection[str]) -> Drops:
    """``left`` and ``right`` cannot reach each other; both reach ``middle``."""
    assert not (set(left) & set(middle) or set(right) & set(middle) or set(left) & set(right))
    return one_way(left, right) | one_way(right, left)


def dropped_sources(drops: Drops, node: str) -> list[str]:
    """The nodes whose packets ``node`` must drop on input."""
    return sorted(s for s, d in drops if d == node)


class FaultKind(enum.Enum):
    ISOLATE_LEADER = "cut a partition leader off from every other node"
    ISOLATE_CONTROLLER = "cut the active controller off from every other node"
    SPLIT = "minority (the active controller and a leader) | majority (the rest)"
    ONE_WAY = "a leader's packets to every other node are lost; it still hears them"
    BRIDGE = "two halves that each reach only the middle (a leader and a controller)"
    FLAP = "a leader isolated and healed, on and off"
    BANDWIDTH = f"a leader's outgoing link limited to {BANDWIDTH_LIMIT}"
    LATENCY = f"every link between two nodes {LATENCY_MS[0]}-{LATENCY_MS[1]} ms slower each way"


@attrs.frozen
class NetFault:
    kind: FaultKind
    hold_s: float  # how long the fault stays (for FLAP: the whole flapping period)
    settle_s: float  # workload undisturbed after every partition is available again
    pick: float  # which leader, in [0, 1)
    delay_ms: int = 0  # FaultKind.LATENCY: each link's added one-way delay

    def choose(self, candidates: Iterable[int]) -> int:
        ordered = sorted(candidates)
        return ordered[int(self.pick * len(ordered))]


FLAP_PERIOD_S = 0.8  # on for one period, off for the next


def net_schedule(seed: int, kinds: list[FaultKind], session_timeout_s: float) -> list[NetFault]:
    """One fault of each of ``kinds``, in an order and with holds drawn from ``seed``. Holds
    straddle the session timeout: shorter ones heal before the controller fences anyone."""
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    faults = []
    for kind in order:
        low, high = (2.0, 4.0) if kind is FaultKind.FLAP else (1.0, session_timeout_s + 1.5)
        hold_s = round(rng.uniform(low, high), 2)
        settle_s, pick = round(rng.uniform(0.3, 1.0), 2), rng.random()
        delay_ms = rng.randint(*LATENCY_MS) if kind is FaultKind.LATENCY else 0
        faults.append(NetFault(kind, hold_s, settle_s, pick, delay_ms))
    return faults


def flap_phases(hold_s: float, period_s: float = FLAP_PERIOD_S) -> list[tuple[bool, float]]:
    """(partitioned?, seconds) phases filling ``hold_s``, starting partitioned, ending healed."""
    phases: list[tuple[bool, float]] = []
    left, on = hold_s, True
    while left > 1e-9:
        step = min(period_s, left)
        phases.append((on, round(step, 6)))
        left -= step
        on = not on
    if phases and phases[-1][0]:
        phases.append((False, 0.0))
    return phases
