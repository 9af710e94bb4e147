"""The cleaner's decisions, batch by batch (Kafka's ``Cleaner.buildOffsetMap`` and the
``RecordFilter`` of ``Cleaner.cleanInto`` over ``MemoryRecords.filterTo``). Pure: bytes in,
bytes out.

Mapping (``OffsetMapBuilder``): over the dirty section ``[first dirty, first uncleanable)`` every
keyed record of a batch that is neither a control batch nor aborted puts its offset in the map,
until the map is full (Kafka stops there, even inside a batch; what it mapped is what this
cleaning covers: up to ``latest_offset``).

Filtering (``CleanerFilter.filter``) decides, for every batch of the segments being cleaned:

* the batch as a whole (``BatchRetention``): an aborted data batch, or a marker no record needs
  any more whose delete horizon has passed, is DELETEd; a batch holding a live producer's last
  data offset (or, when it has none, the marker of its current epoch) is RETAIN_EMPTY — kept,
  at least as an empty header, so the producer's sequence and epoch survive (Kafka's
  ``isBatchLastRecordOfProducer``); any other batch is DELETE_EMPTY (goes if no record stays);
* each record (Kafka ``shouldRetainRecord``): past the map's ``latest_offset`` it stays; without
  a key it goes; otherwise it stays when it is the latest offset of its key and has a value, or
  is a tombstone whose batch has no delete horizon yet or one still in the future;
* KIP-534's delete horizon: a kept batch holding a tombstone, or a marker whose transaction has
  no record left, gets ``now + delete.retention.ms`` as its delete horizon the first time it is
  cleaned; a later cleaning past that time removes the tombstone (the marker batch).

pykraft adds one rule: the last batch of a group of segments is kept, as an empty header when
nothing of it stays, so that a cleaned segment still ends where the next one begins (recovery
checks that segments continue each other, ``storage.recovery``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.cleaner_batches import (
    delete_horizon_ms,
    empty_batch,
    read_batch,
    rebuild_batch,
)
from pykraft.storage.cleaner_offset_map import OffsetMap
from pykraft.storage.cleaner_txn import CleanedTransactionMetadata
from pykraft.storage.record_batch import BatchHeader, parse_header
from pykraft.storage.records import Record
from pykraft.storage.txn_markers import decode_end_txn_marker


class BatchRetention(enum.Enum):
    """Kafka ``RecordFilter.BatchRetention``."""

    DELETE = "delete"  # the whole batch goes
    DELETE_EMPTY = "delete_empty"  # goes if no record stays
    RETAIN_EMPTY = "retain_empty"  # stays, as an empty header if no record stays


@attrs.frozen
class LastRecord:
    """Kafka ``LastRecord``: a live producer's last data offset (None: it has only markers)
    and its current epoch."""

    last_data_offset: int | None
    producer_epoch: int


@attrs.frozen
class FilteredBatch:
    """What to write for one batch: ``data`` (None: nothing) and how many records stayed."""

    data: bytes | None
    records_read: int
    records_kept: int
    is_original: bool  # ``data`` is the input unchanged


class OffsetMapBuilder:
    """Fills an ``OffsetMap`` from the dirty section, batch by batch (``buildOffsetMap``)."""

    def __init__(
        self, offset_map: OffsetMap, start_offset: int, txn: CleanedTransactionMetadata
    ) -> None:
        self.offset_map = offset_map
        self.start_offset = start_offset
        self._txn = txn
        self.full = False

    def add_batch(self, data: bytes) -> bool:
        """Map the keyed records of the batch ``data``; False once the map is full (the batch
        may then be mapped in part)."""
        assert not self.full, "a full map takes no more batches"
        header = parse_header(data)
        if header.is_control:
            marker = decode_end_txn_marker(data) if header.records_count else None
            self._txn.on_control_batch_read(header, marker, has_records=header.records_count > 0)
        elif not self._txn.on_batch_read(header):
            for record in read_batch(data)[1]:
                if record.key is None or record.offset < self.start_offset:
                    continue
                if not self.offset_map.has_room_for(record.key):
                    self.full = True
                    return False
                self.offset_map.put(record.key, record.offset)
        if header.last_offset >= self.start_offset:
            self.offset_map.update_latest_offset(header.last_offset)
        return True


class CleanerFilter:
    """Decides what stays of each batch of one group of segments (see the module docstring)."""

    def __init__(
        self,
        offset_map: OffsetMap,
        txn: CleanedTransactionMetadata,
        last_records: Mapping[int, LastRecord],
        *,
        now_ms: int,
        delete_retention_ms: int,
    ) -> None:
        self._map = offset_map
        self._txn = txn
        self._last_records = last_records
        self._now_ms = now_ms
        self._delete_retention_ms = delete_retention_ms

    def filter(self, data: bytes, *, keep_header: bool = False) -> FilteredBatch:
        """What stays of the batch ``data``; ``keep_header``: the group's last batch, kept at
        least as an empty header."""
        header, records = read_batch(data)  # checks the CRC and every record first
        can_discard = self._can_discard(header, data, records)
        horizon = delete_horizon_ms(header)
        if header.is_control:
            discard_records = can_discard and horizon is not None and horizon <= self._now_ms
        else:
            discard_records = can_discard
        retention = self._batch_retention(header, discard_records)
        if retention is BatchRetention.DELETE:
            kept: list[Record] = []
        else:
            kept = [r for r in records if self._retain(header, r, discard_records, horizon)]
        if kept:
            tombstones = any(record.value is None for record in kept)
            needs_horizon = horizon is None and (tombstones or (can_discard and header.is_control))
            if len(kept) == len(records) and not needs_horizon:
                return FilteredBatch(data, len(records), len(kept), is_original=True)
            if needs_horizon:
                horizon = self._now_ms + self._delete_retention_ms
            out = rebuild_batch(header, kept, horizon)
            return FilteredBatch(out, len(records), len(kept), is_original=False)
        if retention is BatchRetention.RETAIN_EMPTY or keep_header:
            return FilteredBatch(empty_batch(header), len(records), 0, is_original=False)
        return FilteredBatch(None, len(records), 0, is_original=False)

    def _can_discard(self, header: BatchHeader, data: bytes, records: list[Record]) -> bool:
        if header.is_control:
            marker = decode_end_txn_marker(data) if records else None
            return self._txn.on_control_batch_read(header, marker, has_records=bool(records))
        return self._txn.on_batch_read(header)

    def _batch_retention(self, header: BatchHeader, discard_records: bool) -> BatchRetention:
        if header.has_producer_id and self._is_last_batch_of_producer(header):
            return BatchRetention.RETAIN_EMPTY
        if discard_records:
            return BatchRetention.DELETE
        return BatchRetention.DELETE_EMPTY

    def _is_last_batch_of_producer(self, header: BatchHeader) -> bool:
        last = self._last_records.get(header.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return header.last_offset == last.last_data_offset
        return header.is_control and header.producer_epoch == last.producer_epoch

    def _retain(
        self, header: BatchHeader, record: Record, discard_records: bool, horizon: int | None
    ) -> bool:
        if discard_records:
            return False  # kept only for the producer's sequence: no record stays
        if header.is_control:
            return True
        if record.offset > self._map.latest_offset:
            return True  # past what this cleaning mapped
        if record.key is None:
            return False  # Kafka counts it invalid in a compacted log
        if record.offset < self._map.get(record.key):
            return False
        return record.value is not None or horizon is None or self._now_ms < horizon

    def take_retained_aborted_txns(self) -> list[AbortedTxn]:
        """Aborted transactions whose marker stayed since the last call: the ``.txnindex`` of
        the group just filtered."""
        return self._txn.take_retained_aborted_txns()
