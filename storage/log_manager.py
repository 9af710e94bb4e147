"""Every partition log under ``log.dirs`` (Kafka's ``LogManager``).

Theory of operation
-------------------
Every file beside the partitions is read and written through a log-dir store
(``storage.log_dir_store.LogDirStore``): ``storage.file_log_dir.FileLogDir`` in production
(``LogManager.open`` on paths), ``storage.memory_log_dir.MemoryLogDir`` in the simulation.
This module decides; it does no I/O of its own.

Start-up (``LogManager.open``): for each log dir, note whether ``.kafka_cleanshutdown`` is
there, read the three offset checkpoints (``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint`` = high watermarks, ``log-start-offset-checkpoint``), finish
deleting ``*-delete`` directories, and open every ``topic-partition`` directory as a
``PartitionLog`` — on the store's threads (``num.recovery.threads.per.data.dir``), since opening
is mostly file I/O and CRC checks, both of which release the GIL (``storage.log_dir_load``).
Only then is the marker removed, so a crash from here on is seen as unclean.

Running: ``maybe_run_periodic(now_ms)`` does whatever is due and returns the next deadline; the
caller owns the clock and the loop (no threads, no sleeping). Due work: flushing segments that
rolled, flushing logs past ``flush.ms`` (Kafka default: never — rely on the OS and replication),
retention every ``log.retention.check.interval.ms``, recovery points and log start offsets every
``log.flush.offset.checkpoint.interval.ms`` / ``log.flush.start.offset.checkpoint.interval.ms``.
High watermarks are checkpointed when the replica layer says (``checkpoint_high_watermarks``;
Kafka's ``ReplicaManager`` schedules that task, every
``replica.high.watermark.checkpoint.interval.ms``). These three periodic checkpoints take their
offsets here and, once the broker called ``sync_off_loop``, are written on a
``checkpoint_writer``'s thread (``storage.checkpoint_writer``): a write fsyncs, and under load
that stalled every request for up to 134 ms. Without one (the simulation, tools) they are
written inline; so are ``checkpoint_all``'s, after any write of the same file under way.
``sync_off_loop`` also moves the flush of rolled segments to a thread of its own
(``storage.rolled_flusher``), as Kafka's "flush-log" task runs on its scheduler: the loop moves
the recovery point once the thread's fsyncs are done.

Topic configs: a log opens with its topic's ``LogConfig`` when ``topic_configs`` names one,
else the broker default. The broker learns topic overrides from the metadata only after the logs
have loaded, so ``get_or_create_log(tp, now_ms, config)`` and ``update_topic_config`` hand a
topic's config to its open logs (Kafka's ``LogManager.updateTopicConfig``).

Failures (issue 9; Kafka's ``LogDirFailureChannel``): a partition that cannot be loaded at
all (an unreadable file or directory, damage recovery cannot handle) is left out and listed in
``offline_partitions`` with the reason — one bad partition never stops the broker. A log dir
that cannot be read at start-up, or whose I/O fails later (``handle_log_dir_failure``: an
``OSError`` on append, flush or checkpoint), goes offline: its logs' files are released, its
partitions become offline, nothing more is written there, and ``on_log_dir_failure`` tells the
broker (``ReplicaManager.handleLogDirFailure``). ``get_or_create_log`` never recreates an
offline partition and places new ones only on online dirs; ``KafkaStorageError`` (an
``OSError``, so callers answer KAFKA_STORAGE_ERROR) says why it cannot.

Directory ids (KIP-858): every log dir has a ``directory.id`` in its ``meta.properties``, a
Kafka uuid that names the dir to the controller when it fails (heartbeat ``OfflineLogDirs``).
``open`` reads it, or adds one to a ``meta.properties`` that has none, as Kafka's
``MetaPropertiesEnsemble`` does on start-up; a dir without ``meta.properties`` (tests, tools)
or that cannot be read gets an id for this process only.

Shutdown: close every log (flush, producer snapshot, trim indexes; each log dir's logs on
``num.recovery.threads.per.data.dir`` threads, as Kafka does), write all checkpoints with
recovery point = log end, then write the clean-shutdown marker.

Deleting a partition renames its directory to ``<topic>-<partition>.<uuid>-delete`` (atomic, so
a crash mid-delete never leaves a half-deleted live partition), then removes it.

Moving a replica between log dirs (KIP-113): ``future_logs`` (``storage.future_logs``) holds
the ``-future`` copies; ``create_future_log`` starts one, ``replace_current_with_future_log``
swaps a caught-up copy in as Kafka's ``replaceCurrentWithFutureLog`` does — the future directory
is renamed to the partition's name first, then the current one to ``-delete`` and removed, so a
crash between leaves two complete copies (start-up refuses with Kafka's duplicate-directories
error) and never none.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from pykraft.storage.checkpoint_writer import CheckpointWriter
from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
)
from pykraft.storage.clean_shutdown import NO_BROKER_EPOCH, previous_broker_epoch
from pykraft.storage.cleaner_hooks import CleanerHooks, CleanerTruncationListener
from pykraft.storage.directory_id import new_directory_id
from pykraft.storage.file_log_dir import FileLogDir
from pykraft.storage.future_logs import FutureLogs
from pykraft.storage.log_config import LONG_MAX, LogConfig
from pykraft.storage.log_dir_load import load_partitions, read_log_dir
from pykraft.storage.log_dir_store import STRAY_DIR_SUFFIX, LogDirStore
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.rolled_flusher import RolledFlusher
from pykraft.storage.segment_store import RecoveryReport, RolledFlush
from pykraft.storage.topic_partition import TopicPartition, delete_dir_name

logger = logging.getLogger(__name__)


class LogDirError(Exception):
    """A log dir cannot be loaded (duplicate partition, unreadable directory, ...)."""


class KafkaStorageError(OSError):
    """The partition or its log dir is offline (Kafka's ``KafkaStorageException``)."""


LogDirFailureListener = Callable[[Path, Sequence[TopicPartition]], None]


@attrs.frozen
class LogManagerSettings:
    """Broker-level settings with Kafka's names and defaults."""

    # Kafka 4.0's default (KIP-1030; 1 before): threads per log dir loading logs at start-up
    # and closing them at shutdown.
    num_recovery_threads_per_data_dir: int = 2
    log_flush_scheduler_interval_ms: int = LONG_MAX
    log_retention_check_interval_ms: int = 300_000
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_start_offset_checkpoint_interval_ms: int = 60_000
    # Kafka's producer.id.expiration.check.interval.ms: how often idle producers (and lingering
    # KIP-890 verification entries) older than producer.id.expiration.ms are forgotten.
    producer_id_expiration_check_interval_ms: int = 600_000


@attrs.frozen
class NewLog:
    """A log to create (``LogManager.plan_new_logs``)."""

    tp: TopicPartition
    log_dir: Path
    config: LogConfig


class LogManager:
    def __init__(
        self,
        stores: Sequence[LogDirStore],
        default_config: LogConfig,
        settings: LogManagerSettings,
        topic_configs: Mapping[str, LogConfig],
        now_ms: int,
    ) -> None:
        assert stores, "at least one log dir"
        self._stores = {store.path: store for store in stores}
        assert len(self._stores) == len(stores), "log dirs must have distinct paths"
        self.log_dirs = tuple(self._stores)
        self.default_config = default_config
        self.settings = settings
        self.topic_configs = dict(topic_configs)
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._last_flush_ms: dict[TopicPartition, int] = {}
        self.load_reports: dict[TopicPartition, RecoveryReport] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        # The broker epoch each dir's clean-shutdown marker held at start-up (KIP-966).
        self._clean_shutdown_epochs: dict[Path, int | None] = {}
        self.problems: list[str] = []
        self.offline_partitions: dict[TopicPartition, str] = {}  # partition -> why
        self.offline_dirs: dict[Path, str] = {}  # log dir -> why
        # Invariant: every log dir has an id once ``open`` returns.
        self.directory_ids: dict[Path, str] = {}
        self.on_log_dir_failure: LogDirFailureListener | None = None
        self.cleaner: CleanerHooks | None = None  # set by storage.log_cleaner.LogCleaner
        # Set by the broker (``sync_off_loop``): checkpoints and rolled segments are synced
        # off its event loop.
        self.checkpoint_writer: CheckpointWriter[tuple[Path, str]] | None = None
        self._flusher: RolledFlusher[TopicPartition] | None = None
        self.future_logs = FutureLogs(self._stores, self.config_for)
        # Kafka's preferredLogDirs: where AlterReplicaLogDirs asked a replica not hosted yet to
        # be created; used once, by the next get_or_create_log of the partition.
        self.preferred_log_dirs: dict[TopicPartition, Path] = {}
        self._shut_down = False
        self._next_due: dict[str, int] = {
            name: now_ms + interval for name, interval, _ in self._tasks()
        }

    @classmethod
    def open(
        cls,
        log_dirs: Sequence[Path | LogDirStore],
        default_config: LogConfig,
        now_ms: int,
        *,
        settings: LogManagerSettings | None = None,
        topic_configs: Mapping[str, LogConfig] | None = None,
    ) -> LogManager:
        """Load every partition under ``log_dirs`` (creating the dirs when absent). A path is
        a directory (``FileLogDir``); the simulation passes ``MemoryLogDir``s."""
        stores = [FileLogDir(d) if isinstance(d, Path) else d for d in log_dirs]
        manager = cls(
            stores, default_config, settings or LogManagerSettings(), topic_configs or {}, now_ms
        )
        for store in stores:
            manager._load_dir(store, now_ms)
        return manager

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    # ------------------------------------------------------------------ loading

    def _load_dir(self, store: LogDirStore, now_ms: int) -> None:
        log_dir = store.path
        self.directory_ids[log_dir] = new_directory_id()  # until meta.properties names one
        try:
            store.create()
            self.directory_ids[log_dir] = store.directory_id()
            contents = read_log_dir(store, self.problems)
        except OSError as error:
            # Kafka: a dir that cannot be read at start-up is offline; the others load.
            self._mark_dir_offline(log_dir, f"cannot be read: {error}")
            return
        self.had_clean_shutdown[log_dir] = contents.had_clean_shutdown
        self._clean_shutdown_epochs[log_dir] = store.read_clean_shutdown_broker_epoch()
        for tp, name in contents.partitions:
            if tp in self._logs:
                raise LogDirError(
                    f"duplicate log directories for {tp}: {self._dir_of[tp]} and {log_dir / name}"
                )
        threads = self.settings.num_recovery_threads_per_data_dir
        for tp, loaded in load_partitions(store, contents, self.config_for, threads, now_ms):
            if isinstance(loaded, str):
                logger.error("partition %s is offline: it %s", tp, loaded)
                self.offline_partitions[tp] = loaded
                self._dir_of[tp] = log_dir
                continue
            self._register(tp, loaded, log_dir, now_ms)
            self.load_reports[tp] = loaded.load_report
        self.future_logs.load_dir(store, now_ms, self.problems)
        # Only now: a crash after this point must be recovered on the next start.
        store.remove_clean_shutdown_marker()

    def _register(self, tp: TopicPartition, log: PartitionLog, log_dir: Path, now_ms: int) -> None:
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        self._last_flush_ms[tp] = now_ms
        log.truncation_listener = CleanerTruncationListener(tp, lambda: self.cleaner)

    # ------------------------------------------------------------------ partitions

    @property
    def logs(self) -> Mapping[TopicPartition, PartitionLog]:
        return dict(self._logs)

    def get_log(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.get(tp)

    def has_future_log(self, tp: TopicPartition) -> bool:
        """A move to another log dir is under way (the cleaner leaves the partition alone)."""
        return self.future_logs.get(tp) is not None

    def get_or_create_log(
        self, tp: TopicPartition, now_ms: int, config: LogConfig | None = None
    ) -> PartitionLog:
        """The partition's log, created in the log dir holding the fewest partitions.

        A ``config`` given becomes the topic's (``update_topic_config``), for an existing log
        too: logs load at start-up before the metadata names their topics' overrides, so the
        first caller that knows them (ReplicaManager, on the first image) hands them over here.
        """
        existing = self._logs.get(tp)
        if existing is not None:
            if config is not None:
                self.update_topic_config(tp.topic, config)
            return existing
        if tp in self.offline_partitions:
            raise KafkaStorageError(f"partition {tp} is offline: {self.offline_partitions[tp]}")
        TopicPartition.parse_dir_name(tp.dir_name())  # a clear ValueError for a bad name
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(f"every log dir is offline: cannot create {tp}")
        counts = {log_dir: 0 for log_dir in online}
        for log_dir in self._dir_of.values():
            if log_dir in counts:
                counts[log_dir] += 1
        preferred = self.preferred_log_dirs.pop(tp, None)
        if preferred is not None and preferred in online:
            log_dir = preferred
        else:
            log_dir = min(online, key=lambda d: counts[d])
        if config is not None:
            self.update_topic_config(tp.topic, config)
        store = self._stores[log_dir]
        try:
            log = PartitionLog.open(
                store.partition_store(tp.dir_name()), self.config_for(tp.topic), now_ms=now_ms
            )
            log.sync_before_first_flush(store.sync)
        except OSError as error:  # Kafka: an IOException in getOrCreateLog fails the dir
            self.handle_log_dir_failure(log_dir, f"creating {tp}: {error}")
            raise KafkaStorageError(f"cannot create {tp} in {log_dir}: {error}") from error
        self._register(tp, log, log_dir, now_ms)
        return log

    # Creating logs off the event loop (``broker.new_logs``): the dirs are chosen and the logs
    # registered on the caller's thread; only ``open_new_log``'s file work runs elsewhere.

    def plan_new_logs(self, wanted: Sequence[tuple[TopicPartition, LogConfig]]) -> list[NewLog]:
        """Where each absent, online partition of ``wanted`` goes: the log dir holding the
        fewest, counting those planned before it (as ``get_or_create_log`` chooses). A partition
        with a preferred dir (AlterReplicaLogDirs) is left to ``get_or_create_log``, which takes
        the preference."""
        online = self.online_dirs
        counts = {log_dir: 0 for log_dir in online}
        for log_dir in self._dir_of.values():
            if log_dir in counts:
                counts[log_dir] += 1
        plan: list[NewLog] = []
        for tp, config in wanted:
            if (
                not online
                or tp in self._logs
                or tp in self.offline_partitions
                or tp in self.preferred_log_dirs
            ):
                continue
            TopicPartition.parse_dir_name(tp.dir_name())
            log_dir = min(online, key=lambda d: counts[d])
            counts[log_dir] += 1
            plan.append(NewLog(tp, log_dir, config))
        return plan

    def open_new_log(self, new: NewLog, now_ms: int) -> PartitionLog:
        """Create ``new``'s directory and files. Reads and changes no state of the manager, so
        it may run on another thread; ``adopt_new_log`` then registers the log."""
        store = self._stores[new.log_dir]
        log = PartitionLog.open(store.partition_store(new.tp.dir_name()), new.config, now_ms=now_ms)
        log.sync_before_first_flush(store.sync)
        return log

    def adopt_new_log(self, new: NewLog, log: PartitionLog, now_ms: int) -> bool:
        """Register a log ``open_new_log`` made; False (its files released) when meanwhile its
        dir went offline or the partition got a log, which ``get_or_create_log`` then decides."""
        if new.log_dir not in self.online_dirs or new.tp in self._logs:
            log.close_handlers()
            return False
        self._register(new.tp, log, new.log_dir, now_ms)
        return True

    def update_topic_config(self, topic: str, config: LogConfig) -> list[TopicPartition]:
        """``config`` is ``topic``'s from now on (Kafka ``LogManager.updateTopicConfig``): every
        open log of the topic takes it (``PartitionLog.update_config``), and so does any log of
        the topic created later. Returns the partitions whose config changed.

        A config the topic already has changes nothing and walks no log: every open log holds
        its topic's config (logs open with ``config_for``, and only this method changes one),
        so handing each of a topic's partitions the same config on the first image is one walk
        per topic, not one per partition (a restart with 2,000 partitions spent 0.75 s here)."""
        if self.topic_configs.get(topic) == config:
            return []
        self.topic_configs[topic] = config
        changed = []
        for tp, log in self._logs.items():
            if tp.topic == topic and log.config != config:
                log.update_config(config)
                changed.append(tp)
        return changed

    # ------------------------------------------------------------------ failures

    @property
    def online_dirs(self) -> tuple[Path, ...]:
        return tuple(d for d in self.log_dirs if d not in self.offline_dirs)

    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        return self._dir_of.get(tp)

    def offline_replicas(self) -> dict[str, list[TopicPartition]]:
        """Directory id of each offline log dir -> the partitions that were on it."""
        found: dict[str, list[TopicPartition]] = {
            self.directory_ids[log_dir]: [] for log_dir in self.offline_dirs
        }
        for tp, log_dir in sorted(self._dir_of.items()):
            if log_dir in self.offline_dirs:
                found[self.directory_ids[log_dir]].append(tp)
        return found

    def handle_log_dir_failure(self, log_dir: Path, reason: str) -> list[TopicPartition]:
        """Take ``log_dir`` offline (Kafka ``LogManager.handleLogDirFailure``): release its
        logs' files, make its partitions offline, tell ``on_log_dir_failure``. Returns the
        partitions that went offline now (none when the dir already was)."""
        if log_dir in self.offline_dirs:
            return []
        gone = self._mark_dir_offline(log_dir, reason)
        if self.on_log_dir_failure is not None:
            self.on_log_dir_failure(log_dir, gone)
        return gone

    def _mark_dir_offline(self, log_dir: Path, reason: str) -> list[TopicPartition]:
        logger.error("log dir %s is offline: %s", log_dir, reason)
        self.offline_dirs[log_dir] = reason
        if self.checkpoint_writer is not None:
            self.checkpoint_writer.discard(lambda file: file[0] == log_dir)
        self.future_logs.forget_dir(log_dir)
        gone = sorted(tp for tp, d in self._dir_of.items() if d == log_dir and tp in self._logs)
        for tp in gone:
            with contextlib.suppress(OSError):
                self._logs.pop(tp).close_handlers()
            self._last_flush_ms.pop(tp, None)
            self.offline_partitions[tp] = f"its log dir {log_dir} is offline: {reason}"
        return gone

    def set_aside_offline_partition(self, tp: TopicPartition) -> bool:
        """Rename an unloadable partition's directory to ``<dir>.<uuid>-stray`` (Kafka's
        stray-log name, ``LocalLog.logStrayDirName``) and forget it is offline, so a replica
        can be re-created empty and re-fetched from the leader; the damaged files stay for an
        operator to look at. False when ``tp`` is not offline by itself (its dir is)."""
        log_dir = self._dir_of.get(tp)
        if tp not in self.offline_partitions or tp in self._logs or log_dir is None:
            return False
        if log_dir in self.offline_dirs:
            return False
        store = self._stores[log_dir]
        stray = f"{tp.dir_name()}.{store.unique_id()}{STRAY_DIR_SUFFIX}"
        store.rename(tp.dir_name(), stray)
        logger.warning("set aside the damaged log of %s as %s", tp, log_dir / stray)
        del self.offline_partitions[tp], self._dir_of[tp]
        return True

    def _on_io_error(self, tp: TopicPartition, error: OSError) -> None:
        log_dir = self._dir_of.get(tp)
        if log_dir is not None:
            self.handle_log_dir_failure(log_dir, f"{tp}: {error}")

    # ------------------------------------------------------------------ deletion

    def delete_log(self, tp: TopicPartition) -> bool:
        """Rename the partition's directory to ``...-delete``, then remove it. An offline
        partition on an online dir (it could not be loaded) is deleted the same way."""
        log = self._logs.pop(tp, None)
        log_dir = self._dir_of.get(tp)
        if log is None and (tp not in self.offline_partitions or log_dir in self.offline_dirs):
            return False
        assert log_dir is not None
        if self.cleaner is not None:
            self.cleaner.abort_and_pause(tp)  # Kafka asyncDelete: abortCleaning
        del self._dir_of[tp]
        self.offline_partitions.pop(tp, None)
        self._last_flush_ms.pop(tp, None)
        if log is not None:
            log.close_handlers()
        if self.cleaner is not None:
            self.cleaner.forget(tp)  # its checkpoint entry and pause go with it
        self.future_logs.drop(tp)
        store = self._stores[log_dir]
        doomed = delete_dir_name(tp, store.unique_id())
        store.rename(tp.dir_name(), doomed)
        store.remove(doomed)
        self.checkpoint_all()
        return True

    # ------------------------------------------------------------------ moving between dirs

    def create_future_log(self, tp: TopicPartition, log_dir: Path, now_ms: int) -> PartitionLog:
        """The future log of ``tp`` in ``log_dir`` (Kafka ``getOrCreateLog(isFuture = true)``):
        ``tp`` must have a current log elsewhere and ``log_dir`` be online."""
        assert tp in self._logs, f"{tp} has no current log"
        assert self._dir_of[tp] != log_dir, f"{tp} already lives in {log_dir}"
        if log_dir in self.offline_dirs or self.offline_dirs:
            raise KafkaStorageError(f"cannot create the future log of {tp}: a log dir is offline")
        try:
            return self.future_logs.create(tp, log_dir, now_ms)
        except OSError as error:
            self.handle_log_dir_failure(log_dir, f"creating the future log of {tp}: {error}")
            raise KafkaStorageError(f"cannot create the future log of {tp}: {error}") from error

    def replace_current_with_future_log(self, tp: TopicPartition, now_ms: int) -> PartitionLog:
        """Swap the caught-up future log in (Kafka ``LogManager.replaceCurrentWithFutureLog``);
        returns the partition's log from now on. The caller holds the partition still: nothing
        is appended to either log until this returns."""
        future = self.future_logs.pop(tp)
        current = self._logs.get(tp)
        assert future is not None and current is not None, f"{tp}: nothing to swap"
        assert future.log.log_end_offset == current.log_end_offset, f"{tp}: future not caught up"
        source_dir = self._dir_of[tp]
        future.log.close()
        dest = self._stores[future.log_dir]
        dest.rename(future.name, tp.dir_name())
        log = PartitionLog.open(
            dest.partition_store(tp.dir_name()),
            self.config_for(tp.topic),
            recovery_point=future.log.recovery_point,
            now_ms=now_ms,
            log_start_offset=current.log_start_offset,
            had_clean_shutdown=True,
        )
        log.update_high_watermark(current.high_watermark)
        self._register(tp, log, future.log_dir, now_ms)
        current.close()
        source = self._stores[source_dir]
        doomed = delete_dir_name(tp, source.unique_id())
        source.rename(tp.dir_name(), doomed)
        source.remove(doomed)
        self.checkpoint_all()
        logger.info("%s moved from %s to %s", tp, source_dir, future.log_dir)
        return log

    # ------------------------------------------------------------------ periodic work

    def _tasks(self) -> list[tuple[str, int, Callable[[int], None]]]:
        s = self.settings
        return [
            ("flush", s.log_flush_scheduler_interval_ms, self._flush_due_logs),
            ("retention", s.log_retention_check_interval_ms, self._run_retention),
            (
                "recovery-point",
                s.log_flush_offset_checkpoint_interval_ms,
                lambda now_ms: self.checkpoint_recovery_points(background=True),
            ),
            (
                "log-start-offset",
                s.log_flush_start_offset_checkpoint_interval_ms,
                lambda now_ms: self.checkpoint_log_start_offsets(background=True),
            ),
            (
                "producer-expiration",
                s.producer_id_expiration_check_interval_ms,
                self._remove_expired_producers,
            ),
        ]

    def maybe_run_periodic(self, now_ms: int) -> int:
        """Run the work that is due at ``now_ms``; returns when something is next due.

        An ``OSError`` of one log takes its log dir offline; the rest of the work goes on.
        """
        # Kafka flushes rolled segments asynchronously, right away.
        self._for_each_log(self._flush_rolled)
        for name, interval, run in self._tasks():
            if now_ms >= self._next_due[name]:
                run(now_ms)
                self._next_due[name] = now_ms + interval
        return min(self._next_due.values())

    def _for_each_log(self, work: Callable[[TopicPartition, PartitionLog], object]) -> None:
        for tp, log in list(self._logs.items()):
            if tp not in self._logs:
                continue  # its dir went offline during this pass
            try:
                work(tp, log)
            except OSError as error:
                self._on_io_error(tp, error)

    def _flush_rolled(self, tp: TopicPartition, log: PartitionLog) -> None:
        if self._flusher is None:
            log.flush_rolled()
        else:
            self._flusher.submit(tp, log, functools.partial(self._rolled_flush_done, tp, log))

    def _rolled_flush_done(
        self, tp: TopicPartition, log: PartitionLog, flush: RolledFlush, error: BaseException | None
    ) -> None:
        """On the loop: the recovery point moves, or an ``OSError`` takes the dir offline.
        A log deleted, moved or taken offline meanwhile has nothing left to move. (Shutdown
        runs on its own thread: a completion past this check may still run beside its closes,
        which is harmless, since both only move the recovery point up.)"""
        if self._shut_down or self._logs.get(tp) is not log:
            return
        if error is None:
            log.complete_rolled_flush(flush)
        elif isinstance(error, OSError):
            self._on_io_error(tp, error)
        else:  # a bug: logged; the next tick prepares the flush again
            logger.error("flushing the rolled segments of %s failed", tp, exc_info=error)

    def _flush_due_logs(self, now_ms: int) -> None:
        def flush(tp: TopicPartition, log: PartitionLog) -> None:
            if now_ms - self._last_flush_ms[tp] >= log.config.flush_ms:
                log.flush()
                self._last_flush_ms[tp] = now_ms

        self._for_each_log(flush)

    def _remove_expired_producers(self, now_ms: int) -> None:
        """Kafka's ``LogManager`` "PeriodicProducerExpirationCheck": every log forgets producers
        idle past ``producer.id.expiration.ms`` that are not inside a transaction."""
        self._for_each_log(lambda tp, log: log.producer_state.remove_expired_producers(now_ms))

    def _run_retention(self, now_ms: int) -> None:
        self._for_each_log(lambda tp, log: log.delete_old_segments(now_ms))

    def _checkpoint(
        self, file_name: str, offset_of: Callable[[PartitionLog], int], background: bool
    ) -> None:
        """Take ``file_name``'s offsets of each online dir now; write them now, or on the
        ``checkpoint_writer``'s thread when ``background`` and the broker gave one."""
        writer = self.checkpoint_writer
        for log_dir in self.online_dirs:
            offsets = {
                tp: offset_of(log) for tp, log in self._logs.items() if self._dir_of[tp] == log_dir
            }
            write = functools.partial(self._stores[log_dir].write_checkpoint, file_name, offsets)
            try:
                if writer is None:
                    write()
                elif background:
                    writer.submit((log_dir, file_name), write)
                else:
                    writer.write_now((log_dir, file_name), write)
            except OSError as error:
                self._checkpoint_failed((log_dir, file_name), error)

    def _checkpoint_failed(self, file: tuple[Path, str], error: OSError) -> None:
        log_dir, file_name = file
        self.handle_log_dir_failure(log_dir, f"writing {file_name}: {error}")

    def _background_checkpoint_failed(self, file: tuple[Path, str], error: OSError) -> None:
        """On the loop: a write the worker failed. Once shutdown began (on its own thread),
        ``shutdown`` handles the failures itself."""
        if self._shut_down:
            logger.error("writing checkpoint %s failed during shutdown: %s", file, error)
            return
        self._checkpoint_failed(file, error)

    def sync_off_loop(
        self, call_soon: Callable[[Callable[[], None]], object]
    ) -> CheckpointWriter[tuple[Path, str]]:
        """From now on write the periodic checkpoints on one thread and flush rolled segments
        on another; their outcomes (a failed write takes its dir offline, a flush moves the
        recovery point) come back through ``call_soon`` (the loop's ``call_soon_threadsafe``)."""
        self.checkpoint_writer = CheckpointWriter(call_soon, self._background_checkpoint_failed)
        if self._flusher is not None:
            self._flusher.shutdown()
        self._flusher = RolledFlusher(call_soon)
        return self.checkpoint_writer

    def checkpoint_high_watermarks(self, *, background: bool = False) -> None:
        self._checkpoint(REPLICATION_CHECKPOINT, lambda log: log.high_watermark, background)

    def checkpoint_recovery_points(self, *, background: bool = False) -> None:
        self._checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point, background)

    def checkpoint_log_start_offsets(self, *, background: bool = False) -> None:
        self._checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset, background)

    def checkpoint_all(self) -> None:
        self.checkpoint_high_watermarks()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()

    # ------------------------------------------------------------------ shutdown

    def _close_logs(self) -> None:
        """Close every log, each log dir's on ``num.recovery.threads.per.data.dir`` threads, as
        Kafka's ``LogManager.shutdown`` does ("flushing at shutdown"): a close is mostly fsyncs
        (producer snapshot and its directory, the segment, its indexes), which release the GIL,
        so 10,000 logs close in a fraction of the serial time. Every close has returned before
        this does, and so before any checkpoint or clean-shutdown marker is written. A close
        that fails with an ``OSError`` takes its dir offline afterwards, on this thread (the
        dir gets no marker; its other logs' closes are harmless)."""
        threads = max(1, self.settings.num_recovery_threads_per_data_dir)

        def close(item: tuple[TopicPartition, PartitionLog]) -> OSError | None:
            try:
                item[1].close()
            except OSError as error:
                return error
            return None

        for log_dir, store in self._stores.items():
            logs = [(tp, log) for tp, log in self._logs.items() if self._dir_of[tp] == log_dir]
            for (tp, _), error in zip(logs, store.load_all(close, logs, threads), strict=True):
                if error is not None:
                    self._on_io_error(tp, error)

    def previous_broker_epoch(self) -> int:
        """The registration's PreviousBrokerEpoch (KIP-966): the epoch every log dir's
        clean-shutdown marker held at start-up, else -1 (``storage.clean_shutdown``)."""
        return previous_broker_epoch(
            (self._clean_shutdown_epochs.get(d) for d in self._stores),
            all_dirs_live=len(self.online_dirs) == len(self._stores),
        )

    def shutdown(self, broker_epoch: int = NO_BROKER_EPOCH) -> None:
        """Close every log durably, checkpoint, then mark each log dir cleanly shut down,
        with ``broker_epoch`` in the marker (KIP-966).

        Once only: the logs are forgotten afterwards, so a second call would write empty
        checkpoints over the good ones (the next start would recover every segment and forget
        every high watermark)."""
        if self._shut_down:
            return
        self._shut_down = True
        if self._flusher is not None:  # the closes below flush whatever it did not
            self._flusher.shutdown()
        if self.checkpoint_writer is not None:
            # What it queued is written before the final ones; a failure is handled here.
            for file, error in self.checkpoint_writer.close():
                self._checkpoint_failed(file, error)
        self._close_logs()
        self.future_logs.close_all()
        self.checkpoint_all()
        # An offline dir gets no marker: its logs were not closed cleanly.
        for log_dir in self.online_dirs:
            try:
                self._stores[log_dir].write_clean_shutdown_marker(broker_epoch)
            except OSError as error:
                logger.error("log dir %s: cannot mark a clean shutdown: %s", log_dir, error)
        self._logs.clear()
        self._dir_of.clear()
