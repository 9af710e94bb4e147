"""The segment store: what ``PartitionLog`` needs from the files under a partition.

``PartitionLog`` makes the decisions — offsets, producer state, epoch entries, what may be
appended, read, truncated or deleted — and a ``SegmentStore`` keeps the bytes: it appends
already-validated batches with their offsets assigned (and indexes them), reads whole batches as
slices, rolls, truncates, deletes segments, flushes and reports the log end offset and the
recovery point (everything below it is durable). Two stores obey it:

* ``storage.local_log.LocalLog``: real segment files (``.log``, ``.index``, ``.timeindex``), as in
  Kafka, in production. Its reads are ``FileSlice``s the network sends with ``sendfile``.
* ``storage.memory_store.MemorySegmentStore``: bytes in memory with injectable ``OSError`` faults
  and a crash that drops unflushed bytes (the simulation's disk). Its reads are
  ``MemorySlice``s, which the network writes as buffers.

Each segment also keeps its aborted transactions (Kafka's transaction index, ``.txnindex`` next
to the segment's files; ``storage.aborted_txn``): the log decides the entries and
``append_aborted_txn`` stores one with the segment its marker is in; they go with their segment
(truncation, retention, deletion) and recovery empties the index of every segment it recovers,
for the log to write again from the batches (``storage.producer_replay``).

Contract, for both: an append or roll that raises ``OSError`` has changed nothing; a truncation
cuts whole batches; the recovery point never passes the log end; after a crash only flushed
bytes are left. Recovery — what opening a store does — is the store's own (``storage.recovery``
for files, ``MemorySegmentStore.recover`` in memory), as is the CRC check of reads below the
recovery point (bytes at rest can rot on disk, not in memory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

import attrs

# Kafka ``LogSegment``: offsets in a segment are stored relative to its base, in 32 bits.
MAX_RELATIVE_OFFSET = 2**31 - 1

if TYPE_CHECKING:
    from pykraft.storage.aborted_txn import AbortedTxn
    from pykraft.storage.corruption import CorruptBatch
    from pykraft.storage.fetch_data import FetchDataInfo
    from pykraft.storage.log_config import LogConfig
    from pykraft.storage.record_batch import BatchHeader
    from pykraft.storage.txn_markers import EndTransactionMarker


class AppendedBatch(NamedTuple):
    """A batch about to be written: where it is in the append buffer and what it holds.

    A tuple rather than an attrs class: an append makes one per batch (issue 18's lean path)."""

    position: int  # within the buffer passed to ``append``
    size: int
    last_offset: int
    max_timestamp: int


@attrs.define
class RolledFlush:
    """The flush of the segments rolled below ``target`` (Kafka's "flush-log" task on roll).

    Its store prepares it on the loop (``prepare_rolled_flush``), ``run`` does the fsyncs on
    any thread, and the store's ``complete_rolled_flush`` then moves the recovery point to
    ``target`` — unless the log was truncated since (``truncations``: the range may hold new
    bytes ``run`` never synced). ``directory_changes`` is the store's count of file creations
    the directory sync covers. The log puts what ``before_flush`` would sync inline first in
    ``syncs``, and what marks it synced in ``after``, run when the flush completes."""

    target: int
    syncs: list[Callable[[], None]]
    truncations: int
    directory_changes: int
    after: list[Callable[[], None]] = attrs.Factory(list)

    def run(self) -> None:
        for sync in self.syncs:
            sync()


@attrs.frozen
class RecoveryReport:
    """What opening a store found and did (``storage.recovery`` for files)."""

    had_clean_shutdown: bool
    recovery_point: int  # the checkpointed recovery point recovery started from
    recovered_segments: tuple[int, ...]  # base offsets re-validated
    rebuilt_indexes: tuple[tuple[int, str], ...]  # (base offset, why) outside normal recovery
    truncated_bytes: int
    deleted_segments: tuple[int, ...]  # segments after a damaged one
    removed_files: tuple[str, ...]  # temporary and orphaned files
    problems: tuple[str, ...]  # what stopped a scan, per damaged segment


def should_roll(
    *,
    segment_size: int,
    messages_size: int,
    config: LogConfig,
    time_waited_ms: int,
    indexes_full: bool,
    relative_offset: int,
) -> bool:
    """Kafka's ``LogSegment.shouldRoll``: roll before appending ``messages_size`` bytes?

    An empty segment rolls only for offsets it cannot hold (a follower's batch past a gap):
    a batch bigger than ``segment.bytes`` goes into it alone.
    """
    if not 0 <= relative_offset <= MAX_RELATIVE_OFFSET:
        return True  # even when empty (Kafka: no size condition on canConvertToRelativeOffset)
    if segment_size == 0:
        return False
    return (
        segment_size > config.segment_bytes - messages_size
        or time_waited_ms > config.segment_ms
        or indexes_full
    )


class SegmentView(Protocol):
    """What the log's rules read of one segment (retention, rolls, tests)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def created_ms(self) -> int: ...

    def largest_timestamp_ms(self) -> int:
        """Kafka ``largestTimestamp``: the largest record timestamp (retention.ms)."""
        ...

    @property
    def aborted_txns(self) -> Sequence[AbortedTxn]:
        """The segment's transaction index: aborted transactions whose marker it holds."""
        ...


def no_flush_hook() -> None:
    """``SegmentStore.before_flush`` until the log sets its own."""


class SegmentStore(Protocol):
    """The segments of one partition; see the module docstring for the contract."""

    config: LogConfig
    # Called before the recovery point moves up (a flush, a new log start): the log makes its
    # epoch history durable there, since recovery re-reads only the batches above that point.
    before_flush: Callable[[], None]

    @property
    def directory(self) -> Path:
        """The partition directory (for an in-memory store, the name it stands for)."""
        ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def recovery_point(self) -> int: ...

    @property
    def segments(self) -> Sequence[SegmentView]:
        """Ordered by base offset, contiguous, never empty; the last one is active."""
        ...

    @property
    def active_segment(self) -> SegmentView: ...

    @property
    def size_in_bytes(self) -> int: ...

    def should_roll(
        self, messages_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool: ...

    def roll(self, now_ms: int, base_offset: int | None = None) -> bool:
        """A new active segment at the log end, or at ``base_offset`` when past it (Kafka
        ``roll(expectedNextOffset)``: a follower's next batch after a gap); False while the
        active one is empty."""
        ...

    def append(
        self, buffer: bytes | bytearray | memoryview, batches: Sequence[AppendedBatch]
    ) -> None:
        """Write whole batches continuing the log end; on ``OSError`` nothing changed."""
        ...

    def read(self, offset: int, max_bytes: int, upper: int, min_one_batch: bool) -> FetchDataInfo:
        """Whole batches from the one holding ``offset`` (which is below ``upper``)."""
        ...

    def verify(
        self, info: FetchDataInfo, first_offset: int, stop_offset: int
    ) -> tuple[FetchDataInfo, CorruptBatch | None]:
        """``info`` up to its first corrupt batch below ``stop_offset``, and that batch."""
        ...

    def offset_for_timestamp(
        self, timestamp: int, log_start_offset: int, log_end_offset: int
    ) -> tuple[int, int] | None:
        """ListOffsets: ``(offset, record timestamp)`` (see ``storage.log_reader``)."""
        ...

    def replay_from(self, offset: int) -> Iterator[tuple[BatchHeader, EndTransactionMarker | None]]:
        """The batches holding offsets >= ``offset``, in order: each header, and a control
        batch's end-transaction marker (producer state is rebuilt from them)."""
        ...

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Add ``entry`` to the transaction index of the segment holding its marker
        (``entry.last_offset``); last offsets increase within an index."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset`` (>= the first base offset)."""
        ...

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None: ...

    def delete_segments(self, base_offsets: Sequence[int]) -> None:
        """Delete inactive segments (retention, DeleteRecords)."""
        ...

    def advance_recovery_point(self, offset: int) -> None: ...

    def flush(self, up_to_offset: int | None = None) -> None:
        """Make [recovery point, ``up_to_offset``) durable; moves the recovery point."""
        ...

    def prepare_rolled_flush(self) -> RolledFlush | None:
        """The flush of the segments rolled since the last one, to ``run`` on any thread;
        None when there are none. Unlike ``flush``, it leaves ``before_flush`` to the caller."""
        ...

    def complete_rolled_flush(self, flush: RolledFlush) -> None:
        """``flush`` ran: move the recovery point, unless a truncation came between."""
        ...

    def close(self) -> None:
        """Clean shutdown: flush and release."""
        ...

    def close_handlers(self) -> None:
        """Release without writing anything (log dir offline, simulated crash)."""
        ...
