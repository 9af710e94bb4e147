"""PYKRAFT_EVENT_LOOP: the loop broker and controller processes run on."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest
import uvloop

from pykraft import broker_cmd, controller_cmd
from pykraft.event_loop import EventLoopChoiceError, loop_factory


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def _run_with(environ: dict[str, str]) -> type:
    with asyncio.Runner(loop_factory=loop_factory(environ)) as runner:
        return runner.run(_loop_type())


def test_uvloop_by_default() -> None:
    assert _run_with({}) is uvloop.Loop
    assert _run_with({"PYKRAFT_EVENT_LOOP": " "}) is uvloop.Loop
    assert _run_with({"PYKRAFT_EVENT_LOOP": "uvloop"}) is uvloop.Loop


def test_asyncio_turns_uvloop_off() -> None:
    loop_type = _run_with({"PYKRAFT_EVENT_LOOP": "asyncio"})
    assert issubclass(loop_type, asyncio.BaseEventLoop)
    assert not issubclass(loop_type, uvloop.Loop)


def test_unknown_loop_is_refused() -> None:
    with pytest.raises(EventLoopChoiceError, match="PYKRAFT_EVENT_LOOP=trio: unknown event loop"):
        loop_factory({"PYKRAFT_EVENT_LOOP": "trio"})


@pytest.mark.parametrize("command", [broker_cmd, controller_cmd])
def test_processes_refuse_an_unknown_loop_before_starting(
    command: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PYKRAFT_EVENT_LOOP", "tokio")
    args = argparse.Namespace(config=tmp_path / "absent.properties", log_level="INFO")
    assert command.run(args) == 2  # type: ignore[attr-defined]
    assert "PYKRAFT_EVENT_LOOP=tokio: unknown event loop (one of asyncio, uvloop)" in (
        capsys.readouterr().err
    )
    assert list(tmp_path.iterdir()) == []
