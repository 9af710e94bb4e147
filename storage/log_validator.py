"""Checks on batches before they reach a log, and what an append reports (pure, no file I/O).

Kafka's ``LogValidator`` / ``UnifiedLog.analyzeAndValidateRecords``: every batch of a client
(leader) append must be a CRC-valid v2 batch whose offset range matches its record count, no
bigger than ``max.message.bytes``; clients may not write control batches; a transactional batch
needs a producer id; every record must agree with the header (``_check_records``). The whole
append must fit in one segment. Any failure rejects the whole
append before a byte is written. Follower appends keep the leader's offsets, which must
continue the log exactly (``UnexpectedAppendOffsetError`` / ``OffsetsOutOfOrderError``); like
Kafka's ``MemoryRecords.batches``, an incomplete batch at the very end of fetched data is
ignored (a fetch response may end mid-batch). Every control batch's end-transaction marker is
decoded once here (``ValidatedBatch.marker``), for the producer checks and the producer state.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

import attrs
import crc32c

from pykraft.storage.producer_append import AppendCheckKind, apply_batch, check_append
from pykraft.storage.producer_entry import ProducerStateEntry
from pykraft.storage.record_batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_POS,
    CONTROL_MASK,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    parse_header,
    validate_batch,
)
from pykraft.storage.record_walk import max_inflated_bytes
from pykraft.storage.records import decode_records, validate_records
from pykraft.storage.segment_store import MAX_RELATIVE_OFFSET
from pykraft.storage.txn_markers import EndTransactionMarker, decode_end_txn_marker
from pykraft.storage.verification_guard import VerificationGuard, VerificationStateEntry


class AppendOrigin(enum.Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"  # transaction markers, group/txn coordinator records
    REPLICATION = "replication"


class LogError(Exception):
    """Base of the expected, typed failures of a partition log."""


class OffsetOutOfRangeError(LogError):
    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(LogError):
    """A batch exceeds max.message.bytes (Kafka MESSAGE_TOO_LARGE)."""


class RecordBatchTooLargeError(LogError):
    """An append exceeds segment.bytes (Kafka RECORD_LIST_TOO_LARGE)."""


class InvalidRecordError(LogError):
    """A well-formed batch that breaks a rule (Kafka INVALID_RECORD)."""


@attrs.frozen
class RecordError:
    """One refused record (KIP-467, Kafka's ``ProduceResponse.RecordError``): its index in its
    batch and why; a Produce response v8+ carries them as ``record_errors``."""

    batch_index: int
    message: str

    def __str__(self) -> str:  # Kafka's RecordError.toString, quoted in the append's message
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


# Kafka's LogValidator.processRecordErrors shows at most this many in the append's message.
MAX_RECORD_ERRORS_SHOWN = 3
_INT32 = struct.Struct(">i")


class RecordValidationError(InvalidRecordError):
    """Records a batch may not hold (Kafka's ``RecordValidationException`` over an
    ``InvalidRecordException``): the whole append fails with INVALID_RECORD and the response
    names each record in ``record_errors``."""

    def __init__(self, record_errors: tuple[RecordError, ...]) -> None:
        assert record_errors, "a record validation error names at least one record"
        shown = ", ".join(str(e) for e in record_errors[:MAX_RECORD_ERRORS_SHOWN])
        super().__init__(
            f"One or more records have been rejected due to {len(record_errors)} record errors "
            f"in total, and only showing the first three errors at most: [{shown}]"
        )
        self.record_errors = record_errors


class CorruptLogError(LogError):
    """Stored records that cannot be read: a damaged batch, or one that inflates past its
    bound (Kafka CORRUPT_MESSAGE). Not a ValueError, so no caller mistakes it for bad input."""


class UnexpectedAppendOffsetError(LogError):
    def __init__(self, first_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"follower append starts at offset {first_offset} but the log ends at {log_end_offset}"
        )
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


class OffsetsOutOfOrderError(LogError):
    """Follower batches whose offsets do not continue one another."""


class OutOfOrderSequenceError(LogError):
    """An idempotent batch with a sequence gap (Kafka OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerEpochError(LogError):
    """A batch from a fenced producer epoch (Kafka INVALID_PRODUCER_EPOCH)."""


class StaleLeaderEpochError(LogError):
    """An append stamped with a leader epoch below the log's latest epoch."""


class InvalidTxnStateError(LogError):
    """A non-transactional batch while the producer's transaction is open (INVALID_TXN_STATE)."""


class TransactionCoordinatorFencedError(LogError):
    """A marker from an older transaction coordinator (TRANSACTION_COORDINATOR_FENCED)."""


@attrs.frozen
class ValidatedBatch:
    position: int  # within the append buffer
    header: BatchHeader
    # A control batch's end-transaction marker (None for data, or another control type).
    marker: EndTransactionMarker | None = None


def _validated(
    buffer: bytes | bytearray | memoryview, position: int, header: BatchHeader
) -> ValidatedBatch:
    marker = decode_end_txn_marker(buffer, position) if header.is_control else None
    return ValidatedBatch(position, header, marker)


@attrs.frozen
class LogAppendInfo:
    """What an append did (Kafka ``LogAppendInfo``); for a duplicate, the original offsets."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    records_count: int
    valid_bytes: int
    duplicate: bool = False


def validate_leader_batches(
    buffer: bytes | bytearray | memoryview,
    *,
    max_message_bytes: int,
    segment_bytes: int,
    origin: AppendOrigin,
    compacted_topic_partition: str | None = None,
) -> list[ValidatedBatch]:
    """Every batch of a leader append, checked; raises a typed error on the first problem.

    ``compacted_topic_partition``: the partition's name when its topic's ``cleanup.policy``
    includes ``compact`` (None otherwise); every record must then have a key, as the cleaner
    keeps the latest value per key (``RecordValidationError``, Kafka's
    ``LogValidator.validateKey``)."""
    if len(buffer) == 0:
        raise InvalidRecordError("an append needs at least one record batch")
    if len(buffer) > segment_bytes:
        raise RecordBatchTooLargeError(
            f"append of {len(buffer)} bytes exceeds segment.bytes ({segment_bytes})"
        )
    batches: list[ValidatedBatch] = []
    position = 0
    while position < len(buffer):
        header = validate_batch(buffer, position)
        _check_leader_batch(header, position, max_message_bytes, origin)
        _check_records(buffer, position, header)
        if compacted_topic_partition is not None and not header.is_control:
            _check_keys(buffer, position, header, compacted_topic_partition)
        batches.append(_validated(buffer, position, header))
        position += header.size_in_bytes
    return batches


def _check_keys(
    buffer: bytes | bytearray | memoryview, position: int, header: BatchHeader, name: str
) -> None:
    """Kafka's ``LogValidator.validateKey``: a compacted topic refuses keyless records, each
    named by its index in the batch. Only compacted topics pay for decoding the records."""
    payload = memoryview(buffer)[position + BATCH_HEADER_SIZE : position + header.size_in_bytes]
    records = decode_records(header, payload, position)
    errors = tuple(
        RecordError(
            index,
            f"Compacted topic cannot accept message without key in topic partition {name}.",
        )
        for index, record in enumerate(records)
        if record.key is None
    )
    if errors:
        raise RecordValidationError(errors)


def _check_records(
    buffer: bytes | bytearray | memoryview, position: int, header: BatchHeader
) -> None:
    """Every record of the batch agrees with its header (Kafka's ``LogValidator`` iterates
    them all); a compressed batch inflates, in bounded chunks, to at most
    ``max_inflated_bytes`` of its size, which max.message.bytes caps (see
    ``storage.record_walk``).

    Any failure is ``InvalidRecordError`` (INVALID_RECORD), as Kafka's
    ``InvalidRecordException`` from ``DefaultRecord.readFrom`` and the batch's
    ``RecordIterator`` ("Incorrect declared batch size, premature EOF reached", "... records
    still remaining in file", "Found invalid record structure"). That includes a records
    section that is not data of its codec: Kafka fails there with a plain ``KafkaException``
    ("Failed to decompress record stream", ``DefaultRecordBatch.compressedIterator``), which
    clients see as UNKNOWN_SERVER_ERROR and do not retry; INVALID_RECORD says what is wrong
    and is not retried either, whereas CORRUPT_MESSAGE (``CorruptRecordException``, a
    ``RetriableException``) would have clients resend a batch that can never succeed. The
    CRC already held, so the bytes are what the producer meant to send. A batch that inflates
    past the limit is INVALID_RECORD too.
    """
    payload = memoryview(buffer)[position + BATCH_HEADER_SIZE : position + header.size_in_bytes]
    try:
        validate_records(
            header, payload, position, max_bytes=max_inflated_bytes(header.size_in_bytes)
        )
    except CorruptRecordError as error:
        raise InvalidRecordError(f"batch at byte {position}: {error}") from error


def _check_leader_batch(
    header: BatchHeader, position: int, max_message_bytes: int, origin: AppendOrigin
) -> None:
    if header.size_in_bytes > max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {header.size_in_bytes} bytes at byte {position} exceeds "
            f"max.message.bytes ({max_message_bytes})"
        )
    if header.records_count <= 0:
        raise InvalidRecordError(f"batch at byte {position} has {header.records_count} records")
    if header.last_offset_delta + 1 != header.records_count:
        raise InvalidRecordError(
            f"batch at byte {position}: offset range of {header.last_offset_delta + 1} does not "
            f"match its {header.records_count} records"
        )
    if header.is_control and origin is AppendOrigin.CLIENT:
        raise InvalidRecordError("clients may not write control batches")
    if header.is_transactional and not header.has_producer_id:
        raise InvalidRecordError(f"transactional batch at byte {position} has no producer id")


def validate_follower_batches(
    buffer: bytes | bytearray | memoryview, *, log_end_offset: int
) -> list[ValidatedBatch]:
    """The complete batches of fetched data, which must start at or after the log end and go
    forward (Kafka ``UnifiedLog.append`` without offset assignment): a compacted leader log
    has gaps where the cleaner removed batches, which its followers keep. Every header is
    checked and every CRC computed; an incomplete last batch is left out.

    One pass, one header and one ``ValidatedBatch`` per batch: a fetch of many small batches
    spends its time here (issue 18)."""
    view = memoryview(buffer)
    end = len(view)
    batches: list[ValidatedBatch] = []
    position = 0
    expected = log_end_offset
    while end - position >= LOG_OVERHEAD:
        batch_length = _INT32.unpack_from(view, position + BATCH_LENGTH_POS)[0]
        if batch_length < 0:
            raise CorruptRecordError("batchLength", f"{batch_length} is negative", position)
        size = batch_length + LOG_OVERHEAD
        if end - position < size:
            break  # the data ends inside this batch (the leader's fetch size cut it)
        header = parse_header(view, position)
        actual = crc32c.crc32c(view[position + ATTRIBUTES_POS : position + size])
        if actual != header.crc:
            raise CorruptRecordError(
                "crc", f"stored {header.crc:#010x} but computed {actual:#010x}", position
            )
        base_offset = header.base_offset
        if base_offset < expected:
            if not batches and base_offset < log_end_offset:
                raise UnexpectedAppendOffsetError(base_offset, log_end_offset)
            raise OffsetsOutOfOrderError(
                f"batch at byte {position} starts at offset {base_offset}, expected {expected}"
            )
        marker = (
            decode_end_txn_marker(buffer, position) if header.attributes & CONTROL_MASK else None
        )
        batches.append(ValidatedBatch(position, header, marker))
        expected = base_offset + header.last_offset_delta + 1
        position += size
    return batches


def append_info(
    batches: list[ValidatedBatch],
    first_offset: int,
    *,
    log_start_offset: int,
    valid_bytes: int,
) -> LogAppendInfo:
    """Summarise batches whose offsets start at ``first_offset`` (already assigned)."""
    max_timestamp, offset_of_max, next_offset, records = -1, first_offset, first_offset, 0
    for batch in batches:
        header = batch.header
        last_offset = next_offset + header.last_offset_delta
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, last_offset
        records += header.records_count
        next_offset = last_offset + 1
    return LogAppendInfo(
        first_offset=first_offset,
        last_offset=next_offset - 1,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        log_append_time_ms=-1,
        log_start_offset=log_start_offset,
        records_count=records,
        valid_bytes=valid_bytes,
    )


class ProducerCheck(NamedTuple):
    """``check_producers``' answer: a duplicate's original offsets (the append writes
    nothing), or the producer entry each batch leaves once written (None for a batch without a
    producer id) — folded into producer state by the write (``ProducerStateManager.update``'s
    ``updated``), not worked out a second time. A tuple: every append makes one."""

    duplicate: LogAppendInfo | None
    entries: list[ProducerStateEntry | None]


def check_producers(
    last_entry: Callable[[int], ProducerStateEntry | None],
    batches: list[ValidatedBatch],
    first_offset: int,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    *,
    verification_entry: Callable[[int], VerificationStateEntry | None] = lambda _: None,
    verification_guard: VerificationGuard | None = None,
) -> ProducerCheck:
    """Check idempotent batches against producer state (Kafka analyzeAndValidateProducerState).

    ``last_entry`` looks a producer id up in the partition's producer state (the manager's
    ``last_entry``, passed as a function so this module stays clear of its snapshot files),
    ``verification_entry`` its verification in progress (KIP-890). Only a client's batches are
    checked for duplicates and sequences (``origin``). ``verification_guard`` is the guard the
    append carries when it asks for transaction verification (None: it does not).

    Batches of one append are folded in order, so two batches of the same producer in one
    append are checked against each other. Returns the original offsets of a duplicate (the
    append must then write nothing), else each batch's producer entry once it is written;
    raises on a sequence gap, a fenced producer epoch, a non-transactional batch inside a
    transaction or a fenced coordinator's marker.
    """
    pending: dict[int, ProducerStateEntry | None] = {}
    entries: list[ProducerStateEntry | None] = []
    next_offset = first_offset
    for item in batches:
        header = item.header
        last_offset = next_offset + header.last_offset_delta
        entry = None
        if header.has_producer_id:
            producer_id = header.producer_id
            entry = pending.get(producer_id, last_entry(producer_id))
            check = check_append(
                entry,
                header,
                from_client=origin is AppendOrigin.CLIENT,
                marker=item.marker,
                verification=verification_entry(producer_id),
                request_guard=verification_guard,
            )
            if check.kind is AppendCheckKind.DUPLICATE:
                duplicate = LogAppendInfo(
                    first_offset=check.first_offset,
                    last_offset=check.last_offset,
                    max_timestamp=header.max_timestamp,
                    offset_of_max_timestamp=check.last_offset,
                    log_append_time_ms=-1,
                    log_start_offset=-1,
                    records_count=header.records_count,
                    valid_bytes=0,
                    duplicate=True,
                )
                return ProducerCheck(duplicate, [])
            _raise_refusal(check.kind, check.message)
            entry = pending[producer_id] = apply_batch(
                entry, header, next_offset, last_offset, header.max_timestamp, item.marker
            )
        entries.append(entry)
        next_offset = last_offset + 1
    return ProducerCheck(None, entries)


_REFUSALS: dict[AppendCheckKind, type[LogError]] = {
    AppendCheckKind.OUT_OF_ORDER_SEQUENCE: OutOfOrderSequenceError,
    AppendCheckKind.INVALID_PRODUCER_EPOCH: InvalidProducerEpochError,
    AppendCheckKind.INVALID_TXN_STATE: InvalidTxnStateError,
    AppendCheckKind.TRANSACTION_COORDINATOR_FENCED: TransactionCoordinatorFencedError,
}


def _raise_refusal(kind: AppendCheckKind, message: str) -> None:
    refusal = _REFUSALS.get(kind)
    if refusal is not None:
        raise refusal(message)


def follower_append_info(batches: list[ValidatedBatch], *, log_start_offset: int) -> LogAppendInfo:
    """Summarise a follower's batches, which carry the leader's offsets (gaps and all)."""
    max_timestamp, offset_of_max, records = -1, batches[0].header.base_offset, 0
    for batch in batches:
        header = batch.header
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
            offset_of_max = header.base_offset + header.last_offset_delta
        records += header.records_count
    last = batches[-1]
    return LogAppendInfo(
        first_offset=batches[0].header.base_offset,
        last_offset=last.header.base_offset + last.header.last_offset_delta,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        log_append_time_ms=-1,
        log_start_offset=log_start_offset,
        records_count=records,
        valid_bytes=last.position + last.header.batch_length + LOG_OVERHEAD,
    )


def segment_sized_chunks(
    batches: list[ValidatedBatch], segment_bytes: int
) -> Iterator[list[ValidatedBatch]]:
    """Consecutive runs of batches of at most ``segment_bytes`` (at least one batch each),
    each spanning at most ``MAX_RELATIVE_OFFSET`` offsets: a follower's batches may leave gaps
    (the leader's cleaner removed batches) too wide for one segment's 32-bit relative offsets."""
    if batches:
        first, last = batches[0], batches[-1]
        total = last.position + last.header.batch_length + LOG_OVERHEAD - first.position
        span = last.header.base_offset + last.header.last_offset_delta
        if total <= segment_bytes and span - first.header.base_offset <= MAX_RELATIVE_OFFSET:
            yield batches  # the common case: one fetch, one write
            return
    chunk: list[ValidatedBatch] = []
    size = 0
    for item in batches:
        too_wide = (
            chunk and item.header.last_offset - chunk[0].header.base_offset > MAX_RELATIVE_OFFSET
        )
        if chunk and (size + item.header.size_in_bytes > segment_bytes or too_wide):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item.header.size_in_bytes
    if chunk:
        yield chunk
