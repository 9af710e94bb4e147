"""Walking the batches of a segment file without loading it.

Two ways, for two jobs:

* ``read_batch_header`` reads only the 61-byte header at a position (offset lookups and reads
  scan headers; batch bodies stay on disk). It checks the shape, not the CRC.
* ``iter_valid_batches`` reads the file in large chunks and checks every batch fully, CRC32C
  included (recovery). It raises ``CorruptRecordError`` at the first torn or corrupt batch,
  whose ``position`` is where the valid data ends.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from pykraft.storage.record_batch import (
    BATCH_HEADER_SIZE,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptRecordError,
    validate_batch,
)

# The header layout of storage.record_batch, unpacked here from a 61-byte pread: parse_header
# wants the whole batch in memory, and scanning a segment must not read batch bodies.
_HEADER = struct.Struct(">qiibIhiqqqhii")
RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024


def read_batch_header(fd: int, position: int, file_size: int) -> BatchHeader:
    """The header of the batch at ``position``, which must lie wholly below ``file_size``."""
    data = os.pread(fd, BATCH_HEADER_SIZE, position)
    if len(data) < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            "header", f"only {len(data)} bytes left, a v2 header needs 61", position
        )
    header = BatchHeader(*_HEADER.unpack(data))
    if header.magic != CURRENT_MAGIC:
        raise CorruptRecordError("magic", f"{header.magic} is not supported", position)
    if header.batch_length < MIN_BATCH_LENGTH or position + header.size_in_bytes > file_size:
        raise CorruptRecordError(
            "batchLength", f"{header.batch_length} does not fit the segment", position
        )
    return header


def iter_valid_batches(fd: int, file_size: int) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of CRC-valid batches from the start of the file, reading in
    chunks; raises CorruptRecordError at the first torn or corrupt batch."""
    position = 0
    while position < file_size:
        chunk = os.pread(fd, min(RECOVERY_CHUNK_BYTES, file_size - position), position)
        offset = 0
        while position + offset < file_size:
            if file_size - position - offset < LOG_OVERHEAD:
                raise CorruptRecordError(
                    "batchLength", "torn batch at the end of the log", position + offset
                )
            if len(chunk) - offset < LOG_OVERHEAD:
                break  # refill from here
            size = _batch_size_at(chunk, offset, position + offset, file_size)
            if offset + size > len(chunk):
                if offset:
                    break  # refill from here
                chunk = os.pread(fd, size, position)  # one batch bigger than a chunk
            yield position + offset, _validate(chunk, offset, position)
            offset += size
        position += offset


def _batch_size_at(chunk: bytes, offset: int, position: int, file_size: int) -> int:
    """Size of the batch at ``offset`` in ``chunk`` (file ``position``); it must fit the file."""
    batch_length = int.from_bytes(chunk[offset + 8 : offset + 12], "big", signed=True)
    size = batch_length + LOG_OVERHEAD
    if batch_length < MIN_BATCH_LENGTH or position + size > file_size:
        raise CorruptRecordError(
            "batchLength", f"batch of {size} bytes does not fit the log", position
        )
    return size


def _validate(buffer: bytes, offset: int, buffer_position: int) -> BatchHeader:
    try:
        return validate_batch(buffer, offset)
    except CorruptRecordError as error:
        raise CorruptRecordError(error.field, error.message, buffer_position + offset) from None
