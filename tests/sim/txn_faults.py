"""Faults of the transaction sim: the replication sim's, and the ones aimed at a commit.

* The replication sim's random faults (``replication_faults``), further apart and on one broker
  at a time: a transaction needs its partitions and its coordinator's partition to reach
  min.insync.replicas at once; two brokers down at once are the replication sim's business.
* Lost and reordered marker deliveries: ``txn_sim.TransactionSimulation.send_markers`` loses a
  WriteTxnMarkers request or answer with ``marker_loss_probability`` (the coordinator times out
  and sends again: a duplicate marker when only the answer was lost) and holds each back up to
  ``marker_jitter_ms``, so markers to different leaders, and markers and fetches, arrive in any
  order. A retry never overtakes its original on the same link (one TCP connection; the sim
  asserts its delays allow it): Kafka's transaction version 1 relies on it, since a marker
  names its producer epoch, not its transaction.
* Coordinator failover mid-commit (``on_decision``): right after a coordinator appends a
  PrepareCommit / PrepareAbort, sometimes a fault at that broker — kill -9, power loss,
  controlled shutdown, isolation, pause, a preferred election — within 200 ms: before, while or
  after its markers go out.
* A leader change between EndTxn and the markers: at the same moment, sometimes a fault at the
  leader of one of the transaction's partitions (kill -9, controlled shutdown, isolation).

Every fault still obeys the replication sim's rules (``FaultInjector._allowed``, the crash rule).
At the end ``quiesce`` waits until the transactions settle too (``txn_sim.unsettled``), then
checks atomicity and read_committed over the converged logs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pykraft.storage.topic_partition import TopicPartition
from tests.sim.replication_faults import FaultInjector, FaultKind
from tests.sim.replication_sim import TOPIC

if TYPE_CHECKING:
    from tests.sim.txn_sim import TransactionSimulation

_COORDINATOR_FAULTS = (
    FaultKind.KILL,
    FaultKind.KILL,
    FaultKind.POWER_LOSS,
    FaultKind.CONTROLLED_SHUTDOWN,
    FaultKind.ISOLATE,
    FaultKind.PAUSE,
    FaultKind.ELECT_PREFERRED,
)
_LEADER_FAULTS = (FaultKind.KILL, FaultKind.CONTROLLED_SHUTDOWN, FaultKind.ISOLATE)


class TxnFaultInjector(FaultInjector):
    """The replication sim's faults, further apart and on one broker at a time (a transaction
    needs its partitions and its coordinator's to reach min.insync.replicas at once; two
    brokers down are the replication sim's business), plus faults aimed at a commit in
    progress."""

    sim: TransactionSimulation
    fault_interval_ms = (2000, 8000)
    max_faulty = 1

    def on_decision(self, coordinator_id: int, partitions: Iterable[TopicPartition]) -> None:
        sim, rng = self.sim, self.sim.rng
        if not self.active:
            return
        if rng.random() < sim.txn.coordinator_react_probability:
            kind = rng.choice(_COORDINATOR_FAULTS)
            self._aim(kind, coordinator_id, rng.randint(0, 200), "at the coordinator mid-commit")
        data = sorted(tp.partition for tp in partitions if tp.topic == TOPIC)
        if data and rng.random() < sim.txn.leader_react_probability:
            registration = sim.registration((TOPIC, rng.choice(data)))
            if registration is not None and registration.leader >= 0:
                kind = rng.choice(_LEADER_FAULTS)
                self._aim(
                    kind, registration.leader, rng.randint(0, 100), "at a leader before its marker"
                )

    def _aim(self, kind: FaultKind, broker_id: int, delay_ms: int, where: str) -> None:
        def inject() -> None:
            before = self.injected[kind]
            self._inject(kind, broker_id)
            if self.injected[kind] > before:
                self.sim.checker.stats[f"faults {where}"] += 1

        self.sim.queue.after(delay_ms, f"react: {kind.value} {where}", inject)

    def converged(self) -> bool:
        return super().converged() and self.sim.unsettled() is None

    def describe(self) -> str:
        unsettled = self.sim.unsettled()
        settled = "" if unsettled is None else f"transactions not settled: {unsettled}\n"
        return settled + super().describe()

    def quiesce(self) -> None:
        super().quiesce()
        sim = self.sim
        sim.checker.check_transactions(
            {p: sim.disks[0].log((TOPIC, p)) for p in range(sim.settings.partitions)}
        )
