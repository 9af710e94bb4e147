"""How a response sent part by part goes out (``broker.network``'s ``_send``): the sends it
takes and which of them carry ``MSG_MORE``. Pure: no socket, no file.

A file slice of at least ``sendfile_min_bytes`` is a send of its own (``os.sendfile``, or read
in chunks where it cannot be). Everything between two such slices — buffers and the bytes of
smaller slices — is joined into one send (up to ``run_max_bytes``): a consumer's Fetch over 100
partitions with one big slice is three sends, not one per part (a ``send`` and a ``pread`` plus
a transport write for each small slice cost ~200 system calls).

``MSG_MORE`` tells the kernel more of this response follows, so it may hold a partial packet
for it: the headers before a sendfile'd slice then leave in the slice's first packet. It must
never be on the last send with bytes: over TCP the kernel may hold that tail until its ~200 ms
timer (loopback, a lone 4-byte send with it: 201 ms; right after a sendfile it was pushed at
once; an AF_UNIX socketpair ignores the flag). Parts without bytes take no send at all.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pykraft.protocol.segments import FileSliceLike, Segment

# A tuple, not a union: isinstance is faster on it (this runs once per part).
_BUFFERS = (bytes, bytearray, memoryview)


@attrs.frozen
class SendStep:
    """One send of a response: a big file slice alone, or a run of buffers and small slices
    joined into one buffer; with ``MSG_MORE`` or not."""

    # Invariant: exactly one of the two holds bytes.
    big_slice: FileSliceLike | None
    run: tuple[Segment, ...]
    length: int
    # Bytes of the response follow this send.
    more: bool


def send_steps(
    parts: Iterable[Segment], sendfile_min_bytes: int, run_max_bytes: int
) -> list[SendStep]:
    """The sends of a response's ``parts``, in order, ``more`` on all but the last. A run ends
    at a big slice or before the part that would take it past ``run_max_bytes`` (a buffer
    larger than that is a run of its own)."""
    # One pass, no per-part objects: a consumer's answer has a few hundred parts.
    groups: list[tuple[FileSliceLike | None, list[Segment], int]] = []
    run: list[Segment] = []
    run_length = 0
    for part in parts:
        if isinstance(part, _BUFFERS):
            length = memoryview(part).nbytes if type(part) is not bytes else len(part)
        else:
            length = part.length
            if length >= sendfile_min_bytes:
                if run:
                    groups.append((None, run, run_length))
                    run, run_length = [], 0
                groups.append((part, [], length))
                continue
        if not length:
            continue
        if run and run_length + length > run_max_bytes:
            groups.append((None, run, run_length))
            run, run_length = [], 0
        run.append(part)
        run_length += length
    if run:
        groups.append((None, run, run_length))
    last = len(groups) - 1
    return [
        SendStep(big_slice, tuple(run), length, index < last)
        for index, (big_slice, run, length) in enumerate(groups)
    ]
