"""storage/hop_trace.py: marks land in the process's file, in order, on the monotonic clock."""

from __future__ import annotations

import atexit
import importlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

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


@pytest.fixture
def reload_with(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], ModuleType]]:
    """Call it to re-import hop_trace with ``PYKRAFT_HOP_TRACE`` set to a value (None: unset);
    afterwards the environment is restored and the module re-imported under it."""

    def reload(value: str | None) -> ModuleType:
        if value is None:
            monkeypatch.delenv(hop_trace.ENV, raising=False)
        else:
            monkeypatch.setenv(hop_trace.ENV, value)
        atexit.unregister(hop_trace.flush)  # the flush a traced import registered, if any
        return importlib.reload(hop_trace)

    yield reload
    monkeypatch.undo()
    atexit.unregister(hop_trace.flush)
    importlib.reload(hop_trace)


def test_the_environment_variable_turns_tracing_on_and_names_the_directory(
    reload_with: Callable[[str | None], ModuleType], tmp_path: Path
) -> None:
    traced = reload_with(str(tmp_path))
    assert traced.ENABLED is True
    assert str(tmp_path) == traced.DIRECTORY
    traced.mark("read PRODUCE")
    traced.flush()
    assert [event for _, event in marks_in(tmp_path)] == ["read PRODUCE"]


@pytest.mark.parametrize("value", [None, ""])
def test_tracing_is_off_without_the_environment_variable(
    reload_with: Callable[[str | None], ModuleType], value: str | None
) -> None:
    untraced = reload_with(value)
    assert untraced.ENABLED is False
    assert untraced.DIRECTORY is None
