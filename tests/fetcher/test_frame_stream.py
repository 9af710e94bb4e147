"""``FrameStream``: size-prefixed frames come out whole and in order however the socket splits
the bytes, large frames are read into their own buffer, and bad input fails the waiter.

Driven the way asyncio's selector transport drives a ``BufferedProtocol`` (``get_buffer``, then
``buffer_updated`` with what ``recv_into`` wrote), without a socket.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.fetcher.frame_stream import (
    MAX_QUEUED_FRAMES,
    SPARE_BYTES_MAX,
    STAGING_BYTES,
    FrameStream,
)
from pykraft.protocol.errors import FrameError
from tests.tls_material import make_tls_material


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def receive(stream: FrameStream, data: bytes, cuts: list[int]) -> list[int]:
    """Hand ``data`` over in pieces ending at ``cuts`` (each piece also bounded by the buffer
    the stream offers, as ``recv_into`` is); returns the buffer sizes offered."""
    offered, position = [], 0
    ends = sorted({c for c in cuts if 0 < c < len(data)} | {len(data)})
    for end in ends:
        while position < end:
            buffer = stream.get_buffer(-1)
            offered.append(len(buffer))
            count = min(len(buffer), end - position)
            buffer[:count] = data[position : position + count]
            buffer.release()
            stream.buffer_updated(count)
            position += count
    return offered


def run(check: object) -> None:
    async def main() -> None:
        stream = FrameStream(max_bytes=1 << 22)
        stream.connection_made(RecordingTransport())
        await asyncio.wait_for(check(stream), 5)  # type: ignore[operator]

    asyncio.run(main())


bodies = st.lists(
    st.one_of(
        st.binary(max_size=300),
        st.integers(STAGING_BYTES - 8, 3 * STAGING_BYTES).map(lambda n: bytes([n % 251]) * n),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=25, deadline=None)
@given(bodies, st.lists(st.integers(0, 4 * STAGING_BYTES), max_size=8))
def test_frames_come_out_whole_and_in_order_however_split(
    frames: list[bytes], cuts: list[int]
) -> None:
    async def check(stream: FrameStream) -> None:
        receive(stream, b"".join(frame(body) for body in frames), cuts)
        held = [await stream.next_frame() for _ in frames]  # every one still referred to
        assert [bytes(view) for view in held] == frames
        del held  # let go: their buffers may be filled again, never one a frame still uses
        receive(stream, b"".join(frame(body) for body in frames), cuts)
        assert [bytes(await stream.next_frame()) for _ in frames] == frames

    run(check)


def test_a_large_frame_is_read_into_its_own_buffer_up_to_its_end() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB, as a follower's Fetch response
    data = frame(body) + frame(b"next")

    async def check(stream: FrameStream) -> None:
        offered = receive(stream, data, [1000])
        # After the first piece, the rest of the big frame is offered in one buffer of exactly
        # its remaining size: recv_into writes it in place, no staging copy.
        assert offered[1] == len(body) - (1000 - 4)
        assert bytes(await stream.next_frame()) == body
        assert bytes(await stream.next_frame()) == b"next"

    run(check)


def test_a_waiter_gets_the_frame_that_arrives_later() -> None:
    async def check(stream: FrameStream) -> None:
        waiting = asyncio.ensure_future(stream.next_frame())
        await asyncio.sleep(0)
        assert not waiting.done()
        receive(stream, frame(b"late"), [2])
        assert bytes(await waiting) == b"late"

    run(check)


def test_an_oversized_frame_fails_the_waiter_and_closes() -> None:
    async def check(stream: FrameStream) -> None:
        waiting = asyncio.ensure_future(stream.next_frame())
        await asyncio.sleep(0)
        receive(stream, struct.pack(">i", (1 << 22) + 1), [])
        with pytest.raises(FrameError):
            await waiting
        assert isinstance(stream.transport, RecordingTransport) and stream.transport.closed
        with pytest.raises(FrameError):  # and every later wait
            await stream.next_frame()

    run(check)


def test_a_negative_size_fails() -> None:
    async def check(stream: FrameStream) -> None:
        receive(stream, struct.pack(">i", -1), [])
        with pytest.raises(FrameError):
            await stream.next_frame()

    run(check)


def test_end_of_stream_mid_frame_fails_the_waiter() -> None:
    async def check(stream: FrameStream) -> None:
        receive(stream, frame(b"x" * 100)[:50], [])
        waiting = asyncio.ensure_future(stream.next_frame())
        await asyncio.sleep(0)
        assert stream.eof_received() is False
        stream.connection_lost(None)
        with pytest.raises(EOFError):
            await waiting
        await stream.wait_closed()

    run(check)


def test_frames_received_before_a_loss_are_still_delivered() -> None:
    async def check(stream: FrameStream) -> None:
        receive(stream, frame(b"kept"), [])
        stream.connection_lost(ConnectionResetError("reset"))
        assert bytes(await stream.next_frame()) == b"kept"
        with pytest.raises(ConnectionResetError):
            await stream.next_frame()

    run(check)


def test_a_split_prefix_after_a_whole_frame_is_carried_over() -> None:
    first, second = frame(b"first"), frame(b"s" * 70_000)  # prefixes 00 00 00 05, 00 01 11 70

    async def check(stream: FrameStream) -> None:
        receive(stream, first + second, [len(first) + 3])  # 3 bytes of the next size prefix
        assert bytes(await stream.next_frame()) == b"first"
        assert bytes(await stream.next_frame()) == b"s" * 70_000

    run(check)


def test_frames_over_tls_on_loopback(tmp_path: Path) -> None:
    """asyncio's TLS transport drives a ``BufferedProtocol`` too (an SSL inter-broker listener)."""
    material = make_tls_material(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(str(material.server.path))
    client_context = ssl.create_default_context(cafile=str(material.ca_path))
    big, small = bytes(range(256)) * 4096, b"small"

    async def main() -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(1)
            writer.write(frame(big) + frame(small))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_context)
        async with server:
            port = server.sockets[0].getsockname()[1]
            _, stream = await asyncio.get_running_loop().create_connection(
                lambda: FrameStream(1 << 22), "127.0.0.1", port, ssl=client_context
            )
            assert stream.transport is not None
            stream.transport.write(b"?")
            assert bytes(await stream.next_frame()) == big
            assert bytes(await stream.next_frame()) == small
            stream.transport.close()
            await stream.wait_closed()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_unasked_for_frames_pause_reading_until_they_are_taken() -> None:
    # One request is in flight at a time: a peer that keeps sending fills no unbounded queue.
    async def check(stream: FrameStream) -> None:
        transport = stream.transport
        assert isinstance(transport, RecordingTransport)
        receive(stream, frame(b"a") + frame(b"b"), [])
        assert not transport.reading  # MAX_QUEUED_FRAMES frames wait: the socket is not read
        assert bytes(await stream.next_frame()) == b"a"
        assert transport.reading
        assert bytes(await stream.next_frame()) == b"b"

    assert MAX_QUEUED_FRAMES == 2
    run(check)


def test_a_large_frames_buffer_is_filled_again_only_once_nothing_refers_to_it() -> None:
    first, second, third = (bytes([n]) * (2 * STAGING_BYTES) for n in (1, 2, 3))

    async def check(stream: FrameStream) -> None:
        receive(stream, frame(first), [1000])
        held = await stream.next_frame()
        receive(stream, frame(second), [1000])
        # The first frame is still referred to: the second got a buffer of its own.
        assert bytes(held) == first
        taken = await stream.next_frame()
        assert bytes(taken) == second
        reused = memoryview(taken).obj
        del held, taken  # the follower appended them and let go
        receive(stream, frame(third), [1000])
        again = await stream.next_frame()
        assert bytes(again) == third
        assert memoryview(again).obj is reused  # no new megabyte buffer per response

    run(check)


def test_a_buffer_over_the_bound_is_not_kept_between_frames() -> None:
    body = b"x" * (SPARE_BYTES_MAX + 1)

    async def main() -> None:
        stream = FrameStream(max_bytes=2 * SPARE_BYTES_MAX)
        stream.connection_made(RecordingTransport())
        receive(stream, frame(body), [1000])
        first = await stream.next_frame()
        buffer = memoryview(first).obj
        del first
        receive(stream, frame(body), [1000])
        assert memoryview(await stream.next_frame()).obj is not buffer

    asyncio.run(main())
