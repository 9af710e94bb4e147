"""The sends of a response written part by part, and which carry MSG_MORE (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.send_plan import SendStep, send_steps
from pykraft.protocol.segments import Segment, segment_length
from pykraft.storage.file_slice import FileSlice

BIG = 65_536


def parts_of(shape: str) -> list[Segment]:
    """``"b4 s65536 b0"``: a 4-byte buffer, a 64 KiB file slice, an empty buffer."""
    parts: list[Segment] = []
    for word in shape.split():
        kind, length = word[0], int(word[1:])
        parts.append(bytes(length) if kind == "b" else FileSlice(Path("x.log"), 0, length))
    return parts


def shape_of(steps: list[SendStep]) -> str:
    """Each send: a big slice as ``S<length>``, a run as its parts in brackets; ``+`` when it
    carries MSG_MORE."""
    words = []
    for step in steps:
        if step.big_slice is not None:
            word = f"S{step.length}"
        else:
            word = "[" + " ".join(shape_of_part(part) for part in step.run) + "]"
        words.append(word + "+" * step.more)
    return " ".join(words)


def shape_of_part(part: Segment) -> str:
    return ("b" if isinstance(part, bytes) else "s") + f"{segment_length(part)}"


def check(parts: str, sends: str, run_max_bytes: int = 256 * 1024) -> None:
    assert shape_of(send_steps(parts_of(parts), BIG, run_max_bytes)) == sends


@pytest.mark.parametrize(
    ("parts", "sends"),
    [
        # Buffer last: it alone goes without MSG_MORE.
        ("b4 b60 s65536 b4", "[b4 b60]+ S65536+ [b4]"),
        # Slice last: the buffers before it are held for its first packet; it ends the answer.
        ("b4 b60 s65536", "[b4 b60]+ S65536"),
        # An empty buffer at the end takes no send: the slice before it is the last.
        ("b4 s65536 b0", "[b4]+ S65536"),
        # An empty slice at the end likewise: the buffer before it goes without MSG_MORE.
        ("b4 s65536 b4 s0", "[b4]+ S65536+ [b4]"),
        # Empty parts in the middle change nothing.
        ("b0 b4 s0 s100 b0 b4", "[b4 s100 b4]"),
        ("b4", "[b4]"),
        ("b0 s0", ""),
    ],
)
def test_msg_more_on_every_send_but_the_last_with_bytes(parts: str, sends: str) -> None:
    check(parts, sends)


@pytest.mark.parametrize(
    ("parts", "sends"),
    [
        # A consumer's answer: small slices and their headers joined around the big slice.
        (
            "b8 b12 s500 b12 s65536 b12 s500 b12 s500",
            "[b8 b12 s500 b12]+ S65536+ [b12 s500 b12 s500]",
        ),
        # Two big slices side by side: two sends; a buffer is never a "big slice".
        ("b4 s65536 s70000 b65536", "[b4]+ S65536+ S70000+ [b65536]"),
        # Just under the threshold a slice is read and joined.
        ("b4 s65535 b4", "[b4 s65535 b4]"),
    ],
)
def test_the_parts_between_big_slices_are_one_send(parts: str, sends: str) -> None:
    check(parts, sends)


def test_a_run_ends_before_the_part_that_would_take_it_past_its_bound() -> None:
    check("b4 s400 s600 b4 s1000 b2000", "[b4 s400]+ [s600 b4]+ [s1000]+ [b2000]", 1000)
    check("b1000 b1", "[b1000]+ [b1]", 1000)
