"""The broker process's lifetime (``broker.server_run``): its collector policy — the heap
start-up built is frozen once the broker started (its garbage collected first), not when
start-up fails."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pykraft.broker.lifecycle import BrokerStartupError
from pykraft.broker.server import BrokerServer
from pykraft.broker.server_run import run_broker


class _Cycle:
    def __init__(self) -> None:
        self.me = self


class FakeServer:
    """What ``run_broker`` uses of a ``BrokerServer``; start-up leaves a reference cycle."""

    def __init__(self, *, startup_fails: bool) -> None:
        self.config = SimpleNamespace(node_id=1)
        self.background_tasks: list[asyncio.Task[Any]] = []
        self.startup_fails = startup_fails
        self.garbage: weakref.ref[_Cycle] | None = None
        self.frozen_at_shutdown = -1

    async def startup(self) -> None:
        self.garbage = weakref.ref(_Cycle())
        if self.startup_fails:
            raise BrokerStartupError("log.dirs unusable")

    async def shutdown(self) -> None:
        self.frozen_at_shutdown = gc.get_freeze_count()


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run(server: FakeServer) -> int:
    async def scenario() -> int:
        stop = asyncio.Event()
        stop.set()  # serve nothing: stop as soon as started
        return await run_broker(cast(BrokerServer, server), stop)

    return asyncio.run(scenario())


@pytest.mark.usefixtures("unfrozen")
def test_a_started_broker_freezes_its_start_up_heap_after_collecting_its_garbage() -> None:
    server = FakeServer(startup_fails=False)
    enabled = gc.isenabled()
    gc.disable()  # only run_broker collects
    try:
        assert run(server) == 0
    finally:
        if enabled:
            gc.enable()
    assert server.frozen_at_shutdown > 0
    assert server.garbage is not None and server.garbage() is None


@pytest.mark.usefixtures("unfrozen")
def test_a_broker_that_fails_to_start_freezes_nothing() -> None:
    server = FakeServer(startup_fails=True)
    assert run(server) == 1
    assert server.frozen_at_shutdown == 0
