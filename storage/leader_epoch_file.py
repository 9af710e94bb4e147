"""The leader-epoch cache's file: ``leader-epoch-checkpoint`` behind the pure rules.

``storage.leader_epoch_cache`` holds Kafka's rules as pure functions over a tuple of entries, so
that pure cores (fetchers, the partition state) can use them without reaching the disk. This
module is the thin stateful wrapper: ``LeaderEpochFileCache`` holds the tuple, loads the
checkpoint file through the same ``assign`` rule Kafka uses on load, and rewrites the file
atomically after every change. (Kafka flushes truncations asynchronously to avoid fsync latency
under a lock; we flush synchronously, which is simpler and never leaves stale entries.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)
from storage.leader_epoch_cache import (
    Entries,
    EpochEntry,
    OffsetAndEpoch,
    assign_epoch,
    end_offset_for,
    epoch_entry,
    epoch_for_offset,
    is_valid_history,
    next_epoch,
    previous_entry,
    previous_epoch,
    truncate_from_end,
    truncate_from_start,
)


def load_entries(path: Path) -> Entries:
    """Read a leader-epoch-checkpoint, folding its lines through ``assign_epoch`` as Kafka does."""
    entries: Entries = ()
    for line, (epoch, start_offset) in enumerate(read_leader_epoch_checkpoint(path), start=3):
        try:
            entries = assign_epoch(entries, epoch, start_offset)
        except ValueError as error:
            raise CheckpointError(path, line, str(error)) from None
    return entries


class EpochCheckpoint(Protocol):
    """Where the history is persisted: the checkpoint file, or memory (the simulation)."""

    def read(self) -> Entries: ...

    def write(self, entries: Entries) -> None:
        """Replace the stored history durably and atomically."""
        ...


class EpochCheckpointFile:
    """The ``leader-epoch-checkpoint`` file, rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> Entries:
        return load_entries(self.path)

    def write(self, entries: Entries) -> None:
        write_leader_epoch_checkpoint(self.path, ((e.epoch, e.start_offset) for e in entries))


class LeaderEpochFileCache:
    """A partition's epoch history, persisted to ``leader-epoch-checkpoint`` on every change."""

    def __init__(self, path: Path, *, checkpoint: EpochCheckpoint | None = None) -> None:
        """``path`` is the checkpoint file, or the partition directory that holds it;
        ``checkpoint`` stores the history elsewhere (``path`` then only names it)."""
        if checkpoint is not None:
            self.path, self.checkpoint = path, checkpoint
        else:
            self.path = path / LEADER_EPOCH_CHECKPOINT if path.is_dir() else path
            self.checkpoint = EpochCheckpointFile(self.path)
        self._entries: Entries = self.checkpoint.read()

    @property
    def entries(self) -> Entries:
        return self._entries

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def previous_epoch(self) -> int | None:
        """The epoch before the latest one (Kafka ``previousEpoch()``)."""
        latest = self.latest_entry
        return previous_epoch(self._entries, latest.epoch) if latest else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record ``epoch`` starting at ``start_offset``; True if the history changed."""
        return self._replace(assign_epoch(self._entries, epoch, start_offset))

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> OffsetAndEpoch:
        return end_offset_for(self._entries, requested_epoch, log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        return epoch_for_offset(self._entries, offset)

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        return epoch_entry(self._entries, epoch)

    def previous_entry(self, epoch: int) -> EpochEntry | None:
        return previous_entry(self._entries, epoch)

    def next_epoch(self, epoch: int) -> int | None:
        return next_epoch(self._entries, epoch)

    def truncate_from_end(self, end_offset: int) -> None:
        self._replace(truncate_from_end(self._entries, end_offset))

    def truncate_from_start(self, start_offset: int) -> None:
        self._replace(truncate_from_start(self._entries, start_offset))

    def clear(self) -> None:
        """Forget all history and persist the empty file (Kafka ``clearAndFlush``)."""
        self._entries = ()
        self._write()

    def _replace(self, entries: Entries) -> bool:
        if entries == self._entries:
            return False
        assert is_valid_history(entries), f"epoch history broke its invariant: {entries}"
        self._entries = entries
        self._write()
        return True

    def _write(self) -> None:
        self.checkpoint.write(self._entries)
