"""Reading the transaction sim's logs: transactional batches, markers, the values' names, and
the coordinators' ``__transaction_state`` records.

Every value a transactional producer writes names itself: ``<transactional id>/<transaction
number>/<partition>/<index>`` (``TxnValue``), so the checks can tell which transaction a record
belongs to without asking the code under test. ``txn_batches`` reads whole batches as the wire or
a log holds them (producer id and epoch, the transactional and control bits, the end-transaction
marker of a control batch, the values).

``StableOffsetScan`` recomputes a replica's last stable offset from its records alone, as Kafka
defines it (``ProducerStateManager.firstUnstableOffset``, ``UnifiedLog.lastStableOffset``): a
producer's first transactional batch opens a transaction at its base offset; the producer's next
COMMIT or ABORT marker ends it; an ended transaction stays unstable until the high watermark
passes its marker (it could still be truncated away, KIP-98's "unreplicated" transactions). The
LSO is the smallest first offset of a transaction still open or unstable, capped by the high
watermark (``bounds``' lower end). A replica reloaded after a crash forgets which ended
transactions were unreplicated (Kafka clears them on reload too, then only the replay after the
producer snapshot finds them again), so the LSO may pass an ended transaction whose marker is
above the high watermark, never an open one (the upper end). The scan is incremental (a
replica's log only grows between truncations); it starts over when the log object changes (a
restart), its start moves, it was truncated, or the high watermark went back below what was
pruned.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from pykraft.coordinator.transaction.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
)
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import iter_records
from pykraft.storage.txn_markers import EndTransactionMarker, decode_end_txn_marker
from tests.sim.replication_log import MAX_LOG_READ_BYTES


@attrs.frozen
class TxnValue:
    """What a transactional producer's value says about itself."""

    transactional_id: str
    transaction: int
    partition: int
    index: int

    def __str__(self) -> str:
        return f"{self.transactional_id}/{self.transaction}/{self.partition}/{self.index}"

    @property
    def transaction_key(self) -> tuple[str, int]:
        return (self.transactional_id, self.transaction)


def parse_value(value: str) -> TxnValue:
    transactional_id, transaction, partition, index = value.split("/")
    return TxnValue(transactional_id, int(transaction), int(partition), int(index))


@attrs.frozen
class TxnBatch:
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    # The control batch's COMMIT / ABORT marker; None for a data batch.
    marker: EndTransactionMarker | None
    values: tuple[str, ...]

    @property
    def is_control(self) -> bool:
        return self.marker is not None

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def txn_batches(data: bytes) -> Iterator[TxnBatch]:
    """The whole batches in ``data`` (a log read or a Fetch answer's records)."""
    for position, header in iter_batches(data):
        marker = decode_end_txn_marker(data, position) if header.is_control else None
        values = (
            ()
            if header.is_control
            else tuple((r.value or b"").decode() for r in iter_records(data, position))
        )
        yield TxnBatch(
            header.base_offset,
            header.last_offset,
            header.producer_id,
            header.producer_epoch,
            header.is_transactional,
            marker,
            values,
        )


@attrs.frozen
class StateRecord:
    """A ``__transaction_state`` record where it lies: offset and leader epoch, decoded."""

    offset: int
    leader_epoch: int
    transactional_id: str
    # None: a tombstone.
    value: TransactionLogValue | None


def state_records(
    log: PartitionLog, from_offset: int, stop_offset: int | None = None
) -> Iterator[StateRecord]:
    """The records of the batches from the one holding ``from_offset`` on, to the log end or
    up to ``stop_offset`` (excluded)."""
    end = log.log_end_offset if stop_offset is None else min(stop_offset, log.log_end_offset)
    if from_offset >= end:
        return
    data = log.read(max(from_offset, log.log_start_offset), MAX_LOG_READ_BYTES, end).read_bytes()
    for position, header in iter_batches(data):
        for record in iter_records(data, position):
            transactional_id = decode_key(record.key or b"")
            assert isinstance(transactional_id, str), transactional_id
            value = None if record.value is None else decode_value(record.value)
            yield StateRecord(record.offset, header.partition_leader_epoch, transactional_id, value)


def log_batches(log: PartitionLog, from_offset: int) -> Iterator[TxnBatch]:
    """The batches of ``log`` holding offsets >= ``from_offset``, to its end."""
    end = log.log_end_offset
    if from_offset >= end:
        return
    start = max(from_offset, log.log_start_offset)
    yield from txn_batches(log.read(start, MAX_LOG_READ_BYTES, end).read_bytes())


class StableOffsetScan:
    """One replica's last stable offset, recomputed from its records (module docstring)."""

    def __init__(self, log: PartitionLog) -> None:
        self._log_id = id(log)
        self._log_start_offset = log.log_start_offset
        self._scanned_to = log.log_start_offset
        # producer id -> the first offset of its open transaction
        self._open: dict[int, int] = {}
        # (first offset, marker offset) of ended transactions the high watermark has not passed
        self._unreplicated: list[tuple[int, int]] = []
        # Ended transactions with markers below this were pruned as stable.
        self._pruned_below = 0
        self.stale = False

    def usable_for(self, log: PartitionLog, high_watermark: int) -> bool:
        return (
            not self.stale
            and self._log_id == id(log)
            and self._log_start_offset == log.log_start_offset
            and log.log_end_offset >= self._scanned_to
            and high_watermark >= self._pruned_below
        )

    def bounds(self, log: PartitionLog, high_watermark: int) -> tuple[int, int]:
        """The LSO must lie in [every unstable transaction, every open transaction] (both
        capped by the high watermark)."""
        for batch in log_batches(log, self._scanned_to):
            self._scan(batch)
        self._scanned_to = max(self._scanned_to, log.log_end_offset)
        self._unreplicated = [(f, m) for f, m in self._unreplicated if m >= high_watermark]
        self._pruned_below = max(self._pruned_below, high_watermark)
        upper = min([high_watermark, *self._open.values()])
        return min([upper, *(first for first, _ in self._unreplicated)]), upper

    def _scan(self, batch: TxnBatch) -> None:
        if not batch.transactional:
            return
        if batch.marker is not None:
            first = self._open.pop(batch.producer_id, None)
            if first is not None:
                self._unreplicated.append((first, batch.base_offset))
        else:
            self._open.setdefault(batch.producer_id, batch.base_offset)
