"""Kafka's zig-zag varints (int32) and varlongs (int64), as used inside RecordBatch v2.

Kafka encodes signed numbers with zig-zag (``(n << 1) ^ (n >> 63)``) so small negative numbers
stay short, then as base-128 little-endian groups with the high bit as "more follows"
(``org.apache.kafka.common.utils.ByteUtils.writeVarint``/``writeVarlong``). For values in the
int32 range the zig-zag of a varint and a varlong is the same number, so one encoder serves both.

Decoding is strict: at most 5 bytes for a varint and 10 for a varlong, and the decoded value must
fit the type, otherwise ``CorruptRecordError`` names the field and the byte position.
"""

from __future__ import annotations

from pykraft.storage.record_batch import CorruptRecordError

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Single-byte varints are by far the most common (small lengths, deltas, counts): precompute them.
_SMALL: tuple[bytes, ...] = tuple(bytes([((n << 1) ^ (n >> 63)) & 0x7F]) for n in range(-64, 64))


def zigzag_encode(value: int) -> int:
    """Map a signed int64 to an unsigned one: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ..."""
    return ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF


def zigzag_decode(unsigned: int) -> int:
    return (unsigned >> 1) ^ -(unsigned & 1)


def encode_varint(value: int) -> bytes:
    """Encode a signed int32 (``ByteUtils.writeVarint``)."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint {value} does not fit in int32")
    return encode_varlong(value)


def encode_varlong(value: int) -> bytes:
    """Encode a signed int64 (``ByteUtils.writeVarlong``)."""
    if -64 <= value < 64:
        return _SMALL[value + 64]
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong {value} does not fit in int64")
    unsigned = zigzag_encode(value)
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def decode_varint(
    data: bytes | bytearray, position: int, field: str, end: int | None = None
) -> tuple[int, int]:
    """Decode a signed int32 at ``position``; return ``(value, next_position)``.

    Bytes at or after ``end`` (default: the end of ``data``) count as missing.
    """
    return _decode(data, position, field, MAX_VARINT_BYTES, 32, end)


def decode_varlong(
    data: bytes | bytearray, position: int, field: str, end: int | None = None
) -> tuple[int, int]:
    """Decode a signed int64 at ``position``; return ``(value, next_position)``."""
    return _decode(data, position, field, MAX_VARLONG_BYTES, 64, end)


def _decode(
    data: bytes | bytearray, position: int, field: str, max_bytes: int, bits: int, end: int | None
) -> tuple[int, int]:
    unsigned = 0
    shift = 0
    if end is None:
        end = len(data)
    for index in range(position, position + max_bytes):
        if index >= end:
            raise CorruptRecordError(
                field, f"varint truncated after {index - position} bytes", position
            )
        byte = data[index]
        unsigned |= (byte & 0x7F) << shift
        if byte < 0x80:
            if unsigned >> bits:
                raise CorruptRecordError(field, f"varint overflows int{bits}", position)
            return zigzag_decode(unsigned), index + 1
        shift += 7
    raise CorruptRecordError(field, f"varint longer than {max_bytes} bytes", position)
