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
3. an epoch below the producer's current one -> INVALID_PRODUCER_EPOCH (a fenced zombie);
4. a higher epoch must start at sequence 0, unless the producer is unknown (no epoch yet);
5. the same epoch must continue at last sequence + 1 (Int32.MAX wraps to 0); an unknown producer
   may start anywhere (its state may have been removed by retention) -> else OUT_OF_ORDER_SEQUENCE.

``apply_batch`` folds an appended batch into the entry, on leaders and followers alike (followers
do not validate, as with Kafka's REPLICATION origin). Both are pure and live in
``storage.producer_append``. ``ProducerStateManager`` holds the map, the map end offset (the log
offset the state is valid up to) and the snapshot files.

Snapshots (``storage.producer_snapshot``) keep only each producer's LAST batch, so after a reload
only a retry of that batch is recognised as a duplicate. ``load`` takes the newest readable
snapshot in (log start, log end]; a corrupt one is deleted (as Kafka does) and the reason kept in
``load_problems``; the caller replays the log from the returned offset via ``update``.

Transactions are tracked only as far as the snapshot needs (``current_txn_first_offset`` is set by
the first transactional batch and cleared by a control batch); coordinator epochs are taken from
the caller, which is the one that decodes the end-transaction marker.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from pykraft.storage.producer_append import (
    PRODUCER_ID_EXPIRATION_MS,
    AppendCheck,
    apply_batch,
    check_append,
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

log = logging.getLogger(__name__)


class SnapshotStore(Protocol):
    """Where producer snapshots live: files in the partition directory, or memory."""

    def offsets(self) -> list[int]:
        """The offsets of the stored snapshots, ascending."""
        ...

    def read(self, offset: int) -> list[ProducerStateEntry]:
        """The snapshot at ``offset``; raises ``CorruptSnapshotError``."""
        ...

    def write(self, offset: int, data: bytes) -> None:
        """Store a snapshot durably and atomically."""
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
        return check_append(self._producers.get(header.producer_id), header)

    def update(
        self,
        header: BatchHeader,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        *,
        coordinator_epoch: int | None = None,
    ) -> None:
        """Record an appended batch (any batch: plain ones only advance the map end offset)."""
        if header.has_producer_id:
            entry = self._producers.get(header.producer_id)
            self._producers[header.producer_id] = apply_batch(
                entry, header, first_offset, last_offset, timestamp, coordinator_epoch
            )
        self._map_end_offset = max(self._map_end_offset, last_offset + 1)

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

    def take_snapshot(self, offset: int) -> None:
        """Write the state as of ``offset`` (the log end when called) to its snapshot file."""
        if offset < self._map_end_offset:
            raise ValueError(
                f"snapshot offset {offset} is below the map end offset {self._map_end_offset}: "
                "the state already includes batches at or after it"
            )
        self._map_end_offset = offset
        if offset == self.last_snapshot_offset:
            return  # Kafka testSkipSnapshotIfOffsetUnchanged: nothing new since that snapshot
        self.snapshots.write(offset, encode_snapshot(self._producers.values()))

    def load(self, log_end_offset: int, log_start_offset: int = 0) -> int:
        """Rebuild from the newest good snapshot in (log start, log end]; return the replay offset.

        The caller re-applies every batch from the returned offset up to ``log_end_offset``
        through ``update``. Pass the real ``log_start_offset``: snapshots at or below it are
        deleted, and with none left the state starts empty at the log start.
        """
        self._delete_snapshots_out_of_range(log_start_offset, log_end_offset)
        self._producers.clear()
        problems: list[str] = []
        for offset in reversed(self.snapshots.offsets()):
            path = snapshot_file(self.directory, offset)
            try:
                entries = self.snapshots.read(offset)
            except CorruptSnapshotError as error:
                problems.append(f"{path.name}: {error.reason}")
                log.warning("ignoring corrupt producer snapshot %s: %s", path, error.reason)
                self.snapshots.delete(offset)
                continue
            self._producers.update((entry.producer_id, entry) for entry in entries)
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
        self._map_end_offset = max(self._map_end_offset, log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything (the log was emptied and restarts at ``offset``)."""
        self._producers.clear()
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
