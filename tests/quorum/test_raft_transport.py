"""GuardedTransport: the Raft port's bounds, on real pysyncobj connections over socket pairs.

The shape tests fail first if a pysyncobj upgrade renames or stops calling what
quorum/raft_transport.py overrides; the rest drive real ``TcpConnection`` objects (Fernet,
pickle, zlib: pysyncobj's own framing) through a real poller, without opening a port.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import pysyncobj
import pytest
from cryptography.fernet import InvalidToken
from pysyncobj.encryptor import getEncryptor
from pysyncobj.node import TCPNode
from pysyncobj.poller import createPoller
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import TcpServer
from pysyncobj.transport import TCPTransport
from pysyncobj.version import VERSION

from pykraft.quorum.raft_transport import (
    AUTHENTICATION_TIMEOUT_S,
    MAX_FRAME_BYTES,
    MAX_HANDSHAKE_FRAME_BYTES,
    MAX_READ_BYTES_PER_EVENT,
    MAX_UNAUTHENTICATED_BYTES,
    MAX_UNAUTHENTICATED_CONNECTIONS,
    PYSYNCOBJ_VERSION,
    SMALL_FRAME_BYTES,
    FrameVerdict,
    GuardedTcpConnection,
    GuardedTcpServer,
    GuardedTransport,
    cluster_key,
    compress_frame,
    judge_frame,
)

ENCRYPTOR = getEncryptor("unit-test-password")
# Poll rounds a test may spend; each reads at most MAX_READ_BYTES_PER_EVENT.
MAX_POLL_ROUNDS = 200


# ---- the shape of pysyncobj's internals we rely on ----


def test_checked_against_the_installed_pysyncobj() -> None:
    assert VERSION == PYSYNCOBJ_VERSION


def test_tcp_connection_still_reads_through_the_methods_we_override() -> None:
    process = TcpConnection._TcpConnection__processConnection.__code__.co_names
    assert "_TcpConnection__tryReadBuffer" in process
    assert "_TcpConnection__processParseMessage" in process
    try_send = TcpConnection._TcpConnection__trySendBuffer.__code__.co_names
    assert "_TcpConnection__processSend" in try_send
    parse = TcpConnection._TcpConnection__processParseMessage.__code__.co_names
    assert "_TcpConnection__readBuffer" in parse and "loads" in parse
    left, right = socket.socketpair()
    try:
        connection = TcpConnection(createPoller("auto"), socket=left)
        for name in (
            "__readBuffer",
            "__writeBuffer",
            "__socket",
            "__recvBufferSize",
            "__lastReadTime",
        ):
            assert hasattr(connection, "_TcpConnection" + name), name
        connection.disconnect()
    finally:
        right.close()


def test_tcp_server_still_accepts_through_the_method_we_override() -> None:
    assert "_TcpServer__onNewConnection" in TcpServer.bind.__code__.co_names
    assert "listen" in TcpServer.bind.__code__.co_names
    accept = TcpServer._TcpServer__onNewConnection.__code__.co_names
    assert "accept" in accept and "unbind" in accept
    assert "_TcpServer__fileno" in TcpServer.unbind.__code__.co_names
    assert "TcpServer" in TCPTransport._createServer.__code__.co_names


def test_tcp_transport_still_has_the_hooks_we_override() -> None:
    for name in (
        "_onNewIncomingConnection",
        "_onIncomingMessageReceived",
        "_onOutgoingMessageReceived",
        "_onTick",
        "addNode",
        "_onDisconnected",
    ):
        assert callable(getattr(TCPTransport, name)), name
    assert "_unknownConnections" in inspect.getsource(TCPTransport.__init__)
    assert "transportClass" in inspect.signature(pysyncobj.SyncObj.__init__).parameters


# ---- the pure verdict on buffered bytes ----


def frame(length: int, body: bytes = b"") -> bytes:
    return struct.pack("i", length) + body


@pytest.mark.parametrize(("buffered", "authenticated", "expected"), [
    (b"", False, FrameVerdict.WAIT),
    (b"\x01\x00", False, FrameVerdict.WAIT),
    (frame(3, b"ab"), False, FrameVerdict.WAIT),
    (frame(3, b"abc"), False, FrameVerdict.PARSE),
    (frame(0), False, FrameVerdict.PARSE),
    (frame(-1), False, FrameVerdict.REJECT),
    (frame(-1), True, FrameVerdict.REJECT),
    (frame(2**31 - 1), False, FrameVerdict.REJECT),  # issue 9: the 2 GiB prefix
    (frame(2**31 - 1), True, FrameVerdict.REJECT),
    (frame(MAX_HANDSHAKE_FRAME_BYTES), False, FrameVerdict.WAIT),
    (frame(MAX_HANDSHAKE_FRAME_BYTES + 1), False, FrameVerdict.REJECT),
    (frame(MAX_HANDSHAKE_FRAME_BYTES + 1), True, FrameVerdict.WAIT),
    (frame(MAX_FRAME_BYTES), True, FrameVerdict.WAIT),
    (frame(MAX_FRAME_BYTES + 1), True, FrameVerdict.REJECT),
])  # fmt: skip
def test_judge_frame(buffered: bytes, authenticated: bool, expected: FrameVerdict) -> None:
    assert judge_frame(buffered, authenticated) is expected


def test_unauthenticated_bytes_hold_whole_handshake_frames() -> None:
    # A full buffer always holds a complete first frame, so it is parsed or rejected, never stuck.
    assert MAX_UNAUTHENTICATED_BYTES >= 4 + MAX_HANDSHAKE_FRAME_BYTES


# ---- real connections over a socket pair ----


class Pair:
    """A guarded receiving connection and a plain pysyncobj sender, polled by hand."""

    def __init__(self) -> None:
        self.poller = createPoller("auto")
        receiving, sending = socket.socketpair()
        receiving.setblocking(False)
        sending.setblocking(False)
        self.raw = sending
        self.messages: list[Any] = []
        self.disconnected = False
        self.receiver = GuardedTcpConnection.guard(
            TcpConnection(
                self.poller,
                socket=receiving,
                onMessageReceived=self.messages.append,
                onDisconnected=self.on_disconnected,
            )
        )
        self.receiver.encryptor = ENCRYPTOR
        self.sender = TcpConnection(self.poller, socket=sending)
        self.sender.encryptor = ENCRYPTOR

    def on_disconnected(self) -> None:
        self.disconnected = True

    def poll_until(self, done: Any) -> int:
        """Polls until ``done()``; returns the rounds it took and checks the buffer bound."""
        for rounds in range(1, MAX_POLL_ROUNDS + 1):
            before = self.receiver.buffered_bytes
            self.poller.poll(0)
            assert self.receiver.buffered_bytes - before <= MAX_READ_BYTES_PER_EVENT
            if not self.receiver.authenticated:
                assert self.receiver.buffered_bytes <= MAX_UNAUTHENTICATED_BYTES
            if done():
                return rounds
        raise AssertionError(f"not done after {MAX_POLL_ROUNDS} poll rounds")

    def close(self) -> None:
        self.receiver.disconnect()
        self.sender.disconnect()


@pytest.fixture
def pair() -> Iterator[Pair]:
    with contextlib.closing(Pair()) as made:
        yield made


def sent_frame_bytes(message: Any, send_rand_key: bytes | None = None) -> int:
    """Bytes pysyncobj puts on the wire for ``message`` (length prefix included)."""
    mine, theirs = socket.socketpair()
    try:
        sender = TcpConnection(createPoller("auto"), socket=mine)
        sender.encryptor, sender.sendRandKey = ENCRYPTOR, send_rand_key
        sender.send(message)
        theirs.setblocking(False)
        return len(theirs.recv(1 << 16))
    finally:
        mine.close()
        theirs.close()


def test_a_real_handshake_fits_the_unauthenticated_bounds() -> None:
    # What pysyncobj's transport sends on a new outgoing connection: a random key, then (after
    # the answer) its address wrapped with the key it was given.
    first = sent_frame_bytes(os.urandom(32))
    second = sent_frame_bytes(
        "controller-with-a-long-host-name.example.com:19093", send_rand_key=os.urandom(32)
    )
    assert first <= MAX_HANDSHAKE_FRAME_BYTES and second <= MAX_HANDSHAKE_FRAME_BYTES
    assert first + second <= MAX_UNAUTHENTICATED_BYTES // 4, (first, second)


def test_frames_under_the_bound_are_delivered_before_authentication(pair: Pair) -> None:
    key = os.urandom(32)
    pair.sender.send(key)
    pair.sender.send("127.0.0.1:19093")
    pair.poll_until(lambda: len(pair.messages) == 2)
    assert pair.messages == [key, "127.0.0.1:19093"]
    assert not pair.disconnected and pair.receiver.buffered_bytes == 0


def test_a_two_gib_length_prefix_is_cut_off_after_a_bounded_read(pair: Pair) -> None:
    pair.raw.send(struct.pack("i", 2**31 - 1) + b"x" * 60_000)
    rounds = pair.poll_until(lambda: pair.disconnected)
    assert rounds == 1 and pair.messages == []
    assert pair.receiver.state == CONNECTION_STATE.DISCONNECTED


def test_unauthenticated_small_frames_that_never_complete_are_cut_off(pair: Pair) -> None:
    # A length within the handshake bound followed by nothing: the buffer never grows past it.
    pair.raw.send(struct.pack("i", MAX_HANDSHAKE_FRAME_BYTES) + b"x" * 100)
    pair.poller.poll(0)
    assert not pair.disconnected and pair.receiver.buffered_bytes == 104


def test_a_frame_that_fails_authentication_is_never_unpickled(pair: Pair) -> None:
    # A pickle that would run code if loaded, in a frame with no valid Fernet token.
    evil = b"cos\nsystem\n(S'touch /tmp/pwned-by-raft'\ntR."
    pair.raw.send(struct.pack("i", len(evil)) + evil)
    pair.poll_until(lambda: pair.disconnected)
    assert pair.messages == [] and not os.path.exists("/tmp/pwned-by-raft")


def test_an_authenticated_large_frame_arrives_in_bounded_reads(pair: Pair) -> None:
    pair.receiver.authenticated = True
    payload = os.urandom(8 << 20)  # incompressible: ~11 MiB on the wire
    pair.sender.send(payload)
    rounds = pair.poll_until(lambda: bool(pair.messages))
    assert pair.messages == [payload] and not pair.disconnected
    assert rounds >= (8 << 20) // MAX_READ_BYTES_PER_EVENT  # the Raft thread ticked in between


def test_frames_are_zlib_streams_pysyncobj_reads() -> None:
    small = b"an AppendEntries answer " * 7
    large = os.urandom(SMALL_FRAME_BYTES // 2) * 2  # compressible: its second half repeats
    assert zlib.decompress(compress_frame(small)) == small
    # Small frames skip pysyncobj's 256 KiB deflate state; large ones keep its level 3.
    assert compress_frame(small) != zlib.compress(small, 3)
    assert compress_frame(large) == zlib.compress(large, 3)
    assert zlib.decompress(compress_frame(large)) == large


def test_a_guarded_sender_talks_to_a_plain_pysyncobj_receiver() -> None:
    # Both ends of a rolling upgrade: our frames are read by pysyncobj's own parser.
    poller = createPoller("auto")
    mine, theirs = socket.socketpair()
    mine.setblocking(False)
    theirs.setblocking(False)
    received: list[Any] = []
    sender = GuardedTcpConnection.guard(TcpConnection(poller, socket=mine))
    receiver = TcpConnection(poller, socket=theirs, onMessageReceived=received.append)
    sender.encryptor = receiver.encryptor = ENCRYPTOR
    messages = [{"type": "next_node_idx", "next_node_idx": 8}, os.urandom(SMALL_FRAME_BYTES)]
    try:
        for message in messages:
            sender.send(message)
        for _ in range(MAX_POLL_ROUNDS):
            poller.poll(0)
            if len(received) == len(messages):
                break
        assert received == messages
    finally:
        sender.disconnect()
        receiver.disconnect()


def test_the_same_frame_is_refused_before_authentication(pair: Pair) -> None:
    pair.sender.send(os.urandom(64 << 10))
    pair.poll_until(lambda: pair.disconnected)
    assert pair.messages == []


# ---- the transport: time to authenticate, and a flood of unauthenticated connections ----


class FakeSyncObj:
    """What TCPTransport reads of its SyncObj, for a read-only node (no server, no peers)."""

    def __init__(self, encryptor: Any) -> None:
        self.encryptor = encryptor
        self._poller = createPoller("auto")
        self.conf = pysyncobj.SyncObjConf()
        self.ticks: list[Any] = []

    def addOnTickCallback(self, callback: Any) -> None:
        self.ticks.append(callback)


class ReadOnlyTransport:
    """A GuardedTransport of a read-only node, and the far ends of the connections it accepted."""

    def __init__(self) -> None:
        self.transport = GuardedTransport(FakeSyncObj(ENCRYPTOR), None, [])
        self.peers: list[socket.socket] = []

    def incoming(self) -> TcpConnection:
        """A connection as pysyncobj's server hands it over, accepted by the transport."""
        mine, theirs = socket.socketpair()
        mine.setblocking(False)
        self.peers.append(theirs)
        connection = TcpConnection(self.transport._syncObj._poller, socket=mine)
        self.transport._onNewIncomingConnection(connection)
        return connection

    def close(self) -> None:
        self.transport.destroy()
        for peer in self.peers:
            peer.close()


@pytest.fixture
def read_only() -> Iterator[ReadOnlyTransport]:
    with contextlib.closing(ReadOnlyTransport()) as made:
        yield made


def test_a_transport_without_a_password_is_refused() -> None:
    with pytest.raises(ValueError, match="password"):
        GuardedTransport(FakeSyncObj(None), None, [])


def test_the_server_is_guarded_before_it_binds() -> None:
    transport = GuardedTransport(FakeSyncObj(ENCRYPTOR), TCPNode("127.0.0.1:1"), [])
    try:
        assert isinstance(transport._server, GuardedTcpServer)
        assert not transport.ready  # no port was opened
    finally:
        transport.destroy()


def test_connections_that_do_not_authenticate_in_time_are_closed(
    read_only: ReadOnlyTransport,
) -> None:
    connection = read_only.incoming()
    assert isinstance(connection, GuardedTcpConnection)
    transport, opened = read_only.transport, connection.opened_at
    assert transport.close_unauthenticated(opened + AUTHENTICATION_TIMEOUT_S) == 0
    assert transport.close_unauthenticated(opened + AUTHENTICATION_TIMEOUT_S + 0.01) == 1
    assert connection.state == CONNECTION_STATE.DISCONNECTED
    assert transport._unknownConnections == set()


def test_a_flood_of_unauthenticated_connections_keeps_only_the_newest(
    read_only: ReadOnlyTransport,
) -> None:
    first = read_only.incoming()
    others = [read_only.incoming() for _ in range(MAX_UNAUTHENTICATED_CONNECTIONS)]
    assert len(read_only.transport._unknownConnections) == MAX_UNAUTHENTICATED_CONNECTIONS
    assert first.state == CONNECTION_STATE.DISCONNECTED
    assert all(c.state == CONNECTION_STATE.CONNECTED for c in others)


def test_a_completed_handshake_authenticates_the_connection(
    read_only: ReadOnlyTransport,
) -> None:
    transport, connection = read_only.transport, read_only.incoming()
    transport._onIncomingMessageReceived(connection, os.urandom(32))  # the peer's key
    assert not connection.authenticated and connection in transport._unknownConnections
    transport._onIncomingMessageReceived(connection, "readonly")  # who it is
    assert connection.authenticated and connection not in transport._unknownConnections


def test_the_raft_key_is_salted_per_cluster() -> None:
    # Issue 11: pysyncobj's own salt is one constant for every cluster; cluster.id salts it first.
    password = "one-password"
    a = cluster_key(password, "cluster-a")
    assert a == cluster_key(password, "cluster-a")  # every controller derives the same
    assert a != cluster_key(password, "cluster-b")
    assert a != cluster_key("another-password", "cluster-a")
    assert password not in a
    assert cluster_key(password, None) == password  # no cluster.id: pysyncobj's derivation only
    # The two keys do not open each other's frames.
    frame = getEncryptor(a).encrypt(b"entry")
    assert getEncryptor(a).decrypt(frame) == b"entry"
    with pytest.raises(InvalidToken):
        getEncryptor(cluster_key(password, "cluster-b")).decrypt(frame)
