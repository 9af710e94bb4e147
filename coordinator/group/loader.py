"""Read a ``__consumer_offsets`` partition's log back as records (Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets`` read loop), through the coordinators' shared
reader, ``coordinator.log_reader`` (which reads up to the log end as it stands when reading
stops, so a marker appended during the load is seen).

Records are handed over chunk by chunk (``offsets.OffsetsReplay`` keeps only the latest value
per key) with the base offset of their batch, which orders commits the way Kafka's
``CommitRecordMetadataAndOffset`` does, and the producer id of a transactional batch; a control
batch becomes a ``TransactionMarker`` (its record's key is ``version int16, type int16``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from pykraft.coordinator import log_reader
from pykraft.coordinator.group.offsets import LogRecord, TransactionMarker
from pykraft.coordinator.log_reader import LOAD_BUFFER_BYTES as LOAD_BUFFER_BYTES
from pykraft.coordinator.log_reader import LoadError as LoadError
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.records import Record

# A control record's key: version, type (Kafka's ``ControlRecordType.parse``).
_CONTROL_KEY = struct.Struct(">hh")


async def read_partition_records(
    log: PartitionLog,
    replay: Callable[[list[LogRecord | TransactionMarker]], None],
    *,
    chunk_bytes: int = LOAD_BUFFER_BYTES,
) -> None:
    """Hand every record of ``log`` to ``replay``, one chunk at a time, in log order."""
    await log_reader.read_partition_records(
        log, replay, record=_offsets_record, chunk_bytes=chunk_bytes
    )


def _offsets_record(header: BatchHeader, record: Record) -> LogRecord | TransactionMarker:
    """A data record, or a control batch's record as the end of its producer's transaction
    (a control batch holds one record; an empty one, as compaction may leave, ends nothing)."""
    if header.is_control:
        key = record.key
        control_type = None
        if key is not None and len(key) >= _CONTROL_KEY.size:
            version, control_type = _CONTROL_KEY.unpack_from(key)
            if version < 0:
                control_type = None
        return TransactionMarker(header.base_offset, header.producer_id, control_type)
    producer_id = header.producer_id if header.is_transactional else None
    return LogRecord(header.base_offset, record.key, record.value, producer_id)
