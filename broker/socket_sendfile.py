"""A response's parts written straight to a connection's socket — file slices with
``os.sendfile`` (Kafka's ``FileChannel.transferTo``), buffers with ``MSG_MORE`` — beside the
asyncio transport that owns the socket.

uvloop (``pykraft/event_loop.py``) has no ``loop.sendfile``, and asyncio's pauses reading around
every call. Writing to the transport's socket directly is safe only while the transport holds
no unsent bytes: those were written before and must leave first. So ``SocketSender`` writes only
then, until the socket is full, and the caller writes what it did not take through the
transport, behind it. TLS encrypts in user space: no sendfile there.

The buffers before a slice (size prefix, response and partition headers) go with ``MSG_MORE``:
sent through the transport they leave as a packet of their own (``TCP_NODELAY``), which cost
more CPU than sendfile saved. ``bench/fetch_send.py`` (the listener on uvloop, one Fetch answer
at a time over loopback, CPU of the loop's thread per 100 MB, median of 3; copy vs this):
64 KiB slices 0.131 vs 0.111, 256 KiB 0.049 vs 0.042. Headers through the transport and
sendfile: 0.132 vs 0.144, 0.046 vs 0.048; with ``TCP_CORK`` around each answer: 0.131 vs 0.178,
0.046 vs 0.072.

sendfile hands the kernel references to the file's pages, not copies: the bytes are read from
the page cache when the socket transmits them, not when the call returns. A log truncated and
appended to again (a replica truncating after a leader change, then fetching the new leader's
records) while an answer still sits in the socket's send buffer can therefore send the new
bytes where the old ones were: a batch cut across fails the client's CRC check, a whole new one
does not. Kafka's ``FileChannel.transferTo`` has the same exposure; nothing here guards it.

A sender lives for one response and holds no descriptor of its own: Python sends flags only
through a socket object, and the transport's is a stand-in without ``send``, so the sender wraps
the transport's descriptor and ``close`` detaches it (never closes it). A long-lived duplicate
cost a second descriptor per connection. The transport may close while the response waits for
the socket to drain (its descriptor then closed, its number free for reuse): the sender checks
``is_closing`` before each call and sends nothing then.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket

# Linux only; elsewhere the buffers before a slice leave as packets of their own.
MSG_MORE: int = getattr(socket, "MSG_MORE", 0)
# sendfile refused for this pair of descriptors, not a failed connection: copy instead.
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP})


class SendfileUnsupportedError(Exception):
    """This socket or file system cannot sendfile; the bytes go through the transport."""


def can_send_directly(transport: asyncio.BaseTransport) -> bool:
    """A plain stream socket under the transport (not TLS)."""
    if transport.get_extra_info("ssl_object") is not None:
        return False
    sock = transport.get_extra_info("socket")
    return sock is not None and sock.type == socket.SOCK_STREAM


class SocketSender:
    """Writes one response to a connection's socket while its transport holds nothing unsent
    and is open; ``close`` (always, once the response is sent) leaves the descriptor open."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        assert can_send_directly(transport) and not transport.is_closing()
        self._transport = transport
        stand_in = transport.get_extra_info("socket")
        # Family, type and protocol given: the kernel is not asked. The descriptor is already
        # non-blocking (the loop's); the object's own timeout stays None, so a full socket
        # raises BlockingIOError rather than waiting.
        self._socket = socket.socket(
            stand_in.family, stand_in.type, stand_in.proto, stand_in.fileno()
        )

    def _idle(self) -> bool:
        """Nothing unsent in the transport, and its socket still open."""
        return not self._transport.get_write_buffer_size() and not self._transport.is_closing()

    def send_buffer(self, data: bytes | bytearray | memoryview, more: bool) -> int:
        """Bytes of ``data`` sent (0 while the transport holds unsent bytes or is closing);
        ``more``: the response goes on, so the kernel may hold a partial packet for it."""
        if not self._idle():
            return 0
        try:
            return self._socket.send(data, MSG_MORE if more else 0)
        except BlockingIOError:
            return 0

    def send_file(self, file_fd: int, position: int, length: int) -> int:
        """Bytes of the file from ``position`` sent, up to ``length`` (0 while the transport
        holds unsent bytes or is closing); stops when the socket is full or the file ends (the
        caller finds a short slice). Connection errors propagate."""
        if not self._idle():
            return 0
        sent = 0
        while sent < length:
            try:
                count = os.sendfile(self._socket.fileno(), file_fd, position + sent, length - sent)
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno in _UNSUPPORTED and not sent:
                    raise SendfileUnsupportedError(str(error)) from error
                raise
            if count == 0:
                break
            sent += count
        return sent

    def close(self) -> None:
        """Release the socket object; the descriptor stays the transport's."""
        self._socket.detach()
