"""A partition's log opened on its files or on a simulated disk: ``UnifiedLog`` plus ``open``.

``storage.unified_log.UnifiedLog`` makes every decision (offsets, producer state, epoch entries)
over an injected segment store; this module only opens one. On a partition directory, ``open``
runs Kafka's recovery (``storage.recovery``) and puts the log on ``LocalLog``'s segment files,
the epoch checkpoint file and producer snapshot files — production. On a ``MemoryDisk`` it puts
the same rules on ``MemorySegmentStore`` (faults, and a crash that drops unflushed bytes) — tests
and the simulation.
"""

from __future__ import annotations

from pathlib import Path

# ListOffsets answers moved to storage.fetch_data; their importers still find them here.
from pykraft.storage.fetch_data import OffsetAndTimestamp as OffsetAndTimestamp
from pykraft.storage.local_log import LocalLog
from pykraft.storage.log_config import LogConfig
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.memory_store import load_memory_log
from pykraft.storage.producer_state import ProducerStateManager
from pykraft.storage.producer_state_file import ProducerStateFileManager
from pykraft.storage.recovery import load_log
from pykraft.storage.unified_log import UnifiedLog


class PartitionLog(UnifiedLog):
    """``UnifiedLog`` on segment files or a ``MemoryDisk``."""

    @classmethod
    def open(
        cls,
        directory: Path | MemoryDisk,
        config: LogConfig,
        recovery_point: int = 0,
        now_ms: int = 0,
        *,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
    ) -> PartitionLog:
        """Load (and if needed recover) the log in ``directory``, creating it when absent.

        ``directory`` is a partition directory (segment files, production) or a ``MemoryDisk``
        (the in-memory store: tests and the simulation); the log's rules are the same.
        """
        if isinstance(directory, MemoryDisk):
            memory = load_memory_log(
                directory,
                config,
                recovery_point=recovery_point,
                now_ms=now_ms,
                log_start_offset=log_start_offset,
                had_clean_shutdown=had_clean_shutdown,
            )
            snapshots = directory.snapshots
            producer_state = ProducerStateManager(directory.directory, snapshots=snapshots)
            return cls.loaded(
                memory.store,
                memory.log_start_offset,
                memory.leader_epoch_cache,
                producer_state,
                memory.report,
            )
        loaded = load_log(
            directory,
            config,
            recovery_point=recovery_point,
            now_ms=now_ms,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
        )
        store = LocalLog(directory, config, loaded.segments, loaded.recovery_point)
        return cls.loaded(
            store,
            loaded.log_start_offset,
            loaded.leader_epoch_cache,
            ProducerStateFileManager(directory),
            loaded.report,
        )

    @property
    def local_log(self) -> LocalLog:
        """The segment files (production's store), for tools and tests that look at them."""
        assert isinstance(self.store, LocalLog), f"{self.directory} is not on segment files"
        return self.store
