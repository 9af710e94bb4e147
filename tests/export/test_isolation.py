"""What read_committed hides, as pure rules (export.isolation) and the scan's option."""

from __future__ import annotations

import pytest

from pykraft.export.isolation import (
    AbortedBatches,
    IsolationLevel,
    overlapping,
    parse_isolation_level,
)
from pykraft.export.log_dirs import LogScanError
from pykraft.export.log_scan import isolation_level_option
from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.record_batch import BatchHeader, parse_header, patch_base_offset
from pykraft.storage.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_control_batch,
)


def batch(producer_id: int, base_offset: int, *, transactional: bool = True) -> BatchHeader:
    data = bytearray(
        build_batch(
            [SimpleRecord(value=b"v")],
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=transactional,
        )
    )
    patch_base_offset(data, 0, base_offset)
    return parse_header(data)


def marker(producer_id: int, offset: int) -> BatchHeader:
    data = build_control_batch(
        ControlRecordType.ABORT,
        producer_id=producer_id,
        producer_epoch=0,
        timestamp=0,
        base_offset=offset,
    )
    return parse_header(data)


# FetcherTest.testReadCommittedWithCommittedAndAbortedTransactions: producer 2 aborted 2..5,
# producer 1 aborted 6..9 (first offset, marker offset).
KAFKA_ABORTED = (AbortedTxn(2, 2, 5, 6), AbortedTxn(1, 6, 9, 10))


def check(
    header: BatchHeader, expected: bool, aborted: tuple[AbortedTxn, ...] = KAFKA_ABORTED
) -> None:
    assert AbortedBatches.of(aborted).holds(header) is expected, header


def test_which_batches_belong_to_aborted_transactions() -> None:
    check(batch(1, 0), False)  # commit1-1: producer 1's committed transaction
    check(batch(2, 2), True)  # abort2-1: the aborted transaction's first batch
    check(batch(2, 4), True)  # abort2-2
    check(batch(1, 6), True)  # abort1-1
    check(batch(2, 7), False)  # commit2-1: producer 2's next transaction, after its marker
    check(batch(1, 8), True)  # abort1-2
    check(batch(1, 10), False)  # after producer 1's marker
    check(batch(3, 4), False)  # another producer inside the interval
    check(batch(2, 3, transactional=False), False)  # only transactional batches
    check(marker(2, 5), False)  # the marker itself is a control batch: never "aborted" data
    check(batch(2, 1), False)  # before the transaction began
    check(batch(2, 4), False, ())  # nothing aborted
    # FetcherTest.testMultipleAbortMarkers: a second ABORT with no data indexes nothing, and
    # the transaction after it is committed.
    check(batch(1, 4), False, (AbortedTxn(1, 0, 2, 3),))
    # FetcherTest.testReadCommittedAbortMarkerWithNoData: the aborted transaction's records
    # are gone from the log; the producer's later transaction is not affected.
    check(batch(1, 6), False, (AbortedTxn(1, 0, 5, 6),))
    # Many transactions of one producer: the interval holding the batch decides.
    many = tuple(AbortedTxn(7, 10 * n, 10 * n + 5, 0) for n in range(100))
    check(batch(7, 503), True, many)
    check(batch(7, 507), False, many)
    assert not AbortedBatches.of(()) and AbortedBatches.of(KAFKA_ABORTED)


def test_overlapping_is_collect_aborted_txns_test() -> None:
    # TransactionIndex.collectAbortedTxns: lastOffset >= fetch offset, firstOffset < upper.
    assert overlapping(KAFKA_ABORTED, 0, 2) == ()
    assert overlapping(KAFKA_ABORTED, 0, 3) == KAFKA_ABORTED[:1]
    assert overlapping(KAFKA_ABORTED, 5, 7) == KAFKA_ABORTED
    assert overlapping(KAFKA_ABORTED, 6, 100) == KAFKA_ABORTED[1:]
    assert overlapping(KAFKA_ABORTED, 10, 100) == ()
    # The same transaction from the index and from a replay is kept once, by marker offset.
    twice = (KAFKA_ABORTED[1], KAFKA_ABORTED[0], KAFKA_ABORTED[1])
    assert overlapping(twice, 0, 100) == KAFKA_ABORTED


def test_isolation_level_names_are_kafkas() -> None:
    assert parse_isolation_level("read_committed") is IsolationLevel.READ_COMMITTED
    assert parse_isolation_level("read_uncommitted") is IsolationLevel.READ_UNCOMMITTED
    # ConsumerConfig's validator is ConfigDef.ValidString: exact, case-sensitive.
    assert parse_isolation_level("READ_COMMITTED") is None
    assert parse_isolation_level("") is None


def test_the_scan_option_and_its_kafka_source_spelling() -> None:
    assert isolation_level_option({}) is IsolationLevel.READ_COMMITTED
    uncommitted = IsolationLevel.READ_UNCOMMITTED
    assert isolation_level_option({"isolation.level": "read_uncommitted"}) is uncommitted
    assert isolation_level_option({"kafka.isolation.level": "read_uncommitted"}) is uncommitted
    both = {"isolation.level": "read_committed", "kafka.isolation.level": "read_committed"}
    assert isolation_level_option(both) is IsolationLevel.READ_COMMITTED
    with pytest.raises(LogScanError, match="disagree"):
        isolation_level_option({**both, "kafka.isolation.level": "read_uncommitted"})
    with pytest.raises(LogScanError, match=r"isolation\.level must be one of read_uncommitted"):
        isolation_level_option({"isolation.level": "committed"})
