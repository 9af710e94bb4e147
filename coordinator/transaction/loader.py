"""Read a ``__transaction_state`` partition back into its transactional ids, through the
coordinators' shared reader (``coordinator.log_reader``) and ``replay.TransactionLogReplay``.

No transaction writes to ``__transaction_state``, so a control batch here is not ours and is
skipped.
"""

from __future__ import annotations

from pykraft.coordinator.log_reader import LOAD_BUFFER_BYTES, read_partition_records
from pykraft.coordinator.transaction.replay import TransactionLogReplay, TxnLogEntry
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.records import Record


async def load_transactions(
    log: PartitionLog, *, chunk_bytes: int = LOAD_BUFFER_BYTES
) -> TransactionLogReplay:
    """Replay ``log`` from its start to its end when called; raises ``LoadError``."""
    replay = TransactionLogReplay()
    await read_partition_records(log, replay.replay, record=_entry, chunk_bytes=chunk_bytes)
    return replay


def _entry(header: BatchHeader, record: Record) -> TxnLogEntry | None:
    if header.is_control:
        return None
    return TxnLogEntry(record.offset, record.key, record.value)
