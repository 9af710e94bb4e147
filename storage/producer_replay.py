"""Folding a log's batches into producer state and transaction indexes (pure).

Three paths do it, as in Kafka:

* an append, leader's or follower's (``apply_appended``, ``UnifiedLog.append``): every batch
  updates producer state first, then each transaction a marker completed is indexed — if
  aborted, with ``last_stable_offset`` as it is after the whole append — and completed;
* opening or truncating a log (``rebuild_producer_state``, ``UnifiedLog.rebuildProducerState``
  with ``loadProducersFromRecords``): the newest snapshot, then the batches after it, their
  completed transactions completed but not indexed again (the index already has them);
* recovery (``rebuild_txn_indexes``, ``LogLoader.recoverSegment`` / ``LogSegment.recover``):
  the segments recovery re-read had their ``.txnindex`` emptied; a scratch producer state
  rebuilt from the newest snapshot at or below the first of them replays the batches and
  writes the aborted transactions whose marker lies in one of them again, each with the LSO
  of its moment (completed batch by batch, as ``LogSegment.recover`` does). Snapshots are read,
  never deleted, by the scratch state.

Nothing here does I/O: the batches, their markers and the index writes are the segment store's.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable
from pathlib import Path

from pykraft.storage.aborted_txn import AbortedTxn, CompletedTxn
from pykraft.storage.producer_entry import ProducerStateEntry
from pykraft.storage.producer_state import ProducerStateManager, SnapshotStore
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.segment_store import SegmentStore
from pykraft.storage.txn_markers import EndTransactionMarker


def index_and_complete(
    producer_state: ProducerStateManager, store: SegmentStore, completed: CompletedTxn
) -> None:
    """Kafka ``UnifiedLog.append``'s last step for one transaction: index it if aborted, with
    the LSO it leaves, then mark it complete (the index is written first: a failed write leaves
    the transaction open, so the LSO does not pass it)."""
    if completed.is_aborted:
        last_stable_offset = producer_state.last_stable_offset(completed)
        store.append_aborted_txn(AbortedTxn.of(completed, last_stable_offset))
    producer_state.complete_txn(completed)


def apply_appended(
    producer_state: ProducerStateManager,
    store: SegmentStore,
    batches: Iterable[
        tuple[BatchHeader, int, int, EndTransactionMarker | None, ProducerStateEntry | None]
    ],
) -> None:
    """Fold written batches ``(header, first offset, last offset, marker, updated)`` into
    producer state, then index and complete the transactions their markers ended. ``updated``:
    the producer's entry after the batch when the append's check already worked it out."""
    completed = [
        txn
        for header, first, last, marker, updated in batches
        if (
            txn := producer_state.update(
                header, first, last, header.max_timestamp, marker=marker, updated=updated
            )
        )
        is not None
    ]
    for txn in completed:
        index_and_complete(producer_state, store, txn)


def rebuild_producer_state(
    producer_state: ProducerStateManager,
    store: SegmentStore,
    log_start_offset: int,
    log_end_offset: int,
) -> None:
    """The newest snapshot, then a replay of the batches after it (Kafka
    ``rebuildProducerState``)."""
    replay_from = producer_state.truncate_and_reload(log_start_offset, log_end_offset)
    _replay(producer_state, store, replay_from)
    producer_state.update_map_end_offset(log_end_offset)


def _replay(producer_state: ProducerStateManager, store: SegmentStore, offset: int) -> None:
    for header, marker in store.replay_from(offset):
        completed = producer_state.update(
            header, header.base_offset, header.last_offset, header.max_timestamp, marker=marker
        )
        if completed is not None:
            producer_state.complete_txn(completed)


def rebuild_txn_indexes(
    store: SegmentStore,
    snapshots: SnapshotStore,
    directory: Path,
    recovered: Collection[int],
    log_start_offset: int,
) -> int:
    """Write again the aborted transactions whose markers lie in the ``recovered`` segments
    (base offsets); returns how many were written."""
    if not recovered:
        return 0
    bases = [segment.base_offset for segment in store.segments]
    scratch = ProducerStateManager(directory, snapshots=snapshots)
    replay_from = scratch.load_as_of(min(recovered), log_start_offset)
    written = 0
    for header, marker in store.replay_from(replay_from):
        completed = scratch.update(
            header, header.base_offset, header.last_offset, header.max_timestamp, marker=marker
        )
        if completed is None:
            continue
        holder = bases[bisect.bisect_right(bases, completed.last_offset) - 1]
        if completed.is_aborted and holder in recovered:
            index_and_complete(scratch, store, completed)
            written += 1
        else:
            scratch.complete_txn(completed)
    return written
