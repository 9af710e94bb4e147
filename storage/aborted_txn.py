"""Aborted transactions as a segment's transaction index holds them (pure: values and rules).

Kafka's ``AbortedTxn``, ``CompletedTxn`` and ``TransactionIndex`` rules (KIP-98). When a COMMIT
or ABORT marker ends a transaction that wrote data, the producer state reports a
``CompletedTxn`` (producer id, first offset, the marker's offset as last offset, aborted?).
Each aborted one becomes an entry of the ``.txnindex`` file of the segment the marker was
written to, with the last stable offset at that moment (``ProducerStateManager.lastStableOffset``:
the first offset of the oldest other transaction still open, else the marker's offset + 1).

Entry layout (``AbortedTxn.java``, big-endian, 34 bytes): ``version int16`` (0),
``producerId int64``, ``firstOffset int64``, ``lastOffset int64``, ``lastStableOffset int64``.
Entries are appended in increasing ``lastOffset`` order (``TransactionIndex.append`` refuses
anything else).

A READ_COMMITTED fetch of ``[fetch_offset, upper_bound_offset)`` needs every aborted
transaction overlapping it: ``lastOffset >= fetch_offset and firstOffset < upper_bound``
(``TransactionIndex.collectAbortedTxns``). The search starts at the segment holding the fetch
offset (a transaction overlapping the range has its marker there or later) and stops at the
first entry whose ``lastStableOffset >= upper_bound``: every transaction whose marker comes
later began at or after that LSO, so after the range (``TxnIndexSearchResult.isComplete``).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Sequence
from typing import Protocol

import attrs

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0  # AbortedTxn.CURRENT_VERSION
_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # AbortedTxn.TOTAL_SIZE: 34
assert ABORTED_TXN_SIZE == 34


@attrs.frozen
class CompletedTxn:
    """A transaction a marker ended (Kafka ``CompletedTxn``); ``last_offset`` is the marker's."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@attrs.frozen
class AbortedTxn:
    """One ``.txnindex`` entry (Kafka ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION

    @classmethod
    def of(cls, completed: CompletedTxn, last_stable_offset: int) -> AbortedTxn:
        assert completed.is_aborted, "only aborted transactions are indexed"
        return cls(
            completed.producer_id, completed.first_offset, completed.last_offset, last_stable_offset
        )

    def encode(self) -> bytes:
        return _ENTRY.pack(
            self.version,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class TxnIndexProblem(ValueError):
    """Why a transaction index cannot be trusted (the segment is then recovered)."""


def decode_entries(data: bytes | bytearray | memoryview) -> list[AbortedTxn]:
    """The whole entries of a ``.txnindex`` file's bytes, in file order.

    Raises ``TxnIndexProblem`` for a torn tail (Kafka's reader stops before it silently; a
    crash mid-append leaves one) or an entry of a version this broker does not know.
    """
    whole, tail = divmod(len(data), ABORTED_TXN_SIZE)
    entries: list[AbortedTxn] = []
    for number in range(whole):
        version, producer_id, first, last, lso = _ENTRY.unpack_from(data, number * ABORTED_TXN_SIZE)
        if version > ABORTED_TXN_VERSION:
            raise TxnIndexProblem(
                f"entry {number} has version {version}; version {ABORTED_TXN_VERSION} is current"
            )
        entries.append(AbortedTxn(producer_id, first, last, lso, version))
    if tail:
        raise TxnIndexProblem(
            f"{len(data)} bytes are not a whole number of {ABORTED_TXN_SIZE}-byte entries"
        )
    return entries


def check_appendable(entries: Sequence[AbortedTxn], entry: AbortedTxn) -> None:
    """``TransactionIndex.append``: last offsets must increase (a bug otherwise)."""
    if entries and entries[-1].last_offset >= entry.last_offset:
        raise ValueError(
            f"the last offset of appended transactions must increase: {entry.last_offset} is "
            f"not greater than {entries[-1].last_offset}"
        )


def sanity_problem(entries: Sequence[AbortedTxn], start_offset: int) -> str | None:
    """``TransactionIndex.sanityCheck``: no entry may end before its segment starts; pykraft
    also checks the append order."""
    previous = None
    for entry in entries:
        if entry.last_offset < start_offset:
            return (
                f"the last offset of {entry} is less than the segment's start offset {start_offset}"
            )
        if previous is not None and entry.last_offset <= previous:
            return f"the last offset of {entry} does not increase on {previous}"
        previous = entry.last_offset
    return None


def entries_below(entries: Sequence[AbortedTxn], offset: int) -> list[AbortedTxn]:
    """``TransactionIndex.truncateTo``: the entries whose marker is below ``offset``."""
    kept = []
    for entry in entries:
        if entry.last_offset >= offset:
            break
        kept.append(entry)
    return kept


def collect_aborted_txns(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> tuple[list[AbortedTxn], bool]:
    """``TransactionIndex.collectAbortedTxns``: the entries overlapping
    ``[fetch_offset, upper_bound_offset)``, and whether the search is complete."""
    found = []
    for entry in entries:
        if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
            found.append(entry)
        if entry.last_stable_offset >= upper_bound_offset:
            return found, True
    return found, False


class IndexedSegment(Protocol):
    @property
    def base_offset(self) -> int: ...

    @property
    def aborted_txns(self) -> Sequence[AbortedTxn]: ...


def collect_across_segments(
    segments: Sequence[IndexedSegment], fetch_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """``LocalLog.collectAbortedTransactions``: search the indexes of ``segments`` (a log's,
    in order) from the one holding ``fetch_offset`` on; stop at the first complete search."""
    bases = [segment.base_offset for segment in segments]
    first = max(bisect.bisect_right(bases, fetch_offset) - 1, 0)
    found: list[AbortedTxn] = []
    for segment in segments[first:]:
        more, complete = collect_aborted_txns(
            segment.aborted_txns, fetch_offset, upper_bound_offset
        )
        found.extend(more)
        if complete:
            break
    return found
