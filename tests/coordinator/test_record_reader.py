"""The byte primitives both coordinators' record codecs read with. Varint cases mirror Kafka's
``ByteUtilsTest.testUnsignedVarintSerde`` and ``testInvalidVarint`` (a sixth continuation byte)."""

from __future__ import annotations

import pytest

from pykraft.coordinator.record_reader import RecordReader


class _Bad(ValueError):
    pass


def reader(data: bytes) -> RecordReader:
    return RecordReader(data, "test value", _Bad)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\x00", 0),
        (b"\x01", 1),
        (b"\x7f", 127),
        (b"\x80\x01", 128),
        (b"\xac\x02", 300),
        (b"\xff\xff\xff\xff\x07", 0x7FFFFFFF),
        (b"\xff\xff\xff\xff\x0f", 0xFFFFFFFF),
    ],
)
def test_unsigned_varint(data: bytes, expected: int) -> None:
    r = reader(data)
    assert r.uvarint() == expected
    r.end()


def test_a_sixth_varint_byte_is_refused_with_the_callers_error() -> None:
    with pytest.raises(_Bad, match="test value: a varint longer than 5 bytes"):
        reader(b"\xff" * 6).uvarint()


def test_big_endian_integers_in_sequence() -> None:
    r = reader(bytes.fromhex("fffffefffffffd7ffffffffffffffe"))
    assert (r.int8(), r.int16(), r.int32(), r.int64()) == (-1, -2, -3, 2**63 - 2)
    r.end()


def test_truncated_input_names_the_position() -> None:
    r = reader(b"\x00\x01\x02")
    assert r.int16() == 1
    with pytest.raises(_Bad, match="needs 4 bytes at byte 2, has 3"):
        r.int32()


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(_Bad, match="needs -1 bytes"):
        reader(b"abc").take(-1)


def test_text_is_utf8() -> None:
    r = reader("grüße".encode())
    assert r.text(len("grüße".encode())) == "grüße"
    with pytest.raises(_Bad, match="not UTF-8"):
        reader(b"\xff\xfe").text(2)


def test_bytes_left_after_the_last_field() -> None:
    r = reader(b"\x00\x00\x01")
    r.int16()
    with pytest.raises(_Bad, match="1 bytes left after the last field"):
        r.end()
