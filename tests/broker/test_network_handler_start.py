"""The listener starts handlers in arrival order, and a connection that ends cancels the ones
still waiting into their own code (``broker.network``'s theory of operation), over a
socketpair: no ports, no sleeps.

A handler the dispatcher marks ``StartsAtOnce`` runs its first step in the read callback; an
earlier request's handler started as a task runs its first step a loop turn later (or, held in
``broker.server._dispatch_when_serving``, once the broker serves): the marked one must not
overtake it (Produce's append happens in its first step). A handler cancelled because its
connection ended must see CancelledError at its wait and run its ``finally`` blocks at once
(purgatory waiters, delayed produces, the transactional append turn), not when the cyclic GC
finds it as GeneratorExit.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from pykraft.broker.metrics import CloseReason
from pykraft.broker.network import RequestContext
from pykraft.broker.request_time import StartsAtOnce
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.segments import Segments
from tests.broker.test_network import METADATA, Harness, echo_response, run, until
from tests.broker.wire_client import correlation_id, read_frame, request_frame


def test_a_marked_handler_does_not_start_before_an_earlier_one_started_as_a_task() -> None:
    # DeleteRecords (a task: its first step a loop turn later) then a pipelined Fetch (marked).
    async def scenario() -> None:
        first_steps: list[int] = []

        async def handler(context: RequestContext, body: memoryview) -> Segments:
            first_steps.append(context.header.correlation_id)
            return echo_response(context, body)

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            if context.header.api_key == ApiKey.DELETE_RECORDS:
                return handler(context, body)
            return StartsAtOnce(handler(context, body))

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(
            request_frame(ApiKey.DELETE_RECORDS, 2, 1)
            + request_frame(ApiKey.FETCH, 12, 2)
            + request_frame(ApiKey.FETCH, 12, 3)
        )
        frames = [await read_frame(reader) for _ in range(3)]
        assert [correlation_id(f) for f in frames if f] == [1, 2, 3]
        assert first_steps == [1, 2, 3]
        await harness.listener.close()

    run(scenario)


def test_a_produce_held_until_serving_appends_before_a_later_one() -> None:
    # broker.server._dispatch: before the metadata catch-up a request waits in
    # _dispatch_when_serving (a task); once serving, a Produce is marked. One read in the loop
    # turn that starts serving must not append before the held one.
    async def scenario() -> None:
        appended: list[int] = []
        serving = asyncio.Event()

        async def produce(context: RequestContext, body: memoryview) -> Segments:
            appended.append(context.header.correlation_id)  # before its first await
            await asyncio.sleep(0)
            return echo_response(context, body)

        async def when_serving(context: RequestContext, body: bytes) -> Segments:
            await serving.wait()
            segments: Segments = await StartsAtOnce(produce(context, memoryview(body)))
            return segments

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            if serving.is_set():
                return StartsAtOnce(produce(context, body))
            return when_serving(context, bytes(body))

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(ApiKey.PRODUCE, 9, 1))
        connection = await _the_connection(harness)
        await until(lambda: connection.busy)  # request 1 waits for serving

        def serving_then_a_read() -> None:
            serving.set()  # the loader's catch-up, earlier in the same loop turn
            connection._in.receive_data(bytes(request_frame(ApiKey.PRODUCE, 9, 2)))

        asyncio.get_running_loop().call_soon(serving_then_a_read)
        frames = [await read_frame(reader) for _ in range(2)]
        assert [correlation_id(f) for f in frames if f] == [1, 2]
        assert appended == [1, 2]
        await harness.listener.close()

    run(scenario)


class _Waits:
    """A marked handler that suspends in its first wait forever and records what reaches it;
    ``alive`` tells whether its frame (with the request) is still held by anything."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._locals: list[weakref.ref[Any]] = []

    def alive(self) -> bool:
        return any(ref() is not None for ref in self._locals)

    async def handler(self, context: RequestContext, body: memoryview) -> Segments:
        held = _Request()
        self._locals.append(weakref.ref(held))
        self.seen.append("first step")
        try:
            await asyncio.get_running_loop().create_future()  # e.g. a purgatory waiter
        except asyncio.CancelledError:
            self.seen.append("cancelled")
            raise
        except GeneratorExit:
            self.seen.append("closed by the GC")
            raise
        finally:
            self.seen.append("finally")
        del held
        return echo_response(context, body)


class _Request:
    pass


def test_a_read_in_the_turn_the_connection_expires_cancels_its_handler_into_its_wait() -> None:
    async def scenario() -> None:
        waits = _Waits()

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            if context.header.api_key == METADATA:
                return StartsAtOnce(asyncio.sleep(0, echo_response(context, body)))
            return StartsAtOnce(waits.handler(context, body))

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(METADATA, 0, 1))
        assert correlation_id(await read_frame(reader) or b"") == 1  # the connection serves
        connection = await _the_connection(harness)
        connection.expire(CloseReason.IDLE)
        connection._in.receive_data(bytes(request_frame(ApiKey.PRODUCE, 9, 2)))
        assert await read_frame(reader) is None
        await _closed(harness)
        assert waits.seen == ["first step", "cancelled", "finally"]
        assert not waits.alive()  # freed by reference counting: no cycle waits for the GC

    _without_cyclic_gc(lambda: run(scenario))


def test_a_read_in_the_turn_a_handler_fails_cancels_the_new_handler_into_its_wait() -> None:
    async def scenario() -> None:
        waits = _Waits()
        fail = asyncio.get_running_loop().create_future()

        async def failing(context: RequestContext, body: memoryview) -> Segments:
            await fail
            raise RuntimeError("handler bug")

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            if context.header.correlation_id == 1:
                return failing(context, body)
            return StartsAtOnce(waits.handler(context, body))

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(METADATA, 0, 1))
        connection = await _the_connection(harness)
        await until(lambda: connection.busy)
        loop = asyncio.get_running_loop()

        def fail_then_a_read() -> None:
            fail.set_result(None)  # the failing handler's step runs first in the next turn
            loop.call_soon(connection._in.receive_data, bytes(request_frame(ApiKey.PRODUCE, 9, 2)))

        loop.call_soon(fail_then_a_read)
        assert await read_frame(reader) is None
        await _closed(harness)
        assert harness.closed(CloseReason.HANDLER_FAILED) == 1
        assert waits.seen == ["first step", "cancelled", "finally"]
        assert not waits.alive()

    _without_cyclic_gc(lambda: run(scenario))


async def _the_connection(harness: Harness) -> Any:
    """The harness's one connection. The tests drive its reader directly
    (``_in.receive_data``) to put a read in a chosen loop turn, which a socket cannot."""
    await until(lambda: harness.listener.connection_count == 1)
    return next(iter(harness.listener._connections.values()))


async def _closed(harness: Harness) -> None:
    await until(lambda: harness.listener.connection_count == 0)
    for _ in range(5):  # the cancelled handlers' tasks step
        await asyncio.sleep(0)


def _without_cyclic_gc(test: Callable[[], None]) -> None:
    gc.collect()
    gc.disable()
    try:
        test()
    finally:
        gc.enable()
