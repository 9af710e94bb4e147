"""Java's ``String.hashCode`` and Kafka's ``Utils.abs`` in Java ``int`` arithmetic.

Expected values are worked out by hand (KAFKA_FORMATS.md "Hashes Kafka uses"):
"hello" = ((((104*31+101)*31+108)*31+108)*31+111) = 99162322; "Aa" and "BB" are Java's
classic collision (65*31+97 = 66*31+66 = 2112); "polygenelubricants" is the string whose
hashCode is exactly Integer.MIN_VALUE; U+1F600 is the surrogate pair D83D DE00, so its hash is
0xD83D*31 + 0xDE00 = 1772899.
"""

from __future__ import annotations

from pykraft.protocol.java_hash import java_string_hash, kafka_abs, to_int32

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1


def check_hash(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected, s


def test_java_string_hash() -> None:
    check_hash("", 0)
    check_hash("a", 97)
    check_hash("hello", 99162322)
    check_hash("Aa", 2112)
    check_hash("BB", 2112)
    check_hash("polygenelubricants", INT_MIN)
    # Non-BMP: two UTF-16 code units, not one code point (0x1F600 would give 128512).
    check_hash("\U0001f600", 0xD83D * 31 + 0xDE00)
    check_hash("\U0001f600", 1772899)
    # A lone surrogate is a legal Java char and hashes as itself.
    check_hash("\ud83d", 0xD83D)
    # BMP non-ASCII: one unit each ('é' = U+00E9 = 233).
    check_hash("é", 233)


def test_java_string_hash_overflows_like_java_int() -> None:
    # 31^6 * 97 > 2^31: the running hash must wrap, never grow past 32 bits.
    h = java_string_hash("aaaaaaa")
    assert INT_MIN <= h <= INT_MAX
    unwrapped = 0
    for ch in "aaaaaaa":
        unwrapped = unwrapped * 31 + ord(ch)
    assert unwrapped > INT_MAX
    assert h == to_int32(unwrapped)


def check_abs(n: int, expected: int) -> None:
    assert kafka_abs(n) == expected, n


def test_kafka_abs() -> None:
    check_abs(0, 0)
    check_abs(5, 5)
    check_abs(-5, 5)
    check_abs(INT_MAX, INT_MAX)
    check_abs(-INT_MAX, INT_MAX)
    check_abs(INT_MIN, 0)  # Utils.abs: Math.abs(MIN_VALUE) would stay negative


def test_to_int32() -> None:
    assert to_int32(2**31) == INT_MIN
    assert to_int32(2**32 + 5) == 5
    assert to_int32(-1) == -1
    assert to_int32(-(2**31) - 1) == INT_MAX
