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

The sender holds a duplicate of the socket's descriptor (Python sends flags only through a
socket object, and the transport's is a stand-in without ``send``): one more descriptor per
connection that was answered with a big slice, closed with the connection.
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
    """Writes to one connection's socket while its transport holds nothing unsent."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        assert can_send_directly(transport)
        self._transport = transport
        self._socket = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))
        self._socket.setblocking(False)

    def send_buffer(self, data: bytes | bytearray | memoryview, more: bool) -> int:
        """Bytes of ``data`` sent (0 while the transport holds unsent bytes); ``more``: the
        response goes on, so the kernel may hold a partial packet for it."""
        if self._transport.get_write_buffer_size():
            return 0
        try:
            return self._socket.send(data, MSG_MORE if more else 0)
        except BlockingIOError:
            return 0

    def send_file(self, file_fd: int, position: int, length: int) -> int:
        """Bytes of the file from ``position`` sent, up to ``length`` (0 while the transport
        holds unsent bytes); stops when the socket is full or the file ends (the caller finds
        a short slice). Connection errors propagate."""
        if self._transport.get_write_buffer_size():
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
        self._socket.close()
