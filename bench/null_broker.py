"""The floor under one-record-at-a-time latency on this machine: a null Kafka broker and a raw
loopback ping-pong, measured by ``bench/replication.py`` next to pykraft's p50/p99.

    .venv/bin/python -m bench.null_broker     # both floors alone, then one JSON line

The **null broker** is a process (the event loop pykraft's brokers run, ``pykraft.event_loop``)
that speaks just enough Kafka for a producer: ApiVersions (pykraft's own table), Metadata (every
topic asked for has ``replication.PARTITIONS`` partitions, all led by itself) and Produce,
answered at once with no storage, through pykraft's codecs (``protocol.framing``,
``protocol.headers``, ``protocol.apis``, ``protocol.produce``). The same client and loop that
time pykraft (``replication.latency_ms``) time it, so its p50 is what librdkafka, the Python
client around it, the loopback and one asyncio request-response cost on this box: the part of
pykraft's RF=1 p50 that is not the broker's own work.

The **ping-pong** is a blocking TCP round trip over 127.0.0.1 between this process and the null
broker's process (``TCP_NODELAY`` both ends): a request-sized message out, a response-sized one
back — the kernel's and two Python ``socket`` calls' share, without any Kafka.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import select
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_figures
from pykraft.event_loop import loop_factory
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    SUPPORTED_API_VERSIONS,
    decode_request,
    encode_api_versions_response,
    encode_response,
    encode_unsupported_api_versions_response,
    response_class,
)
from pykraft.protocol.framing import FrameDecoder, frame_response
from pykraft.protocol.headers import parse_request_header, response_header_version
from pykraft.protocol.produce import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
    decode_produce_request,
    encode_produce_response,
)
from pykraft.protocol.wire import ZERO_UUID

NODE_ID = 0
CLUSTER_ID = "null-broker-bench-cluster"
PING_BYTES = 1100  # about a one-record (1 KiB value) Produce request
PONG_BYTES = 60  # about its response
STARTUP_TIMEOUT_S = 30.0  # until the null broker prints its ports
STOP_TIMEOUT_S = 10.0  # from stdin closed to the process gone (then it is killed)

_Metadata: Any = response_class(ApiKey.METADATA)


class NullBroker(asyncio.Protocol):
    """One connection: every request answered in the callback that read it."""

    def __init__(self, port: int, partitions: int) -> None:
        self._port = port
        self._partitions = partitions
        self._decoder = FrameDecoder(100 * 1024 * 1024)
        self._transport: asyncio.Transport | None = None
        self._offsets = itertools.count()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        self._decoder.receive_data(data)
        while (frame := self._decoder.next_frame()) is not None:
            header, body_start = parse_request_header(memoryview(frame))
            body = self._answer(header.api_key, header.api_version, memoryview(frame)[body_start:])
            if body is None:
                continue  # acks=0
            version = response_header_version(header.api_key, header.api_version)
            buffers = []
            for part in frame_response(header.correlation_id, version, body).parts:
                assert isinstance(part, bytes | bytearray | memoryview)  # no file slices here
                buffers.append(part)
            self._transport.write(b"".join(buffers))

    def _answer(self, api_key: int, api_version: int, body: memoryview) -> bytes | None:
        if api_key == ApiKey.API_VERSIONS:
            if api_version > SUPPORTED_API_VERSIONS[ApiKey.API_VERSIONS].max_version:
                return encode_unsupported_api_versions_response()
            return encode_api_versions_response(api_version)
        if api_key == ApiKey.METADATA:
            return self._metadata(api_version, body)
        if api_key == ApiKey.PRODUCE:
            return self._produce(api_version, body)
        raise RuntimeError(f"the null broker serves no API key {api_key}")

    def _metadata(self, version: int, body: memoryview) -> bytes:
        request = decode_request(ApiKey.METADATA, version, body)
        topic_class = _Metadata.MetadataResponseTopic
        partition_class = topic_class.MetadataResponsePartition
        topics = [
            topic_class(
                error_code=0,
                name=entry.name,
                topic_id=ZERO_UUID,
                is_internal=False,
                partitions=[
                    partition_class(
                        error_code=0,
                        partition_index=index,
                        leader_id=NODE_ID,
                        leader_epoch=0,
                        replica_nodes=[NODE_ID],
                        isr_nodes=[NODE_ID],
                        offline_replicas=[],
                    )
                    for index in range(self._partitions)
                ],
            )
            for entry in request.topics or []
        ]
        response = _Metadata(
            version=version,
            throttle_time_ms=0,
            brokers=[
                _Metadata.MetadataResponseBroker(
                    node_id=NODE_ID, host="127.0.0.1", port=self._port, rack=None
                )
            ],
            cluster_id=CLUSTER_ID,
            controller_id=NODE_ID,
            topics=topics,
        )
        return encode_response(ApiKey.METADATA, version, response)

    def _produce(self, version: int, body: memoryview) -> bytes | None:
        request = decode_produce_request(body, version)
        if request.acks == 0:
            return None
        response = ProduceResponse(
            tuple(
                TopicProduceResponse(
                    topic.name,
                    tuple(
                        PartitionProduceResponse(
                            index=partition.index, base_offset=next(self._offsets)
                        )
                        for partition in topic.partition_data
                    ),
                )
                for topic in request.topic_data
            )
        )
        return encode_produce_response(response, version)


class Pong(asyncio.Protocol):
    """The ping-pong's far end: every PING_BYTES received, PONG_BYTES back."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._pending = 0
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._pending += len(data)
        while self._pending >= PING_BYTES:
            self._pending -= PING_BYTES
            self._transport.write(b"p" * PONG_BYTES)


async def serve(partitions: int) -> None:
    """Both servers on free ports of 127.0.0.1; prints ``<kafka port> <ping port>``, runs until
    stdin closes (so it never outlives the bench that started it)."""
    loop = asyncio.get_running_loop()
    holder: list[int] = []
    kafka = await loop.create_server(lambda: NullBroker(holder[0], partitions), "127.0.0.1", 0)
    holder.append(kafka.sockets[0].getsockname()[1])
    ping = await loop.create_server(Pong, "127.0.0.1", 0)
    print(holder[0], ping.sockets[0].getsockname()[1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    kafka.close()
    ping.close()


@contextmanager
def null_broker() -> Iterator[tuple[str, int]]:
    """A null broker process: yields its bootstrap address and its ping-pong port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.null_broker", "--serve"],
        cwd=Path(__file__).resolve().parent.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        kafka_port, ping_port = (int(word) for word in _ports_line(process).split())
        yield f"127.0.0.1:{kafka_port}", ping_port
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _ports_line(process: subprocess.Popen[str]) -> str:
    """The ``<kafka port> <ping port>`` line the null broker prints once it listens; an error
    if it exits first or prints nothing within STARTUP_TIMEOUT_S."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], STARTUP_TIMEOUT_S)
    if not ready:
        raise RuntimeError(f"the null broker printed no ports within {STARTUP_TIMEOUT_S}s")
    line = process.stdout.readline()  # it prints the whole line at once
    if not line:
        code = process.wait(STOP_TIMEOUT_S)
        raise RuntimeError(f"the null broker exited (code {code}) before printing its ports")
    if len(line.split()) != 2:
        raise RuntimeError(f"the null broker printed {line!r}, not its two ports")
    return line


def ping_pong_p50_ms(port: int, count: int) -> float:
    """Median round trip of PING_BYTES out and PONG_BYTES back over loopback TCP."""
    ping = b"x" * PING_BYTES
    samples = []
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            started = time.perf_counter()
            connection.sendall(ping)
            received = 0
            while received < PONG_BYTES:
                chunk = connection.recv(PONG_BYTES - received)
                if not chunk:
                    raise RuntimeError("the ping-pong server closed the connection")
                received += len(chunk)
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


# (bootstrap servers, topic, acks, count) -> (p50 ms, p99 ms): ``replication.latency_ms``.
LatencyLoop = Callable[[str, str, str, int], tuple[float, float]]


def measure_floors(count: int, latency_ms: LatencyLoop) -> dict[str, float]:
    """The null broker's p50/p99 through ``latency_ms`` (the loop pykraft is timed with) and
    the ping-pong p50."""
    with null_broker() as (bootstrap_servers, ping_port):
        p50, p99 = latency_ms(bootstrap_servers, "null", "all", count)
        ping = ping_pong_p50_ms(ping_port, count)
    return {
        "null_broker_p50_ms": round(p50, 3),
        "null_broker_p99_ms": round(p99, 3),
        "loopback_ping_pong_p50_ms": round(ping, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help="be the null broker (internal)")
    parser.add_argument("--count", type=int, default=2000, help="records one at a time")
    args = parser.parse_args(argv)
    # Here, not at the top: bench/replication.py imports this module (measure_floors).
    from bench.replication import PARTITIONS, latency_ms

    if args.serve:
        with asyncio.Runner(loop_factory=loop_factory(os.environ)) as runner:
            runner.run(serve(PARTITIONS))
        return 0
    print_figures(measure_floors(args.count, latency_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
