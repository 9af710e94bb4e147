"""An in-memory partition log with a disk that loses unflushed bytes, for the replication sim.

``MemoryLog`` obeys the contract of the members of ``storage.partition_log.PartitionLog`` that
``broker.partition.Partition`` (the leader shell) and ``fetcher.follower_log`` (the follower's
actions) use, so the sim drives the real leader and follower code on it: batches are real
RecordBatch v2 bytes, validated by ``storage.log_validator`` and stamped with the base offset and
leader epoch exactly as ``PartitionLog`` stamps them; the leader-epoch history follows the same
pure functions ``LeaderEpochFileCache`` wraps (``storage.leader_epoch_cache``).

The disk. Appended batches sit in the page cache until ``flush`` moves ``flushed_end`` to the
log end. The leader-epoch history is durable at every change (``LeaderEpochFileCache`` writes
its checkpoint atomically, with fsync), and truncation is durable. ``recover`` is what a restart
does to the files: after a power loss (``lose_unflushed``) only the flushed prefix is left; after
a kill -9 the page cache survives and nothing is lost. Then, like ``storage.recovery.load_log``,
the epoch history is truncated to the recovered log end and extended by the epochs of the
recovered batches, and the high watermark comes from the broker's
``replication-offset-checkpoint``, clamped to the log (``LogManager`` loading).

The log start offset stays 0: the sim runs no retention and no DeleteRecords.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from storage.fetch_data import FetchDataInfo, LogOffsetMetadata
from storage.file_slice import FileSlice
from storage.leader_epoch_cache import (
    Entries,
    OffsetAndEpoch,
    assign_epoch,
    end_offset_for,
    epoch_for_offset,
    truncate_from_end,
)
from storage.log_reader import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP
from storage.log_validator import (
    AppendOrigin,
    LogAppendInfo,
    OffsetOutOfRangeError,
    StaleLeaderEpochError,
    append_info,
    validate_follower_batches,
    validate_leader_batches,
)
from storage.partition_log import OffsetAndTimestamp
from storage.record_batch import parse_header, patch_base_offset, patch_partition_leader_epoch
from storage.records import SimpleRecord, build_batch, iter_records

MAX_MESSAGE_BYTES = 1 << 20
SEGMENT_BYTES = 1 << 30
MEMORY = Path("<memory>")


@attrs.frozen
class MemorySlice(FileSlice):
    """A fetch result held in memory instead of a segment file range."""

    data: bytes = b""

    def read_bytes(self) -> bytes:
        return self.data


@attrs.frozen
class StoredBatch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    values: tuple[str, ...]
    data: bytes


def client_batch(values: Sequence[str]) -> bytearray:
    """What a producer sends: one v2 batch, offsets and epoch unset."""
    return bytearray(build_batch([SimpleRecord(value=value.encode()) for value in values]))


def _stored(data: bytes) -> StoredBatch:
    records = list(iter_records(data))
    values = tuple((record.value or b"").decode() for record in records)
    header = parse_header(data)
    return StoredBatch(header.base_offset, header.last_offset, header.partition_leader_epoch,
                       values, data)


class MemoryEpochCache:
    """``LeaderEpochFileCache`` without the file: the same pure rules over a tuple."""

    def __init__(self, entries: Entries = ()) -> None:
        self.entries: Entries = entries

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1].epoch if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        before = self.entries
        self.entries = assign_epoch(self.entries, epoch, start_offset)
        return self.entries != before

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> OffsetAndEpoch:
        return end_offset_for(self.entries, requested_epoch, log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        return epoch_for_offset(self.entries, offset)

    def truncate_from_end(self, end_offset: int) -> None:
        self.entries = truncate_from_end(self.entries, end_offset)

    def clear(self) -> None:
        self.entries = ()


class MemoryLog:
    """One replica's log of one partition: page cache, flushed prefix, epoch history, HW."""

    def __init__(self) -> None:
        self.batches: list[StoredBatch] = []
        self.leader_epoch_cache = MemoryEpochCache()
        # Invariant: 0 <= high_watermark <= log_end_offset; flushed_end <= log_end_offset.
        self._high_watermark = 0
        self.flushed_end = 0

    def __repr__(self) -> str:
        return (f"MemoryLog(end={self.log_end_offset}, hw={self._high_watermark}, "
                f"flushed={self.flushed_end}, epochs={self.leader_epoch_cache.entries})")

    # ------------------------------------------------------------------ offsets

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """``PartitionLog.update_high_watermark``: clamped to [log start, log end]."""
        self._high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self._high_watermark

    # ------------------------------------------------------------------ appends

    def append_as_leader(self, batch: bytearray | memoryview, leader_epoch: int, now_ms: int,
                         *, origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """``PartitionLog.append_as_leader`` without producer state (the sim's producers are
        not idempotent)."""
        latest = self.leader_epoch_cache.latest_epoch
        if leader_epoch < 0 or (latest is not None and leader_epoch < latest):
            raise StaleLeaderEpochError(
                f"leader epoch {leader_epoch} is below the log's latest epoch {latest}")
        validated = validate_leader_batches(batch, max_message_bytes=MAX_MESSAGE_BYTES,
                                            segment_bytes=SEGMENT_BYTES, origin=origin)
        first_offset = self.log_end_offset
        if latest != leader_epoch:
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        next_offset = first_offset
        for item in validated:
            patch_base_offset(batch, item.position, next_offset)
            patch_partition_leader_epoch(batch, item.position, leader_epoch)
            next_offset += item.header.last_offset_delta + 1
        for item in validated:
            end = item.position + item.header.size_in_bytes
            self.batches.append(_stored(bytes(batch[item.position:end])))
        return append_info(validated, first_offset, log_start_offset=self.log_start_offset,
                           valid_bytes=len(batch))

    def append_as_follower(self, batches: bytes | bytearray | memoryview,
                           now_ms: int | None = None) -> LogAppendInfo:
        """``PartitionLog.append_as_follower``: the leader's offsets and epochs, continuing
        the log exactly; a new epoch is recorded where its first batch starts."""
        validated = validate_follower_batches(batches, log_end_offset=self.log_end_offset)
        first_offset = self.log_end_offset
        for item in validated:
            epoch = item.header.partition_leader_epoch
            if epoch >= 0 and epoch != self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(epoch, item.header.base_offset)
            end = item.position + item.header.size_in_bytes
            self.batches.append(_stored(bytes(batches[item.position:end])))
        valid_bytes = (validated[-1].position + validated[-1].header.size_in_bytes
                       if validated else 0)
        return append_info(validated, first_offset, log_start_offset=self.log_start_offset,
                           valid_bytes=valid_bytes)

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, max_bytes: int, upper_bound: int,
             min_one_batch: bool = True) -> FetchDataInfo:
        """``PartitionLog.read``: whole batches from the one holding ``offset``, below
        ``upper_bound``, at most ``max_bytes`` unless the first batch alone is larger."""
        end = self.log_end_offset
        if not self.log_start_offset <= offset <= end:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, end)
        upper = min(upper_bound, end)
        chosen: list[bytes] = []
        size, next_offset = 0, offset
        for batch in self.batches:
            if batch.last_offset < offset:
                continue
            if batch.last_offset >= upper:
                break
            if size + len(batch.data) > max_bytes and (chosen or not min_one_batch):
                break
            chosen.append(batch.data)
            size += len(batch.data)
            next_offset = batch.last_offset + 1
        if not chosen:
            return FetchDataInfo(LogOffsetMetadata(offset), (), offset)
        data = b"".join(chosen)
        return FetchDataInfo(LogOffsetMetadata(offset),
                             (MemorySlice(MEMORY, 0, len(data), data),), next_offset)

    def fetch_offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """Only what a follower's out-of-range reset asks the leader: the earliest offset."""
        if timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            raise ValueError(f"the sim's log answers only the earliest offset, not {timestamp}")
        start = self.log_start_offset
        return OffsetAndTimestamp(start, -1, self.leader_epoch_cache.epoch_for_offset(start))

    def records(self) -> list[tuple[int, int, str]]:
        """Every record as ``(offset, leader_epoch, value)``."""
        return [(batch.base_offset + index, batch.leader_epoch, value)
                for batch in self.batches for index, value in enumerate(batch.values)]

    def batch_at(self, offset: int) -> StoredBatch | None:
        for batch in self.batches:
            if batch.base_offset <= offset <= batch.last_offset:
                return batch
        return None

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> bool:
        """``PartitionLog.truncate_to``: a batch straddling ``offset`` goes whole."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        self.batches = [batch for batch in self.batches if batch.last_offset < offset]
        end = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(end)
        self._high_watermark = min(self._high_watermark, end)
        self.flushed_end = min(self.flushed_end, end)
        return True

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        assert offset == 0, "the sim's logs always start at offset 0"
        self.batches = []
        self.leader_epoch_cache.clear()
        self._high_watermark = self.flushed_end = 0

    def delete_records(self, offset: int) -> int:
        assert offset <= self.log_start_offset, "the sim never moves the log start offset"
        return self.log_start_offset

    # ------------------------------------------------------------------ the disk

    def flush(self) -> None:
        self.flushed_end = self.log_end_offset

    def recover(self, *, lose_unflushed: bool, high_watermark_checkpoint: int) -> None:
        """What a restart finds: see the module docstring."""
        if lose_unflushed:
            self.batches = [b for b in self.batches if b.last_offset < self.flushed_end]
        end = self.log_end_offset
        self.flushed_end = min(self.flushed_end, end)
        self.leader_epoch_cache.truncate_from_end(end)
        for batch in self.batches:
            latest = self.leader_epoch_cache.latest_epoch
            if batch.leader_epoch >= 0 and (latest is None or batch.leader_epoch > latest):
                self.leader_epoch_cache.assign(batch.leader_epoch, batch.base_offset)
        self._high_watermark = 0
        self.update_high_watermark(high_watermark_checkpoint)


class BrokerDisk:
    """One broker's log directory; it outlives the broker's processes."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], MemoryLog] = {}
        # replication-offset-checkpoint: the high watermarks last written (durably).
        self.high_watermark_checkpoint: dict[tuple[str, int], int] = {}

    def log(self, key: tuple[str, int]) -> MemoryLog:
        return self.logs.setdefault(key, MemoryLog())

    def flush(self) -> None:
        for log in self.logs.values():
            log.flush()

    def checkpoint_high_watermarks(self) -> None:
        for key, log in self.logs.items():
            self.high_watermark_checkpoint[key] = log.high_watermark

    def recover(self, *, lose_unflushed: bool) -> None:
        for key, log in self.logs.items():
            log.recover(lose_unflushed=lose_unflushed,
                        high_watermark_checkpoint=self.high_watermark_checkpoint.get(key, 0))
