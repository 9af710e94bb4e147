"""The transactions checker on hand-made histories (no cluster: these run with the unit tests).

Each anomaly class of ``txn_checker`` is made to happen once, alone where it can be, the way
Jepsen's Kafka analysis describes it: a lost committed write, a partial (non-atomic)
transaction; and the committed-total invariant. The same bank histories, recorded as the
workload records them (``OP_TYPES``), show ``history_checker``'s aborted reads, duplicates and
reads that vanished.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import pytest

from tests.chaos.checker import Placed
from tests.chaos.history import Poll, Recorder, Send
from tests.chaos.history_checker import Report
from tests.chaos.history_checker import check as check_history
from tests.chaos.txn_checker import (
    OP_TYPES,
    Entry,
    LsoStall,
    Outcome,
    Transaction,
    TxnReport,
    check_transactions,
    decode_entry,
    deposit,
    encode_entry,
    format_txn_report,
    lso_behind,
    transfer,
)

# Accounts 0 and 2 live on partition 0, accounts 1 and 3 on partition 1.
DEPOSIT = deposit("deposit", 4, 100)
COMMITTED = transfer("p0-0", 0, 1, 30)
ABORTED = transfer("p0-1", 1, 2, 20)
UNKNOWN_IN = transfer("p1-0", 3, 0, 5)
UNKNOWN_OUT = transfer("p1-1", 2, 3, 7)
FENCED = transfer("p2-0", 0, 3, 9)
TRANSACTIONS = {
    t.transaction_id: t for t in (DEPOSIT, COMMITTED, ABORTED, UNKNOWN_IN, UNKNOWN_OUT, FENCED)
}
OUTCOMES = {
    "deposit": Outcome.COMMITTED,
    "p0-0": Outcome.COMMITTED,
    "p0-1": Outcome.ABORTED,
    "p1-0": Outcome.UNKNOWN,
    "p1-1": Outcome.UNKNOWN,
    "p2-0": Outcome.FENCED,
}


def log_of(*entries: Entry) -> dict[int, list[Placed]]:
    """Entries in order, each on its account's partition (``account % 2``), offsets from 0."""
    log: dict[int, list[Placed]] = {0: [], 1: []}
    for entry in entries:
        partition = log[entry.account % 2]
        partition.append(Placed(entry.account % 2, len(partition), encode_entry(entry)))
    return log


CLEAN = (*DEPOSIT.entries, *COMMITTED.entries, *UNKNOWN_IN.entries)
# The aborted and fenced records are in the log, not readable.
UNCOMMITTED = (*CLEAN, *ABORTED.entries, *FENCED.entries)


def check(committed: tuple[Entry, ...]) -> TxnReport:
    return check_transactions(
        transactions=TRANSACTIONS,
        outcomes=OUTCOMES,
        committed_log=log_of(*committed),
        uncommitted_log=log_of(*UNCOMMITTED),
    )


def history_of(
    committed: tuple[Entry, ...],
    live: tuple[Placed, ...] = (),
    outcomes: Mapping[str, Outcome] = OUTCOMES,
) -> Report:
    """The bank's transactions as the workload records them, ``live`` read by the consumer
    during the run, then a final read of ``committed``."""
    ticks = itertools.count()
    recorder = Recorder(wall=lambda: float(next(ticks)), monotonic=lambda: next(ticks))
    for transaction_id, transaction in TRANSACTIONS.items():
        sends = [Send(e.account % 2, encode_entry(e)) for e in transaction.entries]
        invocation = recorder.invoke(transaction_id.split("-")[0], "txn", sends)
        recorder.complete(invocation, OP_TYPES[outcomes[transaction_id]])
    for read in live:
        recorder.ok("consumer", "poll", [Poll(read.partition, read.offset, read.value)])
    recorder.final_read(
        {
            k: [Poll(p.partition, p.offset, p.value) for p in log]
            for k, log in log_of(*committed).items()
        }
    )
    return check_history(recorder.history())


def test_a_clean_history_has_no_anomaly_and_keeps_the_total() -> None:
    assert history_of(CLEAN, live=tuple(log_of(*CLEAN)[0][:3])).bad() == {}
    report = check(CLEAN)
    assert report.anomalies == 0
    assert report.committed_total == report.expected_total == 400
    assert report.outcomes == {
        Outcome.COMMITTED: 2,
        Outcome.ABORTED: 1,
        Outcome.UNKNOWN: 2,
        Outcome.FENCED: 1,
    }
    assert (report.unknown_visible, report.unknown_invisible) == (1, 1)
    assert report.aborted_in_log == 4 and report.visible_records == 8


def test_an_aborted_record_read_is_an_aborted_read_and_a_partial_transaction() -> None:
    credit = ABORTED.entries[1]
    report = check((*CLEAN, credit))
    [aborted] = history_of((*CLEAN, credit)).anomalies["aborted-read"]
    assert aborted.detail == encode_entry(credit).decode()
    assert report.partial == ("p0-1",) and report.lost == ()
    assert report.committed_total == 420 != report.expected_total


def test_an_aborted_record_read_during_the_run_only_is_still_an_aborted_read() -> None:
    read = Placed(1, 99, encode_entry(ABORTED.entries[0]))
    report = history_of(CLEAN, live=(read,))
    # and the final log no longer has it
    assert report.bad() == {"aborted-read": 1, "vanished": 1}


def test_a_fenced_transaction_read_back_is_an_aborted_read() -> None:
    # KIP-98: the new instance's InitProducerId aborted it; a zombie's commit must not win.
    report = check((*CLEAN, *FENCED.entries))
    aborted = history_of((*CLEAN, *FENCED.entries)).anomalies["aborted-read"]
    assert sorted(a.detail for a in aborted) == sorted(
        encode_entry(e).decode() for e in FENCED.entries
    )
    assert report.partial == () and report.committed_total == report.expected_total


def test_a_transaction_aborted_at_its_timeout_is_aborted_too() -> None:
    # Kafka's TransactionCoordinator.abortTimedOutTransactions ended it, not its producer.
    outcomes = {**OUTCOMES, "p2-0": Outcome.TIMED_OUT}
    report = check_transactions(
        transactions=TRANSACTIONS,
        outcomes=outcomes,
        committed_log=log_of(*CLEAN, FENCED.entries[0]),
        uncommitted_log=log_of(*UNCOMMITTED),
    )
    [aborted] = history_of((*CLEAN, FENCED.entries[0]), outcomes=outcomes).anomalies["aborted-read"]
    assert aborted.detail == encode_entry(FENCED.entries[0]).decode()
    assert report.partial == ("p2-0",) and report.aborted_in_log == 4


def test_a_committed_transaction_missing_a_record_is_lost_and_partial() -> None:
    report = check((*DEPOSIT.entries, COMMITTED.entries[0], *UNKNOWN_IN.entries))
    assert report.lost == ("p0-0",) and report.partial == ("p0-0",)
    assert report.committed_total == 370  # the debit without its credit


def test_a_committed_transaction_missing_entirely_is_lost_not_partial() -> None:
    report = check((*DEPOSIT.entries, *UNKNOWN_IN.entries))
    assert report.lost == ("p0-0",) and report.partial == ()
    assert report.committed_total == report.expected_total  # a transfer's total is 0


def test_an_unknown_outcome_may_go_either_way_but_not_halfway() -> None:
    report = check((*CLEAN, UNKNOWN_OUT.entries[1]))
    assert report.partial == ("p1-1",) and report.lost == ()
    assert report.unknown_visible == 1 and report.unknown_invisible == 0


def test_a_record_visible_twice_is_a_duplicate_and_breaks_the_total() -> None:
    report = check((*CLEAN, COMMITTED.entries[1]))
    [duplicate] = history_of((*CLEAN, COMMITTED.entries[1])).anomalies["duplicate"]
    assert duplicate.detail.startswith(encode_entry(COMMITTED.entries[1]).decode())
    assert report.committed_total == 430


def test_a_record_read_during_the_run_must_stay_at_its_offset() -> None:
    final = log_of(*CLEAN)
    moved = Placed(0, final[0][1].offset, final[0][2].value)
    report = history_of(CLEAN, live=(final[0][0], moved))
    # Its value is at another offset at the end: an offset with two values, a value at two.
    assert report.bad() == {"inconsistent-offsets": 1, "duplicate": 1}


def test_records_no_transaction_wrote_are_phantoms() -> None:
    forged = Entry("p0-0", 0, -31)  # the right transaction and account, another amount
    report = check((*CLEAN, forged))
    assert [decode_entry(p.value) for p in report.phantoms] == [forged]
    garbage = check_transactions(
        transactions=TRANSACTIONS,
        outcomes=OUTCOMES,
        committed_log={0: [Placed(0, 0, b"chaos-000000001")]},
        uncommitted_log={},
    )
    assert len(garbage.phantoms) == 1 and garbage.committed_total == 0
    assert garbage.lost == ("deposit", "p0-0")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (encode_entry(Entry("p2-17", 5, -42)), Entry("p2-17", 5, -42)),
        (b"bank|deposit|0|1000", Entry("deposit", 0, 1000)),
        (b"chaos-000000001", None),
        (b"bank|p0-0|1", None),
        (b"bank|p0-0|x|1", None),
        (b"bank|p0-0|1|2|3", None),
        (b"", None),
    ],
)
def test_decode_entry(value: bytes, expected: Entry | None) -> None:
    assert decode_entry(value) == expected


def test_transfers_move_money_and_deposits_add_it() -> None:
    assert COMMITTED.total == 0 and [e.amount for e in COMMITTED.entries] == [-30, 30]
    assert DEPOSIT.total == 400 and [e.account for e in DEPOSIT.entries] == [0, 1, 2, 3]
    with pytest.raises(AssertionError):
        transfer("t", 1, 1, 5)
    with pytest.raises(AssertionError):
        transfer("t", 1, 2, 0)
    assert isinstance(DEPOSIT, Transaction)


@pytest.mark.parametrize(
    ("last_stable", "target", "expected"),
    [
        ({0: 10, 1: 4}, {0: 10, 1: 4}, {}),
        ({0: 12, 1: 4}, {0: 10, 1: 4}, {}),  # the LSO moved on past the target
        ({0: 7, 1: 4}, {0: 10, 1: 4}, {0: 3}),
        ({0: 10}, {0: 10, 1: 4}, {1: 4}),  # partition 1's leader did not answer
        ({}, {0: 0}, {}),
    ],
)
def test_lso_behind(
    last_stable: dict[int, int], target: dict[int, int], expected: dict[int, int]
) -> None:
    assert lso_behind(last_stable, target) == expected


def test_the_report_names_every_anomaly_count() -> None:
    report = check((*CLEAN, ABORTED.entries[1]))
    text = format_txn_report(report, [LsoStall("after kill -9", 20.5, {0: 3})])
    assert "partial transactions: 1" in text
    assert "committed total 420, deposits 400" in text
    assert "LSO stalls: 1" in text and "after kill -9" in text
