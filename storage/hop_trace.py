"""Per-hop timestamps of one record's way through a cluster (issue 18), off by default.

With ``PYKRAFT_HOP_TRACE=DIR`` in a process's environment, every ``mark(event)`` appends
``<CLOCK_MONOTONIC ns> <event>`` to ``DIR/<pid>.txt`` (buffered, written every
``MAX_BUFFERED_MARKS`` marks and at exit). The monotonic clock is one clock for every process
of the machine, so ``bench/hop_timeline.py`` lines up the marks of the client, the leader and
its followers around each record sent one at a time. Without the variable ``ENABLED`` is False
and call sites cost one attribute test: ``if hop_trace.ENABLED: hop_trace.mark("...")``.
"""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path

ENV = "PYKRAFT_HOP_TRACE"
DIRECTORY = os.environ.get(ENV) or None
ENABLED = DIRECTORY is not None
MAX_BUFFERED_MARKS = 4096

_marks: list[str] = []
# The one clock of every trace (this module's marks and quorum/commit_trace.py's): system-wide,
# so the marks of the client, the brokers and the controllers line up.
trace_clock_ns = time.monotonic_ns


def mark(event: str) -> None:
    """Record that ``event`` happened now in this process."""
    _marks.append(f"{trace_clock_ns()} {event}\n")
    if len(_marks) >= MAX_BUFFERED_MARKS:
        flush()


def flush() -> None:
    """Append the buffered marks to this process's file."""
    if DIRECTORY is None or not _marks:
        return
    with (Path(DIRECTORY) / f"{os.getpid()}.txt").open("a") as file:
        file.writelines(_marks)
    _marks.clear()


if ENABLED:
    atexit.register(flush)
