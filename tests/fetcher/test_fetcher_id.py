"""Fetcher assignment: Kafka's ``AbstractFetcherManager.getFetcherId``.

The hashes it uses are checked in tests/common/test_java_hash.py; the rows below are worked
out by hand from them (KAFKA_FORMATS.md "Hashes Kafka uses").
"""

from __future__ import annotations

import pytest

from pykraft.fetcher.fetcher_id import fetcher_id
from pykraft.protocol.java_hash import to_int32

INT_MAX = 2**31 - 1


def check_id(topic: str, partition: int, fetchers: int, expected: int) -> None:
    assert fetcher_id(topic, partition, fetchers) == expected, (topic, partition, fetchers)


def test_fetcher_id() -> None:
    # num.replica.fetchers = 1 (Kafka's default): everything on fetcher 0.
    check_id("hello", 7, 1, 0)
    # 31 * 97 + p = 3007 + p.
    check_id("a", 0, 2, 3007 % 2)
    check_id("a", 1, 2, 3008 % 2)
    check_id("a", 3, 5, 3010 % 5)
    # 31 * 99162322 = 3074031982 overflows int: wraps to 3074031982 - 2^32 = -1220935314,
    # + 2 = -1220935312, abs 1220935312, % 7 = 1220935312 - 7*174419330 = 2.
    check_id("hello", 2, 7, 2)
    # 31 * MIN_VALUE wraps back to MIN_VALUE; Utils.abs(MIN_VALUE) = 0.
    check_id("polygenelubricants", 0, 3, 0)
    # MIN_VALUE + 1 -> abs = 2^31 - 1 = 2147483647 = 3 * 715827882 + 1.
    check_id("polygenelubricants", 1, 3, 1)


def test_fetcher_id_hello_overflow_by_hand() -> None:
    """The arithmetic behind the "hello" row, spelled out."""
    product = 31 * 99162322
    assert product == 3074031982 > INT_MAX
    assert to_int32(product + 2) == -1220935312
    assert 1220935312 % 7 == 2


def test_fetcher_id_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=r"num\.replica\.fetchers must be at least 1"):
        fetcher_id("t", 0, 0)
    with pytest.raises(ValueError, match="partition must not be negative"):
        fetcher_id("t", -1, 2)
