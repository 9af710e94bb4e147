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

Every failure to decompress raises ``CorruptRecordError`` with field ``records`` and a message
naming the codec; library exceptions never escape.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import lz4.frame
import snappy
import zstandard

from storage.record_batch import CompressionType, CorruptRecordError

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_VERSION = 1
_XERIAL_COMPATIBLE_VERSION = 1
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")


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


def decompress(compression: CompressionType, data: bytes | memoryview) -> bytes:
    """Decompress a records section; bad input raises ``CorruptRecordError``."""
    if compression is CompressionType.NONE:
        return bytes(data)
    raw = bytes(data)
    try:
        if compression is CompressionType.GZIP:
            return gzip.decompress(raw)
        if compression is CompressionType.SNAPPY:
            return _snappy_decompress(raw)
        if compression is CompressionType.LZ4:
            return _lz4_decompress(raw)
        if compression is CompressionType.ZSTD:
            return _zstd_decompress(raw)
    except (OSError, EOFError, zlib.error, RuntimeError, ValueError,
            snappy.UncompressError, zstandard.ZstdError) as error:
        reason = str(error) or type(error).__name__
        raise CorruptRecordError(
            "records", f"{compression.name.lower()} data is corrupt: {reason}"
        ) from error
    raise CorruptRecordError("attributes", f"unknown compression codec {int(compression)}")


def _xerial_snappy_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPATIBLE_VERSION)]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = snappy.compress(bytes(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(snappy.decompress(data))
    # Version fields are not checked: some producers write them little-endian (kafka-python
    # issue #2414) and xerial itself only ever wrote version 1.
    if len(data) < _XERIAL_HEADER.size:
        raise ValueError(f"xerial header truncated at {len(data)} bytes")
    out = bytearray()
    pos = _XERIAL_HEADER.size
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError(f"xerial block length truncated at byte {pos}")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise ValueError(f"xerial block of {length} bytes at byte {pos - 4} runs past the end")
        out += snappy.decompress(data[pos : pos + length])
        pos += length
    return bytes(out)


def _lz4_decompress(data: bytes) -> bytes:
    out = bytearray()
    remaining = data
    # A records section is normally one frame; accept concatenated frames like lz4 tools do.
    while remaining:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        out += decompressor.decompress(remaining)
        if not decompressor.eof:
            raise ValueError("lz4 frame is truncated")
        remaining = decompressor.unused_data or b""
    return bytes(out)


def _zstd_decompress(data: bytes) -> bytes:
    out = bytearray()
    remaining = data
    while remaining:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        out += decompressor.decompress(remaining)
        if not decompressor.eof:
            raise ValueError("zstd frame is truncated")
        remaining = decompressor.unused_data
    return bytes(out)
