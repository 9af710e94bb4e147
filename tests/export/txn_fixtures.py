"""Partitions written with transactions, as a leader writes them, and what each offset is.

Batches come from ``storage.records.build_batch`` (transactional, with each producer's next
sequences) and markers from ``storage.txn_markers.TxnMarker.control_batch``, appended through
``storage.partition_log.PartitionLog`` with the coordinator's origin, as
``tests/storage/test_log_transactions.py`` writes them; small segments, so transactions span
segments and their ``.txnindex`` entries live apart from their records. The log stays open
while export reads it, as a running broker's would.

The expected rows come from what the fixture wrote (every offset's producer and, once its
marker is written, its transaction's outcome), never from export/: under read_committed, the
offsets below the last stable offset — the first offset of the oldest transaction with a record
below the high watermark and no marker below it — that are plain or committed.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from tests.export.fixtures import BASE_MS

EPOCH = 0
SEGMENT_BYTES = 400  # a few batches per segment


@attrs.define
class Txn:
    """One transaction as written: its producer, first offset, and marker once ended."""

    producer_id: int
    first_offset: int
    marker_offset: int | None = None
    committed: bool = False


class TxnPartition:
    """One partition of ``topic`` in ``log_dir``, written batch by batch."""

    def __init__(self, log_dir: Path, tp: TopicPartition) -> None:
        self.log_dir, self.tp = log_dir, tp
        self.directory = log_dir / tp.dir_name()
        self.log = PartitionLog.open(self.directory, LogConfig(segment_bytes=SEGMENT_BYTES))
        self.sequences: dict[int, int] = {}
        self.txns: list[Txn] = []
        self.producer_of: dict[int, int | None] = {}  # data offset -> producer (None: plain)
        self.txn_of: dict[int, Txn] = {}  # transactional data offset -> its transaction

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def txn(self, producer_id: int, count: int = 1) -> int:
        """A transactional batch of ``count`` records; returns its base offset."""
        base = self.log.log_end_offset
        sequence = self.sequences.get(producer_id, 0)
        records = [
            SimpleRecord(value=f"p{producer_id}-{base + i}".encode(), timestamp=BASE_MS + base + i)
            for i in range(count)
        ]
        data = build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=EPOCH,
            base_sequence=sequence,
            is_transactional=True,
        )
        self.log.append_as_leader(bytearray(data), EPOCH, BASE_MS + base)
        self.sequences[producer_id] = sequence + count
        open_txn = self._open(producer_id)
        if open_txn is None:
            open_txn = Txn(producer_id, base)
            self.txns.append(open_txn)
        for offset in range(base, base + count):
            self.producer_of[offset] = producer_id
            self.txn_of[offset] = open_txn
        return base

    def plain(self, count: int = 1) -> int:
        base = self.log.log_end_offset
        records = [
            SimpleRecord(value=f"plain-{base + i}".encode(), timestamp=BASE_MS + base + i)
            for i in range(count)
        ]
        self.log.append_as_leader(bytearray(build_batch(records)), EPOCH, BASE_MS + base)
        for offset in range(base, base + count):
            self.producer_of[offset] = None
        return base

    def end(self, producer_id: int, *, commit: bool) -> int:
        """The coordinator's COMMIT or ABORT marker; returns its offset."""
        offset = self.log.log_end_offset
        marker = TxnMarker(
            producer_id=producer_id,
            producer_epoch=EPOCH,
            coordinator_epoch=0,
            commit=commit,
            partitions=(self.tp,),
        )
        self.log.append_as_leader(
            marker.control_batch(BASE_MS + offset),
            EPOCH,
            BASE_MS + offset,
            origin=AppendOrigin.COORDINATOR,
        )
        open_txn = self._open(producer_id)
        if open_txn is not None:  # a marker for an empty transaction changes nothing
            open_txn.marker_offset, open_txn.committed = offset, commit
        return offset

    def _open(self, producer_id: int) -> Txn | None:
        for txn in self.txns:
            if txn.producer_id == producer_id and txn.marker_offset is None:
                return txn
        return None

    def checkpoint(self, high_watermark: int | None = None) -> int:
        """Move the high watermark (default: the log end), flush, and write the log dir's
        checkpoints as the broker's periodic task does; returns the high watermark."""
        hw = self.log.update_high_watermark(
            self.log.log_end_offset if high_watermark is None else high_watermark
        )
        self.log.flush()
        for name, value in (
            (REPLICATION_CHECKPOINT, hw),
            (LOG_START_OFFSET_CHECKPOINT, self.log.log_start_offset),
        ):
            path = self.log_dir / name
            offsets = read_offset_checkpoint(path) if path.exists() else {}
            offsets[self.tp] = value
            write_offset_checkpoint(path, offsets)
        return hw

    # ------------------------------------------------------------------ the oracle

    def open_at(self, high_watermark: int) -> list[Txn]:
        return [
            t
            for t in self.txns
            if t.first_offset < high_watermark
            and (t.marker_offset is None or t.marker_offset >= high_watermark)
        ]

    def last_stable_offset(self, high_watermark: int) -> int:
        return min((t.first_offset for t in self.open_at(high_watermark)), default=high_watermark)

    def committed_offsets(self, high_watermark: int, start: int = 0) -> list[int]:
        """What read_committed must show of ``[start, high watermark)``."""
        end = self.last_stable_offset(high_watermark)
        return [
            offset
            for offset in sorted(self.producer_of)
            if start <= offset < end
            and (offset not in self.txn_of or self.txn_of[offset].committed)
        ]

    def uncommitted_offsets(self, high_watermark: int) -> list[int]:
        """What read_uncommitted must show: every data record below the high watermark."""
        return [offset for offset in sorted(self.producer_of) if offset < high_watermark]

    def aborted_offsets(self) -> list[int]:
        return [
            offset
            for offset, txn in sorted(self.txn_of.items())
            if txn.marker_offset is not None and not txn.committed
        ]


def kafka_mixed_transactions(partition: TxnPartition) -> None:
    """FetcherTest.testReadCommittedWithCommittedAndAbortedTransactions's log (offsets 0..10),
    with a long transaction of producer 4 begun first and aborted after it, then plain records,
    a transaction of producer 3 left open, more plain records and a transaction of producer 1
    begun after it: the last stable offset is producer 3's first offset."""
    partition.txn(4, 2)  # 0-1, aborted at 13: its index entry is segments away
    partition.txn(1, 2)  # 2-3 commit1-1, commit1-2
    partition.txn(2)  # 4 abort2-1
    partition.end(1, commit=True)  # 5
    partition.txn(2)  # 6 abort2-2
    partition.end(2, commit=False)  # 7
    partition.txn(1)  # 8 abort1-1
    partition.txn(2)  # 9 commit2-1
    partition.txn(1)  # 10 abort1-2
    partition.end(1, commit=False)  # 11
    partition.end(2, commit=True)  # 12
    partition.end(4, commit=False)  # 13
    partition.plain(2)  # 14-15
    partition.txn(3, 3)  # 16-18: open
    partition.plain(2)  # 19-20: held back behind producer 3
    partition.txn(1, 2)  # 21-22: open, ends later
