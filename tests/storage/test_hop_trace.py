"""storage/hop_trace.py: marks land in the process's file, in order, on the monotonic clock."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pykraft.storage import hop_trace


@pytest.fixture
def trace_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(hop_trace, "DIRECTORY", str(tmp_path))
    monkeypatch.setattr(hop_trace, "_marks", [])
    return tmp_path


def marks_in(directory: Path) -> list[tuple[int, str]]:
    lines = (directory / f"{os.getpid()}.txt").read_text().splitlines()
    return [(int(nanos), event) for nanos, event in (line.split(" ", 1) for line in lines)]


def test_marks_are_written_in_order_with_monotonic_nanoseconds(trace_directory: Path) -> None:
    before = time.monotonic_ns()
    hop_trace.mark("read PRODUCE")
    hop_trace.mark("fetch woken ENOUGH_BYTES")
    hop_trace.flush()
    after = time.monotonic_ns()
    marks = marks_in(trace_directory)
    assert [event for _, event in marks] == ["read PRODUCE", "fetch woken ENOUGH_BYTES"]
    assert before <= marks[0][0] <= marks[1][0] <= after


def test_a_full_buffer_is_written_without_a_flush(trace_directory: Path) -> None:
    for index in range(hop_trace.MAX_BUFFERED_MARKS):
        hop_trace.mark(f"event {index}")
    assert len(marks_in(trace_directory)) == hop_trace.MAX_BUFFERED_MARKS
    hop_trace.mark("one more")
    hop_trace.flush()
    assert marks_in(trace_directory)[-1][1] == "one more"


def test_tracing_is_off_without_the_environment_variable() -> None:
    # The test run does not set PYKRAFT_HOP_TRACE: every call site skips its mark.
    assert os.environ.get(hop_trace.ENV) is None
    assert hop_trace.ENABLED is False
