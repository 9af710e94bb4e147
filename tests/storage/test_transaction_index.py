"""The aborted-transaction index: its 34-byte entries, its file and its search, reproducing
Kafka's TransactionIndexTest (storage/src/test/java/org/apache/kafka/storage/internals/log/).
"""

from __future__ import annotations

import struct
from pathlib import Path

import attrs
import pytest

from pykraft.storage.aborted_txn import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    CompletedTxn,
    TxnIndexProblem,
    collect_aborted_txns,
    collect_across_segments,
    decode_entries,
)
from pykraft.storage.index import CorruptIndexError
from pykraft.storage.transaction_index import TransactionIndex

# TransactionIndexTest's four transactions: (producer id, first, last, last stable offset).
FOUR = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13),
        AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]  # fmt: skip


@attrs.frozen
class Segment:
    base_offset: int
    aborted_txns: list[AbortedTxn]


@pytest.fixture
def index(tmp_path: Path) -> TransactionIndex:
    return TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)


def test_entry_layout_is_kafkas() -> None:
    # testAbortedTxnSerde, and AbortedTxn.java's layout: version int16, then four int64s
    entry = AbortedTxn(983493, 137, 299, 200)
    data = entry.encode()
    assert len(data) == ABORTED_TXN_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 983493, 137, 299, 200)
    assert decode_entries(data + AbortedTxn(1, 2, 3, 4).encode()) == [entry, AbortedTxn(1, 2, 3, 4)]
    assert AbortedTxn.of(CompletedTxn(7, 10, 20, is_aborted=True), 15) == AbortedTxn(7, 10, 20, 15)
    with pytest.raises(AssertionError):
        AbortedTxn.of(CompletedTxn(7, 10, 20, is_aborted=False), 15)


def test_damaged_bytes_are_named() -> None:
    whole = FOUR[0].encode()
    with pytest.raises(TxnIndexProblem, match="not a whole number"):
        decode_entries(whole + whole[:20])  # a torn append
    with pytest.raises(TxnIndexProblem, match="version 1"):
        decode_entries(struct.pack(">hqqqq", 1, 0, 0, 10, 11))


def check_collect(fetch: int, upper: int, expected: list[AbortedTxn], complete: bool) -> None:
    assert collect_aborted_txns(FOUR, fetch, upper) == (expected, complete)


def test_collect_aborted_transactions() -> None:
    # testCollectAbortedTransactions, case by case
    check_collect(0, 100, FOUR, False)
    check_collect(0, 32, FOUR[:3], True)
    check_collect(0, 35, FOUR, True)
    check_collect(10, 35, FOUR, True)
    check_collect(11, 35, FOUR[1:], True)
    check_collect(20, 41, FOUR[2:], False)
    # LocalLog.collectAbortedTransactions: from the segment holding the fetch offset; the next
    # one is searched only when the search is incomplete
    segments = [Segment(0, FOUR), Segment(40, [AbortedTxn(4, 45, 60, 61)])]
    assert collect_across_segments(segments, 20, 41) == FOUR[2:]
    assert collect_across_segments(segments, 20, 100) == [*FOUR[2:], AbortedTxn(4, 45, 60, 61)]
    assert collect_across_segments([Segment(0, FOUR[:1]), segments[1]], 0, 5) == FOUR[:1]
    assert collect_across_segments(segments, 50, 100) == [AbortedTxn(4, 45, 60, 61)]


def test_position_set_correctly_when_opened(index: TransactionIndex) -> None:
    # testPositionSetCorrectlyWhenOpened: appends after a reopen go after the old entries
    for entry in FOUR:
        index.append(entry)
    reopened = TransactionIndex(index.path, 0)
    reopened.append(AbortedTxn(3, 50, 60, 55))
    assert list(reopened.entries) == [*FOUR, AbortedTxn(3, 50, 60, 55)]
    assert TransactionIndex(index.path, 0).entries == reopened.entries
    assert index.path.stat().st_size == 5 * ABORTED_TXN_SIZE


def test_sanity_check(index: TransactionIndex) -> None:
    # testSanityCheck: an entry ending before the segment's start offset is corrupt
    for entry in FOUR:
        index.append(entry)
    TransactionIndex(index.path, 0).sanity_check()
    with pytest.raises(CorruptIndexError, match="less than the segment's start offset 100"):
        TransactionIndex(index.path, 100).sanity_check()
    # a torn tail (a crash mid-append) fails the check instead of being read
    with index.path.open("ab") as file:
        file.write(b"\x00" * 7)
    torn = TransactionIndex(index.path, 0)
    assert torn.entries == ()
    with pytest.raises(CorruptIndexError, match="not a whole number"):
        torn.sanity_check()
    torn.reset()
    torn.sanity_check()
    assert index.path.stat().st_size == 0


@pytest.mark.parametrize("last_offset", [15, 10])
def test_last_offset_must_increase(index: TransactionIndex, last_offset: int) -> None:
    # testLastOffsetMustIncrease / testLastOffsetCannotDecrease
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError, match="must increase"):
        index.append(AbortedTxn(0, 0, last_offset, 11))
    assert list(index.entries) == [AbortedTxn(1, 5, 15, 13)]


def test_truncate(index: TransactionIndex) -> None:
    # testTruncate
    entries = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16),
               AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]  # fmt: skip
    for entry in entries:
        index.append(entry)
    index.truncate_to(51)
    assert index.collect(0, 100)[0] == entries
    index.truncate_to(50)
    assert index.collect(0, 100)[0] == entries[:3]
    assert TransactionIndex(index.path, 0).entries == tuple(entries[:3])  # the file too
    index.reset()
    assert index.collect(0, 100)[0] == [] and index.is_empty


def test_file_is_created_by_the_first_append_only(index: TransactionIndex) -> None:
    # testDoNotCreateFileUntilNeeded, testIsEmptyWhenFileDoesNotExist, testFlush
    assert index.is_empty
    index.reset()
    index.flush()
    index.truncate_to(0)
    assert not index.path.exists()
    index.append(AbortedTxn(0, 0, 10, 2))
    index.flush()
    assert index.path.stat().st_size == ABORTED_TXN_SIZE and not index.is_empty


def test_delete_if_exists(index: TransactionIndex) -> None:
    # testDeleteIfExists
    index.append(AbortedTxn(0, 0, 10, 2))
    index.delete()
    assert not index.path.exists() and index.is_empty
    index.delete()  # already gone: nothing to do
