"""A log dir in memory: the simulation's ``LogDirStore``, with the same crash rule as its disks.

``MemoryLogDir`` outlives the ``LogManager``s opened on it, as a directory outlives a process.
It holds one ``storage.memory_disk.MemoryDisk`` per partition directory, the offset checkpoints
as last written, the clean-shutdown marker and the directory id. Kafka writes the checkpoints
and the marker atomically with fsync, and fsyncs the directory after creating, renaming or
removing a partition, so all of that is durable at once here; ``crash`` (power loss) drops
only what each partition's ``MemoryDisk.crash`` drops: its unflushed bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pykraft.storage.log_dir_store import Item, Loaded
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.topic_partition import TopicPartition


class MemoryLogDir:
    """``storage.log_dir_store.LogDirStore`` in memory; ``path`` is a name only."""

    def __init__(self, path: Path, directory_id: str) -> None:
        self._path = path
        self._directory_id = directory_id
        self.disks: dict[str, MemoryDisk] = {}
        self.checkpoints: dict[str, dict[TopicPartition, int]] = {}
        self.clean_shutdown_marker = False
        self.clean_shutdown_broker_epoch: int | None = None
        self._unique_ids = 0

    @property
    def path(self) -> Path:
        return self._path

    def create(self) -> None:
        pass  # it exists from construction

    def directory_id(self) -> str:
        return self._directory_id

    def has_clean_shutdown_marker(self) -> bool:
        return self.clean_shutdown_marker

    def write_clean_shutdown_marker(self, broker_epoch: int) -> None:
        self.clean_shutdown_marker = True
        self.clean_shutdown_broker_epoch = broker_epoch

    def read_clean_shutdown_broker_epoch(self) -> int | None:
        return self.clean_shutdown_broker_epoch if self.clean_shutdown_marker else None

    def remove_clean_shutdown_marker(self) -> None:
        self.clean_shutdown_marker = False

    def read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        return dict(self.checkpoints.get(name, {}))

    def write_checkpoint(self, name: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.checkpoints[name] = dict(offsets)

    def directory_names(self) -> list[str]:
        return sorted(self.disks)

    def partition_store(self, name: str) -> MemoryDisk:
        disk = self.disks.get(name)
        if disk is None:
            disk = self.disks[name] = MemoryDisk(self._path / name)
        return disk

    def sync(self) -> None:
        pass  # every change is durable at once

    def rename(self, name: str, new_name: str) -> None:
        assert new_name not in self.disks, f"{new_name} exists in {self._path}"
        self.disks[new_name] = self.disks.pop(name)

    def remove(self, name: str) -> None:
        self.disks.pop(name, None)

    def unique_id(self) -> str:
        self._unique_ids += 1
        return f"{self._unique_ids:032x}"

    def load_all(
        self, load: Callable[[Item], Loaded], items: Sequence[Item], threads: int
    ) -> list[Loaded]:
        return [load(item) for item in items]

    def crash(self) -> None:
        """Power loss: every partition keeps only its flushed bytes (``MemoryDisk.crash``)."""
        for disk in self.disks.values():
            disk.crash()
