"""The safety properties the replication sim checks after every event.

Each one is what Kafka guarantees with acks=all, replication factor 3, min.insync.replicas 2,
clean elections only, and no fsync (replication is the durability; see the crash rule in
``replication_sim``):

1. **Committed history is immutable.** ``reference`` is the partition's committed log, built
   from the records every replica holds below its own high watermark: whichever replica first
   reports an offset below its high watermark fixes ``(leader_epoch, value)`` there, and every
   replica, at every later time, must hold the same record there while it is below its high
   watermark. This is "every pair of replicas agrees below min(their high watermarks)", also
   across time: a record once committed is never replaced.
2. **The leader holds all committed data.** The current leader (the broker the controller's
   image names, once it has applied that leader epoch) holds every ``reference`` record. Its
   high watermark may lag the previous leader's (the follower learnt it one fetch late; Kafka
   answers OFFSET_NOT_AVAILABLE meanwhile, KIP-207) — so the guarantee across leader changes is
   about the data below the highest high watermark ever reached, not the number.
3. **A leader's high watermark never decreases during its tenure** (one broker incarnation
   leading one leader epoch: ``maybeIncrementLeaderHW`` only moves it up).
4. **No acknowledged write is lost.** Every value acknowledged (acks=all, the delayed produce
   completed without error) is in ``reference`` at its offset, so by 2 in every later leader.
5. **One leader per leader epoch**, and a broker's leader epoch for a partition never goes back.
6. **Log matching.** Batches at the same base offset written in the same leader epoch are the
   same batch on every replica; after a completed truncation a follower's log is a prefix of
   the log of the leader that answered; a follower never truncates below its high watermark.
7. **Every elected leader holds every acknowledged record** when the controller's election
   commits (``check_elected``): the clean-election guarantee itself, checked on the elected
   replica's disk at the moment of the election rather than once it acts as leader (2).

``SimulationFailure`` carries the message; the simulation adds the seed, step and trace.
"""

from __future__ import annotations

from collections import Counter
from typing import NoReturn

import attrs

from pykraft.storage.partition_log import PartitionLog
from tests.sim.replication_log import PartitionKey, StoredBatch, records, records_from

__all__ = ["Checker", "InvariantViolation", "PartitionKey", "Tenure", "fail"]


class InvariantViolation(AssertionError):
    pass


def fail(message: str) -> NoReturn:
    raise InvariantViolation(message)


@attrs.frozen
class Tenure:
    """One broker incarnation leading one leader epoch of a partition."""

    key: PartitionKey
    broker_id: int
    incarnation: int
    leader_epoch: int


class Checker:
    def __init__(self) -> None:
        # What happened, for tests that the faults reach the interesting cases.
        self.stats: Counter[str] = Counter()
        # Invariant 1: the committed log, (leader_epoch, value) per offset from 0.
        self.reference: dict[PartitionKey, list[tuple[int, str]]] = {}
        # How far each replica's log has been compared with the reference.
        self._verified: dict[tuple[PartitionKey, int], int] = {}
        self._replica_high_watermark: dict[tuple[PartitionKey, int], int] = {}
        # Invariant 2: how much of the reference each tenure's log was checked to hold.
        self._leader_checked: dict[Tenure, int] = {}
        # Invariant 3.
        self._tenure_high_watermark: dict[Tenure, int] = {}
        # Invariant 4: offset -> value of every acknowledged record; acks not yet compared.
        self.acked: dict[PartitionKey, dict[int, str]] = {}
        self._unchecked_acks: list[tuple[PartitionKey, int, str]] = []
        # Invariant 5.
        self._epoch_leader: dict[tuple[PartitionKey, int], int] = {}
        self._broker_epoch: dict[tuple[PartitionKey, int, int], int] = {}
        # Invariant 6: (key, leader_epoch, base_offset) -> the batch its leader wrote.
        self._written: dict[tuple[PartitionKey, int, int], StoredBatch] = {}

    # ------------------------------------------------------------------ hooks

    def on_become_leader(self, key: PartitionKey, broker_id: int, leader_epoch: int) -> None:
        leader = self._epoch_leader.setdefault((key, leader_epoch), broker_id)
        self.stats["leader elections"] += 1
        reference = self.reference.get(key, [])
        if len(reference) > 0 and self._leader_high_watermark(key, broker_id) < len(reference):
            # KIP-207: the new leader's HW starts below what the old leader had committed.
            self.stats["new leader's HW below the committed offset"] += 1
        if leader != broker_id:
            fail(f"{key}: brokers {leader} and {broker_id} both led leader epoch {leader_epoch}")

    def _leader_high_watermark(self, key: PartitionKey, broker_id: int) -> int:
        return self._replica_high_watermark.get((key, broker_id), 0)

    def on_leader_append(self, key: PartitionKey, batch: StoredBatch) -> None:
        slot = (key, batch.leader_epoch, batch.base_offset)
        if slot in self._written:
            fail(
                f"{key}: leader epoch {batch.leader_epoch} wrote offset {batch.base_offset} "
                f"twice: {self._written[slot].values} and {batch.values}"
            )
        self._written[slot] = batch

    def on_follower_append(
        self, key: PartitionKey, broker_id: int, batches: list[StoredBatch]
    ) -> None:
        for batch in batches:
            written = self._written.get((key, batch.leader_epoch, batch.base_offset))
            if written is None or written.values != batch.values:
                fail(
                    f"{key}: broker {broker_id} appended {batch.values} at offset "
                    f"{batch.base_offset} in leader epoch {batch.leader_epoch}, but that "
                    f"epoch's leader wrote {None if written is None else written.values}"
                )

    def on_truncation(
        self, key: PartitionKey, broker_id: int, offset: int, log: PartitionLog
    ) -> None:
        """Before a follower cuts its log at ``offset``."""
        high_watermark_before = log.high_watermark
        if offset < log.log_end_offset:
            self.stats["truncations that removed records"] += 1
        if offset < high_watermark_before:
            fail(
                f"{key}: broker {broker_id} truncates to {offset}, below its high watermark "
                f"{high_watermark_before}"
            )

    def on_truncation_complete(
        self,
        key: PartitionKey,
        broker_id: int,
        follower: PartitionLog,
        leader_records: tuple[tuple[int, int, str], ...],
    ) -> None:
        self.stats["completed truncations checked"] += 1
        mine = records(follower)
        if list(leader_records[: len(mine)]) != mine:
            fail(
                f"{key}: after a completed truncation broker {broker_id}'s log "
                f"{mine[-5:]} is not a prefix of the leader's {list(leader_records[-5:])}"
            )

    def on_ack(self, key: PartitionKey, base_offset: int, values: tuple[str, ...]) -> None:
        acked = self.acked.setdefault(key, {})
        for index, value in enumerate(values):
            offset = base_offset + index
            if acked.get(offset, value) != value:
                fail(f"{key}: offset {offset} acknowledged twice, {acked[offset]} and {value}")
            acked[offset] = value
            self._unchecked_acks.append((key, offset, value))

    # ------------------------------------------------------------------ after every event

    def check_replica(self, key: PartitionKey, broker_id: int, log: PartitionLog) -> None:
        """Invariant 1 for one replica: compare its new records below its HW."""
        reference = self.reference.setdefault(key, [])
        slot = (key, broker_id)
        high_watermark = log.high_watermark
        verified = min(self._verified.get(slot, 0), high_watermark)
        if verified < high_watermark:
            for offset, epoch, value in records_from(log, verified):
                if offset >= high_watermark:
                    break
                if offset < len(reference):
                    if reference[offset] != (epoch, value):
                        fail(
                            f"{key}: broker {broker_id} holds {(epoch, value)} at offset "
                            f"{offset} below its high watermark {high_watermark}, but "
                            f"{reference[offset]} was committed there"
                        )
                else:
                    assert offset == len(reference), (offset, len(reference))
                    reference.append((epoch, value))
        self._verified[slot] = high_watermark
        self._replica_high_watermark[slot] = high_watermark

    def check_leader(self, tenure: Tenure, log: PartitionLog, *, legitimate: bool) -> None:
        """Invariants 2, 3, 5 for a broker that acts as leader."""
        key = (tenure.key, tenure.broker_id, tenure.incarnation)
        if self._broker_epoch.get(key, -1) > tenure.leader_epoch:
            fail(
                f"{tenure.key}: broker {tenure.broker_id}'s leader epoch went back to "
                f"{tenure.leader_epoch} from {self._broker_epoch[key]}"
            )
        self._broker_epoch[key] = tenure.leader_epoch
        last = self._tenure_high_watermark.get(tenure, 0)
        if log.high_watermark < last:
            fail(
                f"{tenure.key}: leader {tenure.broker_id}'s high watermark went back from "
                f"{last} to {log.high_watermark} in leader epoch {tenure.leader_epoch}"
            )
        self._tenure_high_watermark[tenure] = log.high_watermark
        if legitimate:
            self._check_leader_holds_reference(tenure, log)

    def _check_leader_holds_reference(self, tenure: Tenure, log: PartitionLog) -> None:
        reference = self.reference.get(tenure.key, [])
        checked = self._leader_checked.get(tenure, 0)
        if checked >= len(reference):
            return
        held = records_from(log, checked)
        for offset in range(checked, len(reference)):
            record = next(held, None)
            if record is None or record[0] != offset or record[1:] != reference[offset]:
                fail(
                    f"{tenure.key}: leader {tenure.broker_id} (epoch {tenure.leader_epoch}) "
                    f"lacks committed record {reference[offset]} at offset {offset}: it "
                    f"holds {record} (log end {log.log_end_offset})"
                )
        self._leader_checked[tenure] = len(reference)

    def check_elected(self, key: PartitionKey, broker_id: int, log: PartitionLog | None) -> None:
        """Invariant 7 (``log`` None: the broker has no log for the partition yet)."""
        self.stats["elections checked against every acknowledged record"] += 1
        acked = self.acked.get(key, {})
        if not acked:
            return
        held = (
            {}
            if log is None
            else {offset: value for offset, _, value in records_from(log, min(acked))}
        )
        for offset, value in sorted(acked.items()):
            if held.get(offset) != value:
                fail(
                    f"{key}: broker {broker_id} was elected leader but lacks committed record "
                    f"{value!r} (acknowledged at offset {offset}; it holds {held.get(offset)!r})"
                )

    def check_acks(self) -> None:
        """Invariant 4 for acknowledgements made during the last event."""
        for key, offset, value in self._unchecked_acks:
            reference = self.reference.get(key, [])
            if offset >= len(reference) or reference[offset][1] != value:
                found = reference[offset] if offset < len(reference) else None
                fail(
                    f"{key}: {value} acknowledged at offset {offset}, but the committed "
                    f"log has {found} there"
                )
        self._unchecked_acks.clear()

    def check_kept(self, key: PartitionKey, logs: dict[int, PartitionLog]) -> int:
        """A partition left offline (KIP-966 runs): every acknowledged value is still on some
        replica, at its offset — unavailable, not lost — and one replica holds them all (the
        one an operator's unclean election must pick); that replica's id is returned."""
        acked = self.acked.get(key, {})
        held = {offset: value for log in logs.values() for offset, _, value in records(log)}
        kept = {
            broker_id: {(o, v) for o, _, v in records(log) if acked.get(o) == v}
            for broker_id, log in logs.items()
        }
        anywhere = set().union(*kept.values())
        for offset, value in sorted(acked.items()):
            if (offset, value) not in anywhere:
                fail(
                    f"{key}: {value} acknowledged at offset {offset} is on no replica of the "
                    f"offline partition ({held.get(offset)!r} there)"
                )
        whole = [broker_id for broker_id, pairs in sorted(kept.items()) if len(pairs) == len(acked)]
        if not whole:
            fail(f"{key}: no replica of the offline partition holds every acknowledged value")
        return whole[0]

    def check_converged(self, key: PartitionKey, logs: dict[int, PartitionLog]) -> None:
        """After quiescing: every replica holds every acknowledged value at its offset."""
        for broker_id, log in logs.items():
            held = {offset: value for offset, _, value in records(log)}
            for offset, value in sorted(self.acked.get(key, {}).items()):
                if held.get(offset) != value:
                    fail(
                        f"{key}: acknowledged {value} at offset {offset} is lost on broker "
                        f"{broker_id} (it holds {held.get(offset)}, log end "
                        f"{log.log_end_offset})"
                    )
