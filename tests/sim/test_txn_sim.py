"""Deterministic simulation of transactions (issue 12; STYLE.md §10; KIP-98).

The replication sim's cluster with the shipped transaction coordinator on every broker,
transactional producers and a read_committed consumer (``txn_sim``); the invariants of
``txn_checks`` after every event and once the run quiesces. CI runs fixed seeds, with the
replication sim's variables: ``PYKRAFT_SIM_SEEDS=50`` runs seeds 0..49, ``PYKRAFT_SIM_SEED=17``
replays one, ``PYKRAFT_SIM_STEPS`` sets the events per seed. A failure names its seed and the
replay command. Models: Kafka's ``TransactionCoordinatorConcurrencyTest`` (coordinator
failover, markers) and the anomaly classes of Jepsen's Kafka analyses (aborted reads, lost
committed writes, partial transactions, LSO stalls).
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

import pykraft.broker.partition_reads as partition_reads
import pykraft.broker.replica_manager as replica_manager
import pykraft.coordinator.transaction.coordinator as coordinator
import pykraft.coordinator.transaction.markers as markers
import tests.sim.replication_faults as replication_faults
from pykraft.broker.txn_markers import append_txn_markers
from pykraft.coordinator.transaction.effects import Effects
from pykraft.coordinator.transaction.metadata import TransactionMetadata
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import AbortedTransaction, PartitionData
from pykraft.storage.fetch_data import FetchDataInfo
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.txn_markers import TxnMarker
from tests.chaos.history import OpType
from tests.chaos.history_checker import check
from tests.sim.replication_net import EventQueue, SimSettings
from tests.sim.txn_consumer import read_committed
from tests.sim.txn_log import txn_batches
from tests.sim.txn_loop import SimLoop, SimLoopError
from tests.sim.txn_sim import SimulationFailure, TransactionSimulation, TxnSettings

DEFAULT_SEEDS = 6
DEFAULT_STEPS = 12_000


def _seeds() -> list[int]:
    if "PYKRAFT_SIM_SEED" in os.environ:
        return [int(os.environ["PYKRAFT_SIM_SEED"])]
    return list(range(int(os.environ.get("PYKRAFT_SIM_SEEDS", DEFAULT_SEEDS))))


STEPS = int(os.environ.get("PYKRAFT_SIM_STEPS", DEFAULT_STEPS))


def settings_for(seed: int) -> tuple[SimSettings, TxnSettings]:
    """Timings and fault rates vary with the seed (every fourth truncates through
    OffsetsForLeaderEpoch, as in the replication sim)."""
    rng = random.Random(-1000 - seed)
    cluster = SimSettings(
        truncate_on_fetch=seed % 4 != 3,
        max_delay_ms=rng.choice((10, 40, 150)),
        drop_probability=rng.choice((0.0, 0.01, 0.05)),
        replica_lag_time_max_ms=rng.choice((3000, 10_000)),
        partitions=rng.choice((2, 3)),
    )
    transactions = TxnSettings(
        state_partitions=rng.choice((1, 2, 3)),
        transaction_timeout_ms=rng.choice((5000, 10_000, 20_000)),
        marker_loss_probability=rng.choice((0.0, 0.05, 0.2)),
        marker_jitter_ms=rng.choice((0, 300, 1000)),
    )
    return cluster, transactions


def simulation(seed: int) -> TransactionSimulation:
    return TransactionSimulation(seed, *settings_for(seed))


@functools.cache
def finished(seed: int, steps: int) -> TransactionSimulation:
    """A completed run, shared by the tests that read it (each seed runs once per session)."""
    sim = simulation(seed)
    sim.run(steps)
    return sim


@pytest.mark.parametrize("seed", _seeds())
def test_transaction_simulation(seed: int) -> None:
    stats = finished(seed, STEPS).checker.stats
    if not stats["transactions committed by their producer"]:
        # Dense faults can abort every transaction of a run, as Kafka would (seeds 64 and 94 of
        # 100: transactions outlive their timeout, and the aborts' markers wait out seconds of
        # a single-member ISR or a leader restarted): the same run twice as long must commit.
        stats = finished(seed, 2 * STEPS).checker.stats
    assert stats["transactions committed by their producer"] > 0, dict(stats)
    assert stats["records read by read_committed consumers"] > 0, dict(stats)


def test_the_clients_history_is_judged_in_jepsens_terms() -> None:
    """The run's history (``TxnChecker.history``) holds its committed, aborted and unknown
    transactions and the consumer's reads, and was judged clean (G0 aside) at quiescence;
    the same history with one committed transaction recorded as aborted shows it read."""
    sim = finished(0, STEPS)
    history = sim.checker.history.history()
    report = check(history)
    assert report.bad() == {}, report.render()
    assert report.operations["txn ok"] > 0 and report.operations["txn fail"] > 0
    assert (
        report.operations["poll ok"]
        == sim.checker.stats["records read by read_committed consumers"]
    )
    read = {poll.value for op in history for poll in op.polls}
    [victim] = [op for op in history if op.type is OpType.OK and op.f == "txn"][:1]
    assert {send.value for send in victim.sends} <= read
    planted = [attrs.evolve(op, type=OpType.FAIL) if op is victim else op for op in history]
    aborted_reads = check(planted).anomalies["aborted-read"]
    assert {a.ops[0] for a in aborted_reads} == {planted[victim.index]}
    assert len(aborted_reads) == len(victim.sends)


def test_same_seed_same_history() -> None:
    def history(seed: int) -> tuple[object, ...]:
        sim = simulation(seed)
        sim.run(2000)
        return sim.history()

    assert history(3) == history(3)


def test_failure_names_seed_and_replay_command() -> None:
    sim = simulation(5)

    def broken_check() -> None:
        raise AssertionError("boom")

    sim.check = broken_check  # type: ignore[method-assign]
    with pytest.raises(SimulationFailure) as failure:
        sim.run(10)
    message = str(failure.value)
    assert "seed=5 step=0" in message and "boom" in message
    assert "PYKRAFT_SIM_SEED=5" in message and "test_txn_sim.py" in message


def test_faults_reach_the_interesting_cases() -> None:
    """Counted over the CI seeds: coordinators fail mid-commit and new ones finish what they
    load, leaders fail between EndTxn and their markers, markers and their answers are lost
    (retried, so some land twice), producers are fenced by a new instance and by the
    transaction timeout, consumers skip aborted transactions, and the LSO lags the high
    watermark while transactions are open."""
    stats: Counter[str] = Counter()
    for seed in range(DEFAULT_SEEDS):
        stats += finished(seed, DEFAULT_STEPS).checker.stats
    for counted in (
        "faults at the coordinator mid-commit",
        "faults at a leader before its marker",
        "markers written by a later coordinator epoch",
        "markers written by a leader elected after the decision",
        "WriteTxnMarkers requests lost",
        "WriteTxnMarkers answers lost",
        "markers ending no records (retried, or a partition left empty)",
        "aborts under a fencing epoch",
        "producers starting over (a new instance mid-transaction)",
        "producers stalling past the transaction timeout",
        "transactions aborted by their producer",
        "transactions whose producer never learnt the outcome",
        "read_committed answers naming aborted transactions",
        "replica checks with LSO below the high watermark",
        "truncations that removed records",
    ):
        assert stats[counted] > 0, f"no {counted!r} in {dict(stats)}"


# ---------------------------------------------------------------------------- the checks can fail
# Each test breaks one rule of the shipped code for the length of the test (monkeypatch, never
# an edit) and requires a CI seed to catch it.


def _caught(expected: str, first_seed: int = 0) -> str:
    for seed in (*range(first_seed, DEFAULT_SEEDS), *range(first_seed)):
        try:
            simulation(seed).run(DEFAULT_STEPS)
        except SimulationFailure as failure:
            message = str(failure)
            assert expected in message, message
            return message
    raise AssertionError(f"no seed below {DEFAULT_SEEDS} caught the injected bug")


def test_a_coordinator_completing_before_every_marker_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A marker that failed (a lost request, a leader that moved) taken as written: the
    coordinator writes CompleteCommit / CompleteAbort with a partition still unmarked."""
    monkeypatch.setattr(markers, "marker_action", lambda error: markers.MarkerAction.WRITTEN)
    _caught("written before the markers of")


def test_a_leader_skipping_a_marker_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """WriteTxnMarkers answered NONE for partition 0 without appending its marker there."""
    shipped = append_txn_markers

    def skip_partition_zero(
        manager: Any, sent: Sequence[TxnMarker], *, timeout_ms: int, now_ms: int
    ) -> asyncio.Future[dict[Any, Errors]]:
        kept = [m for m in sent if all(tp.partition != 0 for tp in m.partitions)]
        answer: asyncio.Future[dict[Any, Errors]] = asyncio.get_running_loop().create_future()
        written = shipped(manager, kept, timeout_ms=timeout_ms, now_ms=now_ms)
        written.add_done_callback(
            lambda done: answer.set_result(
                {(m.producer_id, tp): Errors.NONE for m in sent for tp in m.partitions}
                | done.result()
            )
        )
        return answer

    monkeypatch.setattr(replica_manager, "append_txn_markers", skip_partition_zero)
    _caught("written before the markers of")


def test_read_committed_without_the_aborted_transactions_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A READ_COMMITTED Fetch that lists no aborted transactions: the consumer cannot drop
    them and returns aborted records."""

    def none_aborted(log: PartitionLog, fetch_offset: int, fetched: FetchDataInfo) -> Any:
        return attrs.evolve(fetched, aborted_transactions=())

    monkeypatch.setattr(partition_reads, "_with_aborted_transactions", none_aborted)
    _caught("read_committed")


def test_a_new_coordinator_leaving_prepared_transactions_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A coordinator that loads a PrepareCommit / PrepareAbort and never sends its markers:
    the transactions of a coordinator that failed mid-commit hang, the LSO never reaches the
    log end, and the run cannot quiesce."""
    shipped = coordinator.TransactionCoordinator.complete_loading

    def forget_prepared(
        self: coordinator.TransactionCoordinator,
        partition: int,
        coordinator_epoch: int,
        loaded: dict[str, TransactionMetadata],
        now_ms: int,
    ) -> Effects:
        shipped(self, partition, coordinator_epoch, loaded, now_ms)
        self.markers.pending.clear()
        return Effects()

    monkeypatch.setattr(coordinator.TransactionCoordinator, "complete_loading", forget_prepared)
    monkeypatch.setattr(replication_faults, "QUIESCE_LIMIT_MS", 40_000)  # fail sooner
    message = _caught("transactions not settled: tx")
    assert "is PrepareCommit" in message or "is PrepareAbort" in message, message


# ---------------------------------------------------------------------------- the sim's own parts
# The consumer's filter and the event loop the checks rely on.


def _batch(values: Sequence[str], producer_id: int, base_offset: int) -> bytes:
    return build_batch(
        [SimpleRecord(value=value.encode()) for value in values],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def _marker(producer_id: int, commit: bool, base_offset: int) -> bytes:
    batch = TxnMarker(
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        commit=commit,
        partitions=(),
    ).control_batch(0)
    batch[0:8] = base_offset.to_bytes(8, "big")
    return bytes(batch)


def test_read_committed_drops_aborted_records_and_markers() -> None:
    """Kafka's FetcherTest.testReadCommittedWithCommittedAndAbortedTransactions, in small:
    interleaved producers, one aborted, one committed; control batches never returned."""
    wire = b"".join(
        (
            _batch(["a0", "a1"], 1, 0),  # 0-1, producer 1: aborted
            _batch(["b0"], 2, 2),  # 2, producer 2: committed
            _marker(1, False, 3),  # 3
            _batch(["a2"], 1, 4),  # 4, producer 1 again: committed
            _marker(2, True, 5),  # 5
            _marker(1, True, 6),  # 6
        )
    )
    data = PartitionData(0, aborted_transactions=(AbortedTransaction(1, 0),))
    returned, position = read_committed(list(txn_batches(wire)), data, 0)
    assert returned == [(2, "b0"), (4, "a2")]
    assert position == 7
    # Starting inside the aborted transaction, and past a record of a batch.
    assert read_committed(list(txn_batches(wire)), data, 3) == ([(4, "a2")], 7)
    without = PartitionData(0, aborted_transactions=())
    assert read_committed(list(txn_batches(wire)), without, 1)[0] == [
        (1, "a1"),
        (2, "b0"),
        (4, "a2"),
    ]


class _Scheduler:
    def __init__(self, queue: EventQueue) -> None:
        self.queue = queue
        self.alive = True

    def schedule(self, delay_ms: int, what: str, action: Any) -> None:
        self.queue.after(delay_ms, what, lambda: action() if self.alive else None)


def test_the_simulated_loop_runs_asyncio_on_simulated_time() -> None:
    queue = EventQueue()
    scheduler = _Scheduler(queue)
    loop = SimLoop(scheduler, lambda: queue.now_ms, "test", alive=lambda: scheduler.alive)
    seen: list[tuple[str, int]] = []

    async def work() -> None:
        await asyncio.sleep(0.25)
        seen.append(("slept", queue.now_ms))
        try:
            await asyncio.wait_for(asyncio.get_running_loop().create_future(), 1)
        except TimeoutError:
            seen.append(("timed out", queue.now_ms))

    def start() -> None:
        loop.create_task(work())

    queue.after(0, "start", lambda: loop.run(start))
    while queue.run_next():
        pass
    assert seen == [("slept", 250), ("timed out", 1250)]


def test_the_simulated_loop_fails_on_a_callback_that_raises() -> None:
    queue = EventQueue()
    scheduler = _Scheduler(queue)
    loop = SimLoop(scheduler, lambda: queue.now_ms, "test", alive=lambda: scheduler.alive)

    def boom() -> None:
        raise ValueError("boom")

    loop.call_soon(boom)
    with pytest.raises(SimLoopError, match="boom"):
        queue.run_next()
    scheduler.alive = False  # a dead process's loop reports nothing
    loop.call_exception_handler({"message": "Task was destroyed but it is pending!"})
    assert len(loop.errors) == 1
