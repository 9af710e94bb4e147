"""A log dir on the file system: the production ``LogDirStore``.

The files are Kafka's, byte for byte: the three offset checkpoints (``storage.checkpoints``,
written atomically with fsync), the empty ``.kafka_cleanshutdown`` marker, ``meta.properties``
with its ``directory.id`` (``storage.directory_id``), and one directory per partition holding
its segment files. Loading partitions runs on a thread pool of
``num.recovery.threads.per.data.dir`` threads: opening a log is mostly file reads and CRC
checks, both of which release the GIL.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pykraft.storage.atomic_file import fsync_directory, write_atomically
from pykraft.storage.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from pykraft.storage.clean_shutdown import decode_clean_shutdown, encode_clean_shutdown
from pykraft.storage.directory_id import ensure_directory_id
from pykraft.storage.log_dir_store import Item, Loaded
from pykraft.storage.recovery import CLEAN_SHUTDOWN_FILE
from pykraft.storage.topic_partition import TopicPartition


class FileLogDir:
    """``storage.log_dir_store.LogDirStore`` over the directory ``path``."""

    def __init__(self, path: Path) -> None:
        self._path = path

    @property
    def path(self) -> Path:
        return self._path

    def create(self) -> None:
        self._path.mkdir(parents=True, exist_ok=True)

    def directory_id(self) -> str:
        return ensure_directory_id(self._path)

    def has_clean_shutdown_marker(self) -> bool:
        return (self._path / CLEAN_SHUTDOWN_FILE).exists()

    def write_clean_shutdown_marker(self, broker_epoch: int) -> None:
        write_atomically(self._path / CLEAN_SHUTDOWN_FILE, encode_clean_shutdown(broker_epoch))

    def read_clean_shutdown_broker_epoch(self) -> int | None:
        try:
            return decode_clean_shutdown((self._path / CLEAN_SHUTDOWN_FILE).read_bytes())
        except OSError:
            return None

    def remove_clean_shutdown_marker(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self._path / CLEAN_SHUTDOWN_FILE).unlink()
            fsync_directory(self._path)

    def read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        return read_offset_checkpoint(self._path / name)

    def write_checkpoint(self, name: str, offsets: Mapping[TopicPartition, int]) -> None:
        write_offset_checkpoint(self._path / name, offsets)

    def directory_names(self) -> list[str]:
        return sorted(path.name for path in self._path.iterdir() if path.is_dir())

    def partition_store(self, name: str) -> Path:
        return self._path / name

    def sync(self) -> None:
        fsync_directory(self._path)

    def rename(self, name: str, new_name: str) -> None:
        (self._path / name).rename(self._path / new_name)
        fsync_directory(self._path)

    def remove(self, name: str) -> None:
        shutil.rmtree(self._path / name, ignore_errors=True)

    def unique_id(self) -> str:
        return uuid.uuid4().hex

    def load_all(
        self, load: Callable[[Item], Loaded], items: Sequence[Item], threads: int
    ) -> list[Loaded]:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-recovery") as pool:
            return list(pool.map(load, items))
