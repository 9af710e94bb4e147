"""The Kafka listener's connection handling, driven over a socketpair (no ports, no sleeps).

Behaviour follows Kafka's SocketServer: responses in request order, a bad frame or rejected
request closes only its own connection (after earlier responses), handler failures are logged
and close the connection, file slices are written with sendfile or by reading the file.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.acceptor import resolve_per_ip_overrides
from pykraft.broker.connection_quotas import ConnectionLimits, ConnectionQuotas
from pykraft.broker.metrics import BrokerMetrics, CloseReason
from pykraft.broker.network import (
    SENDFILE_MIN_BYTES,
    KafkaListener,
    ListenerAuthentication,
    RequestContext,
)
from pykraft.broker.quotas_channel import ChannelThrottles
from pykraft.broker.request_time import StartsAtOnce
from pykraft.broker.sasl_mechanisms import PLAIN, PlainServer, PlainUsers
from pykraft.broker.sasl_server import SaslAuthenticator
from pykraft.metadata.auth.principal import ANONYMOUS, user
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import request_class
from pykraft.protocol.errors import MalformedRequestError, UnsupportedRequestError
from pykraft.protocol.framing import frame_response
from pykraft.protocol.segments import Segments
from pykraft.storage.file_slice import FileSlice, file_id_of
from tests.broker.wire_client import correlation_id, read_frame, request_frame
from tests.fake_clock import FakeClock

METADATA = 3
Dispatch = Callable[[RequestContext, memoryview], Awaitable[Segments | None] | None]


def echo_response(context: RequestContext, body: memoryview) -> Segments:
    return frame_response(context.header.correlation_id, 0, bytes(body))


class Harness:
    """One listener plus socketpair connections to it."""

    def __init__(
        self, dispatch: Dispatch, *, clock: FakeClock | None = None, **options: Any
    ) -> None:
        self.metrics = BrokerMetrics()
        self.listener = KafkaListener(
            dispatch,
            metrics=self.metrics,
            monotonic_ms=(clock or FakeClock()).monotonic_ms,
            **options,
        )
        self.tasks: list[asyncio.Task[None]] = []

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        server_side, client_side = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=server_side)
        self.tasks.append(asyncio.create_task(self.listener.serve_connection(reader, writer)))
        return await asyncio.open_connection(sock=client_side)

    def closed(self, reason: CloseReason) -> float:
        return self.metrics.connections_closed.value(reason.value)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=10))


async def until(predicate: Callable[[], bool]) -> None:
    """Yield to the event loop until ``predicate`` holds (no wall-clock waiting)."""
    for _ in range(10_000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


def test_responses_leave_in_request_order_when_handlers_finish_out_of_order() -> None:
    async def scenario() -> None:
        gates: dict[int, asyncio.Event] = {}

        async def slow(context: RequestContext, body: memoryview) -> Segments:
            await gates[context.header.correlation_id].wait()
            return echo_response(context, body)

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            gates[context.header.correlation_id] = asyncio.Event()
            return slow(context, body)

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(b"".join(request_frame(METADATA, 0, cid, b"req%d" % cid) for cid in (1, 2, 3)))
        await until(lambda: len(gates) == 3)
        # Finish 3, then 2: neither may overtake 1. Then 1 releases all three, in order.
        gates[3].set()
        gates[2].set()
        gates[1].set()
        frames = [await read_frame(reader) for _ in range(3)]
        assert [correlation_id(f) for f in frames if f] == [1, 2, 3]
        assert [f[4:] for f in frames if f] == [b"req1", b"req2", b"req3"]
        await harness.listener.close()

    run(scenario)


def test_pipelined_requests_answered_at_once_leave_in_one_write() -> None:
    async def scenario() -> None:
        async def answer(context: RequestContext, body: memoryview) -> Segments:
            return echo_response(context, body)

        harness = Harness(answer)
        server_side, client_side = socket.socketpair()
        server_reader, server_writer = await asyncio.open_connection(sock=server_side)
        writes: list[bytes] = []
        # Counted at the transport: the listener writes through its own StreamWriter.
        transport = server_writer.transport
        write = transport.write

        def counted(data: bytes | bytearray | memoryview) -> None:
            writes.append(bytes(data))
            write(data)

        transport.write = counted  # type: ignore[method-assign]
        serving = asyncio.create_task(
            harness.listener.serve_connection(server_reader, server_writer)
        )
        reader, writer = await asyncio.open_connection(sock=client_side)
        # Five requests in one read: the writer wakes once, finds all five answered, and
        # writes them in order with one system call (issue 18: a pipelining client's answers).
        writer.write(
            b"".join(request_frame(METADATA, 0, cid, b"req%d" % cid) for cid in range(1, 6))
        )
        frames = [await read_frame(reader) for _ in range(5)]
        assert [correlation_id(f) for f in frames if f] == [1, 2, 3, 4, 5]
        assert len(writes) == 1 and writes[0] == b"".join(
            len(f).to_bytes(4, "big") + f for f in frames if f
        )
        assert harness.metrics.bytes_out.value() == len(writes[0])
        assert harness.metrics.kafka_requests.value("Metadata", "0") == 5
        # One more request later is written on its own.
        writer.write(request_frame(METADATA, 0, 6, b"req6"))
        assert correlation_id(await read_frame(reader) or b"") == 6
        assert len(writes) == 2
        await harness.listener.close()
        await asyncio.gather(serving, return_exceptions=True)

    run(scenario)


def test_no_response_for_a_request_dispatch_answers_with_none() -> None:
    async def scenario() -> None:
        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments] | None:
            if context.header.correlation_id == 1:  # like acks=0 Produce
                return None
            return asyncio.sleep(0, echo_response(context, body))

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(0, 9, 1, b"fire-and-forget") + request_frame(METADATA, 0, 2))
        frame = await read_frame(reader)
        assert frame is not None and correlation_id(frame) == 2
        assert harness.metrics.request_duration.count("Produce") == 1
        assert harness.metrics.request_duration.count("Metadata") == 1
        await harness.listener.close()

    run(scenario)


def test_an_oversized_frame_closes_only_its_connection_after_earlier_responses() -> None:
    async def scenario() -> None:
        seen: list[int] = []

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            seen.append(context.header.correlation_id)
            return asyncio.sleep(0, echo_response(context, body))

        harness = Harness(dispatch, max_request_bytes=100)
        reader, writer = await harness.connect()
        oversized = (101).to_bytes(4, "big") + b"x" * 101
        writer.write(request_frame(METADATA, 0, 1) + oversized + request_frame(METADATA, 0, 3))
        first = await read_frame(reader)
        assert first is not None and correlation_id(first) == 1
        assert await read_frame(reader) is None  # closed, request 3 never read
        assert seen == [1]
        assert harness.closed(CloseReason.MALFORMED_REQUEST) == 1
        # The listener still serves other connections.
        other_reader, other_writer = await harness.connect()
        other_writer.write(request_frame(METADATA, 0, 7))
        frame = await read_frame(other_reader)
        assert frame is not None and correlation_id(frame) == 7
        await harness.listener.close()

    run(scenario)


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00\x03",  # too short for api key, version and correlation id
        b"\x00\x03\x00\x00\x00\x00\x00\x01\x00\x05ab",  # client id runs past the frame
        b"\x00\x03\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe",  # client id not UTF-8
        (-1).to_bytes(4, "big", signed=True),  # negative size prefix (the frame itself)
    ],
)
def test_a_malformed_request_never_reaches_the_dispatcher(payload: bytes) -> None:
    async def scenario() -> None:
        seen: list[int] = []

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            seen.append(context.header.correlation_id)
            return asyncio.sleep(0, echo_response(context, body))

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        if payload.startswith(b"\xff\xff"):
            writer.write(payload)
        else:
            writer.write(len(payload).to_bytes(4, "big") + payload)
        assert await read_frame(reader) is None
        assert seen == []
        assert harness.closed(CloseReason.MALFORMED_REQUEST) == 1
        await harness.listener.close()

    run(scenario)


def test_a_rejected_request_closes_the_connection_after_earlier_responses() -> None:
    async def scenario() -> None:
        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            if context.header.api_key == 99:
                raise UnsupportedRequestError(99, 0, "unknown API")
            return asyncio.sleep(0, echo_response(context, body))

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(METADATA, 0, 1) + request_frame(99, 0, 2))
        first = await read_frame(reader)
        assert first is not None and correlation_id(first) == 1
        assert await read_frame(reader) is None
        assert harness.closed(CloseReason.REQUEST_REJECTED) == 1
        await harness.listener.close()

    run(scenario)


def test_handler_failures_close_the_connection_and_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        async def handler(context: RequestContext, body: memoryview) -> Segments:
            if context.header.correlation_id == 2:
                raise RuntimeError("handler bug")
            if context.header.correlation_id == 3:
                raise MalformedRequestError("topics", "truncated", 4)
            return echo_response(context, body)

        harness = Harness(handler)
        for bad in (2, 3):
            reader, writer = await harness.connect()
            writer.write(request_frame(METADATA, 0, 1) + request_frame(METADATA, 0, bad))
            first = await read_frame(reader)
            assert first is not None and correlation_id(first) == 1
            assert await read_frame(reader) is None
        assert harness.closed(CloseReason.HANDLER_FAILED) == 1
        assert harness.closed(CloseReason.REQUEST_REJECTED) == 1
        await harness.listener.close()

    with caplog.at_level(logging.WARNING, logger="pykraft.broker.network"):
        run(scenario)
    assert any("handler bug" in (r.exc_text or "") for r in caplog.records)
    assert any("truncated" in r.getMessage() for r in caplog.records)


def test_in_flight_requests_per_connection_are_bounded() -> None:
    async def scenario() -> None:
        gates: list[asyncio.Event] = []

        async def wait_for_gate(context: RequestContext, gate: asyncio.Event) -> Segments:
            await gate.wait()
            return echo_response(context, memoryview(b""))

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            gates.append(asyncio.Event())
            return wait_for_gate(context, gates[-1])

        harness = Harness(dispatch, max_in_flight_requests=2)
        reader, writer = await harness.connect()
        writer.write(b"".join(request_frame(METADATA, 0, cid) for cid in range(5)))
        await until(lambda: len(gates) == 2)
        for _ in range(200):
            await asyncio.sleep(0)
        assert len(gates) == 2  # the third request waits until one is answered
        gates[0].set()
        await until(lambda: len(gates) == 3)
        for gate in gates[1:]:
            gate.set()
        await until(lambda: len(gates) == 5)
        for gate in gates:
            gate.set()
        cids = [correlation_id(await read_frame(reader) or b"") for _ in range(5)]
        assert cids == [0, 1, 2, 3, 4]
        await harness.listener.close()

    run(scenario)


@pytest.mark.parametrize("use_sendfile", [True, False])
def test_file_slices_are_written_between_buffers(tmp_path: Path, use_sendfile: bool) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(bytes(range(256)) * 8192)  # 2 MiB

    async def scenario() -> None:
        async def handler(context: RequestContext, body: memoryview) -> Segments:
            parts = Segments.of(
                # A slice large enough for sendfile, then a small one that is read.
                [b"head", FileSlice(segment, 10, 1_500_000), b"mid", FileSlice(segment, 0, 3)]
            )
            return frame_response(context.header.correlation_id, 0, parts)

        harness = Harness(handler, use_sendfile=use_sendfile)
        reader, writer = await harness.connect()
        writer.write(request_frame(1, 4, 42))
        frame = await read_frame(reader)
        data = segment.read_bytes()
        assert frame == (42).to_bytes(4, "big") + b"head" + data[10:1_500_010] + b"mid" + data[:3]
        await until(lambda: harness.metrics.bytes_out.value() == 4 + len(frame or b""))
        assert len(harness.listener.files) == 1  # one open file, reused for both slices
        assert harness.listener.use_sendfile is use_sendfile  # sendfile worked when enabled
        await harness.listener.close()
        assert len(harness.listener.files) == 0

    run(scenario)


def test_a_finished_handler_writes_its_small_response_before_the_next_woken_handler_runs(
    tmp_path: Path,
) -> None:
    # Two followers' Fetches woken by one append: the first answer (buffers and a small file
    # slice, read) is on the wire, whole, before the second handler resumes — not one loop
    # turn later, after every woken handler ran.
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"records-")

    async def scenario() -> None:
        append = asyncio.Event()
        first_client: list[socket.socket] = []
        seen_by_second: list[bytes] = []
        waiting: list[int] = []

        async def handler(context: RequestContext, body: memoryview) -> Segments:
            waiting.append(context.header.correlation_id)
            await append.wait()
            if context.header.correlation_id == 2:
                try:
                    seen_by_second.append(first_client[0].recv(1024, socket.MSG_PEEK))
                except BlockingIOError:
                    seen_by_second.append(b"")  # nothing written yet
            parts = Segments.of([b"head-", FileSlice(segment, 0, 8), b"-tail"])
            return frame_response(context.header.correlation_id, 0, parts)

        harness = Harness(handler)
        clients = []
        for correlation in (1, 2):
            server_side, client_side = socket.socketpair()
            reader, writer = await asyncio.open_connection(sock=server_side)
            harness.tasks.append(
                asyncio.create_task(harness.listener.serve_connection(reader, writer))
            )
            client_side.sendall(request_frame(1, 4, correlation))
            client_side.setblocking(False)
            clients.append(client_side)
        first_client.append(clients[0])
        await until(lambda: len(waiting) == 2)
        append.set()
        await until(lambda: bool(seen_by_second))
        frame = b"head-records--tail"
        size_and_correlation_id = (4 + len(frame)).to_bytes(4, "big") + (1).to_bytes(4, "big")
        assert seen_by_second == [size_and_correlation_id + frame]
        await harness.listener.close()
        for client in clients:
            client.close()

    run(scenario)


@pytest.mark.parametrize("size", [100, 2 * SENDFILE_MIN_BYTES])
def test_a_slice_beyond_the_end_of_its_file_closes_the_connection(
    tmp_path: Path, size: int
) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"x" * size)  # a follower truncated the log after the read

    async def scenario() -> None:
        async def handler(context: RequestContext, body: memoryview) -> Segments:
            return frame_response(context.header.correlation_id, 0, Segments.of(
                [FileSlice(segment, size // 2, size)]
            ))  # fmt: skip

        harness = Harness(handler)
        reader, writer = await harness.connect()
        writer.write(request_frame(1, 4, 1))
        received = await reader.read()  # until EOF: a cut-short frame, then the close
        assert len(received) < 4 + 4 + size
        assert harness.closed(CloseReason.SEND_FAILED) == 1
        await harness.listener.close()

    run(scenario)


def test_closing_the_listener_cancels_pending_handlers() -> None:
    async def scenario() -> None:
        started = asyncio.Event()
        never = asyncio.get_running_loop().create_future()
        tasks: list[asyncio.Future[Segments]] = []

        async def handler(context: RequestContext, body: memoryview) -> Segments:
            started.set()
            result: Segments = await never
            return result

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            task = asyncio.ensure_future(handler(context, body))
            tasks.append(task)
            return task

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(METADATA, 0, 1))
        await started.wait()
        assert harness.listener.connection_count == 1
        await harness.listener.close()
        assert tasks[0].cancelled()
        assert harness.listener.connection_count == 0
        assert harness.closed(CloseReason.SHUTDOWN) == 1
        assert await read_frame(reader) is None

    run(scenario)


def test_byte_and_connection_metrics() -> None:
    async def scenario() -> None:
        harness = Harness(lambda c, b: asyncio.sleep(0, echo_response(c, b)))
        reader, writer = await harness.connect()
        request = request_frame(METADATA, 0, 5, b"abc")
        writer.write(request)
        frame = await read_frame(reader)
        assert frame is not None
        assert harness.metrics.bytes_in.value() == len(request)
        await until(lambda: harness.metrics.request_duration.count("Metadata") == 1)
        assert harness.metrics.bytes_out.value() == 4 + len(frame)
        assert harness.metrics.connections.value() == 1
        writer.close()
        await until(lambda: harness.closed(CloseReason.CLIENT_CLOSED) == 1)
        assert harness.metrics.connections.value() == 0
        await harness.listener.close()

    run(scenario)


def test_a_client_that_half_closes_still_gets_its_answers() -> None:
    async def scenario() -> None:
        harness = Harness(lambda c, b: asyncio.sleep(0, echo_response(c, b)))
        reader, writer = await harness.connect()
        writer.write(request_frame(METADATA, 0, 1) + request_frame(METADATA, 0, 2))
        writer.write_eof()
        frames = [await read_frame(reader) for _ in range(3)]
        assert [correlation_id(f) for f in frames[:2] if f] == [1, 2] and frames[2] is None
        await harness.listener.close()

    run(scenario)


def test_failures_of_requests_behind_a_closed_connection_are_not_reported_as_lost() -> None:
    async def scenario() -> None:
        reported: list[str] = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda loop, context: reported.append(context["message"]))
        first_may_fail = asyncio.Event()

        async def handler(context: RequestContext, body: memoryview) -> Segments:
            if context.header.correlation_id == 1:
                await first_may_fail.wait()
            raise RuntimeError(f"handler {context.header.correlation_id} failed")

        harness = Harness(handler)
        reader, writer = await harness.connect()
        writer.write(request_frame(METADATA, 0, 1) + request_frame(METADATA, 0, 2))
        await until(lambda: harness.metrics.connections.value() == 1)
        for _ in range(100):  # let request 2 fail while request 1 still holds the line
            await asyncio.sleep(0)
        first_may_fail.set()
        assert await read_frame(reader) is None
        await harness.listener.close()
        gc.collect()
        assert reported == []

    run(scenario)


def test_idle_connections_close_after_connections_max_idle_ms_and_busy_ones_stay() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        gate = asyncio.Event()

        async def held(context: RequestContext, body: memoryview) -> Segments:
            await gate.wait()
            return echo_response(context, body)

        harness = Harness(held, connections_max_idle_ms=1000, clock=clock)
        quiet_reader, quiet_writer = await harness.connect()
        busy_reader, busy_writer = await harness.connect()
        talking_reader, talking_writer = await harness.connect()
        await until(lambda: harness.listener.connection_count == 3)
        request_bytes = len(request_frame(METADATA, 0, 1))
        busy_writer.write(request_frame(METADATA, 0, 1))  # its answer is held back
        await until(lambda: harness.metrics.bytes_in.value() == request_bytes)
        clock.now_ms = 900
        talking_writer.write(request_frame(METADATA, 0, 2))
        await until(lambda: harness.metrics.bytes_in.value() == 2 * request_bytes)
        clock.now_ms = 1000  # exactly the limit: not yet idle
        assert harness.listener.acceptor.expire_idle_connections(clock.now_ms) == 0
        clock.now_ms = 1001
        # Only the quiet one: the busy one waits for an answer, the talking one read at 900.
        assert harness.listener.acceptor.expire_idle_connections(clock.now_ms) == 1
        assert await read_frame(quiet_reader) is None
        await until(lambda: harness.closed(CloseReason.IDLE) == 1)
        gate.set()
        assert correlation_id(await read_frame(busy_reader) or b"") == 1
        assert correlation_id(await read_frame(talking_reader) or b"") == 2
        assert not quiet_writer.is_closing()  # the broker closed it, not the client
        await harness.listener.close()

    run(scenario)


def test_over_max_connections_a_listener_closes_its_least_recently_active_connection() -> None:
    # Kafka's Processor.closeExcessConnections after a protected listener let one more in.
    async def scenario() -> None:
        clock = FakeClock()
        quotas = ConnectionQuotas(
            ConnectionLimits(max_connections=2), inter_broker_listener="REPLICATION"
        )
        quotas.add_listener("REPLICATION")
        harness = Harness(lambda c, b: asyncio.sleep(0, echo_response(c, b)), quotas=quotas,
                          clock=clock)  # fmt: skip
        connections = []
        for count, at_ms in enumerate((30, 10, 20), start=1):  # the second is the least recent
            clock.now_ms = at_ms
            connections.append(await harness.connect())
            await until(lambda: harness.listener.connection_count == count)  # noqa: B023
        for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            quotas.open("PLAINTEXT", ip)
        harness.listener.acceptor.close_excess_connections()
        assert await read_frame(connections[1][0]) is None
        await until(lambda: harness.closed(CloseReason.MAX_CONNECTIONS) == 1)
        harness.listener.acceptor.close_excess_connections()  # already closing: no second one
        await until(lambda: harness.listener.connection_count == 2)
        assert harness.closed(CloseReason.MAX_CONNECTIONS) == 1
        await harness.listener.close()

    run(scenario)


def test_per_ip_overrides_are_keyed_by_address_with_host_names_resolved() -> None:
    # Kafka resolves override host names with InetAddress.getByName; localhost is in /etc/hosts.
    resolved = asyncio.run(resolve_per_ip_overrides({"localhost": 7, "0:0::1": 3, "10.0.0.1": 0}))
    assert resolved["127.0.0.1"] == 7
    assert resolved["::1"] == 3  # normalised; written after localhost, so it wins
    assert resolved["10.0.0.1"] == 0


def recording_dispatch() -> tuple[list[RequestContext], Dispatch]:
    """A dispatch that echoes and remembers every context it was given."""
    seen: list[RequestContext] = []

    def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
        seen.append(context)
        return asyncio.sleep(0, echo_response(context, body))

    return seen, dispatch


def sasl_listener_options() -> dict[str, Any]:
    users = PlainUsers.from_passwords({"alice": "alice-secret"})

    def authenticator() -> SaslAuthenticator:
        return SaslAuthenticator({PLAIN: lambda: PlainServer(users)})

    return {
        "authentication": ListenerAuthentication(new_sasl_authenticator=authenticator),
        "failed_authentication_delay_ms": 0,
    }


def sasl_frames(password: bytes) -> bytes:
    handshake = request_class(ApiKey.SASL_HANDSHAKE)(version=1, mechanism="PLAIN")
    authenticate = request_class(ApiKey.SASL_AUTHENTICATE)(
        version=2, auth_bytes=b"\0alice\0" + password
    )
    return request_frame(
        ApiKey.SASL_HANDSHAKE, 1, 1, bytes(handshake.encode(version=1))
    ) + request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, bytes(authenticate.encode(version=2)))


def test_sasl_principal_reaches_the_handlers() -> None:
    async def scenario() -> None:
        seen, dispatch = recording_dispatch()
        harness = Harness(dispatch, **sasl_listener_options())
        reader, writer = await harness.connect()
        writer.write(sasl_frames(b"alice-secret") + request_frame(METADATA, 0, 3))
        frames = [await read_frame(reader) for _ in range(3)]
        assert [correlation_id(f) for f in frames if f] == [1, 2, 3]
        # Only the request after authentication was dispatched, with alice as its principal.
        assert [(c.header.correlation_id, c.principal) for c in seen] == [(3, user("alice"))]
        await harness.listener.close()

    run(scenario)


def test_sasl_failure_closes_before_any_request_is_dispatched() -> None:
    async def scenario() -> None:
        seen, dispatch = recording_dispatch()
        harness = Harness(dispatch, **sasl_listener_options())
        reader, writer = await harness.connect()
        writer.write(sasl_frames(b"wrong") + request_frame(METADATA, 0, 3))
        frames = [await read_frame(reader) for _ in range(3)]
        assert [correlation_id(f) for f in frames if f] == [1, 2]  # then end of stream
        assert frames[2] is None and seen == []
        await until(lambda: harness.closed(CloseReason.AUTHENTICATION_FAILED) == 1)
        await harness.listener.close()

    run(scenario)


def test_plaintext_requests_are_anonymous() -> None:
    async def scenario() -> None:
        seen, dispatch = recording_dispatch()
        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(METADATA, 0, 1))
        assert await read_frame(reader) is not None
        assert [c.principal for c in seen] == [ANONYMOUS]
        await harness.listener.close()

    run(scenario)


@pytest.mark.parametrize("size", [100, 2 * SENDFILE_MIN_BYTES])
def test_a_slice_whose_file_was_swapped_before_sending_is_never_sent(
    tmp_path: Path, size: int
) -> None:
    # Issue 14's swap race: the Fetch handler cut the slice, then the cleaner renamed a cleaned
    # file over the segment (storage.cleaner_swap) before the writer sent it. The new file has
    # other bytes at those positions; the connection closes instead of sending them.
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"o" * size)
    fd = os.open(segment, os.O_RDONLY)
    piece = FileSlice(segment, 0, size, file_id_of(fd))
    os.close(fd)

    async def scenario() -> None:
        async def handler(context: RequestContext, body: memoryview) -> Segments:
            swap = tmp_path / "00000000000000000000.log.swap"
            swap.write_bytes(b"n" * size)
            os.rename(swap, segment)  # between the cut and the send
            return frame_response(context.header.correlation_id, 0, Segments.of([piece]))

        harness = Harness(handler)
        reader, writer = await harness.connect()
        writer.write(request_frame(1, 4, 1))
        received = await reader.read()  # until EOF
        assert b"n" not in received
        assert harness.closed(CloseReason.SEND_FAILED) == 1
        await harness.listener.close()

    run(scenario)


def test_a_request_started_at_once_is_answered_in_the_read_callback_without_a_task() -> None:
    # Issue 18: a handler the dispatcher marks StartsAtOnce that finishes without suspending
    # runs in the transport's callback (no task, no loop turn) and writes its response there;
    # an unmarked one runs in a task of its own (it may enter asyncio.timeout at once).
    async def scenario() -> None:
        tasks_seen: dict[int, asyncio.Task[Any] | None] = {}

        async def answer_now(context: RequestContext, body: memoryview) -> Segments:
            tasks_seen[context.header.correlation_id] = asyncio.current_task()
            return echo_response(context, body)

        async def answer_in_task(context: RequestContext, body: memoryview) -> Segments:
            tasks_seen[context.header.correlation_id] = asyncio.current_task()
            async with asyncio.timeout(5):  # raises outside a task
                return echo_response(context, body)

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            if context.header.correlation_id < 10:
                return StartsAtOnce(answer_now(context, body))
            return answer_in_task(context, body)

        harness = Harness(dispatch)
        reader, writer = await harness.connect()
        for cid in (1, 10, 2):
            writer.write(request_frame(METADATA, 0, cid, b"req"))
            assert correlation_id(await read_frame(reader) or b"") == cid
        assert tasks_seen[1] is None and tasks_seen[2] is None and tasks_seen[10] is not None
        assert harness.metrics.kafka_requests.value("Metadata", "0") == 3
        await harness.listener.close()

    run(scenario)


@pytest.mark.parametrize("half_closed", [False, True])
def test_bytes_the_stream_reader_buffered_before_serving_are_answered(half_closed: bool) -> None:
    # The listener takes the transport over from the StreamReaderProtocol the acceptor made:
    # what that stream reader had read already (and its end of input) is not lost.
    async def scenario() -> None:
        harness = Harness(lambda c, b: asyncio.sleep(0, echo_response(c, b)))
        server_side, client_side = socket.socketpair()
        server_reader, server_writer = await asyncio.open_connection(sock=server_side)
        reader, writer = await asyncio.open_connection(sock=client_side)
        writer.write(request_frame(METADATA, 0, 1, b"early") + request_frame(METADATA, 0, 2))
        if half_closed:
            writer.write_eof()
        await until(lambda: len(getattr(server_reader, "_buffer", b"")) > 0)
        if half_closed:
            await until(lambda: getattr(server_reader, "_eof", False))
        serving = asyncio.create_task(
            harness.listener.serve_connection(server_reader, server_writer)
        )
        frames = [await read_frame(reader) for _ in range(2)]
        assert [correlation_id(f) for f in frames if f] == [1, 2]
        assert frames[0] is not None and frames[0][4:] == b"early"
        if half_closed:
            assert await read_frame(reader) is None  # closed after the answers
            assert harness.closed(CloseReason.CLIENT_CLOSED) == 1
        await harness.listener.close()
        await asyncio.gather(serving, return_exceptions=True)

    run(scenario)


def test_no_module_enters_a_task_bound_construct_unless_listed() -> None:
    # The first step of a handler KafkaApis marks StartsAtOnce (Produce, Fetch, ApiVersions)
    # runs outside any task, so nothing on their paths may enter asyncio.timeout, a TaskGroup
    # or ask current_task before its first await. These modules do it off those paths (their
    # own tasks); a new one must show it is not on their way before joining the list.
    root = Path(__file__).resolve().parents[2]
    packages = ("broker", "coordinator", "fetcher", "metadata", "protocol", "replica", "storage")
    constructs = ("asyncio.timeout(", "TaskGroup(", "current_task(")
    using = {
        str(path.relative_to(root))
        for package in packages
        for path in (root / package).rglob("*.py")
        if any(construct in path.read_text() for construct in constructs)
    }
    assert using == {
        "broker/heartbeat.py",  # the heartbeat task
        "broker/network.py",  # serve_connection: the connection's own task
        "storage/system_clock.py",  # Clock.wait: the cleaner, fetchers, the listener's unmute
    }


@pytest.mark.parametrize("at_once", [False, True])
def test_a_produce_handler_that_throttles_in_its_first_step_mutes_the_next_request(
    at_once: bool,
) -> None:
    # KIP-219: the quota a Produce handler records before its first await mutes the connection
    # before the next request is dispatched (Kafka reads one request at a time), whether the
    # handler starts at once or as a task (then the reader waits a loop turn for it).
    async def scenario() -> None:
        clock = FakeClock()
        throttles = ChannelThrottles(clock.wait)
        dispatched_at: dict[int, int] = {}

        async def produce(context: RequestContext, body: memoryview) -> Segments:
            if context.header.correlation_id == 1:
                throttles.throttle(context.connection_id, clock.now_ms + 5000)
            await asyncio.sleep(0)
            return echo_response(context, body)

        def dispatch(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            dispatched_at[context.header.correlation_id] = clock.now_ms
            return StartsAtOnce(produce(context, body)) if at_once else produce(context, body)

        harness = Harness(dispatch, clock=clock, throttles=throttles)
        reader, writer = await harness.connect()
        writer.write(request_frame(ApiKey.PRODUCE, 9, 1) + request_frame(ApiKey.PRODUCE, 9, 2))
        frames = [await read_frame(reader) for _ in range(2)]
        assert [correlation_id(f) for f in frames if f] == [1, 2]
        assert dispatched_at == {1: 0, 2: 5000}
        await harness.listener.close()

    run(scenario)
