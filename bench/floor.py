"""What moving 100 MB costs this machine's CPU at the least, measured in the same run as a
benchmark: the floor under the brokers' CPU-seconds per 100 MB.

    .venv/bin/python -m bench.floor    # prints the figures, then one JSON line

Each figure is the CPU-seconds (user + system of this process, every thread) to move 100 MB in
1 MiB pieces, the way a broker moves batches: ``memcpy`` (a ``bytearray`` slice copy),
``loopback`` (TCP over 127.0.0.1, both ends: ``sendall`` in one thread, ``recv_into`` a reused
buffer in another), ``pwrite`` (into the page cache of a file in ``directory``, no fsync, as a
segment append) and ``sendfile`` (that file to a loopback socket, the receiving end included).

An acks=all RF=3 produce of 100 MB must at least: receive it on the leader (the receiving half
of one loopback transfer), write it there and on two followers (three pwrites) and carry it to
the two followers (two loopback transfers, both ends in servers): the server floor is
``2.5 x loopback + 3 x pwrite`` (``acks_all_rf3_floor``); RF=1 is ``0.5 x loopback + pwrite``.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_figures

MB = 1_000_000
CHUNK = 1024 * 1024
TOTAL = 100 * MB


def _cpu() -> float:
    return time.process_time()  # every thread's user + system time, to the nanosecond


def memcpy_s() -> float:
    source, target = os.urandom(CHUNK), bytearray(CHUNK)
    started = _cpu()
    for _ in range(TOTAL // CHUNK):
        target[:] = source
    return _cpu() - started


def _loopback_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    return client, accepted


def _drain(sock: socket.socket, total: int) -> None:
    buffer = memoryview(bytearray(CHUNK))
    while total > 0:
        received = sock.recv_into(buffer)
        if not received:
            return
        total -= received


def _timed_transfer(send: object, total: int) -> float:
    """CPU-seconds of ``send(client)`` while another thread drains ``total`` bytes."""
    client, accepted = _loopback_pair()
    with client, accepted:
        reader = threading.Thread(target=_drain, args=(accepted, total))
        started = _cpu()
        reader.start()
        send(client)  # type: ignore[operator]
        reader.join()
        return _cpu() - started


def loopback_s() -> float:
    chunk = os.urandom(CHUNK)

    def send(client: socket.socket) -> None:
        for _ in range(TOTAL // CHUNK):
            client.sendall(chunk)

    return _timed_transfer(send, TOTAL // CHUNK * CHUNK)


def pwrite_and_sendfile_s(directory: Path) -> tuple[float, float]:
    chunk = os.urandom(CHUNK)
    count = TOTAL // CHUNK
    fd, name = tempfile.mkstemp(dir=directory, prefix="floor-", suffix=".log")
    try:
        started = _cpu()
        for index in range(count):
            os.pwrite(fd, chunk, index * CHUNK)
        pwrite = _cpu() - started

        def send(client: socket.socket) -> None:
            offset = 0
            while offset < count * CHUNK:
                offset += os.sendfile(client.fileno(), fd, offset, count * CHUNK - offset)

        return pwrite, _timed_transfer(send, count * CHUNK)
    finally:
        os.close(fd)
        os.unlink(name)


def floor_cpu_s_per_100mb(directory: Path) -> dict[str, float]:
    """The figures above, each per 100 MB (the best of 3 to keep a busy moment out)."""
    scale = TOTAL / (TOTAL // CHUNK * CHUNK)
    memcpy = min(memcpy_s() for _ in range(3)) * scale
    loopback = min(loopback_s() for _ in range(3)) * scale
    pwrite, sendfile = (
        min(pair) * scale
        for pair in zip(*(pwrite_and_sendfile_s(directory) for _ in range(3)), strict=True)
    )
    return {
        "floor_memcpy_cpu_s_per_100mb": round(memcpy, 3),
        "floor_loopback_cpu_s_per_100mb": round(loopback, 3),
        "floor_pwrite_cpu_s_per_100mb": round(pwrite, 3),
        "floor_sendfile_cpu_s_per_100mb": round(sendfile, 3),
        "rf1_floor_cpu_s_per_100mb": round(0.5 * loopback + pwrite, 3),
        "acks_all_rf3_floor_cpu_s_per_100mb": round(2.5 * loopback + 3 * pwrite, 3),
    }


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="pykraft-bench-floor-") as directory:
        print_figures(floor_cpu_s_per_100mb(Path(directory)))
