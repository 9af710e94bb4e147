"""The latency relay's scheduling (``tests/chaos/relay.py``'s ``DelayLine``), time passed in."""

from __future__ import annotations

import pytest

from tests.chaos.relay import DelayLine


def test_a_chunk_is_released_once_its_delay_has_passed() -> None:
    line = DelayLine()
    assert line.push(10.0, 0.1, b"abc") == pytest.approx(10.1)
    assert line.pop_due(10.09) == b"" and line.queued_bytes == 3
    assert line.pop_due(10.1) == b"abc"
    assert line.queued_bytes == 0 and len(line) == 0 and line.next_due() is None


def test_each_chunk_is_delayed_from_its_own_arrival_not_the_streams() -> None:
    line = DelayLine()
    line.push(0.0, 0.05, b"a")
    line.push(0.03, 0.05, b"b")
    line.push(0.2, 0.05, b"c")
    assert line.next_due() == pytest.approx(0.05)
    assert line.pop_due(0.06) == b"a"
    assert line.pop_due(0.08) == b"b"  # 50 ms after it came, not after the stream began
    assert line.pop_due(0.2) == b""
    assert line.pop_due(0.25) == b"c"


def test_bytes_keep_their_order_when_the_delay_drops() -> None:
    line = DelayLine()
    line.push(0.0, 0.15, b"slow")
    # The fault heals: the next chunk has no delay of its own, but waits for the one before.
    assert line.push(0.01, 0.0, b"fast") == pytest.approx(0.15)
    assert line.pop_due(0.01) == b""
    assert line.pop_due(0.15) == b"slowfast"


def test_several_due_chunks_come_out_joined_in_order() -> None:
    line = DelayLine()
    for index, data in enumerate([b"1", b"22", b"333"]):
        line.push(index * 0.001, 0.0, data)
    assert line.queued_bytes == 6 and len(line) == 3
    assert line.pop_due(1.0) == b"122333"


def test_an_empty_chunk_or_a_negative_delay_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        DelayLine().push(0.0, 0.1, b"")
    with pytest.raises(AssertionError):
        DelayLine().push(0.0, -0.1, b"x")
