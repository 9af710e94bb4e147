"""Replay a ``__transaction_state`` partition's records into the transactional ids it holds
(the replay half of Kafka's ``TransactionStateManager.loadTransactionMetadata`` and
``TransactionLog.readTxnRecordValue``).

The log is compacted by transactional id, so the last record of an id wins: a value installs
its state, a tombstone (null value) removes the id. An id comes back as Kafka reads it: the
previous producer id from a v1 value (-1 from v0), no last epoch (it is not written), and no
partitions when EMPTY. A record that cannot be read (a malformed key or value, a key of another
record type, a state Kafka never writes) is skipped and reported, keeping what came before it;
Kafka ignores unknown keys too, and stops loading at the first unreadable value.
"""

from __future__ import annotations

import attrs

from pykraft.coordinator.transaction.metadata import TransactionMetadata
from pykraft.coordinator.transaction.records import (
    TransactionLogError,
    TransactionLogValue,
    UnknownKey,
    decode_key,
    decode_value,
)
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH

# How many problems are kept to be logged; the rest are counted.
MAX_PROBLEMS = 100
# States only ever pending, never written: a value holding one is not Kafka's.
_NEVER_WRITTEN = frozenset({TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE})


@attrs.frozen
class TxnLogEntry:
    """A record read back from ``__transaction_state``."""

    offset: int
    key: bytes | None
    value: bytes | None


class TransactionLogReplay:
    def __init__(self) -> None:
        self.values: dict[str, TransactionLogValue] = {}
        self.records = 0
        self.problems: list[str] = []
        self.problem_count = 0

    def replay(self, entries: list[TxnLogEntry]) -> None:
        for entry in entries:
            self.records += 1
            self._replay(entry)

    def _replay(self, entry: TxnLogEntry) -> None:
        if entry.key is None:
            self._problem(entry, "a record without a key")
            return
        try:
            key = decode_key(entry.key)
            if isinstance(key, UnknownKey):
                self._problem(entry, f"a key of record type {key.version}, not ours")
                return
            if entry.value is None:
                self.values.pop(key, None)
                return
            value = decode_value(entry.value)
        except TransactionLogError as error:
            self._problem(entry, str(error))
            return
        if value.transaction_status in _NEVER_WRITTEN:
            self._problem(entry, f"state {value.transaction_status.value} is never written")
            return
        self.values[key] = value

    def _problem(self, entry: TxnLogEntry, reason: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"record at offset {entry.offset}: {reason}")

    def loaded(self) -> dict[str, TransactionMetadata]:
        """Fresh ``TransactionMetadata`` of every id replayed (``readTxnRecordValue``)."""
        return {tid: metadata_of(tid, value) for tid, value in self.values.items()}


def metadata_of(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    state = value.transaction_status
    partitions = set() if state is TransactionState.EMPTY else set(value.topic_partitions)
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        last_producer_id=value.previous_producer_id,
        producer_epoch=value.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=state,
        topic_partitions=partitions,
        txn_start_timestamp_ms=value.transaction_start_timestamp_ms,
        txn_last_update_timestamp_ms=value.transaction_last_update_timestamp_ms,
    )
