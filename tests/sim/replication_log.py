"""The replication sim's disks: the shipped ``LogManager`` on ``MemoryLogDir``s, and two crashes.

Every broker's log dir is a ``storage.memory_log_dir.MemoryLogDir`` holding a ``MemoryDisk``
per partition, and each process of the broker opens it with the shipped
``storage.log_manager.LogManager.open``: the same start-up (clean-shutdown marker, the
recovery-point, replication and log-start-offset checkpoints, the shipped recovery of
``PartitionLog.open`` on a ``MemoryDisk``), partition creation and deletion, checkpoints and
clean shutdown as in production. Every replica is the shipped ``PartitionLog`` (``UnifiedLog``
decisions over ``MemorySegmentStore``). Nothing here decides what a log holds or how it loads.

``BrokerDisk`` is the crash double: one broker's ``MemoryLogDir`` (it outlives the broker's
processes) and the ``LogManager`` of the broker's current process. Both crashes release every
log without writing (``close_handlers``, as a dying process does). A power loss then crashes
the log dir (``MemoryLogDir.crash``: only flushed segment bytes remain; the checkpoints, the
marker, the epoch checkpoint and truncations were durable at once); a kill -9 keeps the page
cache, so nothing is lost. The restart's load runs at once: nothing touches the disk in between,
so what it finds is what a later start would find. A clean exit is the shipped
``LogManager.shutdown``, then ``restart``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager, LogManagerSettings
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.memory_log_dir import MemoryLogDir
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import parse_header
from pykraft.storage.records import SimpleRecord, build_batch, iter_records
from pykraft.storage.topic_partition import TopicPartition

PartitionKey = tuple[str, int]
# Small segments, so that rolls, several segments per log and the crash rule's cut across
# segments happen within a run (a sim batch is ~70-100 bytes).
SIM_LOG_CONFIG = LogConfig(segment_bytes=4096)
# Reading a whole log for the checks: larger than any sim log.
MAX_LOG_READ_BYTES = 1 << 30


@attrs.frozen
class StoredBatch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    values: tuple[str, ...]


def _text(value: bytes | None) -> str:
    """A record's value as the checks compare it: the sim's values are text; the coordinators'
    records and the markers' values are binary, kept distinct by their escapes."""
    return (value or b"").decode("utf-8", "backslashreplace")


def client_batch(values: Sequence[str]) -> bytearray:
    """What a producer sends: one v2 batch, offsets and epoch unset."""
    return bytearray(build_batch([SimpleRecord(value=value.encode()) for value in values]))


def stored_batches(log: PartitionLog, from_offset: int = 0) -> Iterator[StoredBatch]:
    """The batches holding offsets >= ``from_offset``, read through ``PartitionLog.read``."""
    end = log.log_end_offset
    if from_offset >= end:
        return
    data = log.read(max(from_offset, log.log_start_offset), MAX_LOG_READ_BYTES, end).read_bytes()
    position = 0
    while position < len(data):
        header = parse_header(data, position)
        values = tuple(_text(record.value) for record in iter_records(data, position))
        yield StoredBatch(
            header.base_offset, header.last_offset, header.partition_leader_epoch, values
        )
        position += header.size_in_bytes


def records_from(log: PartitionLog, offset: int) -> Iterator[tuple[int, int, str]]:
    """``(offset, leader_epoch, value)`` from ``offset`` to the log end."""
    for batch in stored_batches(log, offset):
        for index, value in enumerate(batch.values):
            if batch.base_offset + index >= offset:
                yield batch.base_offset + index, batch.leader_epoch, value


def records(log: PartitionLog) -> list[tuple[int, int, str]]:
    """Every record as ``(offset, leader_epoch, value)``."""
    return list(records_from(log, 0))


def batch_at(log: PartitionLog, offset: int) -> StoredBatch:
    batch = next(stored_batches(log, offset), None)
    assert batch is not None and batch.base_offset <= offset, f"no batch at {offset} in {log}"
    return batch


def describe(log: PartitionLog) -> str:
    epochs = [(entry.epoch, entry.start_offset) for entry in log.leader_epoch_cache.entries]
    return (
        f"log(end={log.log_end_offset}, hw={log.high_watermark}, "
        f"recovery point={log.recovery_point}, epochs={epochs})"
    )


def _unflushed(disk: MemoryDisk) -> list[tuple[int, int]]:
    """``(base offset, last offset)`` of every batch a power loss would take now."""
    return [
        (header.base_offset, header.last_offset)
        for segment in disk.segments
        for position, header in segment.headers
        if position >= segment.flushed_size
    ]


@functools.cache
def _topic_partition(key: PartitionKey) -> TopicPartition:
    return TopicPartition(*key)


class BrokerDisk:
    """One broker's log dir and its current process's ``LogManager`` (see the module
    docstring)."""

    def __init__(self, broker_id: int = 0, settings: LogManagerSettings | None = None) -> None:
        self.store = MemoryLogDir(Path(f"/sim/broker-{broker_id}"), f"sim-dir-{broker_id}")
        self.settings = settings or LogManagerSettings()
        self.log_manager = self._open(now_ms=0)

    def _open(self, now_ms: int) -> LogManager:
        return LogManager.open([self.store], SIM_LOG_CONFIG, now_ms, settings=self.settings)

    @property
    def logs(self) -> dict[PartitionKey, PartitionLog]:
        return {(tp.topic, tp.partition): log for tp, log in self.log_manager.logs.items()}

    def log(self, key: PartitionKey, now_ms: int = 0) -> PartitionLog:
        """The partition's log, created empty when absent."""
        topic_partition = _topic_partition(key)
        log = self.log_manager.get_log(topic_partition)  # the checks ask after every event
        return log or self.log_manager.get_or_create_log(topic_partition, now_ms)

    def unflushed(self, key: PartitionKey) -> list[tuple[int, int]]:
        disk = self.store.disks.get(TopicPartition(*key).dir_name())
        return _unflushed(disk) if disk is not None else []

    def crash(self, *, lose_unflushed: bool, now_ms: int) -> None:
        """kill -9 (the page cache survives) or power loss, then the restart's load."""
        for log in self.log_manager.logs.values():
            log.close_handlers()
        if lose_unflushed:
            self.store.crash()
        self.log_manager = self._open(now_ms)

    def restart(self, now_ms: int) -> None:
        """The restart's load after a clean exit (the process ran ``LogManager.shutdown``)."""
        self.log_manager = self._open(now_ms)
