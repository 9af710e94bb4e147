"""Kafka wire primitives: a bounds-checked reader over a memoryview, and small encoders.

The protocol guide's primitive types: big-endian fixed-width integers, ``UNSIGNED_VARINT``
(base-128, little-endian groups, at most 5 bytes for 32 bits), ``STRING`` (int16 length),
``COMPACT_STRING`` (unsigned varint length + 1, 0 = null), ``BYTES``/``RECORDS`` (int32 length,
-1 = null) and their compact forms, ``UUID`` (16 bytes), arrays (int32 count, or unsigned varint
count + 1 when compact) and tagged-field sections (count, then tag, size, bytes).

Every read checks the bytes are there and raises ``MalformedRequestError`` naming the field, so
the hand-written decoders never raise anything else on bad input. Byte fields come back as
memoryview slices of the input, never copies.
"""

from __future__ import annotations

import struct
import uuid

from pykraft.protocol.errors import MalformedRequestError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")

MAX_UVARINT_BYTES = 5
ZERO_UUID = uuid.UUID(int=0)
# One empty tagged-field section: what every flexible struct ends with when it has no tags.
EMPTY_TAGGED_FIELDS = b"\x00"


class Reader:
    """Reads Kafka primitives from ``buf`` starting at ``position``; ``position`` advances."""

    __slots__ = ("_buf", "_end", "position")

    def __init__(self, buf: bytes | bytearray | memoryview, position: int = 0) -> None:
        self._buf = memoryview(buf)
        self._end = len(self._buf)
        self.position = position

    @property
    def remaining(self) -> int:
        return self._end - self.position

    def _need(self, size: int, field: str) -> int:
        start = self.position
        if size > self._end - start:
            raise MalformedRequestError(
                field, f"needs {size} bytes, only {self._end - start} left", start
            )
        self.position = start + size
        return start

    def int8(self, field: str) -> int:
        value: int = INT8.unpack_from(self._buf, self._need(1, field))[0]
        return value

    def boolean(self, field: str) -> bool:
        return self.int8(field) != 0

    def int16(self, field: str) -> int:
        value: int = INT16.unpack_from(self._buf, self._need(2, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = INT32.unpack_from(self._buf, self._need(4, field))[0]
        return value

    def int64(self, field: str) -> int:
        value: int = INT64.unpack_from(self._buf, self._need(8, field))[0]
        return value

    def uuid(self, field: str) -> uuid.UUID:
        start = self._need(16, field)
        return uuid.UUID(bytes=bytes(self._buf[start : start + 16]))

    def uvarint(self, field: str) -> int:
        """An unsigned varint of at most 32 bits (``ByteUtils.readUnsignedVarint``)."""
        start = self.position
        if start < self._end and self._buf[start] < 0x80:  # one byte: most lengths and counts
            self.position = start + 1
            return int(self._buf[start])
        value = 0
        for index in range(MAX_UVARINT_BYTES):
            byte = self._buf[self._need(1, field)]
            value |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                if value > 0xFFFF_FFFF:
                    raise MalformedRequestError(field, "varint overflows 32 bits", start)
                return value
        raise MalformedRequestError(field, f"varint longer than {MAX_UVARINT_BYTES} bytes", start)

    def bytes_view(self, size: int, field: str) -> memoryview:
        start = self._need(size, field)
        return self._buf[start : start + size]

    def _text(self, size: int, field: str) -> str:
        start = self.position
        try:
            return str(self.bytes_view(size, field), "utf-8")
        except UnicodeDecodeError as error:
            raise MalformedRequestError(field, f"invalid UTF-8 ({error.reason})", start) from None

    def string(self, field: str, *, compact: bool) -> str:
        value = self.nullable_string(field, compact=compact)
        if value is None:
            raise MalformedRequestError(field, "null where a string is required", self.position)
        return value

    def nullable_string(self, field: str, *, compact: bool) -> str | None:
        start = self.position
        size = self.uvarint(field) - 1 if compact else self.int16(field)
        if size < -1:
            raise MalformedRequestError(field, f"string length {size} is negative", start)
        return None if size == -1 else self._text(size, field)

    def nullable_bytes(self, field: str, *, compact: bool) -> memoryview | None:
        """``BYTES``/``RECORDS`` (or their compact forms) as a zero-copy slice; None when null."""
        start = self.position
        size = self.uvarint(field) - 1 if compact else self.int32(field)
        if size < -1:
            raise MalformedRequestError(field, f"bytes length {size} is negative", start)
        return None if size == -1 else self.bytes_view(size, field)

    def array_length(self, field: str, *, compact: bool, nullable: bool = False) -> int:
        """Element count of an array; -1 for a null array (only when ``nullable``).

        The count is bounded by the bytes left (every element takes at least one byte), so a
        hostile count can never make a decoder loop or allocate beyond the frame.
        """
        start = self.position
        count = self.uvarint(field) - 1 if compact else self.int32(field)
        if count == -1 and nullable:
            return -1
        if count < 0:
            raise MalformedRequestError(field, f"array length {count} is invalid", start)
        if count > self.remaining:
            raise MalformedRequestError(
                field, f"array claims {count} elements but only {self.remaining} bytes left", start
            )
        return count

    def tagged_fields(self, field: str) -> dict[int, memoryview]:
        """A tagged-field section: ``{tag: raw bytes}``.

        Writers emit tags in increasing order (KIP-482); like Kafka's generated readers we do
        not insist on it, and a repeated tag keeps its last value.
        """
        tags: dict[int, memoryview] = {}
        for _ in range(self._tag_count(field)):
            tag = self.uvarint(field)
            tags[tag] = self.bytes_view(self.uvarint(field), field)
        return tags

    def skip_tagged_fields(self, field: str) -> None:
        """Read past a tagged-field section whose tags this decoder does not use."""
        for _ in range(self._tag_count(field)):
            self.uvarint(field)
            self.bytes_view(self.uvarint(field), field)

    def _tag_count(self, field: str) -> int:
        start = self.position
        count = self.uvarint(field)
        # Every tagged field takes at least two bytes (tag and size).
        if 2 * count > self.remaining:
            raise MalformedRequestError(
                field, f"{count} tagged fields but only {self.remaining} bytes left", start
            )
        return count


def encode_uvarint(value: int) -> bytes:
    """``ByteUtils.writeUnsignedVarint`` for 0 <= value < 2**32."""
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    # Unrolled for the sizes Fetch responses write for every partition's records.
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x20_0000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS: tuple[bytes, ...] = tuple(bytes([n]) for n in range(0x80))


def encode_string(value: str, *, compact: bool) -> bytes:
    raw = value.encode("utf-8")
    prefix = encode_uvarint(len(raw) + 1) if compact else INT16.pack(len(raw))
    return prefix + raw


def encode_nullable_string(value: str | None, *, compact: bool) -> bytes:
    if value is None:
        return b"\x00" if compact else b"\xff\xff"
    return encode_string(value, compact=compact)


def encode_array_length(count: int, *, compact: bool) -> bytes:
    """Length prefix of an array of ``count`` elements; -1 encodes a null array."""
    return encode_uvarint(count + 1) if compact else INT32.pack(count)


def encode_bytes_length(size: int, *, compact: bool) -> bytes:
    """Length prefix of ``BYTES``/``RECORDS``; -1 encodes null."""
    return encode_uvarint(size + 1) if compact else INT32.pack(size)


def encode_tagged_fields(fields: list[tuple[int, bytes]]) -> bytes:
    """A tagged-field section from ``(tag, encoded value)`` pairs in increasing tag order."""
    if not fields:
        return EMPTY_TAGGED_FIELDS
    parts = [encode_uvarint(len(fields))]
    for tag, value in fields:
        parts.append(encode_uvarint(tag))
        parts.append(encode_uvarint(len(value)))
        parts.append(value)
    return b"".join(parts)
