"""The Kafka listener: asyncio TCP connections that frame, order and write; no API knowledge.

Theory of operation. Per connection a reader and a writer cooperate through one queue:

* the **reader** (``broker.network_reader.RequestReader``) runs in the transport's own
  callback (``broker.network_protocol``: no ``StreamReader``, no reader task): it frames each
  read and hands every complete frame to ``dispatch_request`` here, which parses its header and
  calls ``dispatch(context, body)``. A handler the dispatcher marks ``StartsAtOnce`` (Produce,
  Fetch) runs its first step right then and gets a task only if it suspends; any other starts
  as a task (``broker.request_time.start_request``), and so does a marked one while a handler
  of the connection started as a task has not finished (its first step, a loop turn later or
  after ``broker.server`` starts serving, must not be overtaken). Handlers run concurrently,
  and every request is queued in arrival order; but a Metadata request starts only once the
  Produce requests before it completed (``_after``: Kafka answers them first). ``None``
  (acks=0 Produce) means no response and queues nothing. Handlers start in arrival order, so
  the part of a handler before its first ``await`` (Produce's append) runs in request order too.
* the **writer** task takes queue entries in order, awaits each response, and writes it:
  responses leave in request order even when handlers finish out of order (Kafka clients match
  responses by position as well as correlation id).

Per request the loop does as little as it can (issue 18, ``bench/listener_requests.py``): a
handler whose request is the only one queued, with the writer idle, nothing unsent and no other
request of the same read behind it, writes its own response and finishes it — for a handler
started at once that answers at once, in the read's callback, with no task and no loop turn at
all; the writer sleeps on. Otherwise the reader queues a read's requests without waking the writer
(``broker.network_queue``) and wakes it with ``call_soon`` behind their handlers' first steps,
and the writer finds the responses complete and writes them all in one write (a pipelining
client's answers, one system call).

At most ``MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION`` dispatched requests wait for their response
per connection; at the bound the reader holds the next frame and stops reading (TCP
backpressure) until one is written.

Failures close only their own connection, after the responses to every earlier request were
written (Kafka reads the next request only after answering the previous one, so its clients
see the same): a bad size prefix (negative or above ``socket.request.max.bytes``), a header that
does not parse, a request ``dispatch`` rejects with ``ProtocolError`` (an API key or version no
schema defines, so not even an error can be answered: Kafka's ``SocketServer.parseRequestHeader``
throws ``InvalidRequestException`` and the processor closes the channel), a handler that raises
(logged with its traceback; Kafka's ``processChannelException``). The dispatcher never sees a
frame whose header failed to parse.

Connections are accepted by ``broker.acceptor.Acceptor`` within Kafka's limits
(``max.connections``: stop accepting until one closes; ``max.connections.per.ip``: close the new
one; ``connections.max.idle.ms``: close idle ones — ``broker.connection_quotas``). Each
connection tells it when it was last active and whether a request is in flight, and closes
when expired, after the responses already queued.

Client quotas (KIP-219): a connection whose request was throttled (``broker.quotas_channel``)
gets its response at once, and the reader dispatches nothing more from it until the throttle
expires, so TCP backpressure holds a client that ignores ``throttle_time_ms``.

Security (``ListenerSecurity``, issue 11): on SSL and SASL_SSL listeners the acceptor wraps the
socket in TLS (``metadata.auth.tls_context``) before the connection starts; the client
certificate, if any, becomes the principal (``metadata.auth.principal``, with the listener's
``ssl.principal.mapping.rules``). On SASL listeners every frame goes to the connection's
``broker.sasl_server.SaslAuthenticator`` until it completes — that pure core decides, the reader
(``broker.network_reader``) only carries its answers to the writer — and frames are capped at
``sasl.server.max.receive.size`` meanwhile. Then the SASL user is the principal. Handlers see
it as ``RequestContext.principal`` (``User:ANONYMOUS`` on PLAINTEXT).

A response is ``protocol.segments.Segments``, written by ``broker.network_writes`` (buffers,
file slices read or sendfile'd); a slice is sent only from the file it was cut from — when a
cleaner swap or a re-created segment made its path name another file and the old one is no
longer open, the connection closes instead (the client fetches again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Protocol, cast

import attrs

from pykraft.broker.acceptor import DEFAULT_LISTEN_BACKLOG, Acceptor, AcceptorMetrics
from pykraft.broker.connection_quotas import (
    DEFAULT_CONNECTIONS_MAX_IDLE_MS,
    ConnectionLimits,
    ConnectionQuotas,
)
from pykraft.broker.file_cache import OpenFileCache
from pykraft.broker.metrics import BrokerMetrics, CloseReason
from pykraft.broker.network_protocol import hand_over_input, take_over
from pykraft.broker.network_queue import Answer, Entry, Failure, WriterQueue
from pykraft.broker.network_reader import RequestReader
from pykraft.broker.network_writes import (
    SENDFILE_MIN_BYTES as SENDFILE_MIN_BYTES,
)
from pykraft.broker.network_writes import (
    WRITE_COALESCE_BYTES,
    ResponseWriter,
    ShortFileSliceError,
)
from pykraft.broker.quotas_channel import ChannelThrottles
from pykraft.broker.request_time import (
    StartsAtOnce,
    drop_traceback,
    forget_request,
    start_request,
)
from pykraft.broker.sasl_server import SaslAuthenticator
from pykraft.metadata.auth.principal import (
    ANONYMOUS,
    DEFAULT_RULES,
    KafkaPrincipal,
    MappingRule,
    PrincipalError,
    parse_mapping_rules,
    principal_from_certificate,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import ProtocolError
from pykraft.protocol.framing import DEFAULT_SOCKET_REQUEST_MAX_BYTES
from pykraft.protocol.headers import RequestHeader, parse_request_header
from pykraft.protocol.segments import Segments
from pykraft.storage import hop_trace
from pykraft.storage.file_slice import StaleFileSliceError

logger = logging.getLogger(__name__)

MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION = 64
# connection.failed.authentication.delay.ms: Kafka's default (KIP-306).
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100
# The key as a plain int: compared on every request's path (an IntEnum compare costs ~5x).
_METADATA = int(ApiKey.METADATA)


@attrs.frozen
class RequestContext:
    """What a handler knows about a request besides its body (Kafka's ``RequestContext``)."""

    header: RequestHeader
    # Kafka's connection id: "localHost:localPort-remoteHost:remotePort-index".
    connection_id: str
    listener_name: str
    client_host: str
    client_port: int
    # Who sent it: the SASL user, the TLS client certificate's mapped subject, or ANONYMOUS.
    principal: KafkaPrincipal = ANONYMOUS


ResponseFuture = Awaitable[Segments | None]
# Returns the framed response (size prefix and response header included) or None for none.
Dispatch = Callable[[RequestContext, memoryview], ResponseFuture | None]


class NetworkMetrics(AcceptorMetrics, Protocol):
    """The hooks the listener calls; ``broker.metrics.BrokerMetrics`` implements them."""

    def record_request(self, api_key: int, api_version: int, latency_seconds: float) -> None: ...

    def record_bytes_in(self, count: int) -> None: ...

    def record_bytes_out(self, count: int) -> None: ...

    def record_connection_opened(self) -> None: ...

    def record_connection_closed(self, reason: CloseReason) -> None: ...


@attrs.define
class _Pending:
    context: RequestContext
    started_ns: int
    response: asyncio.Future[Segments | None] = attrs.field(init=False)
    # Set when the handler's own task wrote the response (``_Connection._answer``).
    written: bool = False
    # Set when its handler started as a task: counted in ``_tasks_unfinished`` until it ends.
    as_task: bool = False


_QueueItem = _Pending | Answer | Failure | Entry


@attrs.frozen
class ListenerAuthentication:
    """How a listener authenticates its connections (``broker.server`` builds it from the
    listener's ``ListenerSecurity``): TLS, and/or a SASL authenticator per connection."""

    ssl_context: ssl.SSLContext | None = None
    principal_mapping_rules: tuple[MappingRule, ...] = attrs.field(
        factory=lambda: parse_mapping_rules(",".join(DEFAULT_RULES))
    )
    new_sasl_authenticator: Callable[[], SaslAuthenticator] | None = None


class KafkaListener:
    """Accepts Kafka connections on one address and serves them with ``dispatch``."""

    def __init__(
        self,
        dispatch: Dispatch,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        listener_name: str = "PLAINTEXT",
        max_request_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES,
        max_in_flight_requests: int = MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
        metrics: NetworkMetrics | None = None,
        use_sendfile: bool = True,
        quotas: ConnectionQuotas | None = None,
        connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS,
        listen_backlog: int = DEFAULT_LISTEN_BACKLOG,
        authentication: ListenerAuthentication | None = None,
        failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
        monotonic_ms: Callable[[], int],
        throttles: ChannelThrottles | None = None,
    ) -> None:
        assert max_in_flight_requests >= 1 and max_request_bytes >= 0
        assert failed_authentication_delay_ms >= 0
        self.authentication = authentication or ListenerAuthentication()
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        # For connections.max.idle.ms (tests pass a simulated one).
        self.monotonic_ms = monotonic_ms
        self.dispatch = dispatch
        # Connections a client quota muted (KIP-219; broker.quotas_shell records them).
        self.throttles = throttles
        self.listener_name = listener_name
        self.max_request_bytes = max_request_bytes
        self.max_in_flight_requests = max_in_flight_requests
        self.metrics: NetworkMetrics = metrics or BrokerMetrics()
        self.use_sendfile = use_sendfile
        self.files = OpenFileCache()
        # quotas: shared by every listener of a broker (max.connections is broker-wide).
        self.acceptor = Acceptor(
            self.serve_connection, lambda: self._connections.values(),
            host=host, port=port, listener_name=listener_name,
            quotas=quotas or ConnectionQuotas(ConnectionLimits()), metrics=self.metrics,
            connections_max_idle_ms=connections_max_idle_ms, listen_backlog=listen_backlog,
            monotonic_ms=monotonic_ms, ssl_context=self.authentication.ssl_context,
        )  # fmt: skip
        self._host = host
        # Invariant: one entry per connection being served (serve_connection is running).
        self._connections: dict[asyncio.Task[None], _Connection] = {}
        self._next_connection_index = 0

    @property
    def port(self) -> int:
        """The bound port (the requested one, or the one the OS picked for port 0)."""
        return self.acceptor.port

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def set_peers(self, listeners: list[KafkaListener]) -> None:
        """The broker's other listeners (max.connections' protected inter-broker listener)."""
        self.acceptor.peers = [other.acceptor for other in listeners if other is not self]

    async def start(self) -> None:
        await self.acceptor.start()
        logger.info("Kafka listener %s on %s:%d", self.listener_name, self._host, self.port)

    async def close(self) -> None:
        """Stop accepting, drop every connection and its pending requests, close files."""
        await self.acceptor.close()
        # Connections tests serve directly (serve_connection) have no acceptor task.
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.files.close()

    # --- serving ---

    def _connection_id(self, writer: asyncio.StreamWriter) -> tuple[str, str, int]:
        local = writer.get_extra_info("sockname") or ("?", 0)
        peer = writer.get_extra_info("peername") or ("?", 0)
        index = self._next_connection_index
        self._next_connection_index = (index + 1) % 2**31
        connection_id = f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{index}"
        return connection_id, str(peer[0]), int(peer[1])

    async def serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Serve one accepted connection until it closes (the accept loop's; tests call it
        with a socketpair's streams)."""
        task = asyncio.current_task()
        assert task is not None
        connection_id, host, port = self._connection_id(writer)
        connection = _Connection(self, reader, writer, connection_id, host, port)
        self._connections[task] = connection
        try:
            # Only close() cancels a connection: end quietly, because Python 3.11's
            # StreamReaderProtocol reports a cancelled connection task as an error.
            with contextlib.suppress(asyncio.CancelledError):
                await connection.run()
        finally:
            del self._connections[task]


def _describe(header: RequestHeader) -> str:
    return (
        f"api_key {header.api_key} v{header.api_version} correlation_id {header.correlation_id}"
        f" client_id {header.client_id!r}"
    )


class _Connection:
    def __init__(
        self,
        listener: KafkaListener,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection_id: str,
        client_host: str,
        client_port: int,
    ) -> None:
        self._listener = listener
        self._metrics = listener.metrics
        self._reader = reader
        self._writer = writer
        self._id = connection_id
        self._client = (client_host, client_port)
        # Invariant: the queue holds the dispatched requests not yet answered plus at most two
        # end/failure markers (the reader's, and the broker's one ``expire``).
        self._queue: WriterQueue[_QueueItem] = WriterQueue()
        # Requests dispatched and not yet answered (a connection serving one is not idle).
        # Invariant: 0 <= _unanswered <= max_in_flight_requests.
        self._unanswered = 0
        # Requests whose handler started as a task and has not finished. A StartsAtOnce
        # handler starts at once only when this is 0: its first step would otherwise overtake
        # theirs (a task's first step runs a loop turn later; a Produce held in
        # ``broker.server._dispatch_when_serving`` runs it later still).
        # Invariant: 0 <= _tasks_unfinished <= _unanswered, but for handlers cancelled before
        # they started (only when the connection ends: ``_cancel_queued``).
        self._tasks_unfinished = 0
        # Invariant: the request whose response the writer awaits, every earlier one written.
        self._awaited: _Pending | None = None
        # Set once the writer took the end of input or a failure, or ended: nothing more is
        # written.
        self._stopping = False
        # When bytes were last read or written (connections.max.idle.ms).
        self.last_active_ms = self._listener.monotonic_ms()
        # Set once the broker decided to close this connection (idle, or over max.connections).
        self.expiring = False
        # Who is on the other end; ANONYMOUS until TLS or SASL says otherwise.
        self.principal = ANONYMOUS
        new_authenticator = listener.authentication.new_sasl_authenticator
        # Reads arrive in the transport's callbacks once ``run`` took the transport over.
        self._in = RequestReader(
            self, self._queue, cast(asyncio.Transport, writer.transport),  # it reads too
            connection_id=connection_id, max_request_bytes=listener.max_request_bytes,
            authenticator=new_authenticator() if new_authenticator else None,
            throttles=listener.throttles, monotonic_ms=listener.monotonic_ms,
        )  # fmt: skip
        self._out = ResponseWriter(writer, listener)

    @property
    def busy(self) -> bool:
        return self._unanswered > 0

    def expire(self, reason: CloseReason) -> None:
        """Close this connection once the responses already queued are written (once)."""
        if self.expiring:
            return
        self.expiring = True
        self._queue.put(Failure(reason, f"closed by the broker: {reason.value}"))

    def _principal_from_certificate(self) -> KafkaPrincipal:
        """The TLS client's principal; ANONYMOUS without TLS or a client certificate."""
        ssl_object = self._writer.get_extra_info("ssl_object")
        if ssl_object is None:
            return ANONYMOUS
        certificate = ssl_object.getpeercert(binary_form=True)
        return principal_from_certificate(
            certificate, self._listener.authentication.principal_mapping_rules
        )

    async def run(self) -> None:
        self._metrics.record_connection_opened()
        reason = CloseReason.SHUTDOWN
        try:
            self.principal = self._principal_from_certificate()
        except PrincipalError as error:
            logger.warning("closing connection %s: %s", self._id, error)
            await self._in.close()
            self._writer.close()
            self._metrics.record_connection_closed(CloseReason.AUTHENTICATION_FAILED)
            return
        self._writer = take_over(self._writer, self._in)
        self._out = ResponseWriter(self._writer, self._listener)
        hand_over_input(self._reader, self._in)
        try:
            reason = await self._write_responses()
        finally:
            # No handler writes its own response any more (the writer ended: on a failure,
            # nothing behind it is answered), and nothing more is read or dispatched.
            self._stopping = True
            await self._in.close()
            if self._listener.throttles is not None:
                self._listener.throttles.forget(self._id)
            self._cancel_queued()
            self._writer.close()
            self._metrics.record_connection_closed(reason)
            logger.debug("connection %s closed: %s", self._id, reason.value)

    # --- reading ---

    def became_active(self, byte_count: int) -> None:
        self._metrics.record_bytes_in(byte_count)
        self.last_active_ms = self._listener.monotonic_ms()

    def at_in_flight_bound(self) -> bool:
        return self._unanswered >= self._listener.max_in_flight_requests

    def authenticated(self, principal: KafkaPrincipal) -> None:
        self.principal = principal
        logger.debug("connection %s authenticated as %s", self._id, principal)

    def dispatch_request(self, frame: bytearray) -> bool:
        """Dispatch one request; False when the connection must stop reading."""
        # Requests are queued without waking the writer (its wake-up is scheduled behind the
        # handlers dispatched so far, so it finds their responses complete and writes them at
        # once): it is woken before the reader holds a frame, and after the read's last one.
        started_ns = time.monotonic_ns()
        view = memoryview(frame)
        try:
            header, body_start = parse_request_header(view)
        except ProtocolError as error:
            self._in.end(Failure(CloseReason.MALFORMED_REQUEST, f"request header: {error}"))
            return False
        if hop_trace.ENABLED:
            self._mark("read", header.api_key)
        context = RequestContext(
            header, self._id, self._listener.listener_name, *self._client, self.principal
        )
        try:
            response = self._listener.dispatch(context, view[body_start:])
        except ProtocolError as error:
            message = f"{_describe(header)}: {error}"
            self._in.end(Failure(CloseReason.REQUEST_REJECTED, message))
            return False
        except Exception as error:
            logger.exception("dispatch of %s on %s failed", _describe(header), self._id)
            self._in.end(Failure(CloseReason.HANDLER_FAILED, repr(error)))
            return False
        if response is None:
            self._record(header, started_ns)
            return True
        if header.api_key == _METADATA and self._unanswered:
            earlier = self._produces_unanswered()
            if earlier:
                response = _after(earlier, response)
        self._unanswered += 1
        throttles = self._listener.throttles
        enforcing = throttles is not None and throttles.enforcing()
        pending = _Pending(context, started_ns)
        # Queued first: a handler started at once that answers in its first step finds itself
        # the only one queued and writes its own response (``_answer``).
        self._queue.put(pending, wake=False)
        at_once = type(response) is StartsAtOnce and not self._tasks_unfinished
        if not at_once:
            pending.as_task = True
            self._tasks_unfinished += 1
        pending.response = start_request(
            self._answer(pending, response), enforcing, at_once=at_once
        )
        if enforcing and header.api_key == ApiKey.PRODUCE and not at_once:
            # Let the Produce handler start: the quota it records before its first await mutes
            # this connection before the next request is dispatched (KIP-219; Kafka reads one
            # request at a time). One started at once has run that far already.
            self._queue.wake()
            self._in.wait_a_turn()
        return True

    def _produces_unanswered(self) -> list[asyncio.Future[Segments | None]]:
        """The responses of the Produce requests dispatched and not yet written."""
        unwritten = [item for item in self._queue if isinstance(item, _Pending)]
        if self._awaited is not None:
            unwritten.append(self._awaited)
        return [
            item.response
            for item in unwritten
            if item.context.header.api_key == ApiKey.PRODUCE and not item.response.done()
        ]

    # --- writing ---

    async def _answer(self, pending: _Pending, response: ResponseFuture) -> Segments | None:
        """The handler's result; written here, in the handler's task, when the writer is idle
        waiting for exactly this response and it fits one write: a loop turn sooner, and before
        handlers woken in the same turn run (two followers' Fetches woken by one append)."""
        try:
            segments = await response
        finally:
            if pending.as_task:
                self._tasks_unfinished -= 1
        if segments is not None and self._writes_alone(pending):
            if self._answer_alone(pending, segments):
                return segments
        elif segments is not None and self._awaited is pending:
            try:
                buffers = self._out.gathered(segments)
            except (ShortFileSliceError, StaleFileSliceError, OSError):
                buffers = None  # the writer sends it the long way and reports the failure
            if buffers is not None:
                self._out.write(buffers)
                pending.written = True
                if hop_trace.ENABLED:
                    self._mark("write", pending.context.header.api_key)
        return segments

    def _writes_alone(self, pending: _Pending) -> bool:
        """The writer is idle, this request is the only one queued, nothing is unsent, and no
        request read with it waits to be dispatched (their answers leave together, by the
        writer): its handler may write the response and finish it, and the writer sleeps on."""
        return (
            self._awaited is None
            and not self._stopping
            and len(self._queue) == 1
            and self._queue.peek() is pending
            and not self._in.more_frames_read()
            and not self._out.unsent_bytes()
        )

    def _answer_alone(self, pending: _Pending, segments: Segments) -> bool:
        """Write ``pending``'s response in the handler's task (one loop turn per request
        fewer: issue 18); False when it does not fit one write (the writer sends it)."""
        try:
            buffers = self._out.gathered(segments)
        except (ShortFileSliceError, StaleFileSliceError, OSError):
            return False  # the writer sends it the long way and reports the failure
        if buffers is None:
            return False
        self._out.write(buffers)
        if hop_trace.ENABLED:
            self._mark("write", pending.context.header.api_key)
        if self._out.unsent_bytes():
            pending.written = True  # the writer waits until it drained
            self._queue.wake()
            return True
        self._queue.take()
        self._metrics.record_bytes_out(segments.length)
        self._record(pending.context.header, pending.started_ns)
        self._answered(pending)
        return True

    async def _write_responses(self) -> CloseReason:
        while True:
            item = await self._queue.get()
            if item is Entry.END_OF_INPUT or isinstance(item, Failure):
                self._stopping = True  # nothing behind it is answered
            if item is Entry.END_OF_INPUT:
                return CloseReason.CLIENT_CLOSED
            if isinstance(item, Failure):
                log = logger.debug if self.expiring else logger.warning
                log("closing connection %s: %s", self._id, item.message)
                if item.reason is CloseReason.AUTHENTICATION_FAILED:
                    # KIP-306: the close waits connection.failed.authentication.delay.ms, so
                    # the client reads the error first and a password guesser is slowed.
                    await asyncio.sleep(self._listener.failed_authentication_delay_ms / 1000)
                return item.reason
            if isinstance(item, Answer):
                try:
                    self._metrics.record_bytes_out(await self._out.send(item.response))
                except (ConnectionError, OSError) as error:
                    logger.debug("sending to %s failed: %s", self._id, error)
                    return CloseReason.SEND_FAILED
                continue
            assert isinstance(item, _Pending)
            buffers = self._ready_buffers(item)
            if buffers is not None:
                reason = await self._write_ready(item, buffers)
                if reason is not None:
                    return reason
                continue
            self._awaited = item
            try:
                reason = await self._complete(item)
            finally:
                self._awaited = None
            if reason is not None:
                return reason
            self._answered(item)

    def _answered(self, item: _Pending) -> None:
        self._unanswered -= 1
        self.last_active_ms = self._listener.monotonic_ms()
        self._in.resume()  # a frame held at the in-flight bound may go now

    def _ready_buffers(self, item: _Pending) -> list[bytes | bytearray | memoryview] | None:
        """A response already complete, not yet written, that fits one write: its buffers
        (None otherwise: ``_complete`` takes it the long way, failures included)."""
        response = item.response
        if item.written or not response.done() or response.cancelled():
            return None
        if response.exception() is not None or (segments := response.result()) is None:
            return None
        try:
            return self._out.gathered(segments)
        except (ShortFileSliceError, StaleFileSliceError, OSError):
            return None

    async def _write_ready(
        self, first: _Pending, buffers: list[bytes | bytearray | memoryview]
    ) -> CloseReason | None:
        """Write ``first`` and every complete response queued right behind it in one write
        (up to WRITE_COALESCE_BYTES): a pipelining client's answers cost one system call."""
        batch = [first]
        size = first.response.result().length  # type: ignore[union-attr]
        while isinstance(following := self._queue.peek(), _Pending):
            more = self._ready_buffers(following)
            length = following.response.result().length if more is not None else 0  # type: ignore[union-attr]
            if more is None or size + length > WRITE_COALESCE_BYTES:
                break
            self._queue.take()
            batch.append(following)
            buffers += more
            size += length
        self._out.write(buffers)
        if hop_trace.ENABLED:
            for item in batch:
                self._mark("write", item.context.header.api_key)
        try:
            await self._out.drain()
        except (ConnectionError, OSError) as error:
            logger.warning("sending to %s failed: %s", self._id, error)
            return CloseReason.SEND_FAILED
        self._metrics.record_bytes_out(size)
        for item in batch:
            self._record(item.context.header, item.started_ns)
            self._answered(item)
        return None

    async def _complete(self, item: _Pending) -> CloseReason | None:
        """Await one response and write it; a close reason if the connection must end."""
        header = item.context.header
        try:
            response = await item.response
        except ProtocolError as error:
            logger.warning("closing connection %s: %s: %s", self._id, _describe(header), error)
            drop_traceback(error)
            return CloseReason.REQUEST_REJECTED
        except Exception as error:
            logger.exception("handler for %s failed; closing %s", _describe(header), self._id)
            drop_traceback(error)
            return CloseReason.HANDLER_FAILED
        if response is not None:
            try:
                if item.written:
                    await self._out.drain()
                    self._metrics.record_bytes_out(response.length)
                else:
                    self._metrics.record_bytes_out(await self._out.send(response))
                    if hop_trace.ENABLED:
                        self._mark("write", header.api_key)
            except (ConnectionError, ShortFileSliceError, StaleFileSliceError, OSError) as error:
                logger.warning("sending to %s failed: %s", self._id, error)
                return CloseReason.SEND_FAILED
        self._record(header, item.started_ns)
        return None

    def _mark(self, event: str, api_key: int) -> None:
        """A hop_trace mark naming this connection (tracing only); an API key Kafka does not
        define by its number: tracing changes no behaviour."""
        traced = ApiKey(api_key).name if api_key in ApiKey.__members__.values() else api_key
        hop_trace.mark(f"{event} {traced} @{self._id}")

    def _record(self, header: RequestHeader, started_ns: int) -> None:
        elapsed = (time.monotonic_ns() - started_ns) / 1e9
        self._metrics.record_request(header.api_key, header.api_version, elapsed)

    def _cancel_queued(self) -> None:
        while self._queue.peek() is not None:
            item = self._queue.take()
            if isinstance(item, _Pending):
                forget_request(item.response)


async def _after(
    earlier: list[asyncio.Future[Segments | None]], response: ResponseFuture
) -> Segments | None:
    """``response`` (a Metadata handler's, not started) once the connection's earlier Produce
    requests completed. Kafka reads a connection's next request only after answering the
    previous one, so its Metadata answer is made after them: behind an acks=all Produce waiting
    for a dead follower it names the leaders of the image whose fencing completed that Produce.
    Made while the Produce waited, it named the dead leader (issue 18: librdkafka asks on a
    connection carrying Produce right after a leader's connection resets, then only on its 1 s
    scan). Behind other requests only (a consumer's Fetch long poll) it is made at once, as
    before: their completion does not wait for the metadata to change."""
    try:
        await asyncio.wait(earlier)
    except BaseException:
        if isinstance(response, Coroutine):
            response.close()  # never started: no "never awaited" warning
        raise
    return await response
