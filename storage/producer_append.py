"""The idempotent producer's append rules, pure: classify a batch, fold it into the entry.

``check_append`` and ``apply_batch`` are the decisions behind ``ProducerStateManager`` (whose
module docstring, ``storage.producer_state``, gives the theory of operation and the order of the
checks). They live apart from the manager because it owns snapshot files: the log validator and
the pure cores that import it must not reach the disk through them.
"""

from __future__ import annotations

import enum

import attrs

from pykraft.storage.producer_entry import (
    NUM_BATCHES_TO_RETAIN,
    SEQUENCE_MODULUS,
    BatchMetadata,
    ProducerStateEntry,
)
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH, BatchHeader

PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms default (1 day)


class AppendCheckKind(enum.Enum):
    NEW = "NEW"
    DUPLICATE = "DUPLICATE"
    OUT_OF_ORDER_SEQUENCE = "OUT_OF_ORDER_SEQUENCE"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"


@attrs.frozen
class AppendCheck:
    kind: AppendCheckKind
    # For DUPLICATE: the offsets the original batch was written at; -1 otherwise.
    first_offset: int = -1
    last_offset: int = -1
    message: str = ""

    @property
    def is_new(self) -> bool:
        return self.kind is AppendCheckKind.NEW


NEW = AppendCheck(AppendCheckKind.NEW)


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Kafka ``ProducerAppendInfo.inSequence``: next follows last, wrapping at Int32.MAX."""
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == SEQUENCE_MODULUS - 1
    )


def _out_of_order(message: str) -> AppendCheck:
    return AppendCheck(AppendCheckKind.OUT_OF_ORDER_SEQUENCE, message=message)


def check_append(entry: ProducerStateEntry | None, header: BatchHeader) -> AppendCheck:
    """Classify a client batch against the producer's current state (no state change)."""
    if not header.has_producer_id:
        return NEW
    current = entry or ProducerStateEntry(header.producer_id)
    duplicate = current.find_duplicate(header)
    if duplicate is not None:
        return AppendCheck(
            AppendCheckKind.DUPLICATE,
            duplicate.first_offset,
            duplicate.last_offset,
            f"sequences {header.base_sequence}..{header.last_sequence} of producer "
            f"{header.producer_id} were already written at offset {duplicate.first_offset}",
        )
    if header.producer_epoch < current.producer_epoch:
        return AppendCheck(
            AppendCheckKind.INVALID_PRODUCER_EPOCH,
            message=f"epoch of producer {header.producer_id} is {header.producer_epoch}, "
            f"which is smaller than the last seen epoch {current.producer_epoch}",
        )
    if header.is_control:
        return NEW  # end-transaction markers carry no sequence
    first_sequence = header.base_sequence
    if header.producer_epoch != current.producer_epoch:
        if first_sequence != 0 and current.producer_epoch != NO_PRODUCER_EPOCH:
            return _out_of_order(
                f"invalid sequence number for new epoch of producer {header.producer_id}: "
                f"{header.producer_epoch} (request epoch), {first_sequence} (seq. number), "
                f"{current.producer_epoch} (current producer epoch)"
            )
        return NEW
    # No known epoch: state was lost (retention, DeleteRecords), so accept any sequence.
    if current.producer_epoch == NO_PRODUCER_EPOCH:
        return NEW
    if not in_sequence(current.last_sequence, first_sequence):
        return _out_of_order(
            f"out of order sequence number for producer {header.producer_id}: "
            f"{first_sequence} (incoming seq. number), {current.last_sequence} "
            "(current end sequence number)"
        )
    return NEW


def apply_batch(
    entry: ProducerStateEntry | None,
    header: BatchHeader,
    first_offset: int,
    last_offset: int,
    timestamp: int,
    coordinator_epoch: int | None = None,
) -> ProducerStateEntry:
    """The producer's entry after ``header`` was appended at ``first_offset..last_offset``."""
    assert header.has_producer_id, "apply_batch needs an idempotent batch"
    current = entry or ProducerStateEntry(header.producer_id)
    # Kafka maybeUpdateProducerEpoch: a new epoch (even a lower one, via replication) forgets
    # the batches of the old one.
    same_epoch = current.producer_epoch == header.producer_epoch
    batches = current.batches if same_epoch else ()
    if header.is_control:
        return attrs.evolve(
            current,
            producer_epoch=header.producer_epoch,
            batches=batches,
            coordinator_epoch=current.coordinator_epoch
            if coordinator_epoch is None
            else coordinator_epoch,
            last_timestamp=timestamp,
            current_txn_first_offset=None,
        )
    batch = BatchMetadata(
        header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp
    )
    txn_first_offset = current.current_txn_first_offset
    if header.is_transactional and txn_first_offset is None:
        txn_first_offset = first_offset
    return attrs.evolve(
        current,
        producer_epoch=header.producer_epoch,
        batches=(*batches, batch)[-NUM_BATCHES_TO_RETAIN:],
        last_timestamp=timestamp,
        current_txn_first_offset=txn_first_offset,
    )


def is_expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
    """Kafka ``isProducerExpired``: idle too long and not inside a transaction."""
    return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= expiration_ms
