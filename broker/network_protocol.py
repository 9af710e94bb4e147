"""A Kafka connection's transport protocol: socket bytes straight to the connection's reader
(``broker.network``), no ``asyncio.StreamReader`` and no reader task.

Why (issue 18): with a ``StreamReader`` every read wakes a reader task (``feed_data`` sets a
future, the task resumes a loop turn later and copies the bytes out again); a protocol hands
each read to the connection in the transport's own callback, where it is framed and dispatched
at once — one loop turn and two copies per read fewer.

A connection arrives as the ``(StreamReader, StreamWriter)`` pair of a
``StreamReaderProtocol`` (the acceptor's, over TLS too, and the tests' socketpairs).
``take_over`` swaps this protocol in with ``transport.set_protocol`` (which TLS transports
forward to their application protocol), hands over whatever the stream reader had buffered
and whether the peer had already finished, and returns a ``StreamWriter`` whose ``drain`` waits
on this protocol's write flow control (``FlowControlMixin``): ``broker.network_writes`` writes
through it as before.
"""

from __future__ import annotations

import asyncio
from asyncio.streams import FlowControlMixin
from typing import Protocol, cast


class ConnectionInput(Protocol):
    """What the protocol tells its connection (``broker.network._Connection``)."""

    def receive_data(self, data: bytes) -> None: ...

    def receive_eof(self) -> None: ...

    def connection_lost(self, error: Exception | None) -> None: ...


class ConnectionProtocol(FlowControlMixin, asyncio.Protocol):
    """Forwards reads to the connection; write flow control for ``StreamWriter.drain``."""

    def __init__(self, connection: ConnectionInput, *, over_tls: bool) -> None:
        super().__init__(asyncio.get_running_loop())
        self._connection = connection
        self._over_tls = over_tls

    def data_received(self, data: bytes) -> None:
        self._connection.receive_data(data)

    def eof_received(self) -> bool:
        self._connection.receive_eof()
        # Half-closed: the answers to what was read still go out (as StreamReaderProtocol);
        # TLS cannot half-close, its transport closes.
        return not self._over_tls

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)  # wakes a writer waiting in drain
        self._connection.connection_lost(exc)


def take_over(writer: asyncio.StreamWriter, connection: ConnectionInput) -> asyncio.StreamWriter:
    """Make ``connection`` the reader of ``writer``'s transport; the writer to write with.
    Then ``hand_over_input`` gives it what the stream reader had already read."""
    # A stream connection's transport reads too (StreamWriter types it as write-only).
    transport = cast(asyncio.Transport, writer.transport)
    over_tls = transport.get_extra_info("sslcontext") is not None
    protocol = ConnectionProtocol(connection, over_tls=over_tls)
    transport.set_protocol(protocol)
    if not transport.is_closing():
        transport.resume_reading()  # the stream reader pauses past its buffer limit
    return asyncio.StreamWriter(transport, protocol, None, asyncio.get_running_loop())


def hand_over_input(reader: asyncio.StreamReader, connection: ConnectionInput) -> None:
    """The bytes ``reader`` had buffered, then its end of input or its error, to
    ``connection``: in one loop callback with ``take_over``, so before any later read."""
    # StreamReader keeps these private; read once, at the hand-over (Python 3.11's).
    buffered: bytearray = getattr(reader, "_buffer", bytearray())
    ended: bool = getattr(reader, "_eof", False)
    if buffered:
        connection.receive_data(bytes(buffered))
        buffered.clear()
    error = reader.exception()
    if error is not None:
        connection.connection_lost(error)
    elif ended:
        connection.receive_eof()
