"""File slices sendfile'd beside the transport: only while it holds nothing unsent, never over
TLS, and the listener's responses byte for byte either way (socketpairs, no ports, no sleeps)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop

from pykraft.broker.metrics import CloseReason
from pykraft.broker.network import SENDFILE_MIN_BYTES, ListenerAuthentication, RequestContext
from pykraft.broker.socket_sendfile import SocketSender
from pykraft.protocol.framing import frame_response
from pykraft.protocol.segments import Segments
from pykraft.storage.file_slice import FileSlice
from tests.broker.test_network import Harness, until
from tests.broker.wire_client import read_frame, request_frame
from tests.tls_material import make_tls_material


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=10))


@pytest.fixture
def sendfile_bytes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes each os.sendfile call of the listener moved (the real call, counted)."""
    counts: list[int] = []
    real = os.sendfile

    def counting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        sent = real(out_fd, in_fd, offset, count)
        counts.append(sent)
        return sent

    monkeypatch.setattr(os, "sendfile", counting)  # the module calls os.sendfile
    return counts


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    return path


def slice_handler(
    segment: Path, position: int, length: int
) -> Callable[[RequestContext, memoryview], Coroutine[Any, Any, Segments]]:
    async def handler(context: RequestContext, body: memoryview) -> Segments:
        parts = Segments.of([b"head", FileSlice(segment, position, length), b"tail"])
        return frame_response(context.header.correlation_id, 0, parts)

    return handler


@pytest.mark.parametrize("length", [SENDFILE_MIN_BYTES, 300_000, 1_000_000])
def test_a_big_slice_is_sendfiled_in_order_between_its_buffers(
    segment: Path, sendfile_bytes: list[int], length: int
) -> None:
    # 300 KB and 1 MB overfill a socketpair's buffer: the rest of the slice is read and
    # written behind what sendfile sent.
    async def scenario() -> None:
        harness = Harness(slice_handler(segment, 7, length))
        reader, writer = await harness.connect()
        writer.write(request_frame(1, 4, 5) + request_frame(1, 4, 6))
        data = segment.read_bytes()
        for correlation in (5, 6):
            expected = correlation.to_bytes(4, "big") + b"head" + data[7 : 7 + length] + b"tail"
            assert await read_frame(reader) == expected
        assert sendfile_bytes and 0 < sum(sendfile_bytes) <= 2 * length
        await harness.listener.close()

    run(scenario)


def test_a_big_slice_answer_over_tcp_arrives_at_once(
    segment: Path, sendfile_bytes: list[int]
) -> None:
    # The sendfile path end to end on a real TCP loopback socket on uvloop, as the brokers
    # run: an AF_UNIX socketpair ignores MSG_MORE, and over TCP a lone last send with it is
    # held ~200 ms (measured: 4 bytes, 201 ms). A last send with it right after a sendfile
    # was pushed at once on this kernel, so the rule itself is checked by tests/broker/
    # test_send_plan.py. The fastest of three round trips rides out a busy machine.
    async def scenario() -> None:
        harness = Harness(slice_handler(segment, 7, SENDFILE_MIN_BYTES))
        with socket.create_server(("127.0.0.1", 0)) as server:
            client_side = socket.create_connection(server.getsockname())
            server_side, _ = server.accept()
        try:
            server_reader, server_writer = await asyncio.open_connection(sock=server_side)
            served = harness.listener.serve_connection(server_reader, server_writer)
            harness.tasks.append(asyncio.create_task(served))
            reader, writer = await asyncio.open_connection(sock=client_side)
            data = segment.read_bytes()[7 : 7 + SENDFILE_MIN_BYTES]
            round_trips = []
            for correlation in (1, 2, 3):
                started = time.monotonic()
                writer.write(request_frame(1, 4, correlation))
                frame = await read_frame(reader)
                round_trips.append(time.monotonic() - started)
                assert frame == correlation.to_bytes(4, "big") + b"head" + data + b"tail"
            assert len(sendfile_bytes) == 3
            assert min(round_trips) < 0.05, round_trips
        finally:
            client_side.close()
            server_side.close()
            await harness.listener.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(asyncio.wait_for(scenario(), timeout=10))


def test_a_small_slice_is_read_and_sent_with_its_response(
    segment: Path, sendfile_bytes: list[int]
) -> None:
    async def scenario() -> None:
        harness = Harness(slice_handler(segment, 0, SENDFILE_MIN_BYTES - 1))
        reader, writer = await harness.connect()
        writer.write(request_frame(1, 4, 5))
        frame = await read_frame(reader)
        assert frame is not None and len(frame) == 4 + 4 + SENDFILE_MIN_BYTES - 1 + 4
        assert sendfile_bytes == []
        await harness.listener.close()

    run(scenario)


def test_nothing_is_sendfiled_while_the_transport_holds_unsent_bytes(segment: Path) -> None:
    async def scenario() -> None:
        server_side, client_side = socket.socketpair()
        _, writer = await asyncio.open_connection(sock=server_side)
        sender = SocketSender(writer.transport)
        earlier = b"e" * (4 * 1024 * 1024)  # more than the socket takes: the transport holds some
        writer.write(earlier)
        assert writer.transport.get_write_buffer_size() > 0
        fd = os.open(segment, os.O_RDONLY)
        try:
            assert sender.send_buffer(b"head", more=True) == 0
            assert sender.send_file(fd, 0, 1000) == 0
            reader, _ = await asyncio.open_connection(sock=client_side)
            drained = asyncio.create_task(reader.readexactly(len(earlier) + 4 + 1000))
            await writer.drain()
            while writer.transport.get_write_buffer_size():
                await asyncio.sleep(0)
            assert sender.send_buffer(b"head", more=True) == 4
            assert sender.send_file(fd, 0, 1000) == 1000
        finally:
            os.close(fd)
            sender.close()
        assert await drained == earlier + b"head" + segment.read_bytes()[:1000]
        writer.close()

    run(scenario)


def test_tls_connections_copy_their_slices(
    tmp_path: Path, segment: Path, sendfile_bytes: list[int]
) -> None:
    # TLS encrypts in user space: bytes sendfile'd to its socket would be plaintext in the
    # record stream.
    material = make_tls_material(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(material.server.path)
    client_tls = ssl.create_default_context(cafile=str(material.ca_path))

    async def scenario() -> None:
        harness = Harness(
            slice_handler(segment, 0, 200_000),
            authentication=ListenerAuthentication(ssl_context=server_tls),
        )
        server_side, client_side = socket.socketpair()

        def on_connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            harness.tasks.append(
                asyncio.create_task(harness.listener.serve_connection(reader, writer))
            )

        loop = asyncio.get_running_loop()
        _, (reader, writer) = await asyncio.gather(  # the two ends' handshakes
            loop.connect_accepted_socket(
                lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(), on_connected),
                server_side,
                ssl=server_tls,
            ),
            asyncio.open_connection(sock=client_side, ssl=client_tls, server_hostname="localhost"),
        )
        writer.write(request_frame(1, 4, 9))
        expected = (9).to_bytes(4, "big") + b"head" + segment.read_bytes()[:200_000] + b"tail"
        assert await read_frame(reader) == expected
        assert sendfile_bytes == []
        await harness.listener.close()
        writer.close()

    run(scenario)


@pytest.mark.filterwarnings("error")  # an unclosed socket's ResourceWarning fails it
def test_a_sendfiled_answer_leaves_no_descriptor_of_its_own(segment: Path) -> None:
    # The sender wraps the transport's descriptor for one response (a duplicate kept for the
    # connection's life cost a second descriptor per connection, against a hard limit).
    async def scenario() -> None:
        before = set(os.listdir("/proc/self/fd"))
        harness = Harness(slice_handler(segment, 0, SENDFILE_MIN_BYTES))
        reader, writer = await harness.connect()
        writer.write(request_frame(1, 4, 1))
        assert await read_frame(reader) is not None
        during = set(os.listdir("/proc/self/fd"))
        writer.close()
        await writer.wait_closed()
        await harness.listener.close()
        assert len(during - before) == 3  # both socket ends, the segment (in the file cache)
        assert set(os.listdir("/proc/self/fd")) == before

    run(scenario)
    gc.collect()


def test_a_connection_closed_while_its_handler_waits_is_closed_quietly(
    segment: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A peer's reset closes the transport while the handler waits (uvloop then reports the
    # socket's descriptor as -1): the answer is not sent, no "Bad file descriptor" warning.
    async def scenario() -> None:
        started, gate = asyncio.Event(), asyncio.Event()

        async def handler(context: RequestContext, body: memoryview) -> Segments:
            started.set()
            await gate.wait()
            return await slice_handler(segment, 0, SENDFILE_MIN_BYTES)(context, body)

        harness = Harness(handler)
        server_side, client_side = socket.socketpair()
        server_reader, server_writer = await asyncio.open_connection(sock=server_side)
        served = asyncio.create_task(
            harness.listener.serve_connection(server_reader, server_writer)
        )
        _, writer = await asyncio.open_connection(sock=client_side)
        writer.write(request_frame(1, 4, 1))
        await started.wait()
        server_writer.transport.abort()
        await until(lambda: server_writer.transport.get_extra_info("socket").fileno() == -1)
        gate.set()
        await served
        assert harness.closed(CloseReason.CLIENT_CLOSED) == 1
        writer.close()
        await harness.listener.close()

    with caplog.at_level(logging.DEBUG, logger="pykraft.broker.network"):
        run(scenario)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_parts_between_big_slices_go_in_one_send_each(
    segment: Path, sendfile_bytes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A consumer's Fetch over 100 partitions, one with a big slice: the buffers and small
    # slices before it go in one send, those after it in another (not one send per part).
    sends: list[int] = []
    real_send_buffer = SocketSender.send_buffer

    def counting(sender: SocketSender, data: Any, more: bool) -> int:
        sends.append(memoryview(data).nbytes)
        return real_send_buffer(sender, data, more)

    monkeypatch.setattr(SocketSender, "send_buffer", counting)
    writes: list[int] = []
    real_write = asyncio.StreamWriter.write

    def counting_write(writer: asyncio.StreamWriter, data: Any) -> None:
        writes.append(memoryview(data).nbytes)
        real_write(writer, data)

    monkeypatch.setattr(asyncio.StreamWriter, "write", counting_write)
    parts: list[bytes | FileSlice] = [b"head"]
    for index in range(100):
        length = SENDFILE_MIN_BYTES if index == 50 else 500
        parts += [b"partition%03d" % index, FileSlice(segment, index * 1000, length)]
    data = segment.read_bytes()
    expected = b"".join(
        part if isinstance(part, bytes) else data[part.position : part.position + part.length]
        for part in parts
    )

    async def handler(context: RequestContext, body: memoryview) -> Segments:
        return frame_response(context.header.correlation_id, 0, Segments.of(parts))

    async def scenario() -> None:
        harness = Harness(handler)
        reader, writer = await harness.connect()
        writer.write(request_frame(1, 4, 3))
        del writes[:]  # the request
        assert await read_frame(reader) == (3).to_bytes(4, "big") + expected
        # Size prefix, header and the first 50 partitions; the 51st's slice; the rest.
        assert len(sends) + len(writes) == 2
        assert sendfile_bytes == [SENDFILE_MIN_BYTES]
        await harness.listener.close()

    run(scenario)
