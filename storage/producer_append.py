"""The idempotent producer's append rules, pure: classify a batch, fold it into the entry.

``check_append`` and ``apply_batch`` are the decisions behind ``ProducerStateManager`` (whose
module docstring, ``storage.producer_state``, gives the theory of operation and the order of the
checks). They live apart from the manager because it owns snapshot files: the log validator and
the pure cores that import it must not reach the disk through them.

Transactions (Kafka ``ProducerAppendInfo``): a transactional data batch of a producer with no
open transaction opens one at its first offset (``current_txn_first_offset``); a
non-transactional batch while one is open is INVALID_TXN_STATE (``appendDataBatch``). An
end-transaction marker (``appendEndTxnMarker``) closes it: its producer epoch may not be below
the producer's (INVALID_PRODUCER_EPOCH) and its coordinator epoch not below the last one seen
(TRANSACTION_COORDINATOR_FENCED). Only client batches are checked for duplicates and sequences
(``UnifiedLog.analyzeAndValidateProducerState``, ``maybeValidateDataBatch``): coordinator
appends (markers, transactional offset commits) carry no sequence.

Verification (KIP-890 part 1, ``storage.verification_guard``): when the append asks for it (a
``request_guard``), a transactional data batch of a producer with no open transaction must carry
the guard the partition handed out when the coordinator was asked — else INVALID_TXN_STATE
("Record was not part of an ongoing transaction", ``UnifiedLog.analyzeAndValidateProducerState``);
this runs after the duplicate check and before the epoch check, as in Kafka. And while a
producer's verification is in progress a client batch may not start above the lowest sequence
that asked (OUT_OF_ORDER_SEQUENCE, ``ProducerAppendInfo.checkSequence``), verification asked or not.
"""

from __future__ import annotations

import enum

import attrs

from pykraft.storage.aborted_txn import CompletedTxn
from pykraft.storage.producer_entry import (
    NUM_BATCHES_TO_RETAIN,
    SEQUENCE_MODULUS,
    BatchMetadata,
    ProducerStateEntry,
)
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH, BatchHeader
from pykraft.storage.txn_markers import EndTransactionMarker
from pykraft.storage.verification_guard import (
    SENTINEL,
    VerificationGuard,
    VerificationStateEntry,
)

PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms default (1 day)


class AppendCheckKind(enum.Enum):
    NEW = "NEW"
    DUPLICATE = "DUPLICATE"
    OUT_OF_ORDER_SEQUENCE = "OUT_OF_ORDER_SEQUENCE"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
    INVALID_TXN_STATE = "INVALID_TXN_STATE"
    TRANSACTION_COORDINATOR_FENCED = "TRANSACTION_COORDINATOR_FENCED"


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


def check_append(
    entry: ProducerStateEntry | None,
    header: BatchHeader,
    *,
    from_client: bool = True,
    marker: EndTransactionMarker | None = None,
    verification: VerificationStateEntry | None = None,
    request_guard: VerificationGuard | None = None,
) -> AppendCheck:
    """Classify a leader's batch against the producer's current state (no state change).

    ``from_client`` is Kafka's ``AppendOrigin.CLIENT`` (duplicates and sequences are checked);
    a coordinator's append checks epochs only. ``marker`` is a control batch's decoded marker.
    ``verification`` is the producer's verification in progress on the partition, if any;
    ``request_guard`` the guard the append carries, None when it asks for no verification.
    """
    if not header.has_producer_id:
        return NEW
    current = entry or ProducerStateEntry(header.producer_id)
    if from_client:
        duplicate = current.find_duplicate(header)
        if duplicate is not None:
            return AppendCheck(
                AppendCheckKind.DUPLICATE,
                duplicate.first_offset,
                duplicate.last_offset,
                f"sequences {header.base_sequence}..{header.last_sequence} of producer "
                f"{header.producer_id} were already written at offset {duplicate.first_offset}",
            )
    if request_guard is not None and _missing_verification(
        current, header, verification, request_guard
    ):
        return AppendCheck(
            AppendCheckKind.INVALID_TXN_STATE,
            message=f"record of producer {header.producer_id} was not part of an ongoing "
            "transaction (the partition's verification with the transaction coordinator "
            "did not cover this write)",
        )
    if header.producer_epoch < current.producer_epoch:
        return AppendCheck(
            AppendCheckKind.INVALID_PRODUCER_EPOCH,
            message=f"epoch of producer {header.producer_id} is {header.producer_epoch}, "
            f"which is smaller than the last seen epoch {current.producer_epoch}",
        )
    if header.is_control:
        return _check_coordinator_epoch(current, marker)
    if from_client:
        sequence = _check_sequence(current, header, verification)
        if sequence is not None:
            return sequence
    if current.current_txn_first_offset is not None and not header.is_transactional:
        return AppendCheck(
            AppendCheckKind.INVALID_TXN_STATE,
            message=f"expected a transactional write from producer {header.producer_id}: its "
            f"transaction at offset {current.current_txn_first_offset} is still open",
        )
    return NEW


def _check_coordinator_epoch(
    current: ProducerStateEntry, marker: EndTransactionMarker | None
) -> AppendCheck:
    """Kafka ``checkCoordinatorEpoch``: a marker from an older coordinator is a zombie's."""
    if marker is None or marker.coordinator_epoch >= current.coordinator_epoch:
        return NEW
    return AppendCheck(
        AppendCheckKind.TRANSACTION_COORDINATOR_FENCED,
        message=f"invalid coordinator epoch for producer {current.producer_id}: "
        f"{marker.coordinator_epoch} (zombie), {current.coordinator_epoch} (current)",
    )


def _missing_verification(
    current: ProducerStateEntry,
    header: BatchHeader,
    verification: VerificationStateEntry | None,
    request_guard: VerificationGuard,
) -> bool:
    """Kafka: a transactional data batch outside an ongoing transaction whose guard is not the
    partition's (``batchMissingRequiredVerification``)."""
    if not header.is_transactional or header.is_control:
        return False
    if current.current_txn_first_offset is not None:
        return False  # phase 2: the transaction is open, so the coordinator knows it
    guard = SENTINEL if verification is None else verification.guard
    return not guard.verify(request_guard)


def _check_sequence(
    current: ProducerStateEntry,
    header: BatchHeader,
    verification: VerificationStateEntry | None = None,
) -> AppendCheck | None:
    """Kafka ``checkSequence``; None when the sequence is acceptable."""
    first_sequence = header.base_sequence
    if verification is not None and first_sequence > verification.lowest_sequence:
        return _out_of_order(
            f"out of order sequence number for producer {header.producer_id}: "
            f"{first_sequence} (incoming seq. number), {verification.lowest_sequence} "
            "(earliest seen sequence)"
        )
    if header.producer_epoch != current.producer_epoch:
        if first_sequence != 0 and current.producer_epoch != NO_PRODUCER_EPOCH:
            return _out_of_order(
                f"invalid sequence number for new epoch of producer {header.producer_id}: "
                f"{header.producer_epoch} (request epoch), {first_sequence} (seq. number), "
                f"{current.producer_epoch} (current producer epoch)"
            )
        return None
    # No known epoch: state was lost (retention, DeleteRecords), so accept any sequence.
    if current.producer_epoch == NO_PRODUCER_EPOCH:
        return None
    if not in_sequence(current.last_sequence, first_sequence):
        return _out_of_order(
            f"out of order sequence number for producer {header.producer_id}: "
            f"{first_sequence} (incoming seq. number), {current.last_sequence} "
            "(current end sequence number)"
        )
    return None


def apply_batch(
    entry: ProducerStateEntry | None,
    header: BatchHeader,
    first_offset: int,
    last_offset: int,
    timestamp: int,
    marker: EndTransactionMarker | None = None,
) -> ProducerStateEntry:
    """The producer's entry after ``header`` was appended at ``first_offset..last_offset``.

    A control batch needs its decoded ``marker``; without one (an empty control batch, or not
    an end-transaction marker) the entry is unchanged, as in Kafka's ``ProducerAppendInfo``.
    """
    assert header.has_producer_id, "apply_batch needs an idempotent batch"
    current = entry or ProducerStateEntry(header.producer_id)
    # Kafka maybeUpdateProducerEpoch: a new epoch (even a lower one, via replication) forgets
    # the batches of the old one.
    same_epoch = current.producer_epoch == header.producer_epoch
    batches = current.batches if same_epoch else ()
    if header.is_control:
        if marker is None:
            return current
        return ProducerStateEntry(
            producer_id=current.producer_id,
            producer_epoch=header.producer_epoch,
            batches=batches,
            coordinator_epoch=marker.coordinator_epoch,
            last_timestamp=timestamp,
            current_txn_first_offset=None,
        )
    batch = BatchMetadata(
        header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp
    )
    txn_first_offset = current.current_txn_first_offset
    if header.is_transactional and txn_first_offset is None:
        txn_first_offset = first_offset
    # The constructor, not ``attrs.evolve``: this runs for every idempotent batch, and evolve
    # looks the class's fields up on each call (a quarter of this function's time).
    return ProducerStateEntry(
        producer_id=current.producer_id,
        producer_epoch=header.producer_epoch,
        batches=(*batches, batch)[-NUM_BATCHES_TO_RETAIN:],
        coordinator_epoch=current.coordinator_epoch,
        last_timestamp=timestamp,
        current_txn_first_offset=txn_first_offset,
    )


def completed_txn(
    entry: ProducerStateEntry | None,
    header: BatchHeader,
    marker: EndTransactionMarker | None,
    marker_offset: int,
) -> CompletedTxn | None:
    """The transaction a marker at ``marker_offset`` completes, if it wrote data (Kafka
    ``appendEndTxnMarker``: an empty transaction has no effect on the LSO or the index)."""
    if not header.is_control or marker is None or entry is None:
        return None
    first_offset = entry.current_txn_first_offset
    if first_offset is None:
        return None
    return CompletedTxn(header.producer_id, first_offset, marker_offset, marker.is_abort)


def is_expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
    """Kafka ``isProducerExpired``: idle too long and not inside a transaction."""
    return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= expiration_ms
