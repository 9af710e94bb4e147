"""The produce side of KIP-890 part 1, pure: which partitions of a transactional produce need
their transaction coordinator's word, and what the producer is told when it does not come.

Kafka 3.6+ (``transaction.partition.verification.enable``, default true;
``ReplicaManager.appendRecords`` with a ``transactionalId``, ``partitionEntriesForVerification``):

* only transactional batches with a producer id are verified; all of a request's transactional
  batches must be one producer's (else INVALID_PRODUCER_ID_MAPPING for every partition,
  Kafka's ``InvalidPidMappingException``: "Transactional records contained more than one
  producer ID");
* the leader's log says whether a partition needs it: ``SENTINEL`` when the producer's
  transaction is already open there, else a guard (``Partition.maybe_start_transaction_
  verification``), with the first batch's producer id, sequence and epoch;
* the coordinator's answers become produce errors (``produce_error``): TRANSACTION_ABORTABLE is
  INVALID_TXN_STATE for Produce up to v10 (the abortable error arrived with v11,
  ``AddPartitionsToTxnManager``'s backward compatibility); INVALID_TXN_STATE says "Partition was
  not added to the transaction"; a coordinator that cannot answer now (NETWORK_EXCEPTION,
  COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, and — transaction
  version 1 — CONCURRENT_TRANSACTIONS) is NOT_ENOUGH_REPLICAS, a retriable error older clients
  retry without a metadata refresh; the rest pass unchanged (INVALID_PRODUCER_EPOCH for a fenced
  producer, INVALID_PRODUCER_ID_MAPPING, ...).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from pykraft.protocol.errors import Errors
from pykraft.storage.record_batch import BatchHeader, CorruptRecordError, parse_header

# Produce v11 carries TRANSACTION_ABORTABLE to the client (KIP-890 part 2's abortable error).
FIRST_ABORTABLE_ERROR_PRODUCE_VERSION = 11


class TransactionSupportedOperation(enum.Enum):
    """Kafka's ``TransactionSupportedOperation`` (the part pykraft serves)."""

    DEFAULT_ERROR = "defaultError"  # Produce <= v10: TRANSACTION_ABORTABLE is unknown
    GENERIC_ERROR_SUPPORTED = "genericErrorSupported"  # Produce v11


DEFAULT_ERROR = TransactionSupportedOperation.DEFAULT_ERROR


def supported_operation(produce_version: int) -> TransactionSupportedOperation:
    """``produceRequestVersionToTransactionSupportedOperation`` (v12's implicit
    AddPartitionsToTxn, transaction version 2, is not served)."""
    if produce_version >= FIRST_ABORTABLE_ERROR_PRODUCE_VERSION:
        return TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED
    return DEFAULT_ERROR


def transactional_header(records: bytes | bytearray | memoryview | None) -> BatchHeader | None:
    """The first batch's header when it is transactional with a producer id (a produce carries
    one batch per partition); None otherwise, or when the bytes do not hold a header (the
    log's validation refuses those)."""
    if not records:
        return None
    try:
        header = parse_header(records)
    except CorruptRecordError:
        return None
    if header.is_transactional and header.has_producer_id and not header.is_control:
        return header
    return None


@attrs.frozen
class TransactionalProducer:
    """The producer of a request's transactional batches."""

    producer_id: int
    producer_epoch: int


def one_producer(headers: Iterable[BatchHeader]) -> TransactionalProducer | Errors | None:
    """The one producer of ``headers``; None when there are none; INVALID_PRODUCER_ID_MAPPING
    when there are several (Kafka refuses the whole request)."""
    producer_ids = {header.producer_id: header for header in headers}
    if not producer_ids:
        return None
    if len(producer_ids) > 1:
        return Errors.INVALID_PRODUCER_ID_MAPPING
    header = next(iter(producer_ids.values()))
    return TransactionalProducer(header.producer_id, header.producer_epoch)


_COORDINATOR_UNAVAILABLE = frozenset(
    {
        Errors.NETWORK_EXCEPTION,
        Errors.COORDINATOR_LOAD_IN_PROGRESS,
        Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.NOT_COORDINATOR,
        Errors.CONCURRENT_TRANSACTIONS,  # transaction version 1 (no epoch bump per transaction)
    }
)


def produce_error(
    error: Errors, operation: TransactionSupportedOperation
) -> tuple[Errors, str | None]:
    """The produce error and message for a partition whose verification failed with ``error``
    (``ReplicaManager``'s "translate transaction coordinator errors to known producer
    response errors")."""
    if error is Errors.TRANSACTION_ABORTABLE and operation is DEFAULT_ERROR:
        error = Errors.INVALID_TXN_STATE
    if error is Errors.INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    if error in _COORDINATOR_UNAVAILABLE:
        return Errors.NOT_ENOUGH_REPLICAS, (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error.name}"
        )
    return error, None
