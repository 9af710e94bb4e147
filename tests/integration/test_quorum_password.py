"""A controller's Raft port never unpickles an unauthenticated frame (DESIGN.md §3.1: pysyncobj
unpickles frames before anything else, so without ``password`` anyone who connects runs code)."""

import pickle
import socket
import struct
import time
import zlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


class _CreatesFile:
    """Unpickling this calls open(path, "w"): the file appearing means code ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def pysyncobj_frame(message: object) -> bytes:
    """A frame exactly as pysyncobj's TcpConnection.send writes it without a password."""
    data = zlib.compress(pickle.dumps(message, 2), 3)
    return struct.pack("i", len(data)) + data


def test_the_payload_would_run_if_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "control-marker"
    frame = pysyncobj_frame(_CreatesFile(marker))
    pickle.loads(zlib.decompress(frame[4:])).close()
    assert marker.exists()


def test_raft_port_refuses_a_pickle_frame_without_the_password(
    cluster_factory, tmp_path: Path
) -> None:
    cluster = cluster_factory(1)
    controller = cluster.wait_for_leader()
    marker = tmp_path / "pwned"
    frame = pysyncobj_frame(_CreatesFile(marker))
    # Twice: as a peer's first message, and after a (fake) node-address message.
    for first in (frame, pysyncobj_frame("127.0.0.1:1") + frame):
        with socket.create_connection(("127.0.0.1", controller.raft_port), timeout=5) as sock:
            sock.sendall(first)
            sock.settimeout(5)
            try:
                closed = sock.recv(1024) == b""
            except ConnectionResetError:
                closed = True
            assert closed, "the controller should drop an unauthenticated connection"
    time.sleep(0.5)
    assert not marker.exists()
    assert controller.alive()
    quorum = controller.get("/v1/quorum")
    assert quorum["state"] == "leader"
    before = quorum["committed_offset"]
    time.sleep(1.2)
    assert controller.get("/v1/quorum")["committed_offset"] > before
