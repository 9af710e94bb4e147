"""Deterministic simulation of replication (STYLE.md §10, DESIGN.md §3.4 and §5).

Three brokers (leader shell + pure leader core, pure follower core) and the controller core on
a simulated clock, network and disk; invariants after every event (``replication_checks``).
CI runs fixed seeds; ``PYKRAFT_SIM_SEEDS=200`` runs seeds 0..199, ``PYKRAFT_SIM_SEED=17``
replays one seed, ``PYKRAFT_SIM_STEPS`` changes the number of events per seed (the same
variables as the controller simulation); ``PYKRAFT_SIM_ELR_SEEDS`` sets how many seeds the
KIP-966 runs take (default the CI seeds). A failure names its seed and the replay command.
Models: Kafka's ``RaftEventSimulationTest``, Jepsen's Kafka tests (acks=all, RF 3,
min.insync.replicas 2, kill -9, pauses, partitions), KIP-101 / KIP-279 / KIP-320.
"""

from __future__ import annotations

import functools
import os
import random
from collections import Counter
from typing import Any

import attrs
import pytest

import pykraft.broker.partition as broker_partition
import pykraft.fetcher.responses as responses
import pykraft.fetcher.truncation as truncation
import pykraft.replica.partition_core as partition_core
from pykraft.fetcher.truncation import FollowerLog, Truncation
from pykraft.protocol.errors import Errors
from pykraft.replica.partition_state import PartitionRole, PartitionState, high_watermark_candidate
from pykraft.storage.partition_log import PartitionLog
from tests.chaos.history import FINAL_READER, OpType
from tests.chaos.history_checker import check
from tests.sim.replication_checks import Checker, InvariantViolation
from tests.sim.replication_faults import CrashRule
from tests.sim.replication_log import BrokerDisk, client_batch, records
from tests.sim.replication_net import SimSettings
from tests.sim.replication_sim import TOLERATED, ReplicationSimulation, SimulationFailure

DEFAULT_SEEDS = 8
DEFAULT_STEPS = 8000


def _seeds() -> list[int]:
    if "PYKRAFT_SIM_SEED" in os.environ:
        return [int(os.environ["PYKRAFT_SIM_SEED"])]
    return list(range(int(os.environ.get("PYKRAFT_SIM_SEEDS", DEFAULT_SEEDS))))


STEPS = int(os.environ.get("PYKRAFT_SIM_STEPS", DEFAULT_STEPS))


def settings_for(seed: int) -> SimSettings:
    """Timings vary with the seed; every fourth seed truncates through OffsetsForLeaderEpoch
    (a leader before KIP-320's DivergingEpoch)."""
    rng = random.Random(-1 - seed)
    return SimSettings(
        truncate_on_fetch=seed % 4 != 3,
        max_delay_ms=rng.choice((10, 40, 150)),
        drop_probability=rng.choice((0.0, 0.01, 0.05)),
        replica_lag_time_max_ms=rng.choice((3000, 10_000, 30_000)),
        partitions=rng.choice((1, 2, 3)),
    )


def simulation(seed: int) -> ReplicationSimulation:
    return ReplicationSimulation(seed, settings_for(seed))


@functools.cache
def finished(seed: int, steps: int) -> ReplicationSimulation:
    """A completed run, shared by the tests that read it (each seed runs once per session)."""
    sim = simulation(seed)
    sim.run(steps)
    return sim


@pytest.mark.parametrize("seed", _seeds())
def test_replication_simulation(seed: int) -> None:
    sim = finished(seed, STEPS)
    assert sim.checker.acked, "nothing was acknowledged: the run tested nothing"


def test_the_producers_history_is_judged_in_jepsens_terms() -> None:
    """Every send the run made is in its history (ok with its offset, or info), closed by a
    read of each converged log; it was judged at quiescence, and a final read that lacks one
    acknowledged value shows it as lost (read past) or unseen (beyond every read)."""
    sim = finished(0, STEPS)
    history = sim.sends.history()
    report = check(history)
    assert report.bad(tolerate=TOLERATED) == {}, report.render()
    acked = sum(len(values) for values in sim.checker.acked.values())
    assert sum(len(op.sends) for op in history if op.type is OpType.OK) == acked > 0
    victim = next(op for op in history if op.type is OpType.OK)
    [send] = victim.sends[:1]
    planted = [
        attrs.evolve(op, value=tuple(p for p in op.polls if p.value != send.value))
        if op.process.startswith(FINAL_READER)
        else op
        for op in history
    ]
    found = check(planted).anomalies
    assert [a.ops[0] for a in (*found["lost-write"], *found["unseen"])] == [victim]


def test_same_seed_same_history() -> None:
    def history(seed: int) -> tuple[object, ...]:
        sim = simulation(seed)
        sim.run(1500)
        return sim.history()

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


def _ci_stats(seeds: range | list[int]) -> Counter[str]:
    total: Counter[str] = Counter()
    for seed in seeds:
        total += finished(seed, DEFAULT_STEPS).checker.stats
    return total


def test_faults_reach_the_interesting_cases() -> None:
    """Counted over the CI seeds: power losses destroy acknowledged copies (replication keeps
    them), followers truncate diverged tails, leaders change, ISRs shrink and expand, a new
    leader starts with a high watermark below the committed offset, restarted brokers wait
    out the old session, the OffsetsForLeaderEpoch path truncates too, links slow down, the
    leader's delayed fetch both waits out its deadline and is woken by an append, and a crashed
    broker's logs recover from the recovery-point checkpoint, not from offset 0."""
    stats = _ci_stats(range(DEFAULT_SEEDS))
    for counted in (
        "power loss: acknowledged records lost on one replica",
        "faults: slow link",
        "delayed fetches (ENOUGH_BYTES)",
        "delayed fetches (DEADLINE)",
        "truncations that removed records",
        "completed truncations checked",
        "leader changes committed",
        "ISR changes committed",
        "new leader's HW below the committed offset",
        "registrations refused (DUPLICATE_BROKER_REGISTRATION)",
        "crash restarts: logs recovered from a checkpointed recovery point",
    ):
        assert stats[counted] > 0, f"no {counted!r} in {dict(stats)}"
    old_path = _ci_stats([s for s in range(DEFAULT_SEEDS) if not settings_for(s).truncate_on_fetch])
    assert old_path["OffsetsForLeaderEpoch requests"] > 0, dict(old_path)
    assert old_path["completed truncations checked"] > 0, dict(old_path)


def test_power_loss_on_every_replica_at_once_loses_acknowledged_writes() -> None:
    """Why the crash rule exists: Kafka does not fsync, so acks=all survives the loss of
    unflushed data on one replica, not on all of them at once. The sim must see the loss."""
    sim = ReplicationSimulation(1, crash_rule=False)

    def power_loss_everywhere() -> None:
        for broker_id in sim.brokers:
            if sim.brokers[broker_id] is not None:
                sim.faults.crash(broker_id, lose_unflushed=True)

    sim.queue.at(30_000, "power loss on every broker", power_loss_everywhere)
    with pytest.raises(SimulationFailure, match="lacks committed record"):
        sim.run(DEFAULT_STEPS)


# ---------------------------------------------------------------------------- the checks can fail
# Each test breaks one rule of the real code for the length of the test (monkeypatch, never an
# edit) and requires a CI seed to catch it, so a weakened check cannot pass unnoticed.


def _caught(expected: str, first_seed: int = 0) -> str:
    """The failure of the first CI seed, from ``first_seed`` on (the one known to catch the
    bug, to keep the test quick), that catches the injected bug."""
    for seed in (*range(first_seed, DEFAULT_SEEDS), *range(first_seed)):
        try:
            simulation(seed).run(DEFAULT_STEPS)
        except SimulationFailure as failure:
            message = str(failure)
            assert expected in message, message
            return message
    raise AssertionError(f"no seed below {DEFAULT_SEEDS} caught the injected bug")


def test_an_ack_before_the_high_watermark_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def ack_at_once(
        state: PartitionState, high_watermark: int, required_offset: int, min_insync_replicas: int
    ) -> tuple[bool, Errors]:
        return state.role is PartitionRole.LEADER, Errors.NONE

    monkeypatch.setattr(broker_partition, "check_enough_replicas_reach_offset", ack_at_once)
    _caught("acknowledged at offset")


def test_a_follower_that_never_truncates_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def keep_everything(*args: object) -> Truncation:
        follower = args[1]
        assert isinstance(follower, FollowerLog)
        return Truncation(follower.log_end_offset, truncation_completed=True)

    monkeypatch.setattr(responses, "truncation_for_diverging_epoch", keep_everything)
    monkeypatch.setattr(responses, "truncation_for_epoch_end_offset", keep_everything)
    _caught("is not a prefix of the leader's")


def test_a_majority_high_watermark_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Raft's commit rule instead of Kafka's (every ISR member): a lagging ISR member can be
    elected and the committed tail is gone."""

    def majority(state: PartitionState, **kwargs: Any) -> int | None:
        if high_watermark_candidate(state, **kwargs) is None:
            return None
        ends = sorted(
            (
                kwargs["log_end_offset"],
                *(
                    replica.log_end_offset
                    for broker, replica in state.followers.items()
                    if broker in state.isr
                ),
            ),
            reverse=True,
        )
        return int(ends[len(ends) // 2])

    monkeypatch.setattr(partition_core, "high_watermark_candidate", majority)
    _caught("lacks committed record", first_seed=2)


def test_a_high_watermark_at_the_leaders_log_end_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The high watermark moved to the leader's log end, ignoring the ISR (whenever Kafka's
    rule would move it at all): records count as committed on one replica, and a leader
    change loses them."""

    def leader_log_end(state: PartitionState, **kwargs: Any) -> int | None:
        if high_watermark_candidate(state, **kwargs) is None:
            return None
        return int(kwargs["log_end_offset"])

    monkeypatch.setattr(partition_core, "high_watermark_candidate", leader_log_end)
    _caught("lacks committed record")


def test_a_follower_truncating_one_offset_too_few_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """KIP-320: after a DivergingEpoch the follower keeps the first offset it should have cut
    (an off-by-one in the truncation offset), so a batch of the old epoch stays below records
    of the new one."""
    original = truncation.truncation_for_diverging_epoch

    def one_too_few(*args: Any, **kwargs: Any) -> Truncation:
        found = original(*args, **kwargs)
        follower = args[1] if len(args) > 1 else kwargs["follower"]
        assert isinstance(follower, FollowerLog)
        if found.offset < follower.log_end_offset:
            return attrs.evolve(found, offset=found.offset + 1)
        return found

    monkeypatch.setattr(responses, "truncation_for_diverging_epoch", one_too_few)
    _caught("is not a prefix of the leader's")


# ---------------------------------------------------------------------------- the disk model
# The sim's disks are the shipped PartitionLog on MemoryDisks; these pin the two crash kinds and
# the restart's load (recovery, high-watermark checkpoint) that the simulation relies on.

KEY = ("t", 0)


def _disk_with(values_per_epoch: dict[int, int]) -> BrokerDisk:
    disk = BrokerDisk()
    log = disk.log(KEY)
    for epoch, count in values_per_epoch.items():
        for index in range(count):
            log.append_as_leader(client_batch([f"{epoch}.{index}"]), epoch, now_ms=0)
    return disk


def epochs(log: PartitionLog) -> list[tuple[int, int]]:
    return [(entry.epoch, entry.start_offset) for entry in log.leader_epoch_cache.entries]


def test_power_loss_keeps_only_the_flushed_prefix() -> None:
    disk = _disk_with({0: 3})
    disk.logs[KEY].flush()
    disk.logs[KEY].append_as_leader(client_batch(["late"]), 2, now_ms=0)
    disk.logs[KEY].update_high_watermark(4)
    disk.log_manager.checkpoint_high_watermarks()
    assert epochs(disk.logs[KEY]) == [(0, 0), (2, 3)]
    assert disk.unflushed(KEY) == [(3, 3)]
    disk.crash(lose_unflushed=True, now_ms=0)
    log = disk.logs[KEY]
    assert [value for _, _, value in records(log)] == ["0.0", "0.1", "0.2"]
    # The durable epoch history is cut back to the recovered log (storage.memory_store's
    # recovery), and the checkpointed high watermark is clamped to it (LogManager's load).
    assert epochs(log) == [(0, 0)]
    assert log.high_watermark == 3


def test_kill_keeps_the_page_cache() -> None:
    disk = _disk_with({0: 2, 1: 2})
    disk.logs[KEY].update_high_watermark(1)
    disk.log_manager.checkpoint_high_watermarks()
    disk.logs[KEY].update_high_watermark(4)
    disk.crash(lose_unflushed=False, now_ms=0)
    log = disk.logs[KEY]
    assert log.log_end_offset == 4 and log.recovery_point == 0
    assert log.high_watermark == 1  # the checkpoint, not the high watermark at the crash
    assert epochs(log) == [(0, 0), (1, 2)]
    # Still unflushed: a power loss now takes what the kill left in the page cache.
    disk.crash(lose_unflushed=True, now_ms=0)
    assert disk.logs[KEY].log_end_offset == 0 and epochs(disk.logs[KEY]) == []


def test_clean_shutdown_flushes_and_checkpoints() -> None:
    disk = _disk_with({0: 2, 1: 2})
    disk.logs[KEY].update_high_watermark(3)
    disk.log_manager.shutdown()
    disk.restart(now_ms=0)
    log = disk.logs[KEY]
    assert log.recovery_point == log.log_end_offset == 4 and log.high_watermark == 3
    disk.crash(lose_unflushed=True, now_ms=0)
    assert [value for _, _, value in records(disk.logs[KEY])] == ["0.0", "0.1", "1.0", "1.1"]


def test_a_crashed_log_is_released() -> None:
    disk = _disk_with({0: 1})
    before = disk.logs[KEY]
    disk.crash(lose_unflushed=False, now_ms=0)
    with pytest.raises(OSError, match="released"):
        before.append_as_leader(client_batch(["zombie"]), 0, now_ms=0)


def test_follower_append_and_read_round_trip() -> None:
    leader = _disk_with({0: 2, 3: 1}).logs[KEY]
    follower = BrokerDisk().log(KEY)
    info = leader.read(0, 1 << 20, leader.log_end_offset)
    follower.append_as_follower(info.read_bytes())
    assert records(follower) == records(leader)
    assert epochs(follower) == epochs(leader) == [(0, 0), (3, 2)]
    assert follower.truncate_to(2)
    assert epochs(follower) == [(0, 0)]


REASSIGN_SEEDS = 4


@pytest.mark.parametrize("seed", range(REASSIGN_SEEDS))
def test_replication_simulation_with_reassignments(seed: int) -> None:
    """KIP-455 under the same faults: partitions move between RF 3 and RF 2 (adding replicas
    follow and join the ISR, removed ones delete their logs and come back empty later), some
    moves are cancelled; every invariant holds, and after every partition returns to all
    brokers the replicas converge with every acknowledged value."""
    sim = ReplicationSimulation(1000 + seed, attrs.evolve(settings_for(seed), reassign=True))
    sim.run(STEPS)
    assert sim.checker.acked, "nothing was acknowledged: the run tested nothing"
    assert sim.checker.stats["reassignments started"] > 0
    assert sim.checker.stats["reassignments ended"] > 0


def test_a_reassignment_completed_before_its_replicas_catch_up_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Break PartitionReassignmentReplicas' rule: complete as soon as the move starts, the
    # target taken as in sync. A new leader then lacks acknowledged records.
    import pykraft.quorum.managers.reassignment_replicas as reassignment_replicas

    def complete_at_once(
        self: reassignment_replicas.ReassignmentReplicas, target_isr: tuple[int, ...]
    ) -> reassignment_replicas.CompletedReassignment | None:
        if not self.is_in_progress():
            return None
        target = self.target_replicas()
        return reassignment_replicas.CompletedReassignment(replicas=target, isr=target)

    monkeypatch.setattr(
        reassignment_replicas.ReassignmentReplicas,
        "maybe_complete_reassignment",
        complete_at_once,
    )
    for seed in range(REASSIGN_SEEDS):
        sim = ReplicationSimulation(1000 + seed, attrs.evolve(settings_for(seed), reassign=True))
        try:
            sim.run(STEPS)
        except SimulationFailure as failure:
            assert "InvariantViolation" in str(failure), str(failure)
            return
    raise AssertionError(f"no seed below {REASSIGN_SEEDS} caught the injected bug")


# ---------------------------------------------------------------------------- KIP-966
# The relaxed crash rule eligible leader replicas allow (``replication_sim``'s docstring):
# power loss of any broker at any time while fewer than min.insync.replicas brokers miss data.
ELR_SEEDS = int(os.environ.get("PYKRAFT_SIM_ELR_SEEDS", 4))
# Past failures, run besides: 34 leaves every partition offline with broker 0 holding an
# unacknowledged leader-epoch-0 tail where the acknowledged epoch-1 records are on 1 and 2.
ELR_REGRESSION_SEEDS = (34,)


def kip_966_run(seed: int, elr_level: int) -> ReplicationSimulation:
    settings = attrs.evolve(settings_for(seed), eligible_leader_replicas_version=elr_level)
    sim = ReplicationSimulation(seed, settings, crash_rule=CrashRule.KIP_966)
    sim.run(STEPS)
    return sim


def test_eligible_leader_replicas_lose_nothing_under_the_kip_966_crash_rule() -> None:
    stats: Counter[str] = Counter()
    acked = 0
    for seed in sorted({*range(ELR_SEEDS), *ELR_REGRESSION_SEEDS}):
        sim = kip_966_run(seed, elr_level=1)
        acked += sum(len(values) for values in sim.checker.acked.values())
        stats += sim.checker.stats
    # Every run ended with every acknowledged record on its converged replicas, or (for a
    # partition left offline) on some replica; none was ever missing from an elected leader.
    assert acked > 0, "nothing was acknowledged: the runs tested nothing"
    # The rule let power losses through that the Kafka rule would have held back, they took
    # acknowledged records from a replica, and elections went to ELR members.
    assert stats["faults: power loss"] > 0, dict(stats)
    assert stats["power loss: acknowledged records lost on one replica"] > 0, dict(stats)
    assert stats["clean elections from the ELR"] > 0, dict(stats)
    assert stats["elections checked against every acknowledged record"] > 0, dict(stats)


def test_an_offline_partition_is_read_from_the_replica_that_kept_every_ack() -> None:
    """KIP-966 leaves a partition offline once every ISR and ELR member restarted uncleanly;
    another replica may then hold a stale or divergent tail (seed 34: broker 0 kept offset 24+
    of leader epoch 0, never truncated, while 1 and 2 held the acknowledged epoch-1 records).
    The final read is of the replica an unclean election must pick; with the acknowledged
    records split over replicas, none may be picked."""
    checker = Checker()
    checker.acked[KEY] = {0: "0.0", 1: "1.0"}
    stale, whole = _disk_with({0: 2}), _disk_with({0: 1, 1: 1})
    assert checker.check_kept(KEY, {0: stale.log(KEY), 1: whole.log(KEY)}) == 1
    checker.acked[KEY] = {0: "0.0", 1: "0.1", 2: "1.1"}
    split = _disk_with({0: 1, 1: 2})
    with pytest.raises(InvariantViolation, match=r"no replica .* holds every acknowledged"):
        checker.check_kept(KEY, {0: stale.log(KEY), 1: split.log(KEY)})


def test_without_eligible_leader_replicas_the_same_rule_loses_acknowledged_records() -> None:
    """The contrast: the last ISR member keeps its place after losing its tail, is elected,
    and acknowledged records are gone — counted, as ``crash_rule=False`` shows for the other
    rule; the first CI seed that shows it is enough (seeds 0 and 1 both do)."""
    for seed in range(DEFAULT_SEEDS):
        try:
            kip_966_run(seed, elr_level=0)
        except SimulationFailure as failure:
            assert "lacks committed record" in str(failure), str(failure)
            return
    raise AssertionError("no CI seed lost an acknowledged record without ELR: no contrast")
