"""The listener's own cost per request: ``broker.network.KafkaListener`` on uvloop with a handler
that answers at once, loop-thread CPU microseconds per request, next to a raw-socket floor.

    .venv/bin/python bench/listener_requests.py            # 20000 requests per run, 3 repeats
    .venv/bin/python bench/listener_requests.py --quick    # 2000 requests, 1 repeat: a smoke run
    taskset -c 1 .venv/bin/python bench/listener_requests.py   # steadier: server and client on
                                                               # one core (no cross-core wake-ups)

Why (issue 18): every request of every client and follower pays the listener's framing, header
parse, dispatch, per-connection queue and writer, metrics and response write, and the brokers are
CPU-bound, so what the listener spends per request moves throughput and latency at once. The
handler here does nothing but frame an empty answer, so what is measured is the listener alone.

Three shapes, each over one loopback TCP connection from a client in its own process (so it
takes no CPU from the loop's thread, not even the GIL): ``serial``, one request at a time (send,
read the answer: a one-at-a-time producer), ``serial_later``, the same with a handler that
answers a loop turn later (a follower's Fetch completed by an append, the writer waiting for
it), and ``pipelined``, ``--depth`` requests written at once and then their answers read (a
client with many in flight).

The floor: an ``asyncio.Protocol`` on the same loop that cuts frames and writes a fixed answer
per frame from ``data_received`` (no task, no queue, no header parse, no metrics): what one
loop turn, a read and a write cost on this box. Only the loop thread's CPU counts
(``time.thread_time``). The listener and the floor take turns, ``--repeats`` times; every run
is printed, then the medians as one JSON line. Never run by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop

from bench.common import print_figures
from pykraft.broker.network import KafkaListener, RequestContext
from pykraft.broker.request_time import StartsAtOnce
from pykraft.protocol.framing import frame_response
from pykraft.protocol.segments import Segments

ANSWER_BODY = bytes(12)  # about a small answer's body (ApiVersions' error code and a few fields)
# Metadata v1: header v1 (api_key, api_version, correlation_id, client_id "bench").
REQUEST_HEADER = struct.Struct(">hhih")
CLIENT_ID = b"bench"
SHAPES = ("serial", "serial_later", "pipelined")


def client(port: int, requests: int, depth: int) -> None:
    """Send ``requests`` requests, ``depth`` at a time, reading every answer whole."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = 0
        while sent < requests:
            batch = min(depth, requests - sent)
            frames = []
            for correlation_id in range(sent, sent + batch):
                body = REQUEST_HEADER.pack(3, 1, correlation_id, len(CLIENT_ID)) + CLIENT_ID
                frames.append(struct.pack(">i", len(body)) + body)
            sock.sendall(b"".join(frames))
            for _ in range(batch):
                (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
                answer = sock.recv(size, socket.MSG_WAITALL)
                assert len(answer) == size, "the server closed the connection"
            sent += batch


async def _answer(context: RequestContext, body: memoryview) -> Segments:
    return frame_response(context.header.correlation_id, 0, ANSWER_BODY)


async def _answer_later(context: RequestContext, body: memoryview) -> Segments:
    """Answered a loop turn later, as a Fetch its append completes (the writer waits for it)."""
    await asyncio.sleep(0)
    return frame_response(context.header.correlation_id, 0, ANSWER_BODY)


class _Floor(asyncio.Protocol):
    """Frames cut in ``data_received``, each answered with one write at once."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a TCP transport

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        self._buffer += data
        answers = []
        while len(self._buffer) >= 4:
            (size,) = struct.unpack_from(">i", self._buffer)
            if len(self._buffer) < 4 + size:
                break
            (correlation_id,) = struct.unpack_from(">i", self._buffer, 8)
            del self._buffer[: 4 + size]
            answers.append(struct.pack(">ii", 4 + len(ANSWER_BODY), correlation_id) + ANSWER_BODY)
        self._transport.write(b"".join(answers))


async def _client_cpu(port: int, requests: int, depth: int) -> float:
    """Loop-thread CPU-seconds while the client process ran."""
    command = [sys.executable, __file__, "--client", str(port), str(requests), str(depth)]
    started = time.thread_time()
    process = await asyncio.create_subprocess_exec(*command)
    assert await process.wait() == 0, "the client failed"
    return time.thread_time() - started


async def _listener_run(requests: int, depth: int, later: bool = False) -> float:
    handler = _answer_later if later else _answer

    def dispatch(context: RequestContext, body: memoryview) -> StartsAtOnce:
        return StartsAtOnce(handler(context, body))  # as KafkaApis marks Produce and Fetch

    listener = KafkaListener(dispatch, port=0, monotonic_ms=lambda: time.monotonic_ns() // 10**6)
    await listener.start()
    try:
        return await _client_cpu(listener.port, requests, depth)
    finally:
        await listener.close()


async def _floor_run(requests: int, depth: int) -> float:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Floor, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        return await _client_cpu(port, requests, depth)
    finally:
        server.close()
        await server.wait_closed()


async def _idle_run(requests: int, depth: int) -> float:
    """The loop-thread CPU of starting and waiting for a client process that connects nowhere:
    subtracted from both, so the figures are per request only."""
    command = [sys.executable, "-c", "pass"]
    started = time.thread_time()
    process = await asyncio.create_subprocess_exec(*command)
    assert await process.wait() == 0
    return time.thread_time() - started


async def measure(
    requests: int, depth: int, repeats: int, shapes: tuple[str, ...] = SHAPES
) -> dict[str, float | int]:
    runs: dict[str, Callable[[int, int], object]] = {
        "listener": _listener_run,
        "floor": _floor_run,
        "idle": _idle_run,
    }
    figures: dict[str, float | int] = {"requests_per_run": requests, "depth": depth}
    results: dict[str, list[float]] = {}
    for shape in shapes:
        shape_depth = depth if shape == "pipelined" else 1
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats):
            for name, run in runs.items():
                if name == "listener":
                    cpu = await _listener_run(requests, shape_depth, shape == "serial_later")
                else:
                    cpu = await run(requests, shape_depth)  # type: ignore[misc]
                samples[name].append(cpu)
        idle = statistics.median(samples["idle"])
        for name in ("listener", "floor"):
            per_request = [round((cpu - idle) * 1e6 / requests, 2) for cpu in samples[name]]
            results[f"{shape}_{name}_us_per_request"] = per_request
            print(f"{shape} {name}: {per_request} us/request", file=sys.stderr)
    for name, values in results.items():
        figures[name] = round(statistics.median(values), 2)
    figures["loadavg_1m"] = round(os.getloadavg()[0], 2)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000, help="requests per run")
    parser.add_argument("--depth", type=int, default=32, help="pipelined requests in flight")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2000 requests, 1 repeat")
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=SHAPES)
    parser.add_argument("--client", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        client(*args.client)
        return 0
    requests, repeats = (2000, 1) if args.quick else (args.requests, args.repeats)
    print_figures(uvloop.run(measure(requests, args.depth, repeats, tuple(args.shapes))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
