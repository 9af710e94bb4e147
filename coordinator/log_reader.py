"""Read a coordinator's partition back, batch by batch: the read loop of Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets`` and
``TransactionStateManager.loadTransactionMetadata``, shared by the group coordinator
(``__consumer_offsets``) and the transaction coordinator (``__transaction_state``).

The log is read from its start to its end, in chunks of the topic's load buffer size
(``offsets.load.buffer.size``, ``transaction.state.log.load.buffer.size``: 5 MiB each),
yielding to the event loop between chunks so a long log does not stall the broker. The end is
the log end offset *now*, looked at again after every chunk (Kafka's ``logEndOffset`` in
``doLoadGroupsAndOffsets``): transaction markers are appended to ``__consumer_offsets`` while it
loads, and a marker whose completion reached the coordinator before the groups were installed
must be in what was read, since the shell installs them without yielding once the reading is
done. Each record goes through the caller's
``record`` function with its batch header, which turns it into what the caller replays (or None
to skip it: a control record, say); the records of a chunk are handed to ``replay`` together,
in log order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from pykraft.storage.log_validator import LogError
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import BatchHeader, CorruptRecordError, iter_batches
from pykraft.storage.records import Record, iter_records

# offsets.load.buffer.size and transaction.state.log.load.buffer.size
LOAD_BUFFER_BYTES = 5 * 1024 * 1024

T = TypeVar("T")


class LoadError(Exception):
    """The partition's log could not be read back."""


async def read_partition_records(
    log: PartitionLog,
    replay: Callable[[list[T]], None],
    *,
    record: Callable[[BatchHeader, Record], T | None],
    chunk_bytes: int = LOAD_BUFFER_BYTES,
) -> None:
    """Hand every record of ``log`` (as ``record`` makes it) to ``replay``, one chunk at a
    time, in log order, until the log's end: returning, the reader has seen every batch."""
    offset = log.log_start_offset
    while offset < (end_offset := log.log_end_offset):
        try:
            fetched = log.read(offset, chunk_bytes, end_offset, min_one_batch=True)
            data = b"".join(part.read_bytes() for part in fetched.slices)
            records = _records_of(data, record)
        except (OSError, EOFError, CorruptRecordError, LogError) as error:
            # LogError: retention moved the log start past ``offset`` meanwhile, for one.
            raise LoadError(f"{log.directory.name} at offset {offset}: {error}") from error
        replay(records)
        if fetched.next_offset <= offset:
            break
        offset = fetched.next_offset
        await asyncio.sleep(0)


def _records_of(data: bytes, record: Callable[[BatchHeader, Record], T | None]) -> list[T]:
    made = []
    for position, header in iter_batches(data):
        for item in iter_records(data, position):
            value = record(header, item)
            if value is not None:
                made.append(value)
    return made
