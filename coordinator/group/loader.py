"""Read a ``__consumer_offsets`` partition's log back as records (Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets`` read loop).

The log is read from its start to its end, in chunks of ``offsets.load.buffer.size`` (5 MiB),
yielding to the event loop between chunks so a long log does not stall the broker. The end is
the log end offset *now*, looked at again after every chunk (Kafka's ``logEndOffset`` in
``doLoadGroupsAndOffsets``): transaction markers are appended here while the partition loads,
and a marker whose completion reached the coordinator before the groups were installed must be
in what was read, since the shell installs them without yielding once the reading is done.

Records are handed over chunk by chunk (``offsets.OffsetsReplay`` keeps only the latest value
per key) with the base offset of their batch, which orders commits the way Kafka's
``CommitRecordMetadataAndOffset`` does, and the producer id of a transactional batch; a control
batch becomes a ``TransactionMarker`` (its record's key is ``version int16, type int16``).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

from pykraft.coordinator.group.offsets import LogRecord, TransactionMarker
from pykraft.storage.log_validator import LogError
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import BatchHeader, CorruptRecordError, iter_batches
from pykraft.storage.records import iter_records

# offsets.load.buffer.size
LOAD_BUFFER_BYTES = 5 * 1024 * 1024
# A control record's key: version, type (Kafka's ``ControlRecordType.parse``).
_CONTROL_KEY = struct.Struct(">hh")


class LoadError(Exception):
    """The partition's log could not be read back."""


async def read_partition_records(
    log: PartitionLog,
    replay: Callable[[list[LogRecord | TransactionMarker]], None],
    *,
    chunk_bytes: int = LOAD_BUFFER_BYTES,
) -> None:
    """Hand every record of ``log`` to ``replay``, one chunk at a time, in log order, until
    the log's end: returning, the reader has seen every batch in the log."""
    offset = log.log_start_offset
    while offset < (end_offset := log.log_end_offset):
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


def _records_of(data: bytes) -> list[LogRecord | TransactionMarker]:
    records: list[LogRecord | TransactionMarker] = []
    for position, header in iter_batches(data):
        if header.is_control:
            records.extend(_markers_of(data, position, header))
            continue
        producer_id = header.producer_id if header.is_transactional else None
        for record in iter_records(data, position):
            records.append(LogRecord(header.base_offset, record.key, record.value, producer_id))
    return records


def _markers_of(data: bytes, position: int, header: BatchHeader) -> list[TransactionMarker]:
    """A control batch's first record ends its producer's transaction (Kafka reads only the
    first; an empty control batch, as compaction may leave, ends nothing)."""
    for record in iter_records(data, position):
        key = record.key
        control_type = None
        if key is not None and len(key) >= _CONTROL_KEY.size:
            version, control_type = _CONTROL_KEY.unpack_from(key)
            if version < 0:
                control_type = None
        return [TransactionMarker(header.base_offset, header.producer_id, control_type)]
    return []
