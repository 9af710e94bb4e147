"""A Kafka connection's reading half (``broker.network``): the bytes each read brought, framed
and handed to the connection request by request, in the transport's own callback.

``RequestReader`` is the connection's ``broker.network_protocol.ConnectionInput``: every read
goes to ``protocol.framing.FrameDecoder`` (bounded by ``socket.request.max.bytes``) and each
complete frame, in order, to the connection's ``dispatch_request``, all before the callback
returns — no reader task and no loop turn between a read and its requests' handlers.

A frame is held instead (``_held``), and the socket no longer read (``pause_reading``: TCP
backpressure, the decoder keeps at most one more read), while

* the connection has ``max_in_flight_requests`` requests unanswered: it calls ``resume`` as
  one is answered;
* a client quota muted the connection (KIP-219, ``broker.quotas_channel``): a task waits the
  mute out, then dispatches on;
* a Produce handler started as a task must take its first step (where it records its quota)
  before the next request: ``wait_a_turn``.

On SASL listeners every frame goes to the connection's ``broker.sasl_server.SaslAuthenticator``
until it completes, with frames capped at ``sasl.server.max.receive.size`` meanwhile; its
answers are queued for the writer as they are.

The input ends once, with one queue entry the writer closes on: the end of input (the peer
finished; queued behind every frame read before it) or a failure — a bad size prefix or header,
a rejected request, a reset connection, a failed SASL exchange — after which nothing more is
read or dispatched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from pykraft.broker.metrics import CloseReason
from pykraft.broker.network_queue import Answer, Entry, Failure, WriterQueue
from pykraft.broker.quotas_channel import ChannelThrottles
from pykraft.broker.sasl_server import SASL_SERVER_MAX_RECEIVE_SIZE, SaslAuthenticator
from pykraft.metadata.auth.principal import KafkaPrincipal
from pykraft.protocol.errors import ProtocolError
from pykraft.protocol.framing import FrameDecoder

logger = logging.getLogger(__name__)


class RequestDispatcher(Protocol):
    """What the reader needs of its connection (``broker.network._Connection``)."""

    def dispatch_request(self, frame: bytearray) -> bool:
        """Dispatch one request frame; False when the input ended (a failure was queued)."""
        ...

    def at_in_flight_bound(self) -> bool: ...

    def became_active(self, byte_count: int) -> None:
        """Bytes were read (metrics; connections.max.idle.ms)."""
        ...

    def authenticated(self, principal: KafkaPrincipal) -> None: ...


class _ConnectionEnded:
    """The dispatcher of a reader whose connection ended (``RequestReader.close``): nothing
    is read or dispatched any more, so nothing calls it."""

    def dispatch_request(self, frame: bytearray) -> bool:
        raise AssertionError("dispatch after the connection ended")

    def at_in_flight_bound(self) -> bool:
        raise AssertionError("dispatch after the connection ended")

    def became_active(self, byte_count: int) -> None:
        raise AssertionError("read after the connection ended")

    def authenticated(self, principal: KafkaPrincipal) -> None:
        raise AssertionError("authenticated after the connection ended")


_CONNECTION_ENDED = _ConnectionEnded()


class RequestReader:
    """Frames one connection's input and dispatches it, holding it when it must wait."""

    def __init__(
        self,
        connection: RequestDispatcher,
        queue: WriterQueue[Any],
        transport: asyncio.Transport,
        *,
        connection_id: str,
        max_request_bytes: int,
        authenticator: SaslAuthenticator | None,
        throttles: ChannelThrottles | None,
        monotonic_ms: Callable[[], int],
    ) -> None:
        self._connection = connection
        self._queue = queue
        self._transport = transport
        self._id = connection_id
        self._max_request_bytes = max_request_bytes
        self._throttles = throttles
        self._monotonic_ms = monotonic_ms
        self._loop = asyncio.get_running_loop()
        self._decoder = FrameDecoder(max_request_bytes)
        # Invariant: not None exactly while SASL authentication is under way.
        self._authenticator = authenticator
        if authenticator is not None:
            # Kafka's sasl.server.max.receive.size: small frames until authenticated.
            self._decoder.max_frame_bytes = min(max_request_bytes, SASL_SERVER_MAX_RECEIVE_SIZE)
        # A frame cut from the input but not dispatched yet (see the module docstring).
        self._held: bytearray | None = None
        # Set once the end of input or a failure was queued: nothing more is read.
        self.ended = False
        # The peer finished sending (queued as the end of input once no frame is held).
        self._eof_received = False
        self._reading_paused = False
        # Set while _dispatch_frames runs; it is re-entered only through call_soon.
        self._dispatching = False
        self._resume_scheduled = False
        # KIP-219: waits out a client quota's mute; the reader holds its frame meanwhile.
        self._unmuting: asyncio.Task[None] | None = None
        # Set by ``wait_a_turn``: the next frame waits for the callbacks already due.
        self._waiting_a_turn = False

    def more_frames_read(self) -> bool:
        """Whether requests read with the one being dispatched wait behind it (their answers
        then leave together, by the writer)."""
        return self._dispatching and self._decoder.frame_ready()

    # --- the transport's callbacks (broker.network_protocol.ConnectionInput) ---

    def receive_data(self, data: bytes) -> None:
        if self.ended:
            return
        self._connection.became_active(len(data))
        # A bad size prefix: the decoder raises it again behind the frames before it.
        with contextlib.suppress(ProtocolError):
            self._decoder.receive_data(data)
        self._dispatch_frames()

    def receive_eof(self) -> None:
        """The peer finished sending; the end of input is queued behind every frame read."""
        self._eof_received = True
        self._dispatch_frames()

    def connection_lost(self, error: Exception | None) -> None:
        if error is None:
            self.receive_eof()
        elif isinstance(error, ConnectionError):
            self.end(Failure(CloseReason.CLIENT_CLOSED, str(error)))
        else:
            logger.error("reading from connection %s failed", self._id, exc_info=error)
            self.end(Failure(CloseReason.HANDLER_FAILED, repr(error)))

    # --- the connection's ---

    def end(self, item: Failure | Entry) -> None:
        """Queue the end of this connection's input (once); nothing more is read."""
        if self.ended:
            return
        self.ended = True
        self._held = None
        self._queue.put(item)
        self._set_reading(paused=True)

    def resume(self) -> None:
        """A request was answered: a frame held at the in-flight bound is dispatched a loop
        turn later (behind the callbacks already due)."""
        if self._held is not None:
            self._schedule_dispatch()

    def wait_a_turn(self) -> None:
        """Dispatch nothing more before the callbacks already due ran (a handler's task that
        must take its first step first)."""
        self._waiting_a_turn = True
        self._schedule_dispatch()

    def _schedule_dispatch(self) -> None:
        if not self._resume_scheduled:
            self._resume_scheduled = True
            self._loop.call_soon(self._resume_dispatch)

    async def close(self) -> None:
        """The connection ended: read and dispatch nothing more, and let go of the connection
        (it holds this reader: a reference cycle, freed only by a full collection in a broker
        that collects seldom)."""
        self.ended = True
        self._held = None
        self._connection = _CONNECTION_ENDED
        if self._unmuting is not None:
            self._unmuting.cancel()
            await asyncio.gather(self._unmuting, return_exceptions=True)

    # --- dispatching ---

    def _dispatch_frames(self) -> None:
        """Dispatch every complete frame read, in order, until one must be held; then read on
        or hold the socket."""
        if self._dispatching or self.ended:
            return
        self._dispatching = True
        try:
            self._dispatch_until_held()
        except ProtocolError as error:
            self.end(Failure(CloseReason.MALFORMED_REQUEST, str(error)))
        except Exception as error:
            logger.exception("reading from connection %s failed", self._id)
            self.end(Failure(CloseReason.HANDLER_FAILED, repr(error)))
        finally:
            self._dispatching = False
        # The requests of this read were queued asleep (``broker.network``): the writer is
        # woken behind their handlers' first steps, and not at all when each one answered at
        # once and wrote its own response.
        if len(self._queue):
            self._loop.call_soon(self._queue.wake)
        if self.ended:
            return
        if self._held is None and self._eof_received:
            self.end(Entry.END_OF_INPUT)
            return
        self._set_reading(paused=self._held is not None)

    def _dispatch_until_held(self) -> None:
        while not self.ended:
            frame = self._held if self._held is not None else self._decoder.next_frame()
            self._held = None
            if frame is None:
                return
            if self._authenticator is not None:
                self._authenticate(frame)
            elif self._must_hold():
                self._held = frame
                return
            elif not self._connection.dispatch_request(frame):
                return

    def _must_hold(self) -> bool:
        """Whether the next request waits: for a client quota's mute to end (KIP-219), or for
        an answer at the in-flight bound. The writer is woken first: the answers leave."""
        if self._unmuting is not None or self._waiting_a_turn:
            return True
        throttles = self._throttles
        if throttles is not None and throttles.muted_for_ms(self._id, self._monotonic_ms()):
            self._queue.wake()
            self._unmuting = self._loop.create_task(self._wait_until_unmuted(throttles))
            return True
        if self._connection.at_in_flight_bound():
            self._queue.wake()
            return True
        return False

    async def _wait_until_unmuted(self, throttles: ChannelThrottles) -> None:
        await throttles.wait_until_unmuted(self._id, self._monotonic_ms)
        self._unmuting = None
        self._dispatch_frames()

    def _resume_dispatch(self) -> None:
        self._resume_scheduled = False
        self._waiting_a_turn = False
        self._dispatch_frames()

    def _set_reading(self, *, paused: bool) -> None:
        if paused == self._reading_paused or self._transport.is_closing():
            return
        self._reading_paused = paused
        if paused:
            self._transport.pause_reading()
        else:
            self._transport.resume_reading()

    def _authenticate(self, frame: bytearray) -> None:
        """Hand one frame to the SASL authenticator; its answer goes to the writer."""
        assert self._authenticator is not None
        step = self._authenticator.handle_frame(bytes(frame))
        if step.response is not None:
            self._queue.put(Answer(step.response))
        if step.principal is not None:
            self._authenticator = None
            self._decoder.max_frame_bytes = self._max_request_bytes
            self._connection.authenticated(step.principal)
        if step.close:
            message = f"SASL authentication failed: {step.reason}"
            self.end(Failure(CloseReason.AUTHENTICATION_FAILED, message))
