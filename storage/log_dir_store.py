"""The log-dir store: what ``LogManager`` needs from one entry of ``log.dirs``.

``LogManager`` makes the decisions — which partitions to load, each one's recovery point, high
watermark and log start from the checkpoints, clean or unclean, where a new partition goes,
which checkpoints to write and when — and a ``LogDirStore`` keeps the files beside the
partitions: it lists the partition directories, says where a partition's segment store lives,
reads and writes the named offset checkpoints, keeps the clean-shutdown marker and the
directory id, and renames and removes partition directories. Two stores obey it, as two obey
``storage.segment_store.SegmentStore``:

* ``storage.file_log_dir.FileLogDir``: a real directory, byte for byte Kafka's files
  (``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``log-start-offset-checkpoint``, ``.kafka_cleanshutdown``, ``meta.properties``), and the
  thread pool of ``num.recovery.threads.per.data.dir``. Partitions open on segment files.
* ``storage.memory_log_dir.MemoryLogDir``: the simulation's log dir, a ``MemoryDisk`` per
  partition, with the same crash rule as ``MemoryDisk``.

Contract, for both: checkpoints and the marker are replaced atomically and durably (Kafka writes
them to a temp file, fsyncs, renames, fsyncs the directory), so a crash leaves the old or the
new file, never a torn one; a rename, a removal and a partition's creation are durable once
``sync`` returns; what a crash loses is only what the partitions' own stores lose (unflushed
segment bytes). ``OSError`` is an I/O failure (the dir goes offline); a malformed checkpoint is
a ``ValueError`` (``storage.checkpoints.CheckpointError``), read as empty, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from pykraft.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from pykraft.storage.memory_disk import MemoryDisk

STRAY_DIR_SUFFIX = "-stray"  # Kafka's LocalLog.StrayDirSuffix

Item = TypeVar("Item")
Loaded = TypeVar("Loaded")


class LogDirStore(Protocol):
    """One log dir (see the module docstring for the contract)."""

    @property
    def path(self) -> Path:
        """The dir's name: how ``LogManager`` and its callers refer to it."""
        ...

    def create(self) -> None:
        """Create the dir (and its parents) when absent."""
        ...

    def directory_id(self) -> str:
        """The dir's ``directory.id`` (KIP-858), added to ``meta.properties`` when missing; an
        id for this process only when there is no ``meta.properties``."""
        ...

    def has_clean_shutdown_marker(self) -> bool: ...

    def write_clean_shutdown_marker(self, broker_epoch: int) -> None:
        """Durably, holding ``broker_epoch`` (``storage.clean_shutdown``, KIP-966)."""
        ...

    def read_clean_shutdown_broker_epoch(self) -> int | None:
        """The epoch the marker holds; None when there is no marker or it holds none."""
        ...

    def remove_clean_shutdown_marker(self) -> None:
        """Durably; a missing marker is fine."""
        ...

    def read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        """The named offset checkpoint; a missing one has no entries. Raises ``ValueError``
        when malformed, ``OSError`` when unreadable."""
        ...

    def write_checkpoint(self, name: str, offsets: Mapping[TopicPartition, int]) -> None: ...

    def directory_names(self) -> list[str]:
        """The names of the dir's subdirectories, sorted."""
        ...

    def partition_store(self, name: str) -> Path | MemoryDisk:
        """Where the partition directory ``name`` keeps its segments, for
        ``PartitionLog.open`` (which creates it when absent)."""
        ...

    def sync(self) -> None:
        """Make creations, renames and removals durable."""
        ...

    def rename(self, name: str, new_name: str) -> None:
        """Rename a partition directory atomically and durably."""
        ...

    def remove(self, name: str) -> None:
        """Remove a directory and everything under it; errors are ignored (a later start
        finishes the job)."""
        ...

    def unique_id(self) -> str:
        """An alphanumeric id for a ``-delete`` or ``-stray`` name (Kafka: a random uuid)."""
        ...

    def load_all(
        self, load: Callable[[Item], Loaded], items: Sequence[Item], threads: int
    ) -> list[Loaded]:
        """``[load(item) for item in items]``, on up to ``threads`` threads where the store has
        any (``num.recovery.threads.per.data.dir``): opening logs at start-up, closing them at
        shutdown."""
        ...
