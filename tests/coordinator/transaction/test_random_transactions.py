"""Seeded random runs of the pure coordinator against a world that fails: appends that fail or
are still in flight when the coordinator moves, markers lost or refused, coordinator failover
at any step (the next one loads the log). After every run quiesces (every append and marker
succeeds), the two-phase commit must hold (KIP-98):

* every PrepareCommit / PrepareAbort in ``__transaction_state`` is followed, for its id, by the
  Complete record of the same decision, written only once every partition has its marker;
* a marker is written only for a decision already in the log (its producer id, epoch and
  partition), and every partition of a decided transaction gets the marker of that decision;
* nothing is left prepared or pending.

A failure prints the seed; ``PYKRAFT_TXN_SEEDS=N`` runs N seeds.
"""

from __future__ import annotations

import os
import random

import attrs
import pytest

from pykraft.coordinator.transaction.config import TransactionConfig
from pykraft.coordinator.transaction.coordinator import TransactionCoordinator
from pykraft.coordinator.transaction.effects import (
    Append,
    Effects,
    InitProducerIdResult,
    ProducerIdAndEpoch,
    SendMarkers,
)
from pykraft.coordinator.transaction.markers import RETRY_BACKOFF_MAX_MS
from pykraft.coordinator.transaction.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_value,
    transaction_log_key,
)
from pykraft.coordinator.transaction.replay import TransactionLogReplay, TxnLogEntry
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

S = TransactionState
IDS = ("t0", "t1", "t2")
PARTITIONS = tuple(TopicPartition("pets", n) for n in range(4))
APPEND_FAILURES = (Errors.NOT_ENOUGH_REPLICAS, Errors.REQUEST_TIMED_OUT)
MARKER_FAILURES = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NETWORK_EXCEPTION)
SEEDS = int(os.environ.get("PYKRAFT_TXN_SEEDS", "40"))
STEPS = 250
PREPARED = {S.PREPARE_COMMIT: True, S.PREPARE_ABORT: False}
COMPLETE = {S.COMPLETE_COMMIT: True, S.COMPLETE_ABORT: False}


@attrs.define
class World:
    rng: random.Random
    log: list[tuple[str, TransactionLogValue]] = attrs.Factory(list)
    epoch: int = 0
    now_ms: int = 1_000_000
    next_producer_id: int = 100
    # (producer id, epoch, commit) of every marker written, per partition
    markers: dict[TopicPartition, set[tuple[int, int, bool]]] = attrs.Factory(dict)
    producers: dict[str, tuple[int, int]] = attrs.Factory(dict)
    appends: list[Append] = attrs.Factory(list)
    # markers sent, with the partitions not answered yet
    sends: list[tuple[SendMarkers, set[TopicPartition]]] = attrs.Factory(list)
    request_ids: int = 0
    # InitProducerId request id -> its transactional id
    inits: dict[int, str] = attrs.Factory(dict)
    coordinator: TransactionCoordinator = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.coordinator = self._load()

    def _load(self) -> TransactionCoordinator:
        """A coordinator elected in the next epoch, loading the log (failover)."""
        self.epoch += 1
        coordinator = TransactionCoordinator(
            TransactionConfig(transaction_state_log_num_partitions=1)
        )
        replay = TransactionLogReplay()
        replay.replay(
            [
                TxnLogEntry(n, transaction_log_key(tid), encode_value(v))
                for n, (tid, v) in enumerate(self.log)
            ]
        )
        assert replay.problems == []
        coordinator.begin_loading(0, self.epoch, self.now_ms)
        self.appends, self.sends = [], []
        self.coordinator = coordinator
        self.take(coordinator.complete_loading(0, self.epoch, replay.loaded(), self.now_ms))
        return coordinator

    def take(self, effects: Effects) -> None:
        for answer in effects.answers:
            result = answer.result
            if isinstance(result, InitProducerIdResult) and result.error is Errors.NONE:
                self.producers[self.inits.pop(answer.request_id)] = (
                    result.producer_id,
                    result.producer_epoch,
                )
        self.appends.extend(effects.appends)
        self.sends.extend((send, set(send.marker.partitions)) for send in effects.markers)

    # ------------------------------------------------------------------ the world's moves

    def step(self) -> None:
        roll = self.rng.random()
        tid = self.rng.choice(IDS)
        if roll < 0.15:
            self.init(tid)
        elif roll < 0.3:
            self.add(tid)
        elif roll < 0.42:
            self.end(tid, commit=self.rng.random() < 0.6)
        elif roll < 0.65 and self.appends:
            self.finish_append(fail=self.rng.random() < 0.2)
        elif roll < 0.85 and self.sends:
            self.deliver_markers(fail=self.rng.random() < 0.3)
        elif roll < 0.95:
            self.now_ms += self.rng.choice((100, 1000, 30_000))
            self.take(self.coordinator.poll(self.now_ms))
        else:
            self.failover()

    def init(self, tid: str) -> None:
        self.request_ids += 1
        self.inits[self.request_ids] = tid
        new_id = None
        if self.coordinator.needs_new_producer_id(tid, 60_000):
            new_id, self.next_producer_id = self.next_producer_id, self.next_producer_id + 1
        known = self.producers.get(tid)
        # Sometimes as a v3+ client that names its current producer (KIP-360).
        current = ProducerIdAndEpoch(*known) if known and self.rng.random() < 0.3 else None
        effects = self.coordinator.handle_init_producer_id(
            tid, 60_000, current, self.request_ids, self.now_ms, new_id
        )
        self.take(effects)

    def add(self, tid: str) -> None:
        if tid not in self.producers:
            return
        producer_id, epoch = self.producers[tid]
        chosen = self.rng.sample(PARTITIONS, self.rng.randint(1, 3))
        self.request_ids += 1
        self.take(
            self.coordinator.handle_add_partitions(
                tid, producer_id, epoch, chosen, self.request_ids, self.now_ms
            )
        )

    def end(self, tid: str, commit: bool) -> None:
        if tid not in self.producers:
            return
        producer_id, epoch = self.producers[tid]
        self.request_ids += 1
        self.take(
            self.coordinator.handle_end_txn(
                tid, producer_id, epoch, commit, self.request_ids, self.now_ms
            )
        )

    def finish_append(self, fail: bool) -> None:
        append = self.appends.pop(self.rng.randrange(len(self.appends)))
        error = self.rng.choice(APPEND_FAILURES) if fail else Errors.NONE
        if error is Errors.NONE:
            self.write(append)
        self.take(self.coordinator.on_append_done(append.write_id, error, self.now_ms))

    def write(self, append: Append) -> None:
        for record in append.records:
            tid = decode_key(record.key)
            assert isinstance(tid, str)
            if record.value is None:
                continue
            value = decode_value(record.value)
            if value.transaction_status in COMPLETE:
                self.check_markers_before_completion(tid, value)
            self.log.append((tid, value))

    def check_markers_before_completion(self, tid: str, value: TransactionLogValue) -> None:
        prepared = [v for t, v in self.log if t == tid][-1]
        commit = COMPLETE[value.transaction_status]
        assert PREPARED.get(prepared.transaction_status) is commit, (prepared, value)
        for tp in prepared.topic_partitions:
            marker = (prepared.producer_id, prepared.producer_epoch, commit)
            assert marker in self.markers.get(tp, set()), (tid, tp, prepared)

    def deliver_markers(self, fail: bool) -> None:
        """Answer some of one request's partitions (their leaders answer one by one)."""
        index = self.rng.randrange(len(self.sends))
        send, remaining = self.sends[index]
        answered = set(self.rng.sample(sorted(remaining), self.rng.randint(1, len(remaining))))
        remaining -= answered
        if not remaining:
            del self.sends[index]
        errors = {}
        for tp in sorted(answered):
            if fail and self.rng.random() < 0.5:
                errors[tp] = self.rng.choice(MARKER_FAILURES)
                continue
            errors[tp] = Errors.NONE
            marker = send.marker
            decision = (marker.producer_id, marker.producer_epoch, marker.commit)
            assert any(
                (v.producer_id, v.producer_epoch, PREPARED.get(v.transaction_status)) == decision
                and tp in v.topic_partitions
                for t, v in self.log
                if t == send.transactional_id
            ), f"a marker {decision} on {tp} without a decision in the log"
            self.markers.setdefault(tp, set()).add(decision)
        effects = self.coordinator.on_markers_written(
            send.transactional_id, send.marker.coordinator_epoch, errors, (), self.now_ms
        )
        self.take(effects)

    def failover(self) -> None:
        """The coordinator's partition moves: appends in flight land or not, then the next
        coordinator loads the log; the old one's outstanding work is lost with it."""
        for append in self.appends:
            if self.rng.random() < 0.5:
                self.write(append)
        self.inits.clear()
        self._load()

    def quiesce(self) -> None:
        for _ in range(200):
            if not self.appends and not self.sends:
                self.now_ms += 2 * RETRY_BACKOFF_MAX_MS
                self.take(self.coordinator.poll(self.now_ms))
                if not self.appends and not self.sends:
                    return
            while self.appends:
                self.finish_append(fail=False)
            while self.sends:
                self.deliver_markers(fail=False)
        raise AssertionError("the coordinator never settled")


def check_two_phase_commit(world: World) -> None:
    by_id: dict[str, list[TransactionLogValue]] = {}
    for tid, value in world.log:
        by_id.setdefault(tid, []).append(value)
    for tid, values in by_id.items():
        for index, value in enumerate(values):
            if value.transaction_status not in PREPARED:
                continue
            assert index + 1 < len(values), f"{tid}: {value} never completed"
            after = values[index + 1]
            commit = PREPARED[value.transaction_status]
            assert COMPLETE.get(after.transaction_status) is commit, (tid, value, after)
    manager = world.coordinator.manager
    for metadata in manager.transactions[0].values():
        assert metadata.state not in PREPARED and metadata.pending_state is None, metadata
    assert world.coordinator.markers.pending == {}


@pytest.mark.parametrize("seed", range(SEEDS))
def test_every_decided_transaction_completes_on_all_its_partitions(seed: int) -> None:
    world = World(random.Random(seed))
    try:
        for _ in range(STEPS):
            world.step()
        world.quiesce()
        check_two_phase_commit(world)
    except AssertionError as error:
        raise AssertionError(f"seed {seed}: {error}") from error


class CountingWorld(World):
    prepared_at_failover = 0

    def failover(self) -> None:
        latest = {tid: value for tid, value in self.log}
        self.prepared_at_failover += sum(v.transaction_status in PREPARED for v in latest.values())
        super().failover()


def test_the_runs_exercise_failover_in_the_middle_of_commits() -> None:
    """The random runs are not idle: transactions complete, and coordinators move while a
    decision is in the log and its markers are not all written."""
    completed = prepared_at_failover = 0
    for seed in range(10):
        world = CountingWorld(random.Random(seed))
        for _ in range(STEPS):
            world.step()
        world.quiesce()
        completed += sum(v.transaction_status in COMPLETE for _, v in world.log)
        prepared_at_failover += world.prepared_at_failover
    assert completed > 30
    assert prepared_at_failover > 5
