"""Read a ``__consumer_offsets`` partition's log back as records (Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets`` read loop), through the coordinators' shared
reader, ``coordinator.log_reader``.

Control batches are skipped (no transactions write here). Records are handed over chunk by
chunk (``offsets.OffsetsReplay`` keeps only the latest value per key) with the base offset of
their batch, which orders commits the way Kafka's ``CommitRecordMetadataAndOffset`` does.
"""

from __future__ import annotations

from collections.abc import Callable

from pykraft.coordinator import log_reader
from pykraft.coordinator.group.offsets import LogRecord
from pykraft.coordinator.log_reader import LOAD_BUFFER_BYTES as LOAD_BUFFER_BYTES
from pykraft.coordinator.log_reader import LoadError as LoadError
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.records import Record


async def read_partition_records(
    log: PartitionLog,
    replay: Callable[[list[LogRecord]], None],
    *,
    chunk_bytes: int = LOAD_BUFFER_BYTES,
) -> None:
    """Hand every record of ``log`` to ``replay``, one chunk at a time, in log order."""
    await log_reader.read_partition_records(
        log, replay, record=_offsets_record, chunk_bytes=chunk_bytes
    )


def _offsets_record(header: BatchHeader, record: Record) -> LogRecord | None:
    if header.is_control:
        return None
    return LogRecord(header.base_offset, record.key, record.value)
