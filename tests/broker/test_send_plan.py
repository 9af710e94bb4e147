"""The sends of a response written part by part, and which carry MSG_MORE (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.send_plan import SendStep, send_steps
from pykraft.protocol.segments import Segment
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
    """Each send as its kind and length, ``+`` when it carries MSG_MORE."""
    return " ".join(
        ("b" if isinstance(step.part, bytes) else "s") + f"{step.length}" + "+" * step.more
        for step in steps
    )


@pytest.mark.parametrize(
    ("parts", "sends"),
    [
        # Buffer last: it alone goes without MSG_MORE.
        ("b4 b60 s65536 b4", "b4+ b60+ s65536+ b4"),
        # Slice last: the buffers before it are held for its first packet; it ends the answer.
        ("b4 b60 s65536", "b4+ b60+ s65536"),
        # An empty buffer at the end takes no send: the slice before it is the last.
        ("b4 s65536 b0", "b4+ s65536"),
        # An empty slice at the end likewise: the buffer before it goes without MSG_MORE.
        ("b4 s65536 b4 s0", "b4+ s65536+ b4"),
        # Empty parts in the middle change nothing.
        ("b0 b4 s0 s100 b0 b4", "b4+ s100+ b4"),
        ("b4", "b4"),
        ("b0 s0", ""),
    ],
)
def test_msg_more_on_every_send_but_the_last_with_bytes(parts: str, sends: str) -> None:
    assert shape_of(send_steps(parts_of(parts))) == sends
