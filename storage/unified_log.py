"""A partition log's decisions (Kafka's ``UnifiedLog``), over any segment store.

Theory of operation
-------------------
Offsets: ``log_start_offset <= high_watermark <= log_end_offset`` and
``recovery_point <= log_end_offset``. Data below the log start is unreadable (it waits for
retention to delete its segment); data at or above the high watermark is not yet committed and
only followers read it; everything below the recovery point has been fsync'd.

Appends go to the last ("active") segment. A leader append validates every batch, checks
idempotent producers (a retry of a recent batch returns the original offsets and writes
nothing), records a new leader epoch in the epoch cache at the log end, then assigns offsets
and stamps the epoch by patching the two header fields outside the CRC — the client's bytes are
written as they came. A follower append keeps the leader's offsets, which must continue the log.
Before writing, the log rolls to a new segment when the active one would pass
``segment.bytes``, is older than ``segment.ms`` (by record time), or its indexes are full.

Transactions (KIP-98): producer state tracks each open transaction; a marker completes one,
and an aborted one is indexed with the segment holding its marker (``storage.producer_replay``).
The last stable offset (``last_stable_offset``, Kafka ``UnifiedLog.lastStableOffset``) is the
first unstable offset — the oldest transaction still open, or decided by a marker the high
watermark has not passed, but never below the log start — when that is below the high
watermark, else the high watermark. READ_COMMITTED consumers read up to it and learn the aborted
transactions overlapping what they read (``collect_aborted_transactions``). KIP-890 part 1: a
leader about to verify a producer's first transactional write gets a guard from
``maybe_start_transaction_verification``; an append that asks for verification must carry it
(``storage.verification_guard``).

Reads return slices of whole batches (``FileSlice``s from files, never bytes), bounded by an
upper offset (last stable offset or high watermark for consumers, log end for followers);
batches below the recovery point are CRC-checked first by the store and a corrupt one is never
served (``storage.read_verification``).
``truncate_to`` (a follower diverged) cuts whole batches from the end; ``delete_records`` moves
the log start forward and retention (``delete_old_segments``) deletes the segments that lie
wholly below it, as Kafka's ``deleteLogStartOffsetBreachedSegments`` does. Opening a
log (``storage.partition_log``) runs the store's recovery, writes the transaction indexes of the
segments it recovered again, and then rebuilds producer state from its latest snapshot plus a
replay of the batches after it.

The bytes themselves (segments, log end, recovery point, rolls, flushes) are the segment
store's (``storage.segment_store``); the epoch history's checkpoint and the producer snapshots
are injected too. So this module does no I/O and imports none (the architecture test checks it
transitively); ``storage.partition_log.PartitionLog`` opens it on files or in memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, Self

import attrs

from pykraft.storage.aborted_txn import AbortedTxn, collect_across_segments
from pykraft.storage.corruption import CorruptionReports
from pykraft.storage.fetch_data import FetchDataInfo, LogOffsetMetadata, OffsetAndTimestamp
from pykraft.storage.leader_epoch_cache import LeaderEpochCache
from pykraft.storage.log_config import CleanupPolicy, LogConfig
from pykraft.storage.log_validator import (
    AppendOrigin,
    LogAppendInfo,
    OffsetOutOfRangeError,
    StaleLeaderEpochError,
    ValidatedBatch,
    append_info,
    check_producers,
    follower_append_info,
    segment_sized_chunks,
    validate_follower_batches,
    validate_leader_batches,
)
from pykraft.storage.producer_entry import ProducerStateEntry
from pykraft.storage.producer_replay import (
    apply_appended,
    rebuild_producer_state,
    rebuild_txn_indexes,
)
from pykraft.storage.producer_state import ProducerStateManager
from pykraft.storage.record_batch import (
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    CorruptRecordError,
    patch_base_offset,
    patch_partition_leader_epoch,
)
from pykraft.storage.retention import RetentionDecision, SegmentInfo, decide_retention
from pykraft.storage.segment_store import (
    AppendedBatch,
    RecoveryReport,
    RolledFlush,
    SegmentStore,
    SegmentView,
)
from pykraft.storage.verification_guard import SENTINEL, VerificationGuard


class TruncationListener(Protocol):
    """Told around every truncation of a log (Kafka's ``LogManager.truncateTo`` aborts and
    pauses the log's cleaning first, then moves the cleaner checkpoint back)."""

    def before_truncation(self) -> None: ...

    def after_truncation(self, active_segment_base_offset: int) -> None: ...


class UnifiedLog:
    """A partition log's rules over any segment store (see the module docstring)."""

    # Invariant: log_start_offset <= high_watermark <= log_end_offset.

    def __init__(
        self,
        store: SegmentStore,
        *,
        log_start_offset: int,
        leader_epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager,
        load_report: RecoveryReport,
    ) -> None:
        self.store = store
        self._log_start_offset = log_start_offset
        self._high_watermark = log_start_offset
        self.leader_epoch_cache = leader_epoch_cache
        # An epoch entry is written without fsync (``LeaderEpochCache.assign``): it is synced
        # before the recovery point can pass it, which is all recovery needs.
        store.before_flush = self._before_flush
        self._unsynced_directory: Callable[[], None] | None = None  # sync_before_first_flush
        self.producer_state = producer_state
        self.load_report = load_report
        self.corruptions = CorruptionReports()
        self.truncation_listener: TruncationListener | None = None
        # Snapshots taken at a roll, unsynced until its flush (``prepare_rolled_flush``).
        self._snapshot_syncs: list[Callable[[], None]] = []

    @classmethod
    def loaded(
        cls,
        store: SegmentStore,
        log_start_offset: int,
        leader_epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager,
        load_report: RecoveryReport,
    ) -> Self:
        """A loaded store's log, its producer state rebuilt from snapshot plus replay."""
        log = cls(
            store,
            log_start_offset=log_start_offset,
            leader_epoch_cache=leader_epoch_cache,
            producer_state=producer_state,
            load_report=load_report,
        )
        rebuild_txn_indexes(
            store,
            producer_state.snapshots,
            store.directory,
            load_report.recovered_segments,
            log_start_offset,
        )
        log._rebuild_producer_state()
        return log

    # ------------------------------------------------------------------ offsets

    @property
    def directory(self) -> Path:
        return self.store.directory

    @property
    def config(self) -> LogConfig:
        return self.store.config

    @property
    def log_end_offset(self) -> int:
        return self.store.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self.store.recovery_point

    @property
    def segments(self) -> tuple[SegmentView, ...]:
        return tuple(self.store.segments)

    @property
    def active_segment(self) -> SegmentView:
        return self.store.active_segment

    @property
    def size_in_bytes(self) -> int:
        return self.store.size_in_bytes

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, log end] (Kafka's rule); markers
        below it are replicated, so the last stable offset may move with it."""
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark_updated(self._high_watermark)
        return self._high_watermark

    @property
    def first_unstable_offset(self) -> int | None:
        """Kafka ``firstUnstableOffset``: the producer state's, never below the log start."""
        offset = self.producer_state.first_unstable_offset()
        return None if offset is None else max(offset, self._log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """Kafka ``lastStableOffset``: the first unstable offset when below the high watermark,
        else the high watermark. Invariant: log start <= LSO <= high watermark."""
        first_unstable = self.first_unstable_offset
        if first_unstable is not None and first_unstable < self._high_watermark:
            return first_unstable
        return self._high_watermark

    # ------------------------------------------------------------------ append

    def append_as_leader(
        self,
        batch: bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        """Validate, assign offsets from the log end, stamp ``leader_epoch``, write.

        Raises a ``LogError`` subclass (or ``CorruptRecordError``) and writes nothing when
        any batch is bad; returns the original offsets for a duplicate producer retry.
        ``verification_guard``: None when the append asks for no transaction verification
        (Kafka's ``transaction.partition.verification.enable`` off, or not a client's write);
        else the guard its verification got (``SENTINEL`` when none was needed), which a
        transactional batch outside an open transaction must match (INVALID_TXN_STATE).
        """
        latest = self.leader_epoch_cache.latest_epoch
        if leader_epoch < 0 or (latest is not None and leader_epoch < latest):
            raise StaleLeaderEpochError(
                f"leader epoch {leader_epoch} is below the log's latest epoch {latest}"
            )
        batches = validate_leader_batches(
            batch,
            max_message_bytes=self.config.max_message_bytes,
            segment_bytes=self.config.segment_bytes,
            origin=origin,
            compacted_topic_partition=self.store.directory.name if self.config.compact else None,
        )
        first_offset = self.log_end_offset
        checked = check_producers(
            self.producer_state.last_entry,
            batches,
            first_offset,
            origin,
            verification_entry=self.producer_state.verification_state_entry,
            verification_guard=verification_guard,
        )
        if checked.duplicate is not None:
            return attrs.evolve(checked.duplicate, log_start_offset=self._log_start_offset)
        next_offset = first_offset
        for validated in batches:
            patch_base_offset(batch, validated.position, next_offset)
            patch_partition_leader_epoch(batch, validated.position, leader_epoch)
            next_offset += validated.header.last_offset_delta + 1
        # Recorded before the write, as Kafka's UnifiedLog.append does: a ``flush.messages``
        # flush inside the write syncs the epoch history first (``store.before_flush``), so no
        # batch is ever durable below the recovery point without its epoch.
        self.leader_epoch_cache.write_pending()
        if latest != leader_epoch:
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        try:
            return self._append(batch, batches, first_offset, now_ms, checked.entries)
        except OSError:
            # A failed write leaves no epoch at the log end.
            with contextlib.suppress(OSError):
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            raise

    def append_as_follower(
        self, batches: bytes | bytearray | memoryview, now_ms: int | None = None
    ) -> LogAppendInfo:
        """Append replicated batches with the leader's offsets and epochs.

        The data must continue the log exactly; an incomplete last batch is ignored (see
        ``storage.log_validator``). Batches are split across segments as rolls require.
        """
        validated = validate_follower_batches(batches, log_end_offset=self.log_end_offset)
        first_offset = self.log_end_offset
        if not validated:
            return append_info(
                [], first_offset, log_start_offset=self._log_start_offset, valid_bytes=0
            )
        self.leader_epoch_cache.write_pending()
        latest = self.leader_epoch_cache.latest_epoch
        for item in validated:
            epoch = item.header.partition_leader_epoch
            if epoch >= 0 and epoch != latest:
                self.leader_epoch_cache.assign(epoch, item.header.base_offset)
                latest = self.leader_epoch_cache.latest_epoch
        view = memoryview(batches)
        try:
            # One write per segment the batches go to: usually one for the whole fetch.
            for chunk in segment_sized_chunks(validated, self.config.segment_bytes):
                start = chunk[0].position
                end = chunk[-1].position + chunk[-1].header.size_in_bytes
                max_timestamp = max([item.header.max_timestamp for item in chunk], default=-1)
                self._write(
                    view[start:end],
                    chunk,
                    chunk[0].header.base_offset,
                    max_timestamp,
                    chunk[-1].header.last_offset,
                    now_ms,
                    leader=True,
                    buffer_start=start,
                )
        except OSError:
            # Epochs were recorded for batches that are not all written: keep only the log's.
            with contextlib.suppress(OSError):
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            raise
        return follower_append_info(validated, log_start_offset=self._log_start_offset)

    def _append(
        self,
        buffer: bytes | bytearray | memoryview,
        batches: list[ValidatedBatch],
        first_offset: int,
        now_ms: int | None,
        entries: list[ProducerStateEntry | None],
    ) -> LogAppendInfo:
        """Write a leader's batches, their offsets assigned from ``first_offset`` on, and the
        producer ``entries`` ``check_producers`` made of them."""
        info = append_info(
            batches, first_offset, log_start_offset=self._log_start_offset, valid_bytes=len(buffer)
        )
        last = info.last_offset
        self._write(buffer, batches, first_offset, info.max_timestamp, last, now_ms, entries)
        return info

    def _write(
        self,
        buffer: bytes | bytearray | memoryview,
        batches: list[ValidatedBatch],
        first_offset: int,
        max_timestamp: int,
        last_offset: int,
        now_ms: int | None,
        producer_entries: list[ProducerStateEntry | None] | None = None,
        *,
        leader: bool = False,
        buffer_start: int = 0,
    ) -> None:
        """Roll if due, write ``buffer``, fold the batches into producer state.

        ``leader``: the batches keep the leader's offsets (a follower's append), which may
        leave gaps where the leader's cleaner removed batches; else they follow each other
        from ``first_offset``. ``buffer_start``: where ``buffer`` begins in the data the
        batches' positions count in. ``producer_entries``: each batch's producer entry once
        written, when ``check_producers`` worked them out (a leader's append)."""
        clock = self.active_segment.created_ms if now_ms is None else now_ms
        if self.store.should_roll(len(buffer), max_timestamp, last_offset, clock):
            # Kafka maybeRoll: roll(Some(firstOffset)), so a follower's batch past a gap wider
            # than a segment's relative offsets opens a segment of its own
            self.roll(clock, batches[0].header.base_offset if leader else None)
        appended: list[AppendedBatch] = []
        next_offset = first_offset
        for item in batches:
            header = item.header
            end = header.last_offset if leader else next_offset + header.last_offset_delta
            appended.append(
                AppendedBatch(
                    item.position - buffer_start,
                    header.batch_length + LOG_OVERHEAD,
                    end,
                    header.max_timestamp,
                )
            )
            next_offset = end + 1
        self.store.append(buffer, appended)  # an OSError here has changed nothing
        # Producer state follows the write, as in Kafka's UnifiedLog.append: updated before
        # it, a failed write would answer the producer's retry as a duplicate (issue 9).
        # A batch without a producer id only moves the map's end offset, which the last batch
        # (always folded in) moves past them all: no per-batch call for plain data.
        entries = producer_entries or [None] * len(batches)
        written_batches = [
            (item.header, end - item.header.last_offset_delta, end, item.marker, entry)
            for item, (_, _, end, _), entry in zip(batches, appended, entries, strict=True)
            if item.header.producer_id != NO_PRODUCER_ID or end == next_offset - 1
        ]
        apply_appended(self.producer_state, self.store, written_batches)

    def roll(self, now_ms: int, base_offset: int | None = None) -> None:
        """Start a new active segment at the log end, or at ``base_offset`` when past it (no-op
        while the active one is empty); producer state is snapshotted at the log end."""
        active = self.active_segment
        if active.size or (base_offset is not None and base_offset > active.base_offset):
            sync = self.producer_state.take_snapshot(self.log_end_offset, durable=False)
            if sync is not None:
                self._snapshot_syncs.append(sync)
            self.store.roll(now_ms, base_offset)

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationGuard:
        """Kafka ``maybeStartTransactionVerification``: ``SENTINEL`` when the producer's
        transaction is already open here (nothing to verify), else the guard of its
        verification in progress (created now if there is none)."""
        if self.producer_state.has_ongoing_transaction(producer_id):
            return SENTINEL
        state = self.producer_state
        return state.maybe_create_verification_state_entry(
            producer_id, sequence, epoch, now_ms
        ).guard

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        """Kafka ``verificationGuard``: the guard in progress, else ``SENTINEL``."""
        entry = self.producer_state.verification_state_entry(producer_id)
        return SENTINEL if entry is None else entry.guard

    # ------------------------------------------------------------------ read

    def read(
        self, offset: int, max_bytes: int, upper_bound: int, min_one_batch: bool = True
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``offset``, all below ``upper_bound``.

        At most ``max_bytes`` — except that with ``min_one_batch`` the first batch comes
        whole even when larger (Kafka's minOneMessage). Raises OffsetOutOfRangeError outside
        [log start, log end]; at or above ``upper_bound`` returns nothing.
        """
        end = self.log_end_offset
        if not self._log_start_offset <= offset <= end:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, end)
        if max_bytes < 0:
            raise ValueError(f"max_bytes {max_bytes} is negative")
        upper = min(upper_bound, end)
        if offset >= upper:
            return FetchDataInfo(LogOffsetMetadata(offset), (), offset)
        info = self.store.read(offset, max_bytes, upper, min_one_batch)
        if offset >= self.recovery_point:
            return info  # checked on append; recovery re-checks it after a crash
        checked, corrupt = self.store.verify(info, offset, self.recovery_point)
        if corrupt is None:
            return checked
        self.corruptions.report(corrupt)
        if checked.is_empty:
            raise CorruptRecordError("crc", f"{corrupt.path}: {corrupt.reason}", corrupt.position)
        return checked

    def fetch_offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets: the first offset whose record timestamp >= ``timestamp``; also
        EARLIEST (-2), LATEST (-1) and MAX_TIMESTAMP (-3). None when no record qualifies."""
        found = self.store.offset_for_timestamp(
            timestamp, self._log_start_offset, self.log_end_offset
        )
        if found is None:
            return None
        offset, record_timestamp = found
        if offset == self.log_end_offset:
            epoch = self.leader_epoch_cache.latest_epoch
        else:
            epoch = self.leader_epoch_cache.epoch_for_offset(offset)
        return OffsetAndTimestamp(offset, record_timestamp, epoch)

    def collect_aborted_transactions(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``, from the
        indexes of the segment holding ``fetch_offset`` on (Kafka ``LocalLog.read`` with
        ``includeAbortedTxns``: ``collectAbortedTransactions``)."""
        return collect_across_segments(self.segments, fetch_offset, upper_bound_offset)

    def _rebuild_producer_state(self) -> None:
        """Latest snapshot, then replay the batches after it (Kafka rebuildProducerState)."""
        rebuild_producer_state(
            self.producer_state, self.store, self._log_start_offset, self.log_end_offset
        )

    # ------------------------------------------------------------------ truncation and deletion

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset >= ``offset``; True if anything went.

        A batch straddling ``offset`` goes whole, so the log may end below ``offset``.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        if self.segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        with self._truncating():
            self._truncate_to(offset)
        return True

    @contextlib.contextmanager
    def _truncating(self) -> Iterator[None]:
        listener = self.truncation_listener
        if listener is None:
            yield
            return
        listener.before_truncation()
        try:
            yield
        finally:
            listener.after_truncation(self.active_segment.base_offset)

    def _truncate_to(self, offset: int) -> None:
        self.store.truncate_to(offset)
        end = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(end)
        self._log_start_offset = min(self._log_start_offset, end)
        self._high_watermark = min(self._high_watermark, end)
        self._rebuild_producer_state()
        # The replay completes the transactions it finds as unreplicated: those whose marker is
        # below the high watermark are not (Kafka's truncateTo updates the high watermark after
        # the rebuild when it reaches the log end), or the LSO would stay behind them.
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """Delete everything; the log restarts empty at ``offset`` (a follower far behind)."""
        if offset < 0:
            raise ValueError(f"cannot start the log at negative offset {offset}")
        created_ms = self.active_segment.created_ms if now_ms is None else now_ms
        with self._truncating():
            self.store.truncate_fully_and_start_at(offset, created_ms)
            self._log_start_offset = self._high_watermark = offset
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully_and_start_at(offset)

    def delete_records(self, offset: int) -> int:
        """Kafka ``maybeIncrementLogStartOffset`` (DeleteRecords on a leader, or a follower
        following the leader's): advance the log start to ``offset``, at most the high
        watermark; the segments wholly below it go at the next retention check
        (``delete_old_segments``). Returns the log start offset."""
        if offset > self._high_watermark or offset < 0:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._high_watermark)
        self._maybe_increment_log_start_offset(offset)
        return self._log_start_offset

    def delete_old_segments(self, now_ms: int) -> RetentionDecision:
        """Retention by log start, then — only when ``cleanup.policy`` contains ``delete`` —
        by ``retention.bytes`` and ``retention.ms`` (Kafka ``UnifiedLog.deleteOldSegments``)."""
        return self._apply_retention(now_ms, self.config.cleanup_policy)

    def update_config(self, config: LogConfig) -> LogConfig:
        """A topic config changed (Kafka ``UnifiedLog.updateConfig``): retention, rolls and
        appends use ``config`` now, existing segments keep their index settings. Returns the
        old config."""
        old, self.store.config = self.store.config, config
        return old

    def _apply_retention(
        self, now_ms: int, cleanup_policy: frozenset[CleanupPolicy]
    ) -> RetentionDecision:
        infos = [
            SegmentInfo(segment.base_offset, segment.size, segment.largest_timestamp_ms())
            for segment in self.segments
        ]
        decision = decide_retention(
            infos,
            log_start_offset=self._log_start_offset,
            high_watermark=self._high_watermark,
            now_ms=now_ms,
            cleanup_policy=cleanup_policy,
            retention_ms=self.config.retention_ms,
            retention_bytes=self.config.retention_bytes,
        )
        if decision.deletions:
            self.store.delete_segments(decision.base_offsets)
            self._maybe_increment_log_start_offset(decision.log_start_offset)
        return decision

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        self.producer_state.on_high_watermark_updated(self._high_watermark)
        self.store.advance_recovery_point(offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.on_log_start_offset_incremented(offset)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)

    # ------------------------------------------------------------------ durability and lifecycle

    def sync_before_first_flush(self, sync: Callable[[], None]) -> None:
        """Run ``sync`` once, before the recovery point first moves: a new partition directory's
        entry in its log dir (Kafka KAFKA-3968, apache/kafka#10680: flushed at the first flush,
        since an fsync per created partition made creating thousands of them too slow). Until
        then nothing of the log is durable, so losing the whole directory loses no more."""
        self._unsynced_directory = sync

    def _before_flush(self) -> None:
        """What must be durable before the recovery point moves (the store calls it)."""
        if self._unsynced_directory is not None:
            self._unsynced_directory()
            self._unsynced_directory = None
        self._sync_snapshots()
        self.leader_epoch_cache.flush()

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync up to ``up_to_offset`` (default: the log end); moves the recovery point."""
        self._sync_snapshots()
        self.store.flush(up_to_offset)

    def _sync_snapshots(self) -> None:
        syncs, self._snapshot_syncs = self._snapshot_syncs, []
        for sync in syncs:
            sync()

    def prepare_rolled_flush(self) -> RolledFlush | None:
        """The flush of the segments rolled since the last one, to ``run`` on any thread
        (Kafka's "flush-log" task); None when nothing was rolled. It syncs first what
        ``_before_flush`` would inline — the directory's entry, the producer snapshots taken
        at the rolls, the epoch history. They count as synced only once this flush completes:
        a flush on the loop meanwhile syncs them itself, and one that never completes
        (cancelled at shutdown, failed) leaves them to the next flush or ``close``."""
        flush = self.store.prepare_rolled_flush()
        if flush is None:
            return None
        directory, snapshots = self._unsynced_directory, list(self._snapshot_syncs)
        epochs = self.leader_epoch_cache.prepare_flush()
        first = [sync for sync in (directory, epochs and epochs[0]) if sync is not None]
        flush.syncs[:0] = [*first, *snapshots]

        def synced() -> None:
            if directory is not None and self._unsynced_directory is directory:
                self._unsynced_directory = None
            done = {id(sync) for sync in snapshots}
            self._snapshot_syncs = [s for s in self._snapshot_syncs if id(s) not in done]
            if epochs is not None:
                self.leader_epoch_cache.synced(epochs[1])

        flush.after.append(synced)
        return flush

    def complete_rolled_flush(self, flush: RolledFlush) -> None:
        """``flush`` ran: the recovery point moves (unless a truncation came between)."""
        for after in flush.after:
            after()
        self.store.complete_rolled_flush(flush)

    def flush_rolled(self) -> bool:
        """Flush segments rolled since the last flush, on this thread."""
        flush = self.prepare_rolled_flush()
        if flush is None:
            return False
        flush.run()
        self.complete_rolled_flush(flush)
        return True

    def close(self) -> None:
        """Snapshot producer state, flush, trim indexes and release files (clean shutdown)."""
        self.producer_state.take_snapshot(self.log_end_offset)
        self._sync_snapshots()
        self.store.close()

    def close_handlers(self) -> None:
        """Release files without writing anything (log dir failed, or a simulated crash)."""
        self.store.close_handlers()
