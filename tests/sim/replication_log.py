"""The replication sim's disks: the shipped ``PartitionLog`` on ``MemoryDisk``s, and two crashes.

Every partition replica is ``storage.partition_log.PartitionLog.open(MemoryDisk(...))``: the
shipped ``UnifiedLog`` decisions (validation, offsets, epochs, producer state, rolls, truncation)
over the shipped ``MemorySegmentStore``, whose ``MemoryDisk`` holds the bytes, the durable
leader-epoch checkpoint and the producer snapshots. Nothing here decides what a log holds.

``BrokerDisk`` is one broker's log dir; it outlives the broker's processes. It keeps what
``storage.log_manager.LogManager`` keeps beside the partitions — the
``replication-offset-checkpoint`` (high watermarks, written on the broker's timer) and the
clean-shutdown marker — and loads the logs as ``LogManager.open`` does: ``PartitionLog.open``
with whether the last shutdown was clean (the shipped recovery,
``storage.memory_store.load_memory_log``), then the checkpointed high watermark, clamped by
``update_high_watermark``. No ``recovery-point-offset-checkpoint`` is kept: after an unclean
shutdown every segment is recovered (what Kafka does without that file), after a clean one the
log end is the recovery point. ``LogManager`` itself cannot run here: it reads its checkpoints,
``meta.properties`` and partition directories as files under a ``Path``.

The two crashes. Both release every log without writing (``close_handlers``, as a dying
process does). A power loss then crashes every ``MemoryDisk`` (``MemoryDisk.crash``: only
flushed bytes remain; the epoch checkpoint and truncations were durable at once); a kill -9
keeps the page cache, so nothing is lost. The restart's load runs at once: nothing touches the
disk in between, so what it finds is what a later start would find.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from pykraft.storage.log_config import LogConfig
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import parse_header
from pykraft.storage.records import SimpleRecord, build_batch, iter_records

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
        values = tuple((record.value or b"").decode() for record in iter_records(data, position))
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


class BrokerDisk:
    """One broker's log dir: a ``MemoryDisk`` and the open log of each partition, and the
    checkpoints ``LogManager`` keeps (see the module docstring)."""

    def __init__(self) -> None:
        self.disks: dict[PartitionKey, MemoryDisk] = {}
        self.logs: dict[PartitionKey, PartitionLog] = {}
        # replication-offset-checkpoint, as last written.
        self.high_watermark_checkpoint: dict[PartitionKey, int] = {}
        self.clean_shutdown = False

    def log(self, key: PartitionKey, now_ms: int = 0) -> PartitionLog:
        """The partition's log, created empty when absent (``LogManager.get_or_create_log``)."""
        log = self.logs.get(key)
        if log is None:
            disk = self.disks[key] = MemoryDisk(Path(f"{key[0]}-{key[1]}"))
            log = self.logs[key] = PartitionLog.open(disk, SIM_LOG_CONFIG, now_ms=now_ms)
        return log

    def delete(self, key: PartitionKey) -> bool:
        log = self.logs.pop(key, None)
        if log is None:
            return False
        log.close_handlers()
        del self.disks[key]
        return True

    def flush(self) -> None:
        for log in self.logs.values():
            log.flush()

    def checkpoint_high_watermarks(self) -> None:
        """``LogManager.checkpoint_high_watermarks``: the file holds the open logs only."""
        self.high_watermark_checkpoint = {key: log.high_watermark for key, log in self.logs.items()}

    def unflushed(self, key: PartitionKey) -> list[tuple[int, int]]:
        return _unflushed(self.disks[key]) if key in self.disks else []

    def crash(self, *, lose_unflushed: bool, now_ms: int) -> None:
        """kill -9 (the page cache survives) or power loss, then the restart's load."""
        for log in self.logs.values():
            log.close_handlers()
        if lose_unflushed:
            for disk in self.disks.values():
                disk.crash()
        self.clean_shutdown = False
        self._load(now_ms)

    def shutdown(self, now_ms: int) -> None:
        """``LogManager.shutdown`` (close every log, checkpoint, marker), then the restart's
        load."""
        for log in self.logs.values():
            log.close()
        self.checkpoint_high_watermarks()
        self.clean_shutdown = True
        self._load(now_ms)

    def _load(self, now_ms: int) -> None:
        """``LogManager.open`` for this dir: every partition, recovered as needed; the marker
        is removed once loaded, so the next crash is unclean."""
        self.logs = {}
        for key, disk in self.disks.items():
            log = PartitionLog.open(
                disk, SIM_LOG_CONFIG, now_ms=now_ms, had_clean_shutdown=self.clean_shutdown
            )
            log.update_high_watermark(self.high_watermark_checkpoint.get(key, 0))
            self.logs[key] = log
        self.clean_shutdown = False
