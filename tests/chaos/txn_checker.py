"""The transactions checker: what transactional producers did against what read_committed shows.

The workload (``tests/chaos/txn_workload.py``) moves money between accounts kept on different
partitions of one topic: each transaction writes a debit (``-amount``) on one account's
partition and a credit (``+amount``) on another's, and is committed or aborted; one deposit
transaction opens every account first. Every record is an ``Entry``, unique by
``(transaction_id, account)``.

The workload records its history (``tests.chaos.history``: a transaction is ``ok`` once its
commit is acknowledged, ``fail`` once aborted — by its producer, by a new instance's fencing or
at its timeout — and ``info`` while unknown, ``OP_TYPES``), and ``tests.chaos.history_checker``
judges it in Jepsen's terms: aborted reads (at the end or by the consumer running beside the
faults), duplicates, records read during the run and gone at the end, poll skips, G0/G1c cycles
(G0 and G1c-ww tolerated).
This module adds what is particular to the bank, read against Kafka's promise for
``isolation.level = read_committed`` (KIP-98: a read_committed consumer reads up to the last
stable offset and never returns an aborted transaction's records), per transaction:

* ``lost``: a transaction whose commit was acknowledged, with a record missing;
* ``partial``: a transaction of any outcome with some of its records visible and some not
  (a transaction whose outcome the producer never learnt must still be all or nothing);
* ``phantoms``: a record no transaction of the workload wrote (or on the wrong account);
* the invariant: the committed total (the sum of every visible amount) equals the deposits.

LSO stalls are measured by the test (how long the last stable offset takes to pass a target
once the cluster is healed); ``lso_behind`` is the pure comparison it polls.
"""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

import attrs

from tests.chaos.checker import Placed
from tests.chaos.history import OpType
from tests.chaos.history_checker import EXAMPLES_MAX

ENTRY_PREFIX = b"bank|"


class Outcome(enum.Enum):
    COMMITTED = "commit acknowledged"
    ABORTED = "abort acknowledged"
    # Left open by an instance that a new one with the same transactional.id then replaced:
    # the new one's init_transactions aborts it (KIP-98 fencing) before it returns.
    FENCED = "aborted by the next instance's init_transactions"
    # Left open by a producer that never came back: the coordinator aborts it when its
    # transaction.timeout.ms passes (Kafka's TransactionCoordinator.abortTimedOutTransactions).
    TIMED_OUT = "aborted by the coordinator at its timeout"
    # Begun, then the producer failed (fatal error, fenced, retries exhausted) before an answer:
    # the coordinator may have committed or aborted it; either way, all or nothing.
    UNKNOWN = "outcome unknown"


ABORTED = (Outcome.ABORTED, Outcome.FENCED, Outcome.TIMED_OUT)
OP_TYPES = {
    Outcome.COMMITTED: OpType.OK,
    **dict.fromkeys(ABORTED, OpType.FAIL),
    Outcome.UNKNOWN: OpType.INFO,
}


@attrs.frozen
class Entry:
    """One record of a transaction: ``amount`` (signed) moved on ``account``."""

    transaction_id: str
    account: int
    amount: int


def encode_entry(entry: Entry) -> bytes:
    return ENTRY_PREFIX + f"{entry.transaction_id}|{entry.account}|{entry.amount}".encode()


def decode_entry(value: bytes) -> Entry | None:
    """The entry a record holds; None for anything the workload never writes."""
    if not value.startswith(ENTRY_PREFIX):
        return None
    fields = value[len(ENTRY_PREFIX) :].split(b"|")
    if len(fields) != 3:
        return None
    try:
        return Entry(fields[0].decode(), int(fields[1]), int(fields[2]))
    except ValueError:
        return None


@attrs.frozen
class Transaction:
    transaction_id: str
    entries: tuple[Entry, ...]

    @property
    def total(self) -> int:
        return sum(e.amount for e in self.entries)


def transfer(
    transaction_id: str, debit_account: int, credit_account: int, amount: int
) -> Transaction:
    """A debit and a credit of the same amount: moves money, keeps the total."""
    assert debit_account != credit_account and amount > 0
    return Transaction(
        transaction_id,
        (
            Entry(transaction_id, debit_account, -amount),
            Entry(transaction_id, credit_account, amount),
        ),
    )


def deposit(transaction_id: str, accounts: int, amount: int) -> Transaction:
    """One credit of ``amount`` to every account: the money the transfers then move."""
    return Transaction(
        transaction_id, tuple(Entry(transaction_id, a, amount) for a in range(accounts))
    )


@attrs.frozen(kw_only=True)
class TxnReport:
    outcomes: Mapping[Outcome, int]
    visible_records: int
    aborted_in_log: int  # aborted records the uncommitted log holds: aborts were exercised
    unknown_visible: int  # unknown-outcome transactions wholly visible (committed)
    unknown_invisible: int  # ... wholly invisible (aborted, or never written)
    lost: tuple[str, ...]
    partial: tuple[str, ...]
    phantoms: tuple[Placed, ...]
    committed_total: int
    expected_total: int

    @property
    def anomalies(self) -> int:
        return sum(
            map(
                len,
                (self.lost, self.partial, self.phantoms),
            )
        ) + (self.committed_total != self.expected_total)


def check_transactions(
    *,
    transactions: Mapping[str, Transaction],
    outcomes: Mapping[str, Outcome],
    committed_log: Mapping[int, Sequence[Placed]],
    uncommitted_log: Mapping[int, Sequence[Placed]],
) -> TxnReport:
    """Judge the final read_committed log against what each transaction was acknowledged
    as. ``expected_total`` is the committed deposits."""
    visible = [p for log in committed_log.values() for p in log]
    entries = {(p.partition, p.offset): decode_entry(p.value) for p in visible}
    known = {e for t in transactions.values() for e in t.entries}
    phantoms = tuple(p for p in visible if entries[(p.partition, p.offset)] not in known)
    counts = Counter(e for e in entries.values() if e in known)
    seen_by_transaction: dict[str, set[int]] = defaultdict(set)
    for entry in counts:
        seen_by_transaction[entry.transaction_id].add(entry.account)

    def outcome_of(placed: Placed) -> Outcome | None:
        entry = decode_entry(placed.value)
        return None if entry is None else outcomes.get(entry.transaction_id)

    lost, partial = [], []
    unknown_visible = unknown_invisible = 0
    for transaction_id, transaction in sorted(transactions.items()):
        seen = len(seen_by_transaction.get(transaction_id, ()))
        outcome = outcomes.get(transaction_id, Outcome.UNKNOWN)
        if outcome is Outcome.COMMITTED and seen < len(transaction.entries):
            lost.append(transaction_id)
        if 0 < seen < len(transaction.entries):
            partial.append(transaction_id)
        if outcome is Outcome.UNKNOWN:
            unknown_visible += seen == len(transaction.entries)
            unknown_invisible += seen == 0
    uncommitted = [p for log in uncommitted_log.values() for p in log]
    return TxnReport(
        outcomes=Counter(outcomes.get(t, Outcome.UNKNOWN) for t in transactions),
        visible_records=len(visible),
        aborted_in_log=sum(outcome_of(p) in ABORTED for p in uncommitted),
        unknown_visible=unknown_visible,
        unknown_invisible=unknown_invisible,
        lost=tuple(lost),
        partial=tuple(partial),
        phantoms=phantoms,
        committed_total=sum(e.amount for e in entries.values() if e is not None),
        expected_total=sum(
            t.total
            for t in transactions.values()
            if outcomes.get(t.transaction_id) is Outcome.COMMITTED
        ),
    )


def lso_behind(last_stable: Mapping[int, int], target: Mapping[int, int]) -> dict[int, int]:
    """Partitions whose last stable offset is below ``target``, with how far (a partition
    missing from ``last_stable`` could not be asked: behind by all of ``target``)."""
    return {
        partition: offset - last_stable.get(partition, 0)
        for partition, offset in sorted(target.items())
        if last_stable.get(partition, 0) < offset
    }


@attrs.frozen
class LsoStall:
    """After healing at ``when``, the LSO of ``behind``'s partitions did not reach their
    targets within the bound."""

    when: str
    waited_s: float
    behind: Mapping[int, int]


def format_txn_report(report: TxnReport, stalls: Sequence[LsoStall]) -> str:
    def examples(items: Iterable[object]) -> str:
        listed = list(items)[:EXAMPLES_MAX]
        return f"  e.g. {listed}" if listed else ""

    counts = ", ".join(f"{o.name.lower()} {report.outcomes.get(o, 0)}" for o in Outcome)
    return "\n".join(
        [
            f"transactions: {counts} (unknown ones wholly visible {report.unknown_visible}, "
            f"wholly invisible {report.unknown_invisible}); read_committed records "
            f"{report.visible_records}; aborted records in the log {report.aborted_in_log}",
            f"lost committed transactions: {len(report.lost)}{examples(report.lost)}",
            f"partial transactions: {len(report.partial)}{examples(report.partial)}",
            f"phantom records: {len(report.phantoms)}{examples(report.phantoms)}",
            f"committed total {report.committed_total}, deposits {report.expected_total}",
            f"LSO stalls: {len(stalls)}{examples(stalls)}",
        ]
    )
