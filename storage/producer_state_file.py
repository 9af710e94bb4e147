"""Producer snapshots as files: ``<offset, 20 digits>.snapshot`` in the partition directory.

``storage.producer_state.ProducerStateManager`` decides what is snapshotted, loaded and deleted,
and keeps the snapshots in any ``SnapshotStore``; this module is the store Kafka uses, files
written atomically (``storage.atomic_file``), and ``ProducerStateFileManager``, the manager on it.
"""

from __future__ import annotations

import re
from pathlib import Path

from pykraft.storage.atomic_file import sync_file, write_atomically
from pykraft.storage.producer_append import PRODUCER_ID_EXPIRATION_MS
from pykraft.storage.producer_entry import ProducerStateEntry
from pykraft.storage.producer_snapshot import decode_snapshot, snapshot_file
from pykraft.storage.producer_state import ProducerStateManager

_SNAPSHOT_NAME = re.compile(r"([0-9]{20})\.snapshot")


def list_snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the ``<20 digits>.snapshot`` files in ``directory``, ascending."""
    try:
        names = [path.name for path in directory.iterdir()]
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for name in names if (m := _SNAPSHOT_NAME.fullmatch(name)))


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    return decode_snapshot(path.read_bytes())


def delete_snapshot(directory: Path, offset: int) -> None:
    snapshot_file(directory, offset).unlink(missing_ok=True)


class SnapshotDirectory:
    """Snapshots as ``<offset>.snapshot`` files (Kafka's ``ProducerStateManager`` layout)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def offsets(self) -> list[int]:
        return list_snapshot_offsets(self.directory)

    def read(self, offset: int) -> list[ProducerStateEntry]:
        return read_snapshot(snapshot_file(self.directory, offset))

    def write(self, offset: int, data: bytes, *, durable: bool = True) -> None:
        write_atomically(snapshot_file(self.directory, offset), data, durable=durable)

    def sync(self, offset: int) -> None:
        sync_file(snapshot_file(self.directory, offset), gone_is_synced=True)

    def delete(self, offset: int) -> None:
        delete_snapshot(self.directory, offset)


class ProducerStateFileManager(ProducerStateManager):
    """The producer state of a partition directory, its snapshots in files there."""

    def __init__(
        self, directory: Path, producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS
    ) -> None:
        super().__init__(
            directory, producer_id_expiration_ms, snapshots=SnapshotDirectory(directory)
        )
