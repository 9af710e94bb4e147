"""The transaction properties the transaction sim checks, on top of ``replication_checks``.

What Kafka promises for transactions (KIP-98; the anomaly classes of Jepsen's Kafka analyses),
checked against what the logs hold, never against what the code under test says of itself:

1. **Atomicity.** Every transaction ends committed on all of its partitions or aborted on all:
   once the run quiesces, each value's fate is the first COMMIT / ABORT marker of its producer
   after it in its partition; all the values of one transaction share one fate, a transaction
   the producer committed (EndTxn answered NONE) has every value it wrote, committed, and one it
   aborted has every value it wrote there aborted. Nothing is left without a marker (a hanging
   transaction), and no value is written twice (idempotence).
2. **Two-phase commit.** A marker is written only for a decision already in
   ``__transaction_state`` (a PrepareCommit / PrepareAbort of that producer id and epoch naming
   that partition, written in the marker's coordinator epoch or before), and CompleteCommit /
   CompleteAbort is written only once every partition of the decision it completes has its
   marker (``TransactionMarkerChannelManager``'s rule). The decision a completion completes is
   the id's last Prepare record in the completing coordinator's own log: a stale coordinator
   (one that lost its partition and does not know yet) may append a Prepare of its own, which
   never reaches the high watermark and decides nothing.
3. **The last stable offset** of every replica, after every event, lies where Kafka's definition
   puts it (``txn_log.StableOffsetScan``): never behind a transaction whose marker is below the
   high watermark, never past an open one, never past the high watermark.
4. **read_committed.** A read_committed consumer (``txn_consumer``) gets only committed records:
   each one is in the committed log at its offset, in offset order, never of a transaction
   known to be aborted, and in the end exactly the committed values of each partition, in order.

The replication invariants (``replication_checks.Checker``) keep holding for every topic,
``__transaction_state`` included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from pykraft.coordinator.transaction.state import TransactionState
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition
from tests.chaos.history import Op, OpType, Poll, Recorder, Send
from tests.chaos.history_checker import check
from tests.sim.replication_checks import Checker, InvariantViolation, PartitionKey, fail
from tests.sim.txn_log import (
    StableOffsetScan,
    StateRecord,
    TxnBatch,
    log_batches,
    parse_value,
    state_records,
)

_PREPARED = {TransactionState.PREPARE_COMMIT: True, TransactionState.PREPARE_ABORT: False}
_COMPLETE = {TransactionState.COMPLETE_COMMIT: True, TransactionState.COMPLETE_ABORT: False}


@attrs.define(eq=False)
class Decision:
    """A PrepareCommit / PrepareAbort written to ``__transaction_state``."""

    transactional_id: str
    commit: bool
    partitions: frozenset[TopicPartition]
    # The coordinator epoch it was written in (the partition's leader epoch).
    coordinator_epoch: int
    # Each partition's leader epoch when it was written.
    leader_epochs: dict[TopicPartition, int]
    marked: set[TopicPartition] = attrs.Factory(set)
    # Its Complete record was written (once every partition had its marker).
    completed: bool = False


@attrs.define(eq=False)
class ClientTransaction:
    """What a producer knows of one of its transactions."""

    producer_id: int
    producer_epoch: int
    partitions: frozenset[int]
    # Acknowledged values in write order (an ordered set: per partition, batches go one at a
    # time, so acknowledgements come in the order written).
    acked: dict[str, None] = attrs.Factory(dict)
    # True / False once EndTxn answered NONE for a commit / an abort; None while unknown.
    committed: bool | None = None


class TxnChecker(Checker):
    def __init__(self, topic: str, clock_s: Callable[[], float]) -> None:
        super().__init__()
        self.topic = topic
        # The clients' history in Jepsen's terms (``tests.chaos.history``), judged at the end by
        # the chaos suite's ``history_checker``: a transaction is invoked when begun, ok or
        # fail when its EndTxn commit or abort is answered, info if its producer restarted
        # first; every record the read_committed consumer got is a poll. Simulated time.
        self.history = Recorder(wall=clock_s, monotonic=clock_s)
        self._open: dict[tuple[str, int], Op] = {}
        self._scans: dict[tuple[PartitionKey, int], StableOffsetScan] = {}
        self._last_seen: dict[tuple[PartitionKey, int], tuple[int, int, int, int]] = {}
        # (producer id, epoch) -> its decisions in write order; each by its place in the log
        # ((__transaction_state partition, leader epoch, offset) identify a record for good).
        self.decisions: dict[tuple[int, int], list[Decision]] = {}
        self._decisions: dict[tuple[int, int, int], Decision] = {}
        self.transactions: dict[tuple[str, int], ClientTransaction] = {}
        self._client_epochs: set[tuple[int, int]] = set()
        # What read_committed consumers got: partition -> [(offset, value)]
        self.consumed: dict[int, list[tuple[int, str]]] = {}
        # Violations found inside the shipped code (which may catch them), raised after the event.
        self.deferred: list[InvariantViolation] = []

    # ------------------------------------------------------------------ the producers' view

    def on_transaction_begun(
        self,
        key: tuple[str, int],
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[int],
    ) -> None:
        assert key not in self.transactions, f"transaction {key} begun twice"
        self.transactions[key] = ClientTransaction(
            producer_id, producer_epoch, frozenset(partitions)
        )
        self._client_epochs.add((producer_id, producer_epoch))
        self._open[key] = self.history.invoke(key[0], "txn")

    def on_produce_acked(self, key: tuple[str, int], values: Iterable[str]) -> None:
        self.transactions[key].acked.update(dict.fromkeys(values))

    def on_transaction_ended(self, key: tuple[str, int], commit: bool) -> None:
        self.transactions[key].committed = commit
        self._complete(key, OpType.OK if commit else OpType.FAIL)
        self.stats[f"transactions {'committed' if commit else 'aborted'} by their producer"] += 1

    # ------------------------------------------------------------------ two-phase commit

    def on_state_append(
        self,
        state_partition: int,
        log: PartitionLog,
        base_offset: int,
        leader_epoch: Callable[[TopicPartition], int],
    ) -> None:
        """A coordinator appended the batch at ``base_offset`` of ``log`` (its partition of
        ``__transaction_state``, as leader); ``leader_epoch`` tells a partition's leader epoch
        now."""
        for record in state_records(log, base_offset):
            value = record.value
            if value is None:
                continue
            state = value.transaction_status
            if state in _PREPARED:
                decision = Decision(
                    record.transactional_id,
                    _PREPARED[state],
                    value.topic_partitions,
                    record.leader_epoch,
                    {tp: leader_epoch(tp) for tp in value.topic_partitions},
                )
                self._decisions[(state_partition, record.leader_epoch, record.offset)] = decision
                producer = (value.producer_id, value.producer_epoch)
                self.decisions.setdefault(producer, []).append(decision)
                self.stats[f"decisions written ({state.value})"] += 1
                if producer not in self._client_epochs:
                    self.stats["aborts under a fencing epoch"] += 1
            elif state in _COMPLETE:
                self._check_completion(state_partition, log, record, _COMPLETE[state])

    def _check_completion(
        self, state_partition: int, log: PartitionLog, complete: StateRecord, commit: bool
    ) -> None:
        """The decision completed is the last PrepareCommit / PrepareAbort of the id in the
        completing coordinator's log (one a stale coordinator wrote since is not there)."""
        what = f"{complete.transactional_id}: Complete{'Commit' if commit else 'Abort'}"
        prepared = None
        for record in state_records(log, log.log_start_offset, stop_offset=complete.offset):
            status = None if record.value is None else record.value.transaction_status
            if record.transactional_id == complete.transactional_id and status in _PREPARED:
                prepared = (state_partition, record.leader_epoch, record.offset)
        decision = None if prepared is None else self._decisions.get(prepared)
        if decision is None or decision.commit is not commit:
            fail(f"{what} written without that decision before it ({prepared})")
        missing = decision.partitions - decision.marked
        if missing:
            fail(f"{what} written before the markers of {sorted(missing)}")
        decision.completed = True

    def on_marker_append(self, key: PartitionKey, batch: TxnBatch, leader_epoch: int) -> None:
        """A leader appended this marker (a coordinator's WriteTxnMarkers) in ``leader_epoch``.
        It counts for every decision not completed yet that it fits: that producer id, epoch,
        outcome and partition, made in its coordinator epoch or before."""
        assert batch.marker is not None
        commit = not batch.marker.is_abort
        producer = (batch.producer_id, batch.producer_epoch)
        partition = TopicPartition(*key)
        fits = [
            decision
            for decision in self.decisions.get(producer, ())
            if decision.commit is commit
            and partition in decision.partitions
            and decision.coordinator_epoch <= batch.marker.coordinator_epoch
        ]
        if not fits:
            fail(
                f"{key}: {'COMMIT' if commit else 'ABORT'} marker of producer {producer} at "
                f"offset {batch.base_offset} without that decision in __transaction_state"
            )
        self.stats["markers written"] += 1
        for decision in fits:
            if decision.completed:
                continue
            decision.marked.add(partition)
            if batch.marker.coordinator_epoch > decision.coordinator_epoch:
                self.stats["markers written by a later coordinator epoch"] += 1
            if leader_epoch > decision.leader_epochs[partition]:
                self.stats["markers written by a leader elected after the decision"] += 1

    # ------------------------------------------------------------------ the LSO

    def on_truncation(
        self, key: PartitionKey, broker_id: int, offset: int, log: PartitionLog
    ) -> None:
        super().on_truncation(key, broker_id, offset, log)
        scan = self._scans.get((key, broker_id))
        if scan is not None:
            scan.stale = True

    def check_last_stable_offset(
        self, key: PartitionKey, broker_id: int, log: PartitionLog
    ) -> None:
        """Invariant 3 for one replica (rescanned only when its log or offsets moved)."""
        slot = (key, broker_id)
        high_watermark, last_stable_offset = log.high_watermark, log.last_stable_offset
        seen = (id(log), log.log_end_offset, high_watermark, last_stable_offset)
        scan = self._scans.get(slot)
        if self._last_seen.get(slot) == seen and scan is not None and not scan.stale:
            return
        self._last_seen[slot] = seen
        if scan is None or not scan.usable_for(log, high_watermark):
            scan = self._scans[slot] = StableOffsetScan(log)
            self.stats["LSO scans started"] += 1
        lower, upper = scan.bounds(log, high_watermark)
        if last_stable_offset < lower:
            fail(
                f"{key}: broker {broker_id}'s last stable offset {last_stable_offset} stays "
                f"behind a transaction whose marker is below the high watermark "
                f"{high_watermark} (it should be at least {lower})"
            )
        if last_stable_offset > upper:
            fail(
                f"{key}: broker {broker_id}'s last stable offset {last_stable_offset} passes an "
                f"open transaction or the high watermark {high_watermark} (at most {upper})"
            )
        if last_stable_offset < high_watermark:
            self.stats["replica checks with LSO below the high watermark"] += 1

    # ------------------------------------------------------------------ read_committed

    def on_read_committed(self, partition: int, offset: int, value: str) -> None:
        key = (self.topic, partition)
        consumed = self.consumed.setdefault(partition, [])
        if consumed and offset <= consumed[-1][0]:
            fail(f"{key}: read_committed went back from offset {consumed[-1][0]} to {offset}")
        reference = self.reference.get(key, [])
        if offset >= len(reference) or reference[offset][1] != value:
            held = reference[offset] if offset < len(reference) else None
            fail(
                f"{key}: read_committed returned {value} at offset {offset}, not committed "
                f"there ({held})"
            )
        transaction = self.transactions.get(parse_value(value).transaction_key)
        if transaction is not None and transaction.committed is False:
            fail(f"{key}: read_committed returned {value} of an aborted transaction")
        consumed.append((offset, value))
        self.history.ok("consumer", "poll", [Poll(partition, offset, value.encode())])
        self.stats["records read by read_committed consumers"] += 1

    def _complete(self, key: tuple[str, int], outcome: OpType) -> None:
        sends = [Send(parse_value(v).partition, v.encode()) for v in self.transactions[key].acked]
        self.history.complete(self._open.pop(key), outcome, sends)

    def check_history(self) -> None:
        """Transactions still open end unknown; then no anomaly but G0 and G1c-ww (expected
        of Kafka's transactions: their writes interleave) may be in the history."""
        for key in sorted(self._open):
            self._complete(key, OpType.INFO)
        report = check(self.history.history())
        self.stats["G0 cycles of interleaved transactions (expected)"] += len(
            report.anomalies["G0"]
        )
        if report.bad():
            fail(f"the clients' history has anomalies {report.bad()}:\n{report.render()}")

    # ------------------------------------------------------------------ after quiescing

    def check_transactions(self, logs: Mapping[int, PartitionLog]) -> None:
        """Invariants 1 and 4 over every partition's converged log."""
        fates: dict[tuple[str, int], dict[int, set[bool]]] = {}
        present: set[str] = set()
        committed_values: dict[int, list[tuple[int, str]]] = {}
        for partition, log in sorted(logs.items()):
            committed_values[partition] = self._fates(partition, log, fates, present)
        for key, by_partition in sorted(fates.items()):
            outcomes = set().union(*by_partition.values())
            if len(outcomes) != 1:
                fail(
                    f"transaction {key} is committed on some partitions and aborted on others: "
                    f"{ {p: sorted(f) for p, f in sorted(by_partition.items())} }"
                )
        for key, transaction in sorted(self.transactions.items()):
            self._check_client_view(key, transaction, fates.get(key, {}), present)
        for partition, expected in sorted(committed_values.items()):
            consumed = self.consumed.get(partition, [])
            if consumed != expected:
                fail(
                    f"{(self.topic, partition)}: read_committed got {len(consumed)} records, "
                    f"the committed log has {len(expected)}: first difference at "
                    f"{_first_difference(consumed, expected)}"
                )
        self.check_history()

    def _fates(
        self,
        partition: int,
        log: PartitionLog,
        fates: dict[tuple[str, int], dict[int, set[bool]]],
        present: set[str],
    ) -> list[tuple[int, str]]:
        """Each value's fate in one partition; returns the committed (offset, value)s."""
        key = (self.topic, partition)
        pending: dict[int, list[tuple[int, str]]] = {}
        committed: list[tuple[int, str]] = []
        for batch in log_batches(log, 0):
            if batch.marker is not None:
                commit = not batch.marker.is_abort
                if batch.producer_id not in pending:
                    self.stats[
                        "markers ending no records (retried, or a partition left empty)"
                    ] += 1
                for offset, value in pending.pop(batch.producer_id, []):
                    txn = parse_value(value).transaction_key
                    fates.setdefault(txn, {}).setdefault(partition, set()).add(commit)
                    if commit:
                        committed.append((offset, value))
                continue
            if not batch.transactional:
                fail(f"{key}: a non-transactional batch at offset {batch.base_offset}")
            for index, value in enumerate(batch.values):
                if value in present:
                    fail(f"{key}: {value} written twice (at offset {batch.base_offset + index})")
                present.add(value)
                pending.setdefault(batch.producer_id, []).append((batch.base_offset + index, value))
        for producer_id, values in sorted(pending.items()):
            fail(
                f"{key}: producer {producer_id}'s records from offset {values[0][0]} have no "
                f"marker: a hanging transaction ({values[0][1]} ...)"
            )
        committed.sort()
        return committed

    def _check_client_view(
        self,
        key: tuple[str, int],
        transaction: ClientTransaction,
        fates: Mapping[int, set[bool]],
        present: set[str],
    ) -> None:
        lost = sorted(transaction.acked.keys() - present)
        if lost:
            fail(f"transaction {key}: acknowledged values {lost[:3]} are in no log")
        if transaction.committed is None:
            self.stats["transactions whose producer never learnt the outcome"] += 1
            return
        for partition, outcomes in sorted(fates.items()):
            if outcomes != {transaction.committed}:
                fail(
                    f"transaction {key} was {'committed' if transaction.committed else 'aborted'}"
                    f" by its producer, but partition {partition} has it "
                    f"{'aborted' if transaction.committed else 'committed'}"
                )


def _first_difference(
    consumed: list[tuple[int, str]], expected: list[tuple[int, str]]
) -> tuple[tuple[int, str] | None, tuple[int, str] | None]:
    for index in range(max(len(consumed), len(expected))):
        got = consumed[index] if index < len(consumed) else None
        want = expected[index] if index < len(expected) else None
        if got != want:
            return got, want
    return None, None
