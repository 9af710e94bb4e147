"""A Kafka connection's response bytes onto its socket (``broker.network``'s writing half).

A response is ``protocol.segments.Segments``: buffers and file slices
(``storage.file_slice.FileSlice``: path, position, length, the file's identity). Slices of at
least ``SENDFILE_MIN_BYTES`` go out with ``os.sendfile`` on a plain socket while the transport
holds nothing unsent (``broker.socket_sendfile``) — Kafka's zero-copy fetch — and the rest of a
slice the socket did not take, or all of them over TLS, by reading the file in chunks; smaller
slices are read and joined with the buffers around them into one send (``broker.send_plan``).
A response up to ``WRITE_COALESCE_BYTES`` without such a slice is gathered and written
in one write. Open files are shared across connections in a bounded cache
(``broker.file_cache.OpenFileCache``); a slice is sent only from the file it was cut from.
Ordering, metrics and failures stay with the connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import BinaryIO, Protocol

from pykraft.broker.file_cache import OpenFileCache
from pykraft.broker.send_plan import send_steps
from pykraft.broker.socket_sendfile import (
    SendfileUnsupportedError,
    SocketSender,
    can_send_directly,
)
from pykraft.protocol.segments import FileSliceLike, Segment, Segments
from pykraft.storage.file_slice import FileSlice

logger = logging.getLogger(__name__)

# Reading path: bytes read from a file per write.
FILE_CHUNK_BYTES = 256 * 1024
# Smaller file slices are read and sent with the rest of their response in one write (a small
# answer is one segment); larger ones go out with os.sendfile beside the transport, which costs
# less CPU per byte from 64 KiB up (broker.socket_sendfile has the figures). loop.sendfile is
# not used: uvloop (pykraft/event_loop.py) has none, and asyncio's pauses reading around every
# call (16 KiB slices measured 4x the CPU of a copy).
SENDFILE_MIN_BYTES = 64 * 1024
# A response up to this size is gathered (small file slices read) and written in one send: one
# system call, and its reader wakes once, not once per part (a follower's Fetch answer to a
# one-record produce is three parts). Larger ones stream part by part.
WRITE_COALESCE_BYTES = FILE_CHUNK_BYTES


class ShortFileSliceError(Exception):
    """A file ended before the slice did: the response is already partly written."""


class WriterOptions(Protocol):
    """What a connection's writer reads from its listener (``broker.network.KafkaListener``)."""

    files: OpenFileCache
    # Turned off for the whole listener when the file system or socket cannot sendfile.
    use_sendfile: bool
    monotonic_ms: Callable[[], int]


class ResponseWriter:
    """Writes one connection's responses onto its stream."""

    def __init__(self, writer: asyncio.StreamWriter, listener: WriterOptions) -> None:
        self._writer = writer
        self._listener = listener
        # Big file slices are sendfile'd (not over TLS, nor when the listener copies), by a
        # sender made for each response that has one.
        self._direct = listener.use_sendfile and can_send_directly(writer.transport)

    def unsent_bytes(self) -> int:
        """Bytes the transport holds, not yet taken by the socket."""
        return self._writer.transport.get_write_buffer_size()

    async def drain(self) -> None:
        await self._writer.drain()

    async def send(self, segments: Segments) -> int:
        """Write a response whole, big file slices sendfile'd; waits while the socket is full.
        The bytes written: all of them, or none when the connection closed before."""
        buffers = self.gathered(segments)
        if buffers is not None:
            self.write(buffers)
            await self._writer.drain()
            return segments.length
        if self._writer.transport.is_closing():
            # Closed while the handler worked (a peer's reset: uvloop has closed the socket and
            # reports its descriptor as -1). Nothing can be sent; the reader ends the connection.
            logger.debug("a connection closed before its response was sent")
            return 0
        sender = SocketSender(self._writer.transport) if self._wants_sendfile(segments) else None
        try:
            await self._send_parts(segments, sender)
        finally:
            if sender is not None:
                sender.close()
        await self._writer.drain()
        return segments.length

    async def _send_parts(self, segments: Segments, sender: SocketSender | None) -> None:
        # broker.send_plan: big slices alone, the parts between them joined into one send
        # each, and which sends carry MSG_MORE (the headers before a sendfile'd slice leave
        # in its first packet, and nothing is held after the end).
        for step in send_steps(segments.parts, SENDFILE_MIN_BYTES, WRITE_COALESCE_BYTES):
            if step.big_slice is not None:
                await self._send_file_slice(step.big_slice, sender if self._direct else None)
                continue
            data = self._joined(step.run)
            sending = sender is not None and self._direct
            sent = sender.send_buffer(data, step.more) if sender and sending else 0
            if sent < step.length:
                self._writer.write(memoryview(data).cast("B")[sent:] if sent else data)
                await self._writer.drain()  # at most one run held in the transport

    def _joined(self, run: tuple[Segment, ...]) -> bytes | bytearray | memoryview:
        """A run of buffers and small slices as one buffer, its slices read."""
        if len(run) == 1 and isinstance(run[0], bytes | bytearray | memoryview):
            return run[0]
        read = self._read_file_slice
        return b"".join(
            part if isinstance(part, bytes | bytearray | memoryview) else read(part) for part in run
        )

    def gathered(self, segments: Segments) -> list[bytes | bytearray | memoryview] | None:
        """A response of at most WRITE_COALESCE_BYTES as buffers, its file slices read; None
        for a larger one, or one with a slice to sendfile (sent part by part)."""
        if segments.length > WRITE_COALESCE_BYTES:
            return None
        if self._wants_sendfile(segments):
            return None
        buffers: list[bytes | bytearray | memoryview] = []
        for part in segments.parts:
            if isinstance(part, bytes | bytearray | memoryview):
                buffers.append(part)
            elif part.length:
                buffers.append(self._read_file_slice(part))
        return buffers

    def _wants_sendfile(self, segments: Segments) -> bool:
        """A slice big enough to sendfile, on a connection that can."""
        return (
            self._direct
            and segments.length >= SENDFILE_MIN_BYTES
            and any(
                not isinstance(part, bytes | bytearray | memoryview)
                and part.length >= SENDFILE_MIN_BYTES
                for part in segments.parts
            )
        )

    def write(self, buffers: list[bytes | bytearray | memoryview]) -> None:
        """Buffers as one write (one system call while the transport holds nothing)."""
        self._writer.write(buffers[0] if len(buffers) == 1 else b"".join(buffers))

    def _read_file_slice(self, part: FileSliceLike) -> bytes:
        """A small slice's bytes (the file it was cut from only, as ``_send_file_slice``)."""
        file_id = part.file_id if isinstance(part, FileSlice) else None
        now_ms = self._listener.monotonic_ms()
        # The slice's own Path, not a copy: a new one costs ~3 us to build and hash (issue 18).
        with self._listener.files.open(part.path, file_id, now_ms) as file:
            data = os.pread(file.fileno(), part.length, part.position)
        if len(data) != part.length:
            raise ShortFileSliceError(
                f"{part.path} ended after {len(data)} of {part.length} bytes from {part.position}"
            )
        return data

    async def _send_file_slice(self, part: FileSliceLike, sender: SocketSender | None) -> None:
        # Only the file the slice was cut from (a cleaner swap may have renamed another over
        # its path since): StaleFileSliceError closes the connection rather than send its bytes.
        file_id = part.file_id if isinstance(part, FileSlice) else None
        now_ms = self._listener.monotonic_ms()
        with self._listener.files.open(part.path, file_id, now_ms) as file:
            sent = 0
            if sender is not None and part.length >= SENDFILE_MIN_BYTES:
                sent = self._sendfile_now(file, part, sender)
            sent = await self._copy_file(file, part, sent)
        if sent != part.length:
            raise ShortFileSliceError(
                f"{part.path} ended after {sent} of {part.length} bytes from {part.position}"
            )

    def _sendfile_now(self, file: BinaryIO, part: FileSliceLike, sender: SocketSender) -> int:
        """Bytes of the slice's start sent with os.sendfile (0 if none could be)."""
        try:
            return sender.send_file(file.fileno(), part.position, part.length)
        except SendfileUnsupportedError as error:
            logger.info("sendfile unavailable (%s); reading segment files instead", error)
            self._listener.use_sendfile = self._direct = False
            return 0

    async def _copy_file(self, file: BinaryIO, part: FileSliceLike, sent: int) -> int:
        """Read and write the slice from ``sent`` bytes on; the bytes sent in all."""
        while sent < part.length:
            size = min(FILE_CHUNK_BYTES, part.length - sent)
            chunk = os.pread(file.fileno(), size, part.position + sent)
            if not chunk:
                break
            self._writer.write(chunk)
            sent += len(chunk)
            await self._writer.drain()
        return sent
