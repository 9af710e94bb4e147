"""The leader's answer to a follower Fetch on its own: the listener writing a response of a few
header bytes and one file slice, CPU of the event loop's thread per 100 MB.

    .venv/bin/python bench/fetch_send.py            # 16 KiB .. 1 MiB slices, 200 MB each
    .venv/bin/python bench/fetch_send.py --quick    # 20 MB each: a smoke run
    .venv/bin/python bench/fetch_send.py --sizes-kib 256 --partitions 100   # a consumer's Fetch

``--partitions N`` answers for N partitions instead of one: each a partition header and a slice,
the middle one of the slice size, the others of ``SMALL_SLICE_BYTES`` (a consumer's Fetch over
many partitions, one with a backlog: one big slice among small ones, all sent part by part).

Why: under acks=all RF=3 every byte leaves the leader twice, once to each follower, and issue
18's profile had the leader's writing of Fetch answers at ~18% of the brokers' busy time. This
runs ``broker.network.KafkaListener`` on uvloop (as the brokers do) over loopback TCP; a thread
plays the follower (one Fetch at a time: send, read the whole answer). Each slice size runs with
the listener's ``use_sendfile`` on (``broker.socket_sendfile``: os.sendfile for slices of
``SENDFILE_MIN_BYTES`` and more) and off (every slice read and written), taking turns, and
reports the median of ``--repeats`` runs of each. Only the loop thread's CPU counts
(``time.thread_time``), not the reading thread's. Ends with one JSON line. Never run by the
tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop

from bench.common import print_figures
from pykraft.broker.network import KafkaListener, RequestContext
from pykraft.protocol.framing import frame_response
from pykraft.protocol.segments import Segments
from pykraft.storage.file_slice import FileSlice, file_id_of

KIB, MB = 1024, 1_000_000
SIZES_KIB = (16, 64, 256, 1024)
FILE_BYTES = 8 * KIB * KIB
HEADER = bytes(60)  # about a v16 Fetch answer's bytes before one partition's records
PARTITION_HEADER = bytes(40)  # about a v16 Fetch answer's bytes per further partition
SMALL_SLICE_BYTES = 1 * KIB


def follower(address: tuple[str, int], requests: int, done: list[float]) -> None:
    """One Fetch at a time, each answer read whole (a blocking socket, its own thread)."""
    with socket.create_connection(address) as sock:
        buffer = bytearray(4 * KIB * KIB)
        for correlation_id in range(requests):
            body = struct.pack(">hhih", 1, 4, correlation_id, -1)  # Fetch v4: header v1
            sock.sendall(struct.pack(">i", len(body)) + body)
            size_prefix = sock.recv(4, socket.MSG_WAITALL)
            (size,) = struct.unpack(">i", size_prefix)
            view, left = memoryview(buffer), size
            while left:
                got = sock.recv_into(view[: min(left, len(buffer))])
                assert got, "the listener closed the connection"
                left -= got
    done.append(time.perf_counter())


async def one_run(
    segment: Path, slice_bytes: int, total_bytes: int, sendfile: bool, partitions: int = 1
) -> float:
    """CPU-seconds of the loop thread per 100 MB of slices sent."""
    position = 0
    fd = os.open(segment, os.O_RDONLY)
    file_id = file_id_of(fd)  # as a segment's slices carry it: no stat per answer
    os.close(fd)
    sizes = [SMALL_SLICE_BYTES] * partitions
    sizes[partitions // 2] = slice_bytes
    answer_bytes = sum(sizes)

    def next_slice(length: int) -> FileSlice:
        nonlocal position
        position = position if position + length <= FILE_BYTES else 0
        piece = FileSlice(segment, position, length, file_id)
        position += length
        return piece

    async def fetch(context: RequestContext, body: memoryview) -> Segments:
        parts: list[bytes | FileSlice] = [HEADER]
        for index, length in enumerate(sizes):
            parts += [PARTITION_HEADER, next_slice(length)] if index else [next_slice(length)]
        return frame_response(context.header.correlation_id, 0, Segments.of(parts))

    listener = KafkaListener(
        fetch, port=0, use_sendfile=sendfile, monotonic_ms=lambda: time.monotonic_ns() // 10**6
    )
    await listener.start()
    try:
        requests = max(1, total_bytes // answer_bytes)
        done: list[float] = []
        reader = threading.Thread(
            target=follower, args=(("127.0.0.1", listener.port), requests, done)
        )
        started = time.thread_time()
        reader.start()
        await asyncio.to_thread(reader.join)
        cpu = time.thread_time() - started
        assert done, "the follower thread failed"
    finally:
        await listener.close()
    return cpu * 100 * MB / (requests * answer_bytes)


async def measure(
    total_bytes: int, repeats: int, sizes_kib: tuple[int, ...], partitions: int
) -> dict[str, float | int]:
    figures: dict[str, float | int] = {"megabytes_per_run": total_bytes // MB, "repeats": repeats}
    figures["partitions"] = partitions
    shape = f"_p{partitions}" if partitions > 1 else ""
    with tempfile.TemporaryDirectory(prefix="pykraft-bench-fetch-send-") as directory:
        segment = Path(directory) / "00000000000000000000.log"
        segment.write_bytes(os.urandom(FILE_BYTES))
        for size_kib in sizes_kib:
            runs: dict[str, list[float]] = {"copy": [], "sendfile": []}
            for _ in range(repeats):
                for name in ("copy", "sendfile"):
                    sendfile = name == "sendfile"
                    cpu = await one_run(segment, size_kib * KIB, total_bytes, sendfile, partitions)
                    runs[name].append(cpu)
            for name, values in runs.items():
                key = f"{name}_{size_kib}k{shape}_cpu_s_per_100mb"
                figures[key] = round(statistics.median(values), 4)
    figures["loadavg_1m"] = round(os.getloadavg()[0], 2)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=200, help="MB sent per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20 MB per run, 1 repeat")
    parser.add_argument(
        "--sizes-kib", type=int, nargs="+", default=SIZES_KIB, help="slice sizes (KiB)"
    )
    parser.add_argument(
        "--partitions", type=int, default=1, help="partitions per answer (one big slice)"
    )
    args = parser.parse_args(argv)
    if args.partitions < 1:
        parser.error("--partitions must be at least 1")
    megabytes, repeats = (20, 1) if args.quick else (args.megabytes, args.repeats)
    sizes = tuple(args.sizes_kib)
    print_figures(uvloop.run(measure(megabytes * MB, repeats, sizes, args.partitions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
