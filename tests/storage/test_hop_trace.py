"""storage/hop_trace.py: marks land in the process's file, in order, on the monotonic clock."""

from __future__ import annotations

import asyncio
import atexit
import importlib
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from pykraft.broker.network import RequestContext
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.segments import Segments
from pykraft.storage import hop_trace
from tests.broker.test_network import Harness, echo_response, run
from tests.broker.wire_client import correlation_id, read_frame, request_frame


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


def test_a_traced_listener_marks_an_unknown_api_key_by_number_and_still_answers(
    trace_directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tracing must not change behaviour: an API key Kafka does not define is marked by its number
    # (ApiKey(999) would raise), and the request is dispatched and answered as without tracing.
    monkeypatch.setattr(hop_trace, "ENABLED", True)
    unknown = 999
    assert unknown not in ApiKey.__members__.values()

    def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
        return asyncio.sleep(0, echo_response(context, body))

    async def scenario() -> None:
        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(unknown, 0, 7, b"body"))
        frame = await read_frame(reader)
        assert frame is not None and correlation_id(frame) == 7 and frame[4:] == b"body"
        await harness.listener.close()

    run(scenario)
    hop_trace.flush()
    events = [event.split(" @")[0] for _, event in marks_in(trace_directory)]
    assert events == [f"read {unknown}", f"write {unknown}"]
