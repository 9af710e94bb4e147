"""The leader-epoch cache's file: ``leader-epoch-checkpoint`` under the pure cache.

``storage.leader_epoch_cache`` holds Kafka's rules as pure functions over a tuple of entries and
``LeaderEpochCache``, which keeps the tuple and writes it to a checkpoint after every change.
This module gives it its file: ``LeaderEpochFileCache`` loads the checkpoint through the same
``assign`` rule Kafka uses on load and rewrites it atomically after every change. (Kafka flushes
truncations asynchronously to avoid fsync latency under a lock; we flush synchronously, which is
simpler and never leaves stale entries.)
"""

from __future__ import annotations

from pathlib import Path

from pykraft.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)
from pykraft.storage.leader_epoch_cache import Entries, LeaderEpochCache, assign_epoch


def load_entries(path: Path) -> Entries:
    """Read a leader-epoch-checkpoint, folding its lines through ``assign_epoch`` as Kafka does."""
    entries: Entries = ()
    for line, (epoch, start_offset) in enumerate(read_leader_epoch_checkpoint(path), start=3):
        try:
            entries = assign_epoch(entries, epoch, start_offset)
        except ValueError as error:
            raise CheckpointError(path, line, str(error)) from None
    return entries


class EpochCheckpointFile:
    """The ``leader-epoch-checkpoint`` file, rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> Entries:
        return load_entries(self.path)

    def write(self, entries: Entries) -> None:
        write_leader_epoch_checkpoint(self.path, ((e.epoch, e.start_offset) for e in entries))


class LeaderEpochFileCache(LeaderEpochCache):
    """A partition's epoch history, persisted to ``leader-epoch-checkpoint`` on every change."""

    def __init__(self, path: Path) -> None:
        """``path`` is the checkpoint file, or the partition directory that holds it."""
        self.path = path / LEADER_EPOCH_CHECKPOINT if path.is_dir() else path
        super().__init__(EpochCheckpointFile(self.path))
