"""Reading a coordinator record's key or value: the byte-level primitives shared by the group
coordinator's consumer group records (``__consumer_offsets`` types 3-8, KIP-848) and the
transaction coordinator's ``__transaction_state`` records.

Kafka generates one ``Readable`` per record schema from the JSON message specs
(``ConsumerGroupMemberMetadataValue.json``, ``TransactionLogValue.json``); the primitives under
them — big-endian fixed-width integers, unsigned varints (``ByteUtils.readUnsignedVarint``),
UTF-8 strings — are the same for every schema, so one reader serves both coordinators. Each
caller names its own error type, so a malformed record surfaces as that coordinator's error
(``CoordinatorRecordError``, ``TransactionLogError``); the schema-specific reads (compact
strings, arrays, tagged fields) stay with the records module that knows the schema.

Pure: no I/O.
"""

from __future__ import annotations

import struct

MAX_UNSIGNED_VARINT_BYTES = 5  # an int32's varint (ByteUtils.readUnsignedVarint)

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordReader:
    """A cursor over ``data``; every failure raises ``error`` naming ``what`` is read."""

    def __init__(self, data: bytes, what: str, error: type[ValueError]) -> None:
        self.data = data
        self.position = 0
        self.what = what
        self.error = error

    def take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise self.error(
                f"{self.what}: needs {size} bytes at byte {self.position}, has {len(self.data)}"
            )
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def int8(self) -> int:
        value: int = _INT8.unpack(self.take(1))[0]
        return value

    def int16(self) -> int:
        value: int = _INT16.unpack(self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self.take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack(self.take(8))[0]
        return value

    def uvarint(self) -> int:
        """An unsigned varint (flexible versions' lengths, counts and tags)."""
        value = 0
        for index in range(MAX_UNSIGNED_VARINT_BYTES):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                return value
        raise self.error(f"{self.what}: a varint longer than {MAX_UNSIGNED_VARINT_BYTES} bytes")

    def text(self, size: int) -> str:
        """The next ``size`` bytes as UTF-8."""
        try:
            return self.take(size).decode("utf-8")
        except UnicodeDecodeError as error:
            raise self.error(f"{self.what}: a string is not UTF-8 ({error})") from None

    def end(self) -> None:
        if self.position != len(self.data):
            raise self.error(
                f"{self.what}: {len(self.data) - self.position} bytes left after the last field"
            )
