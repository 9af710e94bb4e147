"""How a response sent part by part goes out (``broker.network``'s ``_send``): the sends it
takes and which of them carry ``MSG_MORE``. Pure: no socket, no file.

``MSG_MORE`` tells the kernel more of this response follows, so it may hold a partial packet
for it: the headers before a sendfile'd slice then leave in the slice's first packet. It must
never be on the last send with bytes: over TCP the kernel may hold that tail until its ~200 ms
timer (loopback, a lone 4-byte send with it: 201 ms; right after a sendfile it was pushed at
once; an AF_UNIX socketpair ignores the flag). Parts without bytes take no send at all.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pykraft.protocol.segments import Segment, segment_length


@attrs.frozen
class SendStep:
    """One send of a response: ``part`` (a buffer or a file slice) with ``MSG_MORE`` or not."""

    part: Segment
    length: int
    # Bytes of the response follow this send.
    more: bool


def send_steps(parts: Iterable[Segment]) -> list[SendStep]:
    """The sends of a response's ``parts``, in order: every part with bytes, ``more`` on all
    but the last."""
    sized = [(part, length) for part in parts if (length := segment_length(part))]
    last = len(sized) - 1
    return [SendStep(part, length, index < last) for index, (part, length) in enumerate(sized)]
