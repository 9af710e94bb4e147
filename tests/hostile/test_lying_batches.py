"""Produce batches whose valid header and CRC wrap records that contradict it (issue 9).

Before record validation such batches were stored and replicated: a record count of 1000 (or
2^31-1) over 2 real records moved the log end by up to 2^31 and stopped every consumer. Kafka's
``LogValidator`` walks every record: structural lies are ``InvalidRecordException``
(INVALID_RECORD, 87). Bytes that are not the flagged codec fail to decompress (Kafka: a plain
``KafkaException``, UNKNOWN_SERVER_ERROR, not retried); pykraft answers INVALID_RECORD, also not
retried (why: ``storage/log_validator.py``). Nothing may be written either way.
"""

from __future__ import annotations

import random

from pykraft.protocol.errors import Errors
from pykraft.storage.compression import compress
from pykraft.storage.record_batch import BATCH_HEADER_SIZE, CompressionType
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.varint import encode_varint
from tests.hostile.conftest import SingleBroker
from tests.hostile.raw_records import TIMESTAMP, produce, raw_batch


def records_section(count: int) -> bytes:
    """The uncompressed records section of ``count`` honest records."""
    batch = build_batch(
        [SimpleRecord(b"value-%d" % i, key=b"k", timestamp=TIMESTAMP) for i in range(count)]
    )
    return batch[BATCH_HEADER_SIZE:]


def record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


TWO = records_section(2)
GARBAGE = random.Random(9).randbytes(64)
THREE = records_section(3)
SAME_OFFSET_DELTA = record(b"\x00\x00\x00\x01\x02v\x00") * 2  # both records say offsetDelta 0

# case -> (batch bytes, the answer Kafka gives)
CASES: dict[str, tuple[bytes, Errors]] = {
    "count 1000 over 2 records": (raw_batch(TWO, 1000), Errors.INVALID_RECORD),
    "count 2^31-1 over 2 records": (raw_batch(TWO, 2**31 - 1), Errors.INVALID_RECORD),
    "count 2 over 3 records": (raw_batch(THREE, 2), Errors.INVALID_RECORD),
    "varint of 6 bytes": (raw_batch(b"\xff" * 6 + TWO, 1), Errors.INVALID_RECORD),
    "varint overflowing int32": (
        raw_batch(b"\xff\xff\xff\xff\x7f" + TWO, 1), Errors.INVALID_RECORD
    ),
    "truncated last record": (raw_batch(TWO[:-3], 2), Errors.INVALID_RECORD),
    "garbage records section": (raw_batch(GARBAGE, 2), Errors.INVALID_RECORD),
    "repeated offsetDelta": (raw_batch(SAME_OFFSET_DELTA, 2), Errors.INVALID_RECORD),
    "garbage inside valid gzip": (
        raw_batch(compress(CompressionType.GZIP, b"\x00" * 64), 2, CompressionType.GZIP),
        Errors.INVALID_RECORD,
    ),
    **{
        f"{codec.name.lower()} flag on plain records": (
            raw_batch(TWO, 2, codec), Errors.INVALID_RECORD
        )
        for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                      CompressionType.ZSTD)
    },
}  # fmt: skip


def test_lying_batches_are_refused_and_nothing_is_written(single_broker: SingleBroker) -> None:
    single_broker.create_topic("lies")
    assert produce(single_broker, "lies", records_section_batch())[0] == Errors.NONE
    end_before = single_broker.log_end_offset("lies")
    files_before = single_broker.partition_files("lies")
    answers = {case: Errors(produce(single_broker, "lies", batch)[0]) for case, (batch, _) in
               CASES.items()}  # fmt: skip
    assert answers == {case: expected for case, (_, expected) in CASES.items()}
    assert single_broker.log_end_offset("lies") == end_before == 2
    assert single_broker.partition_files("lies") == files_before
    single_broker.assert_still_serves()


def records_section_batch() -> bytes:
    """An honest batch of two records, sent the same raw way (the control case)."""
    return raw_batch(TWO, 2)
