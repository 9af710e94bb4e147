"""The log cleaner's manager (Kafka's ``LogCleaner`` and the file half of ``LogCleanerManager``):
which log to clean next, the ``cleaner-offset-checkpoint`` of each log dir, and what a failed
cleaning means.

``clean_filthiest(now_ms)`` does one round of Kafka's ``CleanerThread.doWork``: it summarises
every log whose ``cleanup.policy`` contains ``compact`` (on segment files), picks the filthiest
with ``storage.cleaner_policy.grab_filthiest_compacted_log``, cleans it (``storage.cleaner``)
and records the end of what it cleaned as the log's first dirty offset in its log dir's
``cleaner-offset-checkpoint`` (Kafka's text format, ``storage.checkpoints``). It returns None
when no log is cleanable; the caller then backs off ``log.cleaner.backoff.ms``.

A cleaning that fails on bad data marks its partition uncleanable for the life of the process
(Kafka's ``markPartitionUncleanable``) and the others go on; one that fails on I/O takes the
log dir offline (the log manager's log-dir failure handling); a partition deleted or
replaced under the cleaning is simply dropped. ``CleaningAbortedError`` (shutdown) propagates.

The log manager calls the ``storage.cleaner_hooks.CleanerHooks`` (Kafka's
``LogCleanerManager.abortAndPauseCleaning`` / ``resumeCleaning`` / ``maybeTruncateCheckpoint``
/ ``abortCleaning``) on the event loop: a paused partition is not chosen, and a cleaning of it
in progress stops at its next batch or before its next swap (``LogChangedError``) — Kafka
waits for the cleaning to stop; here the swap and the checkpoint update, both on the event
loop, check that nothing paused, truncated, deleted or replaced the log since the cleaning
started. A partition with a future log (a move between log dirs) is not cleaned either.

Threads: ``run_on_log`` carries every look at the logs' state (see ``storage.cleaner``).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from pykraft.storage.checkpoints import (
    CheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from pykraft.storage.cleaner import (
    Cleaner,
    CleanerStats,
    CleaningAbortedError,
    LogChangedError,
    call_here,
    segment_summary,
)
from pykraft.storage.cleaner_hooks import CleanerHooks
from pykraft.storage.cleaner_offset_map import (
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_IO_BUFFER_LOAD_FACTOR,
    offset_map_capacity,
)
from pykraft.storage.cleaner_policy import LogSummary, LogToClean, grab_filthiest_compacted_log
from pykraft.storage.local_log import LocalLog
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"  # Kafka's LogCleanerManager name

logger = logging.getLogger(__name__)


@attrs.frozen
class CleanerConfig:
    """Kafka's ``CleanerConfig`` (broker properties ``log.cleaner.*``), Kafka's defaults."""

    enable: bool = True  # log.cleaner.enable
    num_threads: int = 1  # log.cleaner.threads
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE  # log.cleaner.dedupe.buffer.size
    io_buffer_load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR
    max_io_bytes_per_second: float = math.inf  # log.cleaner.io.max.bytes.per.second
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms


class LogSource(Protocol):
    """What the cleaner reads of ``storage.log_manager.LogManager``."""

    cleaner: CleanerHooks | None

    @property
    def logs(self) -> Mapping[TopicPartition, PartitionLog]: ...

    def log_dir_of(self, tp: TopicPartition) -> Path | None: ...

    def has_future_log(self, tp: TopicPartition) -> bool: ...

    def handle_log_dir_failure(self, log_dir: Path, reason: str) -> list[TopicPartition]: ...

    @property
    def online_dirs(self) -> tuple[Path, ...]: ...


@attrs.frozen
class CleaningResult:
    topic_partition: TopicPartition
    stats: CleanerStats


@attrs.frozen
class _Chosen:
    to_clean: LogToClean
    log: PartitionLog
    aborts: int  # the partition's abort count when chosen


class LogCleaner:
    """Rounds of cleaning over a ``LogSource`` (see the module docstring)."""

    def __init__(
        self,
        config: CleanerConfig,
        source: LogSource,
        *,
        check_done: Callable[[int], None] | None = None,
        run_on_log: Callable[[Callable[[], Any]], Any] = call_here,
    ) -> None:
        self.config = config
        self._source = source
        self._run_on_log = run_on_log
        capacity = offset_map_capacity(
            config.dedupe_buffer_size, config.num_threads, config.io_buffer_load_factor
        )
        extra: dict[str, Any] = {} if check_done is None else {"check_done": check_done}
        self._cleaner = Cleaner(capacity, run_on_log=run_on_log, **extra)
        self.uncleanable: dict[TopicPartition, str] = {}
        self._paused: dict[TopicPartition, int] = {}  # Kafka LogCleaningPaused(count)
        # Bumped by every abort: a cleaning that started before one is stale.
        self._aborts: dict[TopicPartition, int] = {}
        # For the metrics (Kafka's LogCleanerManager dirtiestLogCleanableRatio and the last
        # cleaning's CleanerStats): set by each round.
        self.max_dirty_ratio = 0.0
        self.last_stats: CleanerStats | None = None
        self._checkpoints: dict[TopicPartition, int] = {}
        self._online_dirs = source.online_dirs
        for log_dir in source.online_dirs:
            self._checkpoints.update(_read_checkpoint(log_dir))
        source.cleaner = self

    # ------------------------------------------------------------------ the log manager's hooks

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Kafka ``abortAndPauseCleaning``: a cleaning of ``tp`` in progress is dropped, none
        starts until as many ``resume`` calls."""
        self._paused[tp] = self._paused.get(tp, 0) + 1
        self._aborts[tp] = self._aborts.get(tp, 0) + 1

    def resume(self, tp: TopicPartition) -> None:
        """Kafka ``resumeCleaning``."""
        count = self._paused.get(tp, 0)
        assert count > 0, f"cleaning of {tp} is not paused"
        if count == 1:
            del self._paused[tp]
        else:
            self._paused[tp] = count - 1

    def maybe_truncate_checkpoint(self, tp: TopicPartition, offset: int) -> None:
        """Kafka ``maybeTruncateCheckpoint``: a first dirty offset past ``offset`` (the log was
        truncated below it) moves back to ``offset``, on disk too."""
        checkpoint = self._checkpoints.get(tp)
        if checkpoint is not None and checkpoint > offset:
            self._checkpoints[tp] = offset
            self._write_checkpoints(self._current_dirs())

    def forget(self, tp: TopicPartition) -> None:
        """The partition was deleted (Kafka ``abortCleaning`` and ``updateCheckpoints`` with
        its entry removed): a log created again under its name starts dirty from its start."""
        self._paused.pop(tp, None)
        self.uncleanable.pop(tp, None)
        if self._checkpoints.pop(tp, None) is not None:
            self._write_checkpoints(self._current_dirs())

    def is_paused(self, tp: TopicPartition) -> bool:
        return tp in self._paused or self._source.has_future_log(tp)

    def _still_current(self, tp: TopicPartition, log: PartitionLog, aborts: int) -> bool:
        """No abort, pause, deletion or replacement of ``tp`` since its cleaning started."""
        return (
            self._aborts.get(tp, 0) == aborts
            and not self.is_paused(tp)
            and self._source.logs.get(tp) is log
        )

    def _current_dirs(self) -> dict[TopicPartition, Path]:
        dirs = {tp: self._source.log_dir_of(tp) for tp in self._source.logs}
        return {tp: d for tp, d in dirs.items() if d is not None}

    # ------------------------------------------------------------------ rounds

    @property
    def checkpoints(self) -> Mapping[TopicPartition, int]:
        """Each log's first dirty offset as the cleaner last recorded it."""
        return dict(self._checkpoints)

    def uncleanable_partitions_count(self) -> dict[Path, int]:
        """Uncleanable partitions per online log dir, 0s included (Kafka's
        ``uncleanable-partitions-count`` gauge per ``logDirectory``). Read on the event loop."""
        counts = dict.fromkeys(self._source.online_dirs, 0)
        for tp in self.uncleanable:
            log_dir = self._source.log_dir_of(tp)
            if log_dir in counts:
                counts[log_dir] += 1
        return counts

    def clean_filthiest(self, now_ms: int) -> CleaningResult | None:
        """One round: clean the filthiest cleanable log at wall time ``now_ms``."""
        chosen: _Chosen | None = self._run_on_log(lambda: self._choose(now_ms))
        if chosen is None:
            return None
        tp, log, aborts = chosen.to_clean.topic_partition, chosen.log, chosen.aborts
        try:
            stats = self._cleaner.clean(
                log,
                chosen.to_clean,
                now_ms,
                still_current=lambda: self._still_current(tp, log, aborts),
            )
        except CleaningAbortedError:
            raise
        except LogChangedError as changed:
            logger.info("cleaning %s dropped: %s", tp, changed)
            return None
        except Exception as error:  # Kafka's LogCleaningException: this log only
            self._run_on_log(functools.partial(self._on_failure, tp, log, aborts, error))
            return None
        if stats.end_offset <= chosen.to_clean.first_dirty_offset:
            return None  # nothing past the first dirty offset to map: back off, do not spin
        if not self._run_on_log(lambda: self._commit(tp, log, aborts, stats.end_offset)):
            logger.info("cleaning %s dropped: its log changed after the last swap", tp)
            return None
        self.last_stats = stats
        logger.info(
            "cleaned %s up to offset %d: %d of %d records kept, %d -> %d bytes",
            tp,
            stats.end_offset,
            stats.records_kept,
            stats.records_read,
            stats.bytes_read,
            stats.bytes_written,
        )
        return CleaningResult(tp, stats)

    def _choose(self, now_ms: int) -> _Chosen | None:
        """The log to clean, if any, its checkpoints brought up to date first (on the event
        loop: the log manager's maps and the checkpoint files change there)."""
        logs, summaries, dirs_of = self._summaries()
        gone = set(self._checkpoints) - set(dirs_of)  # deleted: Kafka drops their entries
        for tp in gone:
            del self._checkpoints[tp]
        paused = frozenset(tp for tp in logs if self.is_paused(tp))
        choice = grab_filthiest_compacted_log(
            summaries, self._checkpoints, now_ms, skip=frozenset(self.uncleanable) | paused
        )
        self.max_dirty_ratio = choice.max_dirty_ratio
        for tp, offset in choice.checkpoints_to_reset:
            self._checkpoints[tp] = offset
        if gone or choice.checkpoints_to_reset:
            self._write_checkpoints(dirs_of)
        if choice.chosen is None:
            return None
        tp = choice.chosen.topic_partition
        return _Chosen(choice.chosen, logs[tp], self._aborts.get(tp, 0))

    def _on_failure(
        self, tp: TopicPartition, log: PartitionLog, aborts: int, error: Exception
    ) -> None:
        """A cleaning failed (on the event loop). A log deleted, moved or truncated under it
        fails with whatever its closed files raise: nothing to do then. An I/O error takes the
        log dir offline, as Kafka's ``LogCleaner.cleanLog`` does on an ``IOException``
        (``LogDirFailureChannel.maybeAddOfflineLogDir``): a swap cut short leaves files only
        the next load repairs. Anything else marks the partition uncleanable."""
        if not self._still_current(tp, log, aborts):
            return
        log_dir = self._source.log_dir_of(tp)
        if isinstance(error, OSError) and log_dir is not None:
            logger.error("cleaning %s failed on I/O, taking %s offline: %r", tp, log_dir, error)
            self._source.handle_log_dir_failure(log_dir, f"cleaning {tp}: {error!r}")
            return
        logger.warning("cleaning %s failed, marking it uncleanable: %r", tp, error)
        self.uncleanable[tp] = repr(error)

    def _commit(self, tp: TopicPartition, log: PartitionLog, aborts: int, end: int) -> bool:
        """Record the new first dirty offset unless the log changed since the cleaning began
        (a truncation moved the checkpoint back meanwhile): on the event loop."""
        if not self._still_current(tp, log, aborts):
            return False
        self._checkpoints[tp] = end
        self._write_checkpoints(self._current_dirs())
        return True

    def _summaries(
        self,
    ) -> tuple[dict[TopicPartition, PartitionLog], list[LogSummary], dict[TopicPartition, Path]]:
        """The compacted logs on segment files, their summaries, and every log's dir (on the
        event loop: the log manager's maps change there)."""
        self._online_dirs = self._source.online_dirs
        dirs_of: dict[TopicPartition, Path] = {}
        for tp in self._source.logs:
            log_dir = self._source.log_dir_of(tp)
            if log_dir is not None and log_dir in self._source.online_dirs:
                dirs_of[tp] = log_dir
        logs = {
            tp: log
            for tp, log in self._source.logs.items()
            if log.config.compact and isinstance(log.store, LocalLog) and tp in dirs_of
        }
        summaries = [
            LogSummary(
                topic_partition=tp,
                config=log.config,
                log_start_offset=log.log_start_offset,
                log_end_offset=log.log_end_offset,
                last_stable_offset=log.last_stable_offset,
                segments=tuple(segment_summary(s) for s in log.local_log.segments),
            )
            for tp, log in logs.items()
        ]
        return logs, summaries, dirs_of

    def _write_checkpoints(self, dirs_of: Mapping[TopicPartition, Path]) -> None:
        """Rewrite ``cleaner-offset-checkpoint`` in every online log dir."""
        by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self._online_dirs}
        for tp, offset in self._checkpoints.items():
            if dirs_of.get(tp) in by_dir:
                by_dir[dirs_of[tp]][tp] = offset
        for log_dir, offsets in by_dir.items():
            write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, offsets)


def _read_checkpoint(log_dir: Path) -> dict[TopicPartition, int]:
    path = log_dir / CLEANER_OFFSET_CHECKPOINT
    if not path.exists():
        return {}
    try:
        return read_offset_checkpoint(path)
    except CheckpointError as error:
        # Kafka logs and starts over: every compacted log is dirty from its start again.
        logger.warning("%s; the cleaner starts from each log's start", error)
        return {}
