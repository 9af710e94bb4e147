"""Kafka's length-prefixed framing: an incremental, I/O-free frame decoder and response framing.

Every request and response on a Kafka connection is ``int32 size`` followed by ``size`` bytes.
``FrameDecoder`` follows h11's shape: the caller feeds whatever bytes arrived
(``receive_data``) and pulls complete frames (``next_frame``) until it gets ``None``; the
decoder owns no socket, clock or thread, so it is tested by splitting byte streams at arbitrary
points.

Theory of operation — the decoder has one state per frame, decided by what is buffered:

* fewer than 4 bytes buffered: waiting for a size prefix;
* a size prefix is buffered: it is checked at once, like Kafka's ``NetworkReceive.readFrom``: a
  negative size or one above ``socket.request.max.bytes`` (100 MiB by default) raises
  ``FrameError``. The decoder then stays failed — every later call raises an equal error —
  and the network layer closes only this connection;
* ``4 + size`` bytes buffered: the payload is cut out as a fresh ``bytearray`` the caller owns
  (decoders hand out memoryview slices of it; the broker may patch record batches in place).

The buffer never holds more than one incomplete frame plus one ``receive_data`` chunk, so
memory per connection is bounded by ``max_frame_bytes`` plus the read size.
"""

from __future__ import annotations

import struct

from pykraft.protocol.errors import FrameError
from pykraft.protocol.segments import Buffer, Segments
from pykraft.protocol.wire import INT32

# socket.request.max.bytes default (KafkaConfig: 100 * 1024 * 1024).
DEFAULT_SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024
SIZE_PREFIX_BYTES = 4
# Size prefix + response header v0 (correlation id) / v1 (and an empty tagged-field section).
_PREFIX_V0 = struct.Struct(">ii")
_PREFIX_V1 = struct.Struct(">iiB")
_HEADER_V0_BYTES = 4
_HEADER_V1_BYTES = 5
# Compact the input buffer once this many consumed bytes sit at its front.
_COMPACT_THRESHOLD = 64 * 1024


class FrameDecoder:
    """Splits a byte stream into Kafka frames (the payloads, without their size prefix)."""

    def __init__(self, max_frame_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES) -> None:
        assert max_frame_bytes >= 0
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        # Invariant: 0 <= _start <= len(_buffer); bytes before _start are consumed.
        self._start = 0
        self._error: FrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer) - self._start

    def receive_data(self, data: Buffer) -> None:
        """Append bytes read from the connection; raises ``FrameError`` on a bad size prefix."""
        self._raise_if_failed()
        if self._start and (self._start >= _COMPACT_THRESHOLD or self._start == len(self._buffer)):
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data
        self._pending_size()

    def frame_ready(self) -> bool:
        """Whether ``next_frame`` would return a frame (or raise for a bad size prefix)."""
        buffered = len(self._buffer) - self._start
        if buffered < SIZE_PREFIX_BYTES:
            return False
        size: int = INT32.unpack_from(self._buffer, self._start)[0]
        return not 0 <= size <= self.max_frame_bytes or buffered >= SIZE_PREFIX_BYTES + size

    def next_frame(self) -> bytearray | None:
        """The next complete frame's payload, or None until more bytes arrive."""
        self._raise_if_failed()
        size = self._pending_size()
        if size is None:
            return None
        begin = self._start + SIZE_PREFIX_BYTES
        end = begin + size
        if end > len(self._buffer):
            return None
        frame = self._buffer[begin:end]
        self._start = end
        return frame

    def _pending_size(self) -> int | None:
        """The size prefix of the frame at the front of the buffer, validated; None if partial."""
        if len(self._buffer) - self._start < SIZE_PREFIX_BYTES:
            return None
        size: int = INT32.unpack_from(self._buffer, self._start)[0]
        if size < 0 or size > self.max_frame_bytes:
            self._error = FrameError(size, self.max_frame_bytes)
            self._raise_if_failed()
        return size

    def _raise_if_failed(self) -> None:
        # A copy of the error each time: the one kept would hold the traceback of its raise,
        # and so the frames and this decoder, a reference cycle.
        if (error := self._error) is not None:
            raise FrameError(error.size, error.max_frame_bytes)


def encode_frame(payload: Buffer) -> bytes:
    """``int32 size`` + payload, as a client writes a request (tests and tools)."""
    return INT32.pack(memoryview(payload).nbytes) + bytes(payload)


def frame_response(correlation_id: int, header_version: int, body: Segments | Buffer) -> Segments:
    """Size prefix + response header + body, ready for the socket.

    ``header_version`` comes from ``headers.response_header_version`` (0, or 1 for flexible
    versions — never 1 for ApiVersions). The body is not copied.
    """
    if isinstance(body, Segments):
        parts, body_length = body.parts, body.length
    else:
        parts = (body,)
        body_length = len(body) if type(body) is bytes else memoryview(body).nbytes
    # Every response's path (issue 18): the size, the correlation id and (v1) the empty
    # tagged-field section in one pack, as ``headers.encode_response_header`` writes them.
    if header_version == 0:
        prefix = _PREFIX_V0.pack(_HEADER_V0_BYTES + body_length, correlation_id)
    else:
        assert header_version == 1, f"response header version {header_version} does not exist"
        prefix = _PREFIX_V1.pack(_HEADER_V1_BYTES + body_length, correlation_id, 0)
    return Segments((prefix, *parts), len(prefix) + body_length)
