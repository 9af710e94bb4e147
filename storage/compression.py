"""The four Kafka compression codecs for the records section of a v2 batch.

What each codec's bytes look like is what Kafka's Java client writes (``CompressionType`` and
the ``*Factory`` classes in ``org.apache.kafka.common.compress``):

- gzip: a gzip stream (``GZIPOutputStream``).
- snappy: xerial's block framing (``SnappyOutputStream``): a 16-byte header (``0x82 SNAPPY 0``,
  version 1, compatible version 1), then blocks of ``int32 length`` + raw snappy, 32 KiB of input
  per block. Readers also accept plain raw snappy, as ``SnappyInputStream`` does.
- lz4: the LZ4 frame format with independent blocks (Kafka's ``Lz4BlockOutputStream`` rejects
  linked blocks).
- zstd: one zstd frame (``ZstdOutputStream``); frames written by streaming encoders carry no
  content size, so decoding streams instead of trusting a size field.

Decompression always has a bound. ``iter_inflated`` streams the inflated bytes in chunks of
``DECOMPRESS_CHUNK_BYTES`` and raises ``InflatedSizeLimitError`` as soon as the caller's limit is
passed, so a decompression bomb costs one chunk of memory and the time to inflate the limit, and
nothing here ever allocates what the compressed bytes merely claim. Every failure to decompress
raises ``CompressionError`` (a ``CorruptRecordError``) with field ``records`` and a message
naming the codec; library exceptions never escape.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable, Iterator

import lz4.frame
import snappy
import zstandard

from pykraft.storage.record_batch import CompressionType, CorruptRecordError

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_VERSION = 1
_XERIAL_COMPATIBLE_VERSION = 1
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")
# Chunks of inflated bytes: the memory a bounded reader holds besides the record it is on.
DECOMPRESS_CHUNK_BYTES = 256 * 1024
SNAPPY_MAX_EXPANSION = 32
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MAGIC_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_DICT_ID_BYTES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_BYTES = (0, 2, 4, 8)  # by Frame_Content_Size_flag; 0 means 1 if single-segment
_ZSTD_RESERVED_BLOCK_TYPE = 3
_ZSTD_RLE_BLOCK_TYPE = 1


class CompressionError(CorruptRecordError):
    """The records section is not valid data of the batch's codec."""


class InflatedSizeLimitError(CorruptRecordError):
    """The records section inflates past the limit its reader allows (a decompression bomb,
    or a batch bigger than the limit was chosen for)."""


def compress(compression: CompressionType, data: bytes) -> bytes:
    """Compress a records section the way Kafka's Java producer does."""
    if compression is CompressionType.NONE:
        return data
    if compression is CompressionType.GZIP:
        # mtime=0 keeps the output deterministic (Java writes 0 as well).
        return gzip.compress(data, mtime=0)
    if compression is CompressionType.SNAPPY:
        return _xerial_snappy_compress(data)
    if compression is CompressionType.LZ4:
        return bytes(lz4.frame.compress(data, block_linked=False))
    return bytes(zstandard.ZstdCompressor().compress(data))


def decompress(compression: CompressionType, data: bytes | memoryview, *, max_bytes: int) -> bytes:
    """Decompress a records section of at most ``max_bytes`` inflated bytes.

    Bad input raises ``CompressionError``; more than ``max_bytes`` raises
    ``InflatedSizeLimitError`` before more than one chunk past the limit is held.
    """
    if compression is CompressionType.NONE:
        return bytes(data)
    return b"".join(iter_inflated(compression, data, max_bytes=max_bytes))


def iter_inflated(
    compression: CompressionType, data: bytes | memoryview, *, max_bytes: int
) -> Iterator[bytes]:
    """The inflated bytes of a compressed records section, in chunks, never more than
    ``max_bytes`` in all.

    Chunks hold at most ``DECOMPRESS_CHUNK_BYTES`` (a snappy block: its declared size, which
    is checked against the budget before it is inflated). The limit is checked as each chunk
    arrives, so a bomb costs one chunk of memory and the time to inflate ``max_bytes``.
    """
    if compression is CompressionType.NONE or compression not in _INFLATERS:
        raise CorruptRecordError("attributes", f"{compression!r} is not a compression codec")
    total = 0
    try:
        for chunk in _INFLATERS[compression](bytes(data), max_bytes):
            total += len(chunk)
            if total > max_bytes:
                raise InflatedSizeLimitError(
                    "records",
                    f"{compression.name.lower()} data inflates past the limit of {max_bytes} bytes",
                )
            yield chunk
    except (
        OSError,
        EOFError,
        zlib.error,
        RuntimeError,
        ValueError,
        IndexError,
        snappy.UncompressError,
        zstandard.ZstdError,
    ) as error:
        if isinstance(error, CorruptRecordError):
            raise
        reason = str(error) or type(error).__name__
        raise CompressionError(
            "records", f"{compression.name.lower()} data is corrupt: {reason}"
        ) from error


def _xerial_snappy_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPATIBLE_VERSION)]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = snappy.compress(bytes(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    if not data.startswith(XERIAL_MAGIC):
        yield _snappy_block(data, max_bytes)
        return
    # Version fields are not checked: some producers write them little-endian (kafka-python
    # issue #2414) and xerial itself only ever wrote version 1.
    if len(data) < _XERIAL_HEADER.size:
        raise ValueError(f"xerial header truncated at {len(data)} bytes")
    pos = _XERIAL_HEADER.size
    budget = max_bytes
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError(f"xerial block length truncated at byte {pos}")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise ValueError(f"xerial block of {length} bytes at byte {pos - 4} runs past the end")
        block = _snappy_block(data[pos : pos + length], budget)
        budget -= len(block)
        yield block
        pos += length


def _snappy_block(block: bytes, max_bytes: int) -> bytes:
    """One raw snappy block, refused before inflating when it declares more than ``max_bytes``.

    A raw snappy block opens with its uncompressed length as a little-endian base-128 varint
    (snappy's format_description.txt), so the limit is checked before any memory is taken,
    and so is what snappy can express at all: its densest element, a 3-byte copy, yields 64
    bytes, so no block inflates more than about 21x (``SNAPPY_MAX_EXPANSION`` has slack).
    """
    declared = _snappy_declared_length(block)
    if declared > SNAPPY_MAX_EXPANSION * len(block):
        raise ValueError(f"a snappy block of {len(block)} bytes cannot hold {declared} bytes")
    if declared > max_bytes:
        raise InflatedSizeLimitError(
            "records", f"a snappy block declares {declared} bytes, past the limit of {max_bytes}"
        )
    return bytes(snappy.decompress(block))


def _snappy_declared_length(block: bytes) -> int:
    value = 0
    for index in range(min(len(block), 5)):
        value |= (block[index] & 0x7F) << (7 * index)
        if block[index] < 0x80:
            return value
    raise ValueError("snappy block length is not a varint")


def _gzip_chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    """Every gzip member in turn (``GZIPInputStream`` reads concatenated members too)."""
    remaining = data
    while remaining:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        pending = remaining
        while not inflater.eof:
            chunk = inflater.decompress(pending, DECOMPRESS_CHUNK_BYTES)
            stalled = not chunk and len(inflater.unconsumed_tail) == len(pending)
            pending = inflater.unconsumed_tail
            if chunk:
                yield chunk
            elif not pending or stalled:  # no input left, or none consumed: never loop idle
                raise EOFError("gzip stream is truncated")
        remaining = inflater.unused_data
        if not remaining.strip(b"\x00"):
            return  # trailing zero padding, as Python's gzip module allows


def _lz4_chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    """Every LZ4 frame in turn; a records section is normally one frame."""
    remaining = data
    while remaining:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        chunk = decompressor.decompress(remaining, max_length=DECOMPRESS_CHUNK_BYTES)
        while True:
            if chunk:
                yield bytes(chunk)
            if decompressor.eof:
                break
            if decompressor.needs_input:
                raise EOFError("lz4 frame is truncated")
            chunk = decompressor.decompress(b"", max_length=DECOMPRESS_CHUNK_BYTES)
        remaining = decompressor.unused_data or b""


def _zstd_chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    """zstd frames, inflated by ``stream_reader`` (whose ``read`` is bounded).

    ``stream_reader`` ends silently on a truncated frame, so the frames' structure is walked
    first (``check_zstd_frames``): it must consist of whole frames.
    """
    check_zstd_frames(data)
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    while chunk := reader.read(DECOMPRESS_CHUNK_BYTES):
        yield chunk


def check_zstd_frames(data: bytes) -> None:
    """Raise ValueError unless ``data`` is a sequence of whole zstd frames (RFC 8878 §3.1).

    Walks frame and block headers only (a few bytes per 128 KiB block), no decompression.
    """
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError(f"zstd frame magic truncated at byte {pos}")
        magic = int.from_bytes(data[pos : pos + 4], "little")
        if magic & _ZSTD_SKIPPABLE_MAGIC_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if pos + 8 > len(data):
                raise ValueError(f"zstd skippable frame truncated at byte {pos}")
            pos += 8 + int.from_bytes(data[pos + 4 : pos + 8], "little")
            if pos > len(data):
                raise ValueError("zstd skippable frame runs past the end")
            continue
        if magic != _ZSTD_MAGIC:
            raise ValueError(f"no zstd frame at byte {pos}")
        pos = _zstd_frame_end(data, pos + 4)


def _zstd_frame_end(data: bytes, pos: int) -> int:
    """The end of the frame whose header descriptor is at ``pos``."""
    if pos >= len(data):
        raise ValueError("zstd frame header truncated")
    descriptor = data[pos]
    single_segment = bool(descriptor & 0x20)
    has_checksum = bool(descriptor & 0x04)
    content_size_bytes = _ZSTD_CONTENT_SIZE_BYTES[descriptor >> 6] or int(single_segment)
    pos += 1 + (0 if single_segment else 1)
    pos += _ZSTD_DICT_ID_BYTES[descriptor & 0x03] + content_size_bytes
    while True:
        if pos + 3 > len(data):
            raise ValueError("zstd block header truncated")
        block_header = int.from_bytes(data[pos : pos + 3], "little")
        block_type = (block_header >> 1) & 0x03
        if block_type == _ZSTD_RESERVED_BLOCK_TYPE:
            raise ValueError(f"reserved zstd block type at byte {pos}")
        pos += 3 + (1 if block_type == _ZSTD_RLE_BLOCK_TYPE else block_header >> 3)
        if pos > len(data):
            raise ValueError("zstd block truncated")
        if block_header & 0x01:  # Last_Block
            break
    pos += 4 if has_checksum else 0
    if pos > len(data):
        raise ValueError("zstd checksum truncated")
    return pos


_INFLATERS: dict[CompressionType, Callable[[bytes, int], Iterator[bytes]]] = {
    CompressionType.GZIP: _gzip_chunks,
    CompressionType.SNAPPY: _snappy_chunks,
    CompressionType.LZ4: _lz4_chunks,
    CompressionType.ZSTD: _zstd_chunks,
}
