"""Decompression bombs built by hand, cheaply: the unit and hostile tests share them.

zstd: one frame of a raw block (the given prefix) and RLE blocks of zeros, 4 bytes per 128 KiB
(RFC 8878 §3.1.1.2), so a 4 GiB bomb is 128 KiB and costs nothing to build.
"""

from __future__ import annotations

import struct

ZSTD_BLOCK_BYTES = 128 * 1024
_ZSTD_MAGIC = 0xFD2FB528
_NO_CONTENT_SIZE_WINDOW_128_KIB = b"\x00\x38"  # frame header descriptor, window descriptor
_RAW, _RLE = 0, 1


def _block_header(size: int, block_type: int, last: bool) -> bytes:
    return ((size << 3) | (block_type << 1) | int(last)).to_bytes(3, "little")


def zstd_zeros_frame(prefix: bytes, inflated_bytes: int) -> bytes:
    """``prefix`` then zeros, ``inflated_bytes`` in all (rounded down to whole RLE blocks)."""
    blocks = (inflated_bytes - len(prefix)) // ZSTD_BLOCK_BYTES
    assert blocks >= 1 and len(prefix) <= ZSTD_BLOCK_BYTES
    frame = bytearray(struct.pack("<I", _ZSTD_MAGIC) + _NO_CONTENT_SIZE_WINDOW_128_KIB)
    frame += _block_header(len(prefix), _RAW, False) + prefix
    frame += (_block_header(ZSTD_BLOCK_BYTES, _RLE, False) + b"\x00") * (blocks - 1)
    frame += _block_header(ZSTD_BLOCK_BYTES, _RLE, True) + b"\x00"
    return bytes(frame)
