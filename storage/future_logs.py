"""Future replicas: a partition's copy being built in another log dir (KIP-113).

Kafka's ``LogManager`` keeps ``futureLogs`` beside ``currentLogs``: AlterReplicaLogDirs creates
the future log in the destination dir as ``<topic>-<p>.<uuid>-future``
(``UnifiedLog.logFutureDirName``), ``ReplicaAlterLogDirsThread`` fills it from the current log,
and ``LogManager.replaceCurrentWithFutureLog`` swaps it in. This module holds the future logs
and their directories; ``LogManager`` owns the swap, since it touches the current logs too.

At start-up a ``-future`` directory left by a move the restart interrupted is loaded again as
the partition's future log (Kafka's ``loadLog`` puts it in ``futureLogs``), so the copy resumes
once the partition is hosted again; a future log whose partition has no current log in any dir
is kept too, as Kafka does (the broker drops it when the metadata says the replica is not ours).
At most one future log per partition: a second one found at start-up is a ``LogDirError``, as
Kafka's "Duplicate log directories found" ``IllegalStateException``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_dir_store import LogDirStore
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import (
    FUTURE_DIR_SUFFIX,
    TopicPartition,
    delete_dir_name,
    is_future_dir,
)

logger = logging.getLogger(__name__)


class FutureLogError(Exception):
    """Two future logs for one partition (Kafka: duplicate log directories)."""


def future_dir_name(topic_partition: TopicPartition, unique_id: str) -> str:
    """``<topic>-<p>.<uuid>-future`` (Kafka ``UnifiedLog.logFutureDirName``)."""
    if not unique_id or not unique_id.isalnum():
        raise ValueError(f"unique id {unique_id!r} must be non-empty and alphanumeric")
    return f"{topic_partition.dir_name()}.{unique_id}{FUTURE_DIR_SUFFIX}"


@dataclass(frozen=True)
class FutureLog:
    log: PartitionLog
    log_dir: Path
    name: str  # the directory's name inside ``log_dir``


class FutureLogs:
    def __init__(
        self, stores: Mapping[Path, LogDirStore], config_for: Callable[[str], LogConfig]
    ) -> None:
        self._stores = stores
        self._config_for = config_for
        # Invariant: at most one future log per partition.
        self._futures: dict[TopicPartition, FutureLog] = {}

    @property
    def logs(self) -> Mapping[TopicPartition, FutureLog]:
        return dict(self._futures)

    def get(self, tp: TopicPartition) -> FutureLog | None:
        return self._futures.get(tp)

    def load_dir(self, store: LogDirStore, now_ms: int, problems: list[str]) -> None:
        """Open every ``-future`` directory of ``store`` (start-up)."""
        for name in sorted(store.directory_names()):
            if not is_future_dir(name):
                continue
            try:
                tp = TopicPartition.parse_dir_name(name)
            except ValueError as error:
                problems.append(f"skipping {store.path / name}: {error}")
                continue
            if tp in self._futures:
                raise FutureLogError(
                    f"duplicate future log directories for {tp}: "
                    f"{self._futures[tp].log_dir / self._futures[tp].name} and {store.path / name}"
                )
            log = PartitionLog.open(
                store.partition_store(name), self._config_for(tp.topic), now_ms=now_ms
            )
            self._futures[tp] = FutureLog(log, store.path, name)
            logger.info("loaded the future log of %s in %s", tp, store.path)

    def create(self, tp: TopicPartition, log_dir: Path, now_ms: int) -> PartitionLog:
        """An empty future log for ``tp`` in ``log_dir``, or the one already there."""
        existing = self._futures.get(tp)
        if existing is not None:
            assert existing.log_dir == log_dir, f"{tp} already moves to {existing.log_dir}"
            return existing.log
        store = self._stores[log_dir]
        name = future_dir_name(tp, store.unique_id())
        log = PartitionLog.open(
            store.partition_store(name), self._config_for(tp.topic), now_ms=now_ms
        )
        store.sync()
        self._futures[tp] = FutureLog(log, log_dir, name)
        return log

    def pop(self, tp: TopicPartition) -> FutureLog | None:
        """Forget ``tp``'s future log without touching its files (the swap renames them)."""
        return self._futures.pop(tp, None)

    def drop(self, tp: TopicPartition) -> bool:
        """Delete ``tp``'s future log (a cancelled move; Kafka ``removeFutureLocalReplica``)."""
        future = self._futures.pop(tp, None)
        if future is None:
            return False
        future.log.close_handlers()
        store = self._stores[future.log_dir]
        doomed = delete_dir_name(tp, store.unique_id())
        store.rename(future.name, doomed)
        store.remove(doomed)
        return True

    def forget_dir(self, log_dir: Path) -> list[TopicPartition]:
        """``log_dir`` went offline: its future logs are gone (their files released)."""
        gone = sorted(tp for tp, future in self._futures.items() if future.log_dir == log_dir)
        for tp in gone:
            future = self._futures.pop(tp)
            with contextlib.suppress(OSError):
                future.log.close_handlers()
        return gone

    def close_all(self) -> None:
        for future in self._futures.values():
            future.log.close()
