"""Read a ``__consumer_offsets`` partition's log back as records (Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets`` read loop).

The log is read from its start to the log end offset it had when loading began, in chunks of
``offsets.load.buffer.size`` (5 MiB), yielding to the event loop between chunks so a long log
does not stall the broker. Control batches are skipped (no transactions write here). Records
are handed over chunk by chunk (``offsets.OffsetsReplay`` keeps only the latest value per key)
with the base offset of their batch, which orders commits the way Kafka's
``CommitRecordMetadataAndOffset`` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pykraft.coordinator.group.offsets import LogRecord
from pykraft.storage.log_validator import LogError
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import CorruptRecordError, iter_batches
from pykraft.storage.records import iter_records

# offsets.load.buffer.size
LOAD_BUFFER_BYTES = 5 * 1024 * 1024


class LoadError(Exception):
    """The partition's log could not be read back."""


async def read_partition_records(
    log: PartitionLog,
    replay: Callable[[list[LogRecord]], None],
    *,
    chunk_bytes: int = LOAD_BUFFER_BYTES,
) -> None:
    """Hand every record of ``log`` to ``replay``, one chunk at a time, in log order."""
    end_offset = log.log_end_offset
    offset = log.log_start_offset
    while offset < end_offset:
        try:
            fetched = log.read(offset, chunk_bytes, end_offset, min_one_batch=True)
            data = b"".join(part.read_bytes() for part in fetched.slices)
            records = _records_of(data)
        except (OSError, EOFError, CorruptRecordError, LogError) as error:
            # LogError: retention moved the log start past ``offset`` meanwhile, for one.
            raise LoadError(f"{log.directory.name} at offset {offset}: {error}") from error
        replay(records)
        if fetched.next_offset <= offset:
            break
        offset = fetched.next_offset
        await asyncio.sleep(0)


def _records_of(data: bytes) -> list[LogRecord]:
    records = []
    for position, header in iter_batches(data):
        if header.is_control:
            continue
        for record in iter_records(data, position):
            records.append(LogRecord(header.base_offset, record.key, record.value))
    return records
