"""Every decompression has a bound, and a bomb costs a chunk of memory, not its size (issue 9)."""

from __future__ import annotations

import gzip
import time
import tracemalloc
from pathlib import Path

import pytest
import snappy

from pykraft.storage.compression import (
    DECOMPRESS_CHUNK_BYTES,
    CompressionError,
    InflatedSizeLimitError,
    compress,
    decompress,
    iter_inflated,
)
from pykraft.storage.log_reader import MAX_TIMESTAMP
from pykraft.storage.log_validator import CorruptLogError
from pykraft.storage.record_batch import (
    BATCH_HEADER_SIZE,
    CompressionType,
    CorruptRecordError,
    validate_batch,
)
from pykraft.storage.record_walk import MAX_INFLATION_RATIO, max_inflated_bytes
from pykraft.storage.records import SimpleRecord, build_batch, iter_records, validate_records
from pykraft.storage.varint import encode_varint
from tests.storage.bombs import zstd_zeros_frame
from tests.storage.test_partition_log import open_log
from tests.storage.test_record_validation import batch_of

GIB = 1 << 30
CODECS = [c for c in CompressionType if c]


@pytest.mark.parametrize("compression", CODECS)
def test_the_limit_is_inclusive_and_one_byte_less_is_refused(compression: CompressionType) -> None:
    data = bytes(range(256)) * 1000
    packed = compress(compression, data)
    assert decompress(compression, packed, max_bytes=len(data)) == data
    with pytest.raises(InflatedSizeLimitError, match="past the limit"):
        decompress(compression, packed, max_bytes=len(data) - 1)


@pytest.mark.parametrize("compression", CODECS)
def test_chunks_are_bounded(compression: CompressionType) -> None:
    packed = compress(compression, bytes(4 * DECOMPRESS_CHUNK_BYTES))
    sizes = [len(chunk) for chunk in iter_inflated(compression, packed, max_bytes=GIB)]
    assert sum(sizes) == 4 * DECOMPRESS_CHUNK_BYTES
    # snappy chunks are xerial blocks (32 KiB of input each)
    assert max(sizes) <= DECOMPRESS_CHUNK_BYTES


def test_a_snappy_block_declaring_more_than_the_limit_is_refused_before_inflating() -> None:
    block = snappy.compress(bytes(1 << 20))
    with pytest.raises(InflatedSizeLimitError, match="declares 1048576 bytes"):
        decompress(CompressionType.SNAPPY, block, max_bytes=1000)


def test_a_truncated_zstd_frame_is_corrupt_not_silently_short() -> None:
    packed = compress(CompressionType.ZSTD, bytes(range(256)) * 4000)
    for cut in (packed[:-1], packed[: len(packed) // 2], packed[:6]):
        with pytest.raises(CompressionError, match="zstd"):
            decompress(CompressionType.ZSTD, cut, max_bytes=GIB)


def test_gzip_reads_concatenated_members_and_refuses_trailing_garbage() -> None:
    two = gzip.compress(b"ab", mtime=0) + gzip.compress(b"cd", mtime=0)
    assert decompress(CompressionType.GZIP, two, max_bytes=4) == b"abcd"
    with pytest.raises(CompressionError, match="gzip"):
        decompress(CompressionType.GZIP, two + b"junk", max_bytes=100)


def test_the_bound_is_64_times_the_batch_with_a_floor_of_kafkas_default_max_message_bytes() -> None:
    assert max_inflated_bytes(100) == MAX_INFLATION_RATIO * 1048588
    assert max_inflated_bytes(4 << 20) == MAX_INFLATION_RATIO * (4 << 20)


def huge_record_prefix(value_bytes: int) -> bytes:
    body = b"\x00\x00\x00\x01" + encode_varint(value_bytes)
    return encode_varint(len(body) + value_bytes + 1) + body


@pytest.mark.parametrize(
    ("prefix", "expected", "message"),
    [
        # one 2 GiB record: refused on reading its length
        (huge_record_prefix(2**31 - 64), InflatedSizeLimitError, "longer than the limit"),
        # an honest 1 KiB record, then zeros: one chunk more shows bytes follow it
        (huge_record_prefix(1024 - 8) + bytes(1024 - 8) + b"\x00", CorruptRecordError,
         "or more bytes remain after the declared 1 records"),
    ],
)  # fmt: skip
def test_a_4_gib_zstd_bomb_costs_a_chunk_of_memory_and_well_under_a_second(
    prefix: bytes, expected: type[CorruptRecordError], message: str
) -> None:
    batch = batch_of(zstd_zeros_frame(prefix, 4 * GIB), 1, CompressionType.ZSTD)
    header = validate_batch(batch)
    tracemalloc.start()
    # CPU time, not wall time: the work this process did (inflating 4 GiB costs seconds of
    # it), whatever else the machine runs meanwhile.
    started = time.process_time()
    try:
        with pytest.raises(CorruptRecordError, match=message) as caught:
            validate_records(header, batch[BATCH_HEADER_SIZE:], max_bytes=16 << 20)
        elapsed = time.process_time() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert type(caught.value) is expected
    assert peak < 8 * DECOMPRESS_CHUNK_BYTES  # a few chunks, not the 16 MiB limit
    assert elapsed < 1.0


@pytest.mark.parametrize("compression", CODECS)
def test_honest_records_past_the_limit_are_refused_at_the_limit(
    compression: CompressionType,
) -> None:
    records = [SimpleRecord(b"x" * 100, timestamp=i) for i in range(200)]
    batch = build_batch(records, compression=compression)
    header = validate_batch(batch)
    payload = batch[BATCH_HEADER_SIZE:]
    inflated = len(decompress(compression, payload, max_bytes=GIB))
    validate_records(header, payload, max_bytes=inflated)
    with pytest.raises(InflatedSizeLimitError, match="past the limit"):
        validate_records(header, payload, max_bytes=inflated - 1)


def test_readers_of_stored_batches_use_the_same_bound() -> None:
    batch = batch_of(zstd_zeros_frame(huge_record_prefix(GIB), GIB), 1, CompressionType.ZSTD)
    with pytest.raises(InflatedSizeLimitError):
        iter_records(batch)


def test_a_timestamp_lookup_over_a_stored_bomb_is_a_corrupt_log_error(tmp_path: Path) -> None:
    """Followers store what the leader sent; a bomb that got in is never inflated to answer."""
    log = open_log(tmp_path)
    bomb = batch_of(zstd_zeros_frame(huge_record_prefix(GIB), GIB), 1, CompressionType.ZSTD)
    log.append_as_follower(bomb)
    with pytest.raises(CorruptLogError, match="longer than the limit"):
        log.fetch_offset_for_timestamp(0)
    with pytest.raises(CorruptLogError, match="longer than the limit"):
        log.fetch_offset_for_timestamp(MAX_TIMESTAMP)


def test_a_snappy_block_declaring_more_than_snappy_can_express_is_corrupt() -> None:
    # varint 2^30, then a 2-byte literal: snappy cannot make 1 GiB out of 7 bytes.
    block = bytes([0x80, 0x80, 0x80, 0x80, 0x04]) + b"\x04ab"
    with pytest.raises(CompressionError, match="cannot hold 1073741824 bytes"):
        decompress(CompressionType.SNAPPY, block, max_bytes=2 * GIB)
    dense = snappy.compress(bytes(1 << 20))  # zeros: snappy's best ratio
    assert decompress(CompressionType.SNAPPY, dense, max_bytes=1 << 20) == bytes(1 << 20)
