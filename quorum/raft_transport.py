"""Bounds on what the Raft port accepts, above all before a peer has authenticated.

Why: pysyncobj reads a frame's 4-byte length prefix and then buffers until that many bytes have
arrived, whoever sent them: one unauthenticated connection announcing 2^31-1 bytes and sending
32 MiB took 14 s of the Raft thread (96 MiB: 148 s — ``bytes += chunk`` on every 64 KiB read is
quadratic, and the read loop runs until the socket is drained) and cost the active controller its
leadership (issue 9). A connection that never authenticates, or trickles, was kept forever.

Checked against pysyncobj 0.3.17 (``PYSYNCOBJ_VERSION``); ``tests/quorum/test_raft_transport.py``
fails if the internals named here change shape. ``GuardedTransport`` is handed to ``SyncObj`` as its
``transportClass`` and overrides, of ``pysyncobj.transport.TCPTransport``:

* ``_onNewIncomingConnection`` / ``addNode``: every connection becomes a ``GuardedTcpConnection``
  (its class is swapped; pysyncobj's server constructs plain ``TcpConnection`` objects). When more
  than ``MAX_UNAUTHENTICATED_CONNECTIONS`` are waiting to authenticate, the oldest is closed.
* ``_onIncomingMessageReceived`` / ``_onOutgoingMessageReceived``: a connection is authenticated
  once pysyncobj has accepted its handshake — for an incoming one, a Fernet-authenticated random key
  and then the peer's address wrapped with the key we sent (what moves it out of
  ``_unknownConnections``), which a replayed frame cannot fake.
* ``_onTick``: closes connections not authenticated within ``AUTHENTICATION_TIMEOUT_S``.
* ``_createServer``: the server becomes a ``GuardedTcpServer``, whose ``bind`` deepens the listen
  backlog and whose ``__onNewConnection`` accepts up to ``MAX_ACCEPTS_PER_EVENT`` per poll event,
  so a flood does not keep a real peer's reconnect waiting in a full backlog.

and of ``pysyncobj.tcp_connection.TcpConnection`` (name-mangled private methods):

* ``send``: pysyncobj's framing (pickle, zlib, Fernet, length prefix), but a frame under
  ``SMALL_FRAME_BYTES`` is deflated ``compress_frame``'s cheap way (issue 18, below);

* ``__tryReadBuffer``: reads at most ``MAX_READ_BYTES_PER_EVENT`` per poll event into a
  ``bytearray`` (amortised linear), so the Raft thread keeps ticking while a large frame arrives;
  before authentication it buffers at most ``MAX_UNAUTHENTICATED_BYTES``.
* ``__processParseMessage``: checks the length prefix (``MAX_HANDSHAKE_FRAME_BYTES`` before
  authentication, ``MAX_FRAME_BYTES`` after) and hands pysyncobj exactly one complete frame, which
  it decrypts (Fernet: HMAC before anything else) and only then unpickles, unchanged: nothing is
  unpickled before authentication.

What a real peer sends before it is authenticated (measured in the unit test, password-protected):
two frames of about 170 and 250 bytes.

Compression (issue 18): pysyncobj's ``zlib.compress(data, 3)`` sets up a 256 KiB deflate state
per frame: 55-240 us for a 170-byte AppendEntries answer on this box (a commit sends 8 frames),
against 1-3 us with a 512-byte window, the smallest hash table and stored blocks — a zlib stream
all the same, which pysyncobj's ``zlib.decompress`` reads unchanged (both ends of a rolling
upgrade read both). Small frames barely compress (455 of 483 bytes for a one-record entry);
larger ones (catch-up batches, dump chunks) keep pysyncobj's level 3.

The key (issue 11): pysyncobj derives its Fernet key from the password with PBKDF2 and one salt
hard-coded in ``pysyncobj/encryptor.py``, the same for every cluster of every user, so one
dictionary computed against that salt attacks every pysyncobj cluster at once, and two clusters
sharing a password share a key. ``cluster_key`` first stretches the password with a salt of the
cluster's own (``cluster.id``) and hands pysyncobj the result as its password: pysyncobj's
Fernet encryption, handshake and frame checks stay exactly as they are, and its key is now
PBKDF2(PBKDF2(password, per-cluster salt), pysyncobj's salt).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import socket
import struct
import zlib
from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import TcpServer
from pysyncobj.transport import TCPTransport

PYSYNCOBJ_VERSION = "0.3.17"

# Bounds (STYLE.md §7). The handshake is two frames of under 300 bytes each.
MAX_HANDSHAKE_FRAME_BYTES = 1024
MAX_UNAUTHENTICATED_BYTES = 4096
AUTHENTICATION_TIMEOUT_S = 5.0
MAX_UNAUTHENTICATED_CONNECTIONS = 32
# An authenticated frame carries an AppendEntries batch or a dump chunk: ~1 MiB plus at most one
# entry of quorum.raft_batch.MAX_BATCH_BYTES (256 MiB), pickled, zlib'd and Fernet-encoded
# (base64: 4/3). Above this the peer is not one of ours, password or not.
MAX_FRAME_BYTES = 512 * 1024 * 1024
MAX_READ_BYTES_PER_EVENT = 1024 * 1024
# pysyncobj listens with a backlog of 5 and accepts one connection per poll round: under a flood,
# a real peer's reconnect waited for SYN retransmits (seconds). Accept several per round instead.
ACCEPT_BACKLOG = 128
MAX_ACCEPTS_PER_EVENT = 16
LENGTH_PREFIX = struct.Struct("i")  # pysyncobj's: native byte order, signed
# Pickled frames under this are deflated with compress_frame's small state (module docstring);
# at or above it with pysyncobj's level 3.
SMALL_FRAME_BYTES = 64 * 1024
SMALL_FRAME_WINDOW_BITS = 9  # zlib's smallest window: 512 bytes
SMALL_FRAME_MEMORY_LEVEL = 1  # zlib's smallest hash table
# cluster_key's stretching (pysyncobj's own count, OWASP's PBKDF2-HMAC-SHA256 floor is 600,000
# for stored passwords; this key is derived once per process start) and the salt's prefix.
CLUSTER_KEY_ITERATIONS = 200_000
CLUSTER_KEY_SALT_PREFIX = b"pykraft raft transport key\x00"


def cluster_key(password: str, cluster_id: str | None) -> str:
    """What pysyncobj is given as its password: ``password`` stretched with a salt of the
    cluster's own (``cluster.id``); every controller of a cluster derives the same. Without a
    cluster id the password is passed through (pysyncobj's fixed salt only, as before)."""
    if cluster_id is None:
        return password
    derived = hashlib.pbkdf2_hmac(
        "sha256",
        password.encode("utf-8"),
        CLUSTER_KEY_SALT_PREFIX + cluster_id.encode("utf-8"),
        CLUSTER_KEY_ITERATIONS,
    )
    return base64.urlsafe_b64encode(derived).decode("ascii")


def compress_frame(pickled: bytes) -> bytes:
    """A zlib stream of ``pickled`` that ``zlib.decompress`` (pysyncobj's reader) restores."""
    if len(pickled) >= SMALL_FRAME_BYTES:
        return zlib.compress(pickled, 3)  # pysyncobj's own
    deflater = zlib.compressobj(0, zlib.DEFLATED, SMALL_FRAME_WINDOW_BITS, SMALL_FRAME_MEMORY_LEVEL)
    return deflater.compress(pickled) + deflater.flush()


class FrameVerdict(enum.Enum):
    WAIT = "wait"  # no complete frame yet; read more
    PARSE = "parse"  # a complete frame is buffered
    REJECT = "reject"  # close the connection


def frame_limit(authenticated: bool) -> int:
    return MAX_FRAME_BYTES if authenticated else MAX_HANDSHAKE_FRAME_BYTES


def buffer_limit(authenticated: bool) -> int:
    """Most bytes a connection may hold unparsed: one whole frame, and one read beyond it."""
    if not authenticated:
        return MAX_UNAUTHENTICATED_BYTES
    return LENGTH_PREFIX.size + MAX_FRAME_BYTES + MAX_READ_BYTES_PER_EVENT


def judge_frame(buffered: bytes | bytearray, authenticated: bool) -> FrameVerdict:
    """What to do with the unparsed bytes ``buffered`` of a connection (pure)."""
    if len(buffered) < LENGTH_PREFIX.size:
        return FrameVerdict.WAIT
    (length,) = LENGTH_PREFIX.unpack_from(buffered)
    if not 0 <= length <= frame_limit(authenticated):
        return FrameVerdict.REJECT
    if len(buffered) - LENGTH_PREFIX.size >= length:
        return FrameVerdict.PARSE
    if len(buffered) >= buffer_limit(authenticated):
        return FrameVerdict.REJECT
    return FrameVerdict.WAIT


class GuardedTcpConnection(TcpConnection):  # type: ignore[misc]
    """A ``TcpConnection`` whose reads are bounded; see the module docstring.

    Installed with ``guard(connection)`` on connections pysyncobj built, never constructed.
    """

    # Invariant: _inbox holds at most buffer_limit(authenticated) bytes.
    _inbox: bytearray
    authenticated: bool
    opened_at: float
    _TcpConnection__writeBuffer: bytes | bytearray  # pysyncobj's unsent bytes

    @classmethod
    def guard(cls, connection: TcpConnection) -> GuardedTcpConnection:
        connection.__class__ = cls
        guarded: GuardedTcpConnection = connection
        guarded._inbox = bytearray()
        guarded.authenticated = False
        guarded.opened_at = monotonic_time()
        return guarded

    def connect(self, host: str, port: int) -> bool:
        self._inbox = bytearray()
        self.authenticated = False
        self.opened_at = monotonic_time()
        return bool(super().connect(host, port))

    def disconnect(self) -> None:
        self._inbox = bytearray()
        self.authenticated = False
        super().disconnect()

    def send(self, message: Any) -> None:
        """pysyncobj's ``TcpConnection.send`` with ``compress_frame`` in place of its zlib."""
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        data = compress_frame(pysyncobj_pickle.dumps(message))
        if self.encryptor:
            data = self.encryptor.encrypt_at_time(data, int(monotonic_time()))
        self._TcpConnection__writeBuffer += LENGTH_PREFIX.pack(len(data)) + data
        self._TcpConnection__trySendBuffer()

    def _TcpConnection__tryReadBuffer(self) -> None:
        sock: socket.socket = self._TcpConnection__socket
        budget = min(MAX_READ_BYTES_PER_EVENT, buffer_limit(self.authenticated) - len(self._inbox))
        while budget > 0:
            try:
                chunk = sock.recv(min(self._TcpConnection__recvBufferSize, budget))
            except BlockingIOError:
                break
            except OSError:
                self.disconnect()
                return
            if not chunk or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.disconnect()
                return
            self._inbox += chunk
            budget -= len(chunk)
        self._TcpConnection__lastReadTime = monotonic_time()

    def _TcpConnection__processParseMessage(self) -> Any:
        verdict = judge_frame(self._inbox, self.authenticated)
        if verdict is FrameVerdict.REJECT:
            self.disconnect()
            return None
        if verdict is FrameVerdict.WAIT:
            return None
        (length,) = LENGTH_PREFIX.unpack_from(self._inbox)
        end = LENGTH_PREFIX.size + length
        # pysyncobj parses exactly this one frame (Fernet needs bytes, not a bytearray).
        self._TcpConnection__readBuffer = bytes(self._inbox[:end])
        del self._inbox[:end]
        return TcpConnection._TcpConnection__processParseMessage(self)

    def _TcpConnection__processSend(self) -> bool:
        # pysyncobj keeps unsent bytes in ``bytes`` and re-slices them after every partial send
        # (quadratic in what is queued); a bytearray makes ``send()``'s ``+=`` and this ``del``
        # amortised linear.
        pending: bytes | bytearray = self._TcpConnection__writeBuffer
        if not pending:
            return False
        if not isinstance(pending, bytearray):
            pending = bytearray(pending)
            self._TcpConnection__writeBuffer = pending
        try:
            sent = self._TcpConnection__socket.send(pending)
        except BlockingIOError:
            return False
        except OSError:
            self.disconnect()
            return False
        if sent <= 0:
            return False
        del pending[:sent]
        return True

    @property
    def buffered_bytes(self) -> int:
        return len(self._inbox)


class GuardedTcpServer(TcpServer):  # type: ignore[misc]
    """pysyncobj's listening socket with a deeper backlog, accepting up to
    ``MAX_ACCEPTS_PER_EVENT`` connections per poll event (installed by class swap)."""

    def bind(self) -> None:
        super().bind()
        self._TcpServer__socket.listen(ACCEPT_BACKLOG)  # raises the backlog of the bound socket

    def _TcpServer__onNewConnection(self, descr: int, event: int) -> None:
        # pysyncobj's handler accepts one connection and treats EAGAIN as "nothing pending".
        for _ in range(MAX_ACCEPTS_PER_EVENT):
            TcpServer._TcpServer__onNewConnection(self, descr, event)
            if self._TcpServer__fileno is None:  # it unbound on an error
                return


class GuardedTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCP transport with every connection guarded; see the module docstring."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        # Without a password pysyncobj has no handshake to wait for, and unpickles anything.
        if syncObj.encryptor is None:
            raise ValueError("the Raft transport needs a password (controller.quorum.password)")
        super().__init__(syncObj, selfNode, otherNodes)

    def _createServer(self) -> None:
        super()._createServer()
        self._server.__class__ = GuardedTcpServer

    def addNode(self, node: Any) -> None:
        super().addNode(node)
        connection = self._connections.get(node)
        if connection is not None and not isinstance(connection, GuardedTcpConnection):
            GuardedTcpConnection.guard(connection)

    def _onNewIncomingConnection(self, conn: TcpConnection) -> None:
        guarded = GuardedTcpConnection.guard(conn)
        waiting = [c for c in self._unknownConnections if isinstance(c, GuardedTcpConnection)]
        if len(waiting) >= MAX_UNAUTHENTICATED_CONNECTIONS:
            min(waiting, key=lambda c: c.opened_at).disconnect()
        super()._onNewIncomingConnection(guarded)

    def _onIncomingMessageReceived(self, conn: GuardedTcpConnection, message: Any) -> None:
        super()._onIncomingMessageReceived(conn, message)
        if conn not in self._unknownConnections and conn.state == CONNECTION_STATE.CONNECTED:
            conn.authenticated = True

    def _onOutgoingMessageReceived(self, conn: GuardedTcpConnection, message: Any) -> None:
        super()._onOutgoingMessageReceived(conn, message)
        if conn.state == CONNECTION_STATE.CONNECTED:
            conn.authenticated = True

    def _onTick(self) -> None:
        super()._onTick()
        self.close_unauthenticated(monotonic_time())

    def close_unauthenticated(self, now: float) -> int:
        """Close incoming connections that did not authenticate in time; returns how many."""
        expired = [
            c
            for c in self._unknownConnections
            if isinstance(c, GuardedTcpConnection) and now - c.opened_at > AUTHENTICATION_TIMEOUT_S
        ]
        for connection in expired:
            connection.disconnect()
        return len(expired)
