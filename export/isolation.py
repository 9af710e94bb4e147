"""Read isolation for scans of partition files: what ``read_committed`` hides (pure).

Kafka's ``isolation.level`` (KIP-98; ``ConsumerConfig``, values ``read_uncommitted`` and
``read_committed``), applied where a consumer applies it. ``pykraft-log`` and ``export-topic``
default to ``read_committed``, which Kafka's consumer does not: an export is a copy of what the
topic *says*, so it must never hold records a transaction took back.

Under ``read_committed`` a scan shows what a READ_COMMITTED Fetch would:

* nothing at or above the **last stable offset** — the first offset of the oldest transaction
  still open at the high watermark, else the high watermark (``UnifiedLog.lastStableOffset``).
  Records past it wait, even plain ones, since a consumer reads in offset order; never below
  the log start offset (``UnifiedLog.maybeIncrementFirstUnstableOffset`` clamps it so);
* no record of an **aborted transaction**: a transactional data batch of producer P is dropped
  when an aborted transaction of P began at or before it and its ABORT marker comes after it.
  That is the consumer's rule (``CompletedFetch.nextFetchedBatch``:
  ``consumeAbortedTransactionsUpTo`` adds P once the batch reaches the transaction's first
  offset, ``isBatchAborted`` drops P's transactional batches, the ABORT marker removes P
  again), written as intervals
  ``[first offset, marker offset)``: a producer has one transaction open at a time, so its
  transactions never overlap. The aborted transactions come from the ``.txnindex`` entries
  overlapping the range read (``TransactionIndex.collectAbortedTxns``), as the broker hands
  them to a consumer in a Fetch response's ``AbortedTransactions``;
* no **control records** (COMMIT/ABORT markers). Those are hidden in both modes, as every Kafka
  consumer hides them (``CompletedFetch``: ``if (currentBatch.isControlBatch())`` skips).

``read_uncommitted`` reads to the high watermark, aborted and open transactions included.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Sequence

import attrs

from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.record_batch import BatchHeader

# Kafka's consumer property, and its name as Spark's Kafka source passes it through.
ISOLATION_LEVEL_OPTION = "isolation.level"
KAFKA_ISOLATION_LEVEL_OPTION = "kafka.isolation.level"


class IsolationLevel(enum.Enum):
    """Kafka ``IsolationLevel``; the values are the property's (lower case, as Kafka's
    ``ConfigDef`` validator accepts them)."""

    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


DEFAULT_ISOLATION_LEVEL = IsolationLevel.READ_COMMITTED
ISOLATION_LEVEL_NAMES = tuple(level.value for level in IsolationLevel)


def parse_isolation_level(text: str) -> IsolationLevel | None:
    """The level ``text`` names exactly (Kafka's validator is case-sensitive), else None."""
    for level in IsolationLevel:
        if text == level.value:
            return level
    return None


def overlapping(
    aborted: Iterable[AbortedTxn], start_offset: int, end_offset: int
) -> tuple[AbortedTxn, ...]:
    """The aborted transactions with records in ``[start_offset, end_offset)``: their marker
    at or after the start and their first offset before the end (``collectAbortedTxns``'s
    test); by marker offset, each once."""
    wanted = {
        txn.last_offset: txn
        for txn in aborted
        if txn.last_offset >= start_offset and txn.first_offset < end_offset
    }
    return tuple(wanted[offset] for offset in sorted(wanted))


@attrs.frozen
class AbortedBatches:
    """Which data batches belong to the given aborted transactions (one producer's
    transactions never overlap, so each producer's intervals are sorted and disjoint)."""

    # producer id -> (first offsets ascending, marker offsets in the same order)
    _intervals: dict[int, tuple[list[int], list[int]]]

    @classmethod
    def of(cls, aborted: Sequence[AbortedTxn]) -> AbortedBatches:
        intervals: dict[int, tuple[list[int], list[int]]] = {}
        for txn in sorted(aborted, key=lambda t: (t.producer_id, t.first_offset)):
            firsts, lasts = intervals.setdefault(txn.producer_id, ([], []))
            firsts.append(txn.first_offset)
            lasts.append(txn.last_offset)
        return cls(intervals)

    def __bool__(self) -> bool:
        return bool(self._intervals)

    def holds(self, header: BatchHeader) -> bool:
        """Is this batch a record batch of an aborted transaction (``isBatchAborted``)?"""
        if not header.is_transactional or header.is_control:
            return False
        found = self._intervals.get(header.producer_id)
        if found is None:
            return False
        firsts, lasts = found
        index = bisect.bisect_right(firsts, header.base_offset) - 1
        return index >= 0 and header.base_offset < lasts[index]
