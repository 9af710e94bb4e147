"""A KafkaListener with KafkaApis on a free 127.0.0.1 port, on its own event loop in a thread,
so blocking clients (sockets, kafka-python) can talk to it from the test thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.network import KafkaListener, RequestContext
from pykraft.protocol.segments import Segments
from pykraft.storage.system_clock import SystemClock

STARTUP_TIMEOUT_S = 10.0


class BackgroundBroker:
    def __init__(self, apis: KafkaApis, **listener_options: Any) -> None:
        self.apis = apis
        self.metrics = BrokerMetrics()
        # Headers the dispatcher was called with, in order (the fuzz test's oracle).
        self.dispatched: list[Any] = []
        self._options = {"monotonic_ms": SystemClock().monotonic_ms, **listener_options}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self.listener: KafkaListener | None = None
        self._thread = threading.Thread(target=self._run, name="background-broker", daemon=True)

    @property
    def port(self) -> int:
        assert self.listener is not None
        return self.listener.port

    def _dispatch(self, context: RequestContext, body: memoryview) -> Any:
        self.dispatched.append(context.header)
        return self.apis.dispatch(context, body)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as error:  # surfaced to the test thread by start()/stop()
            self._error = error
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.listener = KafkaListener(self._dispatch, metrics=self.metrics, **self._options)
        await self.listener.start()
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await self.listener.close()

    def call(self, function: Callable[[], Any]) -> Any:
        """Run ``function`` on the broker's loop and return its result."""
        assert self._loop is not None
        future: Any = asyncio.run_coroutine_threadsafe(_call(function), self._loop)
        return future.result(timeout=STARTUP_TIMEOUT_S)

    def start(self) -> None:
        self._thread.start()
        assert self._started.wait(STARTUP_TIMEOUT_S), "listener did not start"
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(STARTUP_TIMEOUT_S)
        assert not self._thread.is_alive(), "listener did not stop"
        if self._error is not None:
            raise self._error


async def _call(function: Callable[[], Any]) -> Any:
    return function()


@contextmanager
def background_broker(apis: KafkaApis | None = None, **options: Any) -> Iterator[BackgroundBroker]:
    broker = BackgroundBroker(apis or KafkaApis(), **options)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def echo_after(delays_s: dict[int, float]) -> Callable[[RequestContext, memoryview], Any]:
    """A handler answering with the request body after a per-correlation-id delay."""

    async def handle(context: RequestContext, body: memoryview) -> bytes | Segments:
        await asyncio.sleep(delays_s.get(context.header.correlation_id, 0.0))
        return bytes(body)

    return handle
