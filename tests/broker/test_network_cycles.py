"""A closed Kafka connection leaves nothing to the cyclic garbage collector: reference counting
frees all of it (its reader, writer, queue, protocol, handlers' futures and failures).

Why: a broker that collects seldom (larger ``gc`` thresholds, issue 18) would otherwise keep
every closed connection's objects until a full collection — ``tests/hostile``'s idle flood saw
RSS grow 1.39 KB per connection that way. Each scenario closes connections one way (the peer
closes after its answers, idle expiry, a bad frame, a rejected request, a failing handler,
mid-SASL, a parked Fetch, TLS) with the collector off and ``DEBUG_SAVEALL`` on, then asks
``gc.collect`` what it found unreachable. On uvloop (the broker's loop, ``pykraft.event_loop``)
that is nothing at all; on asyncio's selector loop Python 3.11's transports keep a cycle of
their own (``_read_ready_cb``, CPython gh-100348, fixed in 3.12), and nothing else.

Connections are socketpairs (no ports), set up as ``broker.acceptor`` does: a
``StreamReaderProtocol`` on the accepted socket, TLS-wrapped on a TLS listener.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import logging
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.network import KafkaListener, ListenerAuthentication, RequestContext
from pykraft.broker.request_time import StartsAtOnce
from pykraft.broker.sasl_mechanisms import PLAIN, PlainServer, PlainUsers
from pykraft.broker.sasl_server import SaslAuthenticator
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import request_class
from pykraft.protocol.errors import UnsupportedRequestError
from pykraft.protocol.framing import frame_response
from pykraft.protocol.segments import Segments
from tests.broker.wire_client import correlation_id, read_frame, request_frame
from tests.fake_clock import FakeClock
from tests.tls_material import make_tls_material

# Connections closed per scenario while the collector watches (after one to warm caches up).
CONNECTIONS = 3
PRODUCE, FETCH, METADATA = ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA
# Correlation ids the dispatcher below treats specially.
REJECTED, FAILS_IN_TASK, FAILS_AT_ONCE, PARKED = 666, 667, 668, 669


class Harness:
    """A listener, its handlers (a Fetch parks until ``fetch_wait`` is set, as a long poll),
    and socketpair connections to it."""

    def __init__(self, *, sasl: bool = False, tls: Path | None = None) -> None:
        self.clock = FakeClock()
        self.fetch_wait = asyncio.Event()
        self.client_tls: ssl.SSLContext | None = None
        server_tls = None
        if tls is not None:
            material = make_tls_material(tls)
            server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            server_tls.load_cert_chain(str(material.server.path))
            self.client_tls = ssl.create_default_context(cafile=str(material.ca_path))
        users = PlainUsers.from_passwords({"alice": "alice-secret"})
        authentication = ListenerAuthentication(
            ssl_context=server_tls,
            new_sasl_authenticator=(
                (lambda: SaslAuthenticator({PLAIN: lambda: PlainServer(users)})) if sasl else None
            ),
        )
        self.listener = KafkaListener(
            self.dispatch, metrics=BrokerMetrics(), monotonic_ms=self.clock.monotonic_ms,
            authentication=authentication, failed_authentication_delay_ms=0,
            connections_max_idle_ms=1000,
        )  # fmt: skip

    def dispatch(self, context: RequestContext, body: memoryview) -> Awaitable[Segments]:
        header = context.header
        answer = frame_response(header.correlation_id, 0, bytes(body))
        if header.correlation_id == REJECTED:
            raise UnsupportedRequestError(header.api_key, header.api_version, "rejected")
        if header.correlation_id == FAILS_AT_ONCE:
            return StartsAtOnce(_fail_at_once())
        if header.correlation_id == FAILS_IN_TASK:
            return _fail_later()
        if header.api_key == FETCH or header.correlation_id == PARKED:  # acks=all waits too
            return StartsAtOnce(_answer_after(self.fetch_wait, answer))
        if header.api_key == PRODUCE:
            return StartsAtOnce(_answer(answer))
        return asyncio.sleep(0, answer)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        server_side, client_side = socket.socketpair()
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        accepting = loop.connect_accepted_socket(
            lambda: protocol, server_side, ssl=self.listener.authentication.ssl_context
        )
        connecting = asyncio.open_connection(
            sock=client_side, ssl=self.client_tls,
            server_hostname="localhost" if self.client_tls else None,
        )  # fmt: skip
        (transport, _), client = await asyncio.gather(accepting, connecting)
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        asyncio.get_running_loop().create_task(self.listener.serve_connection(reader, writer))
        await until(lambda: self.listener.connection_count == 1)
        return client

    async def wait_closed(self) -> None:
        await until(lambda: self.listener.connection_count == 0)
        await spin(20)  # transports' close callbacks


async def _answer(answer: Segments) -> Segments:
    return answer


async def _answer_after(event: asyncio.Event, answer: Segments) -> Segments:
    await event.wait()
    return answer


async def _fail_at_once() -> Segments:
    raise RuntimeError("failed in its first step")


async def _fail_later() -> Segments:
    await asyncio.sleep(0)
    raise RuntimeError("failed in its task")


async def until(done: Callable[[], bool]) -> None:
    """Loop turns (I/O included) until ``done``; no wall-clock waiting."""
    for _ in range(10_000):
        if done():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


async def spin(turns: int) -> None:
    """Let the loop run ``turns`` times (callbacks and I/O already due)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        await writer.wait_closed()


async def read_until_closed(reader: asyncio.StreamReader) -> list[int]:
    """The correlation ids of the answers up to the end of the stream."""
    ids = []
    try:
        while (frame := await read_frame(reader)) is not None:
            ids.append(correlation_id(frame))
    except (ConnectionError, ssl.SSLError):
        pass
    return ids


def sasl_frames(password: bytes) -> bytes:
    handshake = request_class(ApiKey.SASL_HANDSHAKE)(version=1, mechanism="PLAIN")
    authenticate = request_class(ApiKey.SASL_AUTHENTICATE)(
        version=2, auth_bytes=b"\0alice\0" + password
    )
    return request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, bytes(handshake.encode(version=1))) + (
        request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, bytes(authenticate.encode(version=2)))
    )


# --- the ways a connection ends ---


async def peer_closes_after_its_answers(harness: Harness) -> None:
    reader, writer = await harness.connect()
    writer.write(request_frame(PRODUCE, 9, 1) + request_frame(METADATA, 0, 2))
    answers = [await read_frame(reader) for _ in range(2)]
    assert [correlation_id(a or b"") for a in answers] == [1, 2]
    await close(writer)


async def closed_when_idle(harness: Harness) -> None:
    reader, writer = await harness.connect()
    harness.clock.now_ms += 1001
    assert harness.listener.acceptor.expire_idle_connections(harness.clock.now_ms) == 1
    assert await read_until_closed(reader) == []
    await close(writer)


async def closed_by_the_broker_after(harness: Harness, frames: bytes, answered: list[int]) -> None:
    """Send ``frames``; the broker answers ``answered`` (correlation ids), then closes."""
    reader, writer = await harness.connect()
    writer.write(frames)
    assert await read_until_closed(reader) == answered
    await close(writer)


async def bad_size_prefix(harness: Harness) -> None:
    frames = request_frame(METADATA, 0, 1) + struct.pack(">i", -1)
    await closed_by_the_broker_after(harness, frames, [1])


async def rejected_request(harness: Harness) -> None:
    await closed_by_the_broker_after(harness, request_frame(METADATA, 0, REJECTED), [])


async def handler_fails_in_its_task(harness: Harness) -> None:
    await closed_by_the_broker_after(harness, request_frame(METADATA, 0, FAILS_IN_TASK), [])


async def handler_fails_in_its_first_step(harness: Harness) -> None:
    await closed_by_the_broker_after(harness, request_frame(PRODUCE, 9, FAILS_AT_ONCE), [])


async def failure_behind_a_parked_fetch_when_the_peer_left(harness: Harness) -> None:
    # The failed handler's future is still queued when the connection ends.
    _, writer = await harness.connect()
    writer.write(request_frame(FETCH, 12, 1) + request_frame(PRODUCE, 9, FAILS_AT_ONCE))
    await spin(5)
    writer.transport.abort()
    await spin(5)
    harness.fetch_wait.set()  # the long poll ends; its answer goes nowhere
    await harness.wait_closed()
    harness.fetch_wait.clear()


async def peer_closes_during_a_parked_fetch(harness: Harness) -> None:
    _, writer = await harness.connect()
    writer.write(request_frame(FETCH, 12, 1))
    await spin(5)
    await close(writer)
    await spin(5)
    harness.fetch_wait.set()
    await harness.wait_closed()
    harness.fetch_wait.clear()


async def peer_closes_while_a_metadata_waits_for_a_parked_produce(harness: Harness) -> None:
    # broker/network.py's _after: a Metadata starts once the Produce before it completed.
    _, writer = await harness.connect()
    writer.write(request_frame(PRODUCE, 9, PARKED) + request_frame(METADATA, 0, 2))
    await spin(5)
    await close(writer)
    await spin(5)
    harness.fetch_wait.set()
    await harness.wait_closed()
    harness.fetch_wait.clear()


async def broker_shuts_down_during_a_parked_fetch(harness: Harness) -> None:
    reader, writer = await harness.connect()
    writer.write(request_frame(FETCH, 12, 1))
    await spin(5)
    await harness.listener.close()
    assert await read_until_closed(reader) == []
    await close(writer)


async def peer_leaves_mid_sasl(harness: Harness) -> None:
    _, writer = await harness.connect()
    writer.write(sasl_frames(b"alice-secret")[:30])
    await spin(5)
    await close(writer)


async def sasl_fails(harness: Harness) -> None:
    reader, writer = await harness.connect()
    writer.write(sasl_frames(b"wrong") + request_frame(METADATA, 0, 3))
    assert await read_until_closed(reader) == [1, 2]
    await close(writer)


async def sasl_then_requests(harness: Harness) -> None:
    reader, writer = await harness.connect()
    writer.write(sasl_frames(b"alice-secret") + request_frame(METADATA, 0, 3))
    answers = [await read_frame(reader) for _ in range(3)]
    assert [correlation_id(a or b"") for a in answers] == [1, 2, 3]
    await close(writer)


Scenario = Callable[[Harness], Coroutine[Any, Any, None]]
PLAINTEXT: list[Scenario] = [
    peer_closes_after_its_answers, closed_when_idle, bad_size_prefix, rejected_request,
    handler_fails_in_its_task, handler_fails_in_its_first_step,
    failure_behind_a_parked_fetch_when_the_peer_left, peer_closes_during_a_parked_fetch,
    peer_closes_while_a_metadata_waits_for_a_parked_produce,
    broker_shuts_down_during_a_parked_fetch,
]  # fmt: skip
SASL: list[Scenario] = [peer_leaves_mid_sasl, sasl_fails, sasl_then_requests]
TLS: list[Scenario] = [peer_closes_after_its_answers, closed_when_idle, handler_fails_in_its_task]
CASES = (
    [(scenario, "PLAINTEXT") for scenario in PLAINTEXT]
    + [(scenario, "SASL_PLAINTEXT") for scenario in SASL]
    + [(scenario, "SSL") for scenario in TLS]
    + [(sasl_then_requests, "SASL_SSL")]
)
LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": None}


def describe(garbage: list[object]) -> str:
    kinds = collections.Counter(getattr(type(o), "__qualname__", "?") for o in garbage)
    return ", ".join(f"{count} {kind}" for kind, count in kinds.most_common(20))


def reachable_within(roots: list[object], garbage: list[object]) -> set[int]:
    """The ids of the garbage ``roots`` reach (roots included), through garbage only."""
    inside = {id(o) for o in garbage}
    seen = {id(o) for o in roots}
    stack = list(roots)
    while stack:
        for referent in gc.get_referents(stack.pop()):
            if id(referent) in inside and id(referent) not in seen:
                seen.add(id(referent))
                stack.append(referent)
    return seen


async def unreachable_after(scenario: Scenario, harness: Harness) -> list[object]:
    """What ``gc.collect`` finds unreachable after ``CONNECTIONS`` connections ended the
    ``scenario``'s way (the collector off meanwhile, so nothing is collected earlier)."""
    await scenario(harness)  # caches, lazy imports, first-use allocations
    await harness.wait_closed()
    with logged_as_in_a_broker():
        return await collected_after(scenario, harness)


@contextlib.contextmanager
def logged_as_in_a_broker() -> Iterator[None]:
    """pykraft's log records formatted and dropped, as a broker's log handler does: pytest's
    log capture keeps every record, and with it the failures and frames it names."""
    logger = logging.getLogger("pykraft")
    handler = _FormatOnly()
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.propagate = True
        logger.removeHandler(handler)


class _FormatOnly(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        self.format(record)


async def collected_after(scenario: Scenario, harness: Harness) -> list[object]:
    enabled = gc.isenabled()
    gc.disable()
    # What exists already is not watched, nor walked: the collection below costs only the
    # objects made since.
    gc.freeze()
    gc.garbage.clear()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(CONNECTIONS):
            await scenario(harness)
            await harness.wait_closed()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.unfreeze()
        if enabled:
            gc.enable()


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    ("scenario", "security"), CASES, ids=[f"{s.__name__}-{security}" for s, security in CASES]
)
def test_a_closed_connection_leaves_nothing_to_the_cyclic_collector(
    scenario: Scenario, security: str, loop: str, tmp_path: Path
) -> None:
    async def measure() -> list[object]:
        harness = Harness(
            sasl=security.startswith("SASL"), tls=tmp_path if security.endswith("SSL") else None
        )
        try:
            return await unreachable_after(scenario, harness)
        finally:
            await harness.listener.close()

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        garbage = runner.run(measure())
    if loop == "asyncio":
        # Python 3.11's selector transport refers to itself (gh-100348): it and what it holds.
        transports = [o for o in garbage if type(o).__name__ == "_SelectorSocketTransport"]
        own = reachable_within(transports, garbage)
        garbage = [o for o in garbage if id(o) not in own]
    assert not garbage, describe(garbage)
