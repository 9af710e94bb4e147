"""Loading one log dir at start-up (Kafka's ``LogManager.loadLogs``), over a log-dir store.

``read_log_dir`` decides what to load: whether the last shutdown was clean (the
``.kafka_cleanshutdown`` marker), the three offset checkpoints (a malformed one reads as empty,
so everything is recovered, as Kafka does), and the live partition directories — ``-delete``
dirs are removed (a deletion the crash interrupted), ``-future`` and ``-stray`` dirs are left
alone, a name that is no partition is a problem, not a failure. ``load_partitions`` then opens
each partition as a ``PartitionLog`` with its checkpointed recovery point, log start offset and
high watermark, on the store's threads; a partition that cannot be opened is returned as the
reason, for ``LogManager`` to list it offline. ``LogManager`` removes the marker afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
)
from pykraft.storage.index import CorruptIndexError
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_dir_store import STRAY_DIR_SUFFIX, LogDirStore
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition, is_deleted_dir, is_future_dir

# What loading one damaged partition may raise; anything else is a bug and propagates.
PARTITION_LOAD_ERRORS = (OSError, ValueError, CorruptIndexError)


@attrs.frozen
class DirCheckpoints:
    recovery_points: dict[TopicPartition, int]
    high_watermarks: dict[TopicPartition, int]
    log_start_offsets: dict[TopicPartition, int]


@attrs.frozen
class LogDirContents:
    """What ``read_log_dir`` found."""

    had_clean_shutdown: bool
    checkpoints: DirCheckpoints
    partitions: list[tuple[TopicPartition, str]]  # (partition, directory name)


def _read_checkpoint(
    store: LogDirStore, name: str, problems: list[str]
) -> dict[TopicPartition, int]:
    """A malformed checkpoint reads as empty (recover everything), as Kafka does."""
    try:
        return store.read_checkpoint(name)
    except ValueError as error:  # storage.checkpoints.CheckpointError
        problems.append(str(error))
        return {}


def _partition_dirs(store: LogDirStore, problems: list[str]) -> list[tuple[TopicPartition, str]]:
    """Live partition directories; finishes deletions, leaves ``-future`` dirs alone."""
    found: list[tuple[TopicPartition, str]] = []
    for name in store.directory_names():
        if is_future_dir(name) or name.endswith(STRAY_DIR_SUFFIX):
            continue
        if is_deleted_dir(name):
            store.remove(name)
            continue
        try:
            found.append((TopicPartition.parse_dir_name(name), name))
        except ValueError as error:
            problems.append(f"skipping {store.path / name}: {error}")
    return found


def read_log_dir(store: LogDirStore, problems: list[str]) -> LogDirContents:
    """The marker, the checkpoints and the partitions of ``store``; ``OSError`` when the dir
    cannot be read. What is odd but harmless is appended to ``problems``."""
    clean = store.has_clean_shutdown_marker()
    checkpoints = DirCheckpoints(
        _read_checkpoint(store, RECOVERY_POINT_CHECKPOINT, problems),
        _read_checkpoint(store, REPLICATION_CHECKPOINT, problems),
        _read_checkpoint(store, LOG_START_OFFSET_CHECKPOINT, problems),
    )
    return LogDirContents(clean, checkpoints, _partition_dirs(store, problems))


def load_partitions(
    store: LogDirStore,
    contents: LogDirContents,
    config_for: Callable[[str], LogConfig],
    threads: int,
    now_ms: int,
) -> Sequence[tuple[TopicPartition, PartitionLog | str]]:
    """Open every partition of ``contents``; a reason instead of a log for one that cannot be
    opened."""
    checkpoints = contents.checkpoints

    def load(item: tuple[TopicPartition, str]) -> tuple[TopicPartition, PartitionLog | str]:
        tp, name = item
        try:
            log = PartitionLog.open(
                store.partition_store(name),
                config_for(tp.topic),
                recovery_point=checkpoints.recovery_points.get(tp, 0),
                now_ms=now_ms,
                log_start_offset=checkpoints.log_start_offsets.get(tp, 0),
                had_clean_shutdown=contents.had_clean_shutdown,
            )
        except PARTITION_LOAD_ERRORS as error:
            where = store.path / name
            return tp, f"cannot be loaded from {where}: {type(error).__name__}: {error}"
        log.update_high_watermark(checkpoints.high_watermarks.get(tp, 0))
        return tp, log

    return store.load_all(load, contents.partitions, max(1, threads))
