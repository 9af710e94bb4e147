"""Size-prefixed response frames received straight into their own buffers, for
``fetcher.broker_connection``.

``asyncio.StreamReader`` copies every received byte twice on top of the kernel's copy: into its
buffer (``feed_data``) and out again (``readexactly``). A follower receives most of what the
cluster writes this way — a Fetch response of up to ``replica.fetch.response.max.bytes`` — so
this protocol is an ``asyncio.BufferedProtocol`` instead, as Kafka's ``NetworkReceive`` reads a
frame: the size prefix, then the socket reads into a buffer of exactly that frame's size, which
becomes the response. Bytes that arrive ahead of a frame's end (small frames, the next prefix)
land in a small staging buffer and are carried over.

A frame's buffer (of ``SMALL_FRAME_BYTES`` and more) is used again for a later frame once
nothing refers to the first any more (no memoryview of it is alive: the records a follower
appended from it are written and dropped), so a follower does not allocate, zero and fault in a
fresh buffer of up to megabytes for every Fetch response (issue 18: a third of ``FrameStream``'s
time). A frame still referred to is never written over: the next one gets a buffer of its own.

One request at a time (``BlockingSend``): ``next_frame`` waits for the next whole frame; a frame
over ``max_bytes`` (``FrameError``), end of stream or a lost connection fail the waiter and every
later wait.
"""

from __future__ import annotations

import asyncio
import collections
from typing import cast

from pykraft.protocol.errors import FrameError
from pykraft.protocol.framing import SIZE_PREFIX_BYTES
from pykraft.protocol.wire import INT32

STAGING_BYTES = 256 * 1024
# Frames this long or longer are received into the spare buffer when it is free; shorter ones
# get a bytearray of their own (cheap at that size).
SMALL_FRAME_BYTES = 4096
# Bound (STYLE.md §7) on the buffer kept between frames: a connection idle after a catch-up's
# large responses holds at most this much.
SPARE_BYTES_MAX = 4 * 1024 * 1024
# Bound (STYLE.md §7): frames received and not yet taken before reading pauses. One request is
# in flight at a time, so only a peer sending unasked-for frames reaches it.
MAX_QUEUED_FRAMES = 2


class FrameStream(asyncio.BufferedProtocol):
    """The receiving side of one connection; the transport is written directly."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._staging = bytearray(STAGING_BYTES)
        self._staged = 0  # bytes of _staging not yet framed, from its start
        # The frame being filled past the staging buffer: its first _frame_size bytes of _spare.
        self._frame: memoryview | None = None
        self._filled = 0
        # Invariant: None or a buffer of at most SPARE_BYTES_MAX bytes, filled again for a
        # later frame only when no view of it remains (``_is_referred_to``).
        self._spare: bytearray | None = None
        self._frames: collections.deque[memoryview] = collections.deque()
        self._reading_paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._writable: asyncio.Future[None] | None = None
        self._closed = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    # ------------------------------------------------------------------ the owner's side

    async def next_frame(self) -> memoryview:
        while not self._frames:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frame = self._frames.popleft()
        if self._reading_paused and len(self._frames) < MAX_QUEUED_FRAMES:
            self._reading_paused = False
            if self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()
        return frame

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        if self._error is not None:
            raise self._error
        if self._writable is not None:
            await asyncio.shield(self._writable)
            if self._error is not None:
                raise self._error

    def abort(self, error: BaseException) -> None:
        """Fail the waiter and every later wait with ``error``, and close the connection."""
        self._fail(error)

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    # ------------------------------------------------------------------ asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not always an asyncio.Transport subclass: uvloop's
        # TCPTransport and SSL transports implement the interface without inheriting it.
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:  # read no further than this frame's end
            return self._frame[self._filled :]
        return memoryview(self._staging)[self._staged :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                self._deliver(self._frame)
                self._frame = None
            return
        self._staged += nbytes
        self._split_staged()

    def _split_staged(self) -> None:
        """Frame what the staging buffer holds; a frame larger than what is staged moves to
        a buffer of its own size, the rest of it to be read straight into that."""
        view, start = memoryview(self._staging), 0
        while self._staged - start >= SIZE_PREFIX_BYTES:
            size: int = INT32.unpack_from(self._staging, start)[0]
            if not 0 <= size <= self._max_bytes:
                self._fail(FrameError(size, self._max_bytes))
                return
            body = start + SIZE_PREFIX_BYTES
            if self._staged - body >= size:
                whole = view[body : body + size]
                if size < SMALL_FRAME_BYTES:
                    self._deliver(memoryview(bytearray(whole)))
                else:
                    frame = self._buffer_for(size)
                    frame[:] = whole
                    self._deliver(frame)
                start = body + size
                continue
            frame = self._buffer_for(size)
            held = self._staged - body
            frame[:held] = view[body : self._staged]
            self._frame, self._filled = frame, held
            start = self._staged
            break
        rest = self._staged - start
        if start and rest:
            self._staging[:rest] = view[start : self._staged]
        self._staged = rest
        view.release()

    def _buffer_for(self, size: int) -> memoryview:
        """A writable view of ``size`` bytes for a frame of ``SMALL_FRAME_BYTES`` or more: the
        spare buffer when it is long enough and nothing refers to it any more, else a new one,
        kept as the spare when it is the longer and at most ``SPARE_BYTES_MAX``."""
        spare = self._spare
        if spare is not None and len(spare) >= size and not _is_referred_to(spare):
            return memoryview(spare)[:size]
        buffer = bytearray(size)
        if size <= SPARE_BYTES_MAX and (spare is None or size >= len(spare)):
            self._spare = buffer
        return memoryview(buffer)

    def _deliver(self, frame: memoryview) -> None:
        self._frames.append(frame)
        if len(self._frames) >= MAX_QUEUED_FRAMES and not self._reading_paused:
            self._reading_paused = True  # what is staged is still framed: at most 256 KiB
            if self.transport is not None and not self.transport.is_closing():
                self.transport.pause_reading()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.resume_writing()  # a drain under way sees the error
        if self.transport is not None:
            self.transport.close()

    def eof_received(self) -> bool | None:
        self._fail(asyncio.IncompleteReadError(b"", None))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else ConnectionResetError("connection closed"))
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)


def _is_referred_to(buffer: bytearray) -> bool:
    """Whether a memoryview of ``buffer`` is alive: a ``bytearray`` cannot change its size while
    one is (``BufferError``). Shrinking by a byte and growing back stays within its allocation."""
    try:
        del buffer[-1:]
    except BufferError:
        return True
    buffer.append(0)
    return False
