"""An in-memory segment store: the simulation's disk, with injectable faults and crashes.

``MemorySegmentStore`` obeys ``storage.segment_store.SegmentStore`` like ``LocalLog`` does, so
``PartitionLog`` runs unchanged on it (``PartitionLog.open`` on a ``MemoryDisk``). It keeps
the real RecordBatch v2 bytes of each segment in a ``bytearray`` with their parsed headers (the
headers are its index), and reads return ``MemorySlice`` copies of whole batches.

The disk itself — segments, epoch history, producer snapshots, armed faults and the crash
rule — is ``storage.memory_disk.MemoryDisk``, which outlives the stores opened on it.
``close_handlers`` detaches a store from its disk; every later call fails with EBADF, as a log
whose files were released does.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs

from pykraft.storage.aborted_txn import AbortedTxn, check_appendable
from pykraft.storage.corruption import CorruptBatch
from pykraft.storage.fetch_data import FetchDataInfo, LogOffsetMetadata, MemorySlice, RecordSlice
from pykraft.storage.leader_epoch_cache import LeaderEpochCache
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_reader import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from pykraft.storage.log_validator import CorruptLogError
from pykraft.storage.memory_disk import MemoryDisk, MemoryEpochCheckpoint, MemorySegment
from pykraft.storage.producer_entry import NO_TIMESTAMP
from pykraft.storage.record_batch import BatchHeader, CorruptRecordError, parse_header
from pykraft.storage.records import iter_records
from pykraft.storage.segment_store import (
    AppendedBatch,
    RecoveryReport,
    RolledFlush,
    no_flush_hook,
    should_roll,
)
from pykraft.storage.txn_markers import EndTransactionMarker, decode_end_txn_marker


class MemorySegmentStore:
    """The ``SegmentStore`` over a ``MemoryDisk``."""

    # Invariant: the disk's segments are contiguous and never empty while the store is open;
    # recovery_point <= log_end_offset.

    def __init__(self, disk: MemoryDisk, config: LogConfig, recovery_point: int) -> None:
        assert disk.segments, "a log always has an active segment"
        self.disk = disk
        self.config = config
        self._recovery_point = recovery_point
        self._pending_flush_offset = recovery_point
        self._truncations = 0  # as ``LocalLog._truncations``
        self._open = True
        self.before_flush: Callable[[], None] = no_flush_hook  # as ``LocalLog.before_flush``

    # ------------------------------------------------------------------ views

    @property
    def directory(self) -> Path:
        return self.disk.directory

    @property
    def log_end_offset(self) -> int:
        return self.disk.segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> tuple[MemorySegment, ...]:
        return tuple(self.disk.segments)

    @property
    def active_segment(self) -> MemorySegment:
        return self.disk.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.disk.segments)

    def _check(self, operation: str | None = None) -> None:
        if not self._open:
            raise OSError(errno.EBADF, "the store's handlers were released")
        if operation is not None:
            self.disk.faults.check(operation)

    def _located(self, offset: int) -> Iterator[tuple[MemorySegment, int, BatchHeader]]:
        """Every batch holding an offset >= ``offset``, in order."""
        for segment in self.disk.segments:
            if segment.next_offset <= offset:
                continue
            for position, header in segment.headers:
                if header.last_offset >= offset:
                    yield segment, position, header

    # ------------------------------------------------------------------ append and roll

    def should_roll(
        self, messages_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        segment = self.active_segment
        first = segment.headers[0][1].max_timestamp if segment.headers else -1
        waited = max_timestamp - first if first >= 0 else now_ms - segment.created_ms
        return should_roll(
            segment_size=segment.size,
            messages_size=messages_size,
            config=self.config,
            time_waited_ms=waited,
            indexes_full=False,  # the headers list is the index: it never fills
            relative_offset=last_offset - segment.base_offset,
        )

    def roll(self, now_ms: int, base_offset: int | None = None) -> bool:
        active = self.active_segment
        if active.size == 0 and (base_offset is None or base_offset <= active.base_offset):
            return False  # an empty segment stays active, unless it cannot hold base_offset
        self._check("roll")
        base = max(self.log_end_offset, base_offset or 0)
        self.disk.segments.append(MemorySegment(base, now_ms))
        self._pending_flush_offset = base
        return True

    def append(
        self, buffer: bytes | bytearray | memoryview, batches: Sequence[AppendedBatch]
    ) -> None:
        """As ``LocalLog.append``: ``flush.messages`` may flush inline; a failed write or
        flush leaves nothing behind (here by failing before the bytes are added)."""
        self._check("write")
        end_after = batches[-1].last_offset + 1
        flush_now = end_after - self._recovery_point >= self.config.flush_messages
        if flush_now:
            self._check("flush")
        segment = self.active_segment
        start = segment.size
        data = bytes(buffer)
        segment.data += data
        for batch in batches:
            segment.headers.append((start + batch.position, parse_header(data, batch.position)))
        if flush_now:
            self._flush(None)

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, upper: int, min_one_batch: bool) -> FetchDataInfo:
        self._check()
        slices: list[RecordSlice] = []
        metadata: LogOffsetMetadata | None = None
        size, next_offset = 0, offset
        current: MemorySegment | None = None
        start = end = 0
        for segment, position, header in self._located(offset):
            if metadata is None:
                metadata = LogOffsetMetadata(offset, segment.base_offset, position)
            fits = size + header.size_in_bytes <= max_bytes or (min_one_batch and size == 0)
            if header.last_offset >= upper or not fits:
                break
            if segment is not current:
                if current is not None:
                    slices.append(MemorySlice(current.data[start:end]))
                current, start = segment, position
            end = position + header.size_in_bytes
            size += header.size_in_bytes
            next_offset = header.next_offset
        if current is not None:
            slices.append(MemorySlice(current.data[start:end]))
        return FetchDataInfo(metadata or LogOffsetMetadata(offset), tuple(slices), next_offset)

    def verify(
        self, info: FetchDataInfo, first_offset: int, stop_offset: int
    ) -> tuple[FetchDataInfo, CorruptBatch | None]:
        """Bytes in memory do not rot: every read is served as it is."""
        return info, None

    def offset_for_timestamp(
        self, timestamp: int, log_start_offset: int, log_end_offset: int
    ) -> tuple[int, int] | None:
        """``storage.log_reader.fetch_offset_for_timestamp``'s answers, by scanning."""
        self._check()
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return log_start_offset, NO_TIMESTAMP
        if timestamp == LATEST_TIMESTAMP:
            return log_end_offset, NO_TIMESTAMP
        if timestamp == MAX_TIMESTAMP:
            largest = max((h.max_timestamp for _, _, h in self._located(0)), default=-1)
            return None if largest < 0 else self._first_at(largest, log_start_offset)
        if timestamp < 0:
            raise ValueError(f"unsupported ListOffsets timestamp {timestamp}")
        return self._first_at(timestamp, log_start_offset)

    def _first_at(self, timestamp: int, log_start_offset: int) -> tuple[int, int] | None:
        for segment, position, header in self._located(log_start_offset):
            if header.max_timestamp < timestamp:
                continue
            batch = bytes(segment.data[position : position + header.size_in_bytes])
            try:
                for record in iter_records(batch):
                    if record.timestamp >= timestamp and record.offset >= log_start_offset:
                        return record.offset, record.timestamp
            except CorruptRecordError as error:  # as storage.log_reader: CORRUPT_MESSAGE
                raise CorruptLogError(f"segment {segment.base_offset}: {error}") from error
        return None

    def replay_from(self, offset: int) -> Iterator[tuple[BatchHeader, EndTransactionMarker | None]]:
        self._check()
        for segment, position, header in self._located(offset):
            marker = None
            if header.is_control:
                end = position + header.size_in_bytes
                marker = decode_end_txn_marker(bytes(segment.data[position:end]))
            yield header, marker

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        self._check()  # armed write faults stay for the batches
        holding = [s for s in self.disk.segments if s.base_offset <= entry.last_offset][-1]
        check_appendable(holding.aborted_txns, entry)
        holding.aborted_txns.append(entry)

    # ------------------------------------------------------------------ truncation and deletion

    def truncate_to(self, offset: int) -> None:
        self._check("truncate")
        segments = self.disk.segments
        keep = max(sum(1 for segment in segments if segment.base_offset <= offset), 1)
        del segments[keep:]
        active = segments[-1]
        active.truncate_at_batch(
            sum(1 for _, header in active.headers if header.last_offset < offset)
        )
        end = self.log_end_offset
        self._recovery_point = min(self._recovery_point, end)
        self._pending_flush_offset = min(self._pending_flush_offset, end)
        self._truncations += 1

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        self._check("truncate")
        self.disk.segments[:] = [MemorySegment(offset, now_ms)]
        self._recovery_point = self._pending_flush_offset = offset
        self._truncations += 1

    def delete_segments(self, base_offsets: Sequence[int]) -> None:
        self._check()
        doomed = set(base_offsets)
        assert self.active_segment.base_offset not in doomed, "never delete the active segment"
        self.disk.segments[:] = [s for s in self.disk.segments if s.base_offset not in doomed]

    def advance_recovery_point(self, offset: int) -> None:
        if offset > self._recovery_point:
            self.before_flush()
        self._recovery_point = min(max(self._recovery_point, offset), self.log_end_offset)

    # ------------------------------------------------------------------ durability and lifecycle

    def flush(self, up_to_offset: int | None = None) -> None:
        self._check("flush")
        self._flush(up_to_offset)

    def _flush(self, up_to_offset: int | None, *, synced_before: bool = False) -> None:
        """``synced_before``: what ``before_flush`` syncs was synced already (a rolled flush
        ran it, off the loop for files)."""
        end = self.log_end_offset
        target = end if up_to_offset is None else min(up_to_offset, end)
        if target > self._recovery_point:
            if not synced_before:
                self.before_flush()
            for segment in self.disk.segments:
                if segment.next_offset > self._recovery_point and segment.base_offset < target:
                    segment.flushed_size = segment.size  # fsync writes the whole file
        self._recovery_point = max(self._recovery_point, target)

    def prepare_rolled_flush(self) -> RolledFlush | None:
        """Nothing to sync off the loop in memory: the completion does the flush."""
        if self._pending_flush_offset <= self._recovery_point:
            return None
        self._check("flush")
        return RolledFlush(self._pending_flush_offset, [], self._truncations, 0)

    def complete_rolled_flush(self, flush: RolledFlush) -> None:
        if flush.truncations == self._truncations:
            self._flush(flush.target, synced_before=True)

    def close(self) -> None:
        self.flush()
        self._open = False

    def close_handlers(self) -> None:
        self._open = False


@attrs.frozen
class LoadedMemoryLog:
    store: MemorySegmentStore
    log_start_offset: int
    leader_epoch_cache: LeaderEpochCache
    report: RecoveryReport


def load_memory_log(
    disk: MemoryDisk,
    config: LogConfig,
    *,
    recovery_point: int,
    now_ms: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
) -> LoadedMemoryLog:
    """``storage.recovery.load_log`` for a memory disk: nothing tears in memory (a crash cuts
    at a flushed batch boundary), so recovery re-derives the epochs of the batches above the
    recovery point, empties their segments' transaction indexes (the log rebuilds them) and
    fixes the log start and recovery point as the file loader does."""
    cache = LeaderEpochCache(MemoryEpochCheckpoint(disk))
    recovered: list[int] = []
    if not had_clean_shutdown:
        for segment in disk.segments:
            if segment.next_offset <= recovery_point:
                continue  # flushed: recovery starts at the recovery point
            recovered.append(segment.base_offset)
            segment.aborted_txns.clear()  # written again from the batches (producer_replay)
            for _, header in segment.headers:
                latest, epoch = cache.latest_epoch, header.partition_leader_epoch
                if epoch >= 0 and (latest is None or epoch > latest):
                    cache.assign(epoch, header.base_offset)
    start = max(log_start_offset, disk.segments[0].base_offset if disk.segments else 0)
    if disk.segments and start > disk.segments[-1].next_offset:
        disk.segments.clear()  # Kafka deleteSegmentsIfLogStartGreaterThanLogEnd
    if not disk.segments:
        disk.segments.append(MemorySegment(start, now_ms))
    log_end = disk.segments[-1].next_offset
    point = log_end if had_clean_shutdown else min(recovery_point, log_end)
    cache.truncate_loaded_from_end(log_end)
    cache.truncate_from_start(start)
    report = RecoveryReport(
        had_clean_shutdown=had_clean_shutdown,
        recovery_point=recovery_point,
        recovered_segments=tuple(recovered),
        rebuilt_indexes=(),
        truncated_bytes=0,
        deleted_segments=(),
        removed_files=(),
        problems=(),
    )
    store = MemorySegmentStore(disk, config, max(point, start))
    return LoadedMemoryLog(store, start, cache, report)
