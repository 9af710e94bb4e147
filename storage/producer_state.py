"""Idempotent-producer state per partition: epochs, sequences, duplicates, snapshots.

Theory of operation
-------------------
Every idempotent batch carries ``producerId``, ``producerEpoch`` and ``baseSequence``. The leader
remembers, per producer id, its epoch and the metadata of its last five batches
(``ProducerStateEntry``, Kafka's NUM_BATCHES_TO_RETAIN). Before appending a client batch it runs
``check_append`` (Kafka: ``UnifiedLog.analyzeAndValidateProducerState`` then
``ProducerAppendInfo.checkProducerEpoch`` / ``checkSequence``), in this order:

1. no producer id -> NEW (plain batches are never deduplicated);
2. same epoch and the exact sequence range of one of the last five batches -> DUPLICATE, carrying
   that batch's original offsets so the broker answers the retry with them and appends nothing;
2a. when the append asks for transaction verification (KIP-890), a transactional data batch
   outside an open transaction without the partition's guard -> INVALID_TXN_STATE;
3. an epoch below the producer's current one -> INVALID_PRODUCER_EPOCH (a fenced zombie);
4. a higher epoch must start at sequence 0, unless the producer is unknown (no epoch yet);
5. the same epoch must continue at last sequence + 1 (Int32.MAX wraps to 0); an unknown producer
   may start anywhere (its state may have been removed by retention) -> else OUT_OF_ORDER_SEQUENCE;
   while a verification is in progress, no batch may start above its lowest sequence (first);
6. a non-transactional batch while the producer's transaction is open -> INVALID_TXN_STATE.

Steps 2, 4 and 5 are for client batches only; a coordinator's append (markers, transactional
offset commits) carries no sequence. An end-transaction marker is checked by 3, then by its
coordinator epoch, which may not be below the last one seen -> TRANSACTION_COORDINATOR_FENCED.

``apply_batch`` folds an appended batch into the entry, on leaders and followers alike (followers
do not validate, as with Kafka's REPLICATION origin). Both are pure and live in
``storage.producer_append``. ``ProducerStateManager`` holds the map, the map end offset (the log
offset the state is valid up to) and the snapshot files.

Snapshots (``storage.producer_snapshot``) keep only each producer's LAST batch, so after a reload
only a retry of that batch is recognised as a duplicate. ``load`` takes the newest readable
snapshot in (log start, log end]; a corrupt one is deleted (as Kafka does) and the reason kept in
``load_problems``; the caller replays the log from the returned offset via ``update``.

Transactions (KIP-98; Kafka ``ProducerStateManager``): a producer's first transactional batch
opens a transaction at its first offset (``ongoing`` transactions, by first offset); its COMMIT or
ABORT marker completes it: ``update`` returns the ``CompletedTxn``, the log asks
``last_stable_offset(completed)`` for the LSO to index an aborted one with, then calls
``complete_txn``. A completed transaction stays *unreplicated* — still unstable — until the high
watermark passes its marker (``on_high_watermark_updated``), so the first unstable offset
(``first_unstable_offset``, the smallest first offset of both sets) never lets a consumer past a
marker that could yet be truncated away. Snapshots keep each producer's open transaction
(``current_txn_first_offset``), so a reload restores the ongoing set; unreplicated ones are
rebuilt by the replay after the snapshot (Kafka clears them on reload too).

Verification (KIP-890 part 1, ``storage.verification_guard``): a leader about to ask the
transaction coordinator about a producer's first write to the partition keeps a
``VerificationStateEntry`` for it (``maybe_create_verification_state_entry``); any transactional
batch of the producer written afterwards — data or marker — clears it in ``update`` (Kafka's
``UnifiedLog.updateProducers``), so a stale verification cannot be used after the transaction
ended. Entries are in memory only (never in snapshots) and expire with idle producers.
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from pykraft.storage.aborted_txn import CompletedTxn
from pykraft.storage.producer_append import (
    PRODUCER_ID_EXPIRATION_MS,
    AppendCheck,
    apply_batch,
    check_append,
    completed_txn,
    is_expired,
)
from pykraft.storage.producer_entry import (
    ProducerStateEntry,
)
from pykraft.storage.producer_snapshot import (
    CorruptSnapshotError,
    encode_snapshot,
    snapshot_file,
)
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.txn_markers import EndTransactionMarker
from pykraft.storage.verification_guard import VerificationStateEntry

log = logging.getLogger(__name__)


class SnapshotStore(Protocol):
    """Where producer snapshots live: files in the partition directory, or memory."""

    def offsets(self) -> list[int]:
        """The offsets of the stored snapshots, ascending."""
        ...

    def read(self, offset: int) -> list[ProducerStateEntry]:
        """The snapshot at ``offset``; raises ``CorruptSnapshotError``."""
        ...

    def write(self, offset: int, data: bytes, *, durable: bool = True) -> None:
        """Store a snapshot atomically; durably unless ``durable`` is False (``sync`` later)."""
        ...

    def sync(self, offset: int) -> None:
        """Make a snapshot written with ``durable=False`` durable (any thread; gone: no-op)."""
        ...

    def delete(self, offset: int) -> None: ...


class ProducerStateManager:
    """The producer map of one partition plus its snapshots (Kafka ProducerStateManager).

    Pure: the snapshots are kept by the ``SnapshotStore`` it is given."""

    def __init__(
        self,
        directory: Path,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
        *,
        snapshots: SnapshotStore,
    ) -> None:
        """``directory`` names the partition (in messages); ``snapshots`` stores the
        snapshots (``storage.producer_state_file``: its snapshot files)."""
        self.directory = directory
        self.snapshots = snapshots
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # Invariant: the map reflects exactly the log's batches below map_end_offset.
        self._map_end_offset = 0
        # Open transactions: first offset -> producer id (Kafka ``ongoingTxns``).
        # Invariant: keys ascend in insertion order (transactions open in offset order).
        self._ongoing_txns: dict[int, int] = {}
        # Completed transactions whose marker the high watermark has not passed yet, by first
        # offset (Kafka ``unreplicatedTxns``).
        self._unreplicated_txns: dict[int, CompletedTxn] = {}
        # Verifications in progress by producer id (Kafka ``verificationStates``).
        self._verification_states: dict[int, VerificationStateEntry] = {}
        self.load_problems: tuple[str, ...] = ()

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        return types.MappingProxyType(self._producers)

    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    @property
    def last_snapshot_offset(self) -> int | None:
        offsets = self.snapshots.offsets()
        return offsets[-1] if offsets else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        offsets = self.snapshots.offsets()
        return offsets[0] if offsets else None

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def check(self, header: BatchHeader) -> AppendCheck:
        """Classify a client batch; changes nothing."""
        producer_id = header.producer_id
        return check_append(
            self._producers.get(producer_id),
            header,
            verification=self._verification_states.get(producer_id),
        )

    def update(
        self,
        header: BatchHeader,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        *,
        marker: EndTransactionMarker | None = None,
        updated: ProducerStateEntry | None = None,
    ) -> CompletedTxn | None:
        """Record an appended batch (plain ones only advance the map end offset); a control
        batch needs its decoded ``marker``. Returns the transaction a marker completed, which
        the caller indexes (if aborted) and then hands to ``complete_txn``. ``updated``: the
        producer's entry after the batch, when the caller already has it (a leader's append,
        ``log_validator.check_producers``: ``apply_batch`` over this same state)."""
        completed = None
        if header.has_producer_id:
            producer_id = header.producer_id
            entry = self._producers.get(producer_id)
            completed = completed_txn(entry, header, marker, first_offset)
            if updated is None:
                updated = apply_batch(entry, header, first_offset, last_offset, timestamp, marker)
            self._producers[producer_id] = updated
            started = updated.current_txn_first_offset
            if started is not None and (entry is None or entry.current_txn_first_offset is None):
                self._begin_txn(started, producer_id)
            if header.is_transactional:
                # The transaction has its first offset now, or has ended: either way the
                # verification that preceded it is spent (Kafka ``updateProducers``).
                self._verification_states.pop(producer_id, None)
        self._map_end_offset = max(self._map_end_offset, last_offset + 1)
        return completed

    def _begin_txn(self, first_offset: int, producer_id: int) -> None:
        last = next(reversed(self._ongoing_txns), None)
        assert last is None or last < first_offset, f"transaction at {first_offset} after {last}"
        self._ongoing_txns[first_offset] = producer_id

    # ------------------------------------------------------------------ verification

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        """Kafka ``UnifiedLog.hasOngoingTransaction``: the producer's transaction is open."""
        entry = self._producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def maybe_create_verification_state_entry(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationStateEntry:
        """Kafka ``maybeCreateVerificationStateEntry``: the producer's entry (a new one with a
        fresh guard, or the one in progress with its lowest sequence and epoch updated)."""
        current = self._verification_states.get(producer_id)
        if current is None:
            entry = VerificationStateEntry(now_ms, sequence, epoch)
        else:
            entry = current.with_sequence_and_epoch(sequence, epoch)
        self._verification_states[producer_id] = entry
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self._verification_states.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self._verification_states.pop(producer_id, None)

    # ------------------------------------------------------------------ transactions

    @property
    def ongoing_txns(self) -> Mapping[int, int]:
        """Open transactions: first offset -> producer id, by first offset."""
        return types.MappingProxyType(self._ongoing_txns)

    def first_undecided_offset(self) -> int | None:
        """Kafka ``firstUndecidedOffset``: the oldest open transaction's first offset."""
        return next(iter(self._ongoing_txns), None)

    def first_unstable_offset(self) -> int | None:
        """Kafka ``firstUnstableOffset``: the oldest transaction that is open, or completed by a
        marker the high watermark has not passed."""
        undecided = self.first_undecided_offset()
        unreplicated = min(self._unreplicated_txns, default=None)
        if undecided is None or unreplicated is None:
            return unreplicated if undecided is None else undecided
        return min(undecided, unreplicated)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """Kafka ``lastStableOffset(CompletedTxn)``: the LSO once ``completed`` is decided —
        the oldest open transaction of another producer, else just past the marker."""
        for first_offset, producer_id in self._ongoing_txns.items():
            if producer_id != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Kafka ``completeTxn``: decided, but unstable until the high watermark passes it."""
        producer_id = self._ongoing_txns.pop(completed.first_offset, None)
        assert producer_id == completed.producer_id, f"{completed} was never started"
        self._unreplicated_txns[completed.first_offset] = completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Kafka ``onHighWatermarkUpdated``: markers below it are replicated; the LSO moves."""
        self._remove_unreplicated_txns(high_watermark)

    def _remove_unreplicated_txns(self, offset: int) -> None:
        if not self._unreplicated_txns:  # no marker waits: every follower fetch of plain data
            return
        for first_offset, completed in list(self._unreplicated_txns.items()):
            if completed.last_offset < offset:
                del self._unreplicated_txns[first_offset]

    def update_map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    def remove_expired_producers(self, now_ms: int) -> None:
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if is_expired(entry, now_ms, self.producer_id_expiration_ms)
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        # Kafka: "also expire any verification state entries that are lingering as unverified".
        lingering = [
            producer_id
            for producer_id, entry in self._verification_states.items()
            if entry.is_expired(now_ms, self.producer_id_expiration_ms)
        ]
        for producer_id in lingering:
            del self._verification_states[producer_id]

    def take_snapshot(self, offset: int, *, durable: bool = True) -> Callable[[], None] | None:
        """Write the state as of ``offset`` (the log end when called) to its snapshot file.

        ``durable=False`` (a roll, on the append path) skips the fsyncs and returns the sync
        to run later, off the loop (Kafka ``takeSnapshot(false)``, then
        ``flushProducerStateSnapshot`` in the "flush-log" task)."""
        if offset < self._map_end_offset:
            raise ValueError(
                f"snapshot offset {offset} is below the map end offset {self._map_end_offset}: "
                "the state already includes batches at or after it"
            )
        self._map_end_offset = offset
        if offset == self.last_snapshot_offset:
            return None  # Kafka testSkipSnapshotIfOffsetUnchanged: nothing new since then
        self.snapshots.write(offset, encode_snapshot(self._producers.values()), durable=durable)
        return None if durable else functools.partial(self.snapshots.sync, offset)

    def load(self, log_end_offset: int, log_start_offset: int = 0) -> int:
        """Rebuild from the newest good snapshot in (log start, log end]; return the replay offset.

        The caller re-applies every batch from the returned offset up to ``log_end_offset``
        through ``update``. Pass the real ``log_start_offset``: snapshots at or below it are
        deleted, and with none left the state starts empty at the log start. Producers with an
        open transaction (``current_txn_first_offset``) reopen it (Kafka ``loadProducerEntry``).
        """
        self._delete_snapshots_out_of_range(log_start_offset, log_end_offset)
        return self._load_newest(self.snapshots.offsets(), log_start_offset, delete_corrupt=True)

    def load_as_of(self, offset: int, log_start_offset: int) -> int:
        """The state of the newest good snapshot in (log start, ``offset``], deleting nothing
        (a scratch state for rebuilding transaction indexes); returns the replay offset."""
        candidates = [o for o in self.snapshots.offsets() if log_start_offset < o <= offset]
        return self._load_newest(candidates, log_start_offset, delete_corrupt=False)

    def _load_newest(
        self, offsets: list[int], log_start_offset: int, *, delete_corrupt: bool
    ) -> int:
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        problems: list[str] = []
        for offset in reversed(offsets):
            path = snapshot_file(self.directory, offset)
            try:
                entries = self.snapshots.read(offset)
            except CorruptSnapshotError as error:
                problems.append(f"{path.name}: {error.reason}")
                log.warning("ignoring corrupt producer snapshot %s: %s", path, error.reason)
                if delete_corrupt:
                    self.snapshots.delete(offset)
                continue
            self._producers.update((entry.producer_id, entry) for entry in entries)
            open_txns = sorted(
                (entry.current_txn_first_offset, entry.producer_id)
                for entry in entries
                if entry.current_txn_first_offset is not None
            )
            self._ongoing_txns.update(open_txns)
            self._map_end_offset = offset
            break
        else:
            self._map_end_offset = log_start_offset
        self.load_problems = tuple(problems)
        return self._map_end_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int:
        """Kafka ``truncateAndReload``; returns the offset the caller must replay from."""
        if log_end_offset != self._map_end_offset:
            return self.load(log_end_offset, log_start_offset)
        self._delete_snapshots_out_of_range(log_start_offset, log_end_offset)
        self.on_log_start_offset_incremented(log_start_offset)
        return self._map_end_offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Kafka ``onLogStartOffsetIncremented``: transactions decided below it are gone."""
        self._remove_unreplicated_txns(log_start_offset)
        self._map_end_offset = max(self._map_end_offset, log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything (the log was emptied and restarts at ``offset``)."""
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        for snapshot_offset in self.snapshots.offsets():
            self.snapshots.delete(snapshot_offset)
        self._map_end_offset = offset

    def delete_snapshots_below(self, offset: int) -> None:
        """Kafka ``deleteSnapshotsBefore``: drop snapshot files for offsets < ``offset``."""
        for snapshot_offset in self.snapshots.offsets():
            if snapshot_offset < offset:
                self.snapshots.delete(snapshot_offset)

    def _delete_snapshots_out_of_range(self, log_start_offset: int, log_end_offset: int) -> None:
        # Kafka truncateAndReload: snapshots past the log end describe truncated history, and
        # those at or below the log start are superseded by replaying from the log start.
        for offset in self.snapshots.offsets():
            if offset > log_end_offset or offset <= log_start_offset:
                self.snapshots.delete(offset)
