"""The network fault layer's pure parts (``tests/chaos/net_faults.py``, ``netns.free_subnet``)."""

from __future__ import annotations

from tests.chaos.net_faults import (
    FaultKind,
    bridge,
    dropped_sources,
    flap_phases,
    isolate,
    net_schedule,
    one_way,
    split,
)
from tests.chaos.netns import NODE_NAMES, free_subnet

NODES = ["c1", "c2", "b10", "b11"]


def test_isolate_cuts_both_directions_between_the_node_and_every_other() -> None:
    drops = isolate("b10", NODES)
    assert drops == {(a, b) for a in NODES for b in NODES if a != b and "b10" in (a, b)}
    assert dropped_sources(drops, "b10") == ["b11", "c1", "c2"]
    assert dropped_sources(drops, "c1") == ["b10"]


def test_split_cuts_only_across_the_sides() -> None:
    drops = split({"c1", "b10"}, NODES)
    assert ("c1", "b10") not in drops and ("c2", "b11") not in drops
    assert {("c1", "c2"), ("c2", "c1"), ("b10", "b11"), ("b11", "b10")} <= drops
    assert len(drops) == 8


def test_one_way_drops_one_direction_only() -> None:
    drops = one_way({"b10"}, NODES)
    assert drops == {("b10", "c1"), ("b10", "c2"), ("b10", "b11")}
    assert dropped_sources(drops, "b10") == []


def test_bridge_keeps_the_middle_reachable_from_both_halves() -> None:
    drops = bridge({"c1"}, {"c2"}, {"b10", "b11"})
    assert drops == {("c1", "b10"), ("c1", "b11"), ("b10", "c1"), ("b11", "c1")}
    assert not any("c2" in pair for pair in drops)


def test_flapping_alternates_and_ends_healed() -> None:
    assert flap_phases(2.0, 0.8) == [(True, 0.8), (False, 0.8), (True, 0.4), (False, 0.0)]
    assert flap_phases(1.6, 0.8) == [(True, 0.8), (False, 0.8)]
    assert round(sum(s for _, s in flap_phases(3.3)), 6) == 3.3


def test_schedules_repeat_from_a_seed_and_hold_each_kind_once() -> None:
    kinds = list(FaultKind)
    assert net_schedule(5, kinds, 3.0) == net_schedule(5, kinds, 3.0)
    assert net_schedule(5, kinds, 3.0) != net_schedule(6, kinds, 3.0)
    for seed in range(20):
        faults = net_schedule(seed, kinds, 3.0)
        assert sorted(f.kind.name for f in faults) == sorted(k.name for k in kinds)
        assert all(1.0 <= f.hold_s <= 4.5 for f in faults)
        [latency] = [f for f in faults if f.kind is FaultKind.LATENCY]
        assert 50 <= latency.delay_ms <= 150
        assert all(f.delay_ms == 0 for f in faults if f is not latency)


def test_free_subnet_skips_those_in_use_and_stays_in_the_benchmarking_range() -> None:
    used = "inet 198.18.7.254/24 brd ... \n198.18.8.0/24 dev x"
    assert free_subnet(used, 7) == "198.18.9"
    assert free_subnet("", 511) == "198.19.255"
    assert free_subnet("198.19.255.1", 511) == "198.18.0"
    assert len(NODE_NAMES) == 6
