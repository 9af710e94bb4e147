"""A transparent TCP relay that adds latency, run inside one node's network namespace.

This kernel has no ``netem``, so the latency fault (``FaultKind.LATENCY``) is made in user
space. In every node namespace an nftables ``nat`` chain on the ``output`` hook redirects each
new TCP connection the node opens to another node to this relay (``redirect to :PORT``); the
relay reads the connection's original destination (``getsockopt(SOL_IP, SO_ORIGINAL_DST)``),
opens its own connection there — its sockets carry ``SO_MARK`` = 1, which the chain lets through
(``meta mark 1 return``) — and copies bytes both ways, each chunk held until ``delay`` after it
was read (``DelayLine``): bytes keep their order, and a stream is delayed chunk by chunk, not as
a whole. The relay of the node that opened a connection delays both of its directions, so with
a relay on every node every link between two nodes gets ``delay`` each way (a round trip
``2 x delay``), as netem on every node does in Jepsen's ``slow`` nemesis; the test process,
outside every namespace, opens connections no relay sees.

The partitions of ``netns.py`` still cut relayed connections as they would direct ones: the
relay's answers to a local client come back through the redirect with the peer's address as
their source, so a node that drops that peer drops them too (a connection to a cut-off peer is
not even accepted), and the peer drops what the relay sends it.

The relays run for the whole life of a namespaced cluster with no delay: a redirect only
catches connections opened after it, and brokers keep theirs for the run, so installing one at
the fault would slow nothing. The fault sets the delay and the heal sets it back to zero,
through the relay's stdin: ``delay <ms>`` answers ``ok``, ``stats`` answers one JSON line
(connections, bytes each way, bytes delayed, failed connects) on stdout.

``DelayLine`` is the pure core (time passed in); the rest is the asyncio shell, standard library
only, started as ``python relay.py PORT`` by ``tests/chaos/netns.py``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import struct
import sys
import time

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
RELAY_MARK = 1  # the nft chain returns (does not redirect) packets carrying it
CHUNK_BYTES_MAX = 65_536
# Bounds (STYLE.md §7): bytes held per direction before the relay stops reading that side,
# and how long a connect to the original destination may take.
QUEUED_BYTES_MAX = 4 * 1024 * 1024
CONNECT_TIMEOUT_S = 10.0


class DelayLine:
    """Chunks of one direction of a stream, each released ``delay_s`` after it was pushed.

    A chunk is never released before one pushed earlier (the delay may drop between the two):
    ``due`` never goes backwards, so the bytes keep their order."""

    def __init__(self) -> None:
        self._chunks: collections.deque[tuple[float, bytes]] = collections.deque()
        self._last_due = float("-inf")
        self.queued_bytes = 0  # Invariant: the sum of the held chunks' lengths.

    def push(self, now_s: float, delay_s: float, data: bytes) -> float:
        """Hold ``data``, read at ``now_s``; returns when it is due."""
        assert data and delay_s >= 0
        due = max(now_s + delay_s, self._last_due)
        self._last_due = due
        self._chunks.append((due, data))
        self.queued_bytes += len(data)
        return due

    def next_due(self) -> float | None:
        return self._chunks[0][0] if self._chunks else None

    def pop_due(self, now_s: float) -> bytes:
        """Every chunk due by ``now_s``, joined, in push order (b"" when none is)."""
        out = []
        while self._chunks and self._chunks[0][0] <= now_s:
            out.append(self._chunks.popleft()[1])
        data = b"".join(out)
        self.queued_bytes -= len(data)
        return data

    def __len__(self) -> int:
        return len(self._chunks)


def original_destination(sock: socket.socket) -> tuple[str, int]:
    """Where a redirected connection was going (``struct sockaddr_in``)."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, address = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(address), port


class Relay:
    def __init__(self) -> None:
        self.delay_s = 0.0
        self.stats: collections.Counter[str] = collections.Counter()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self.relay(reader, writer)
        except asyncio.CancelledError:
            # The relay is exiting. (Python 3.11's start_server callback calls exception() on
            # a cancelled handler task, which raises: end normally instead.)
            writer.close()

    async def relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        client = writer.get_extra_info("socket")
        try:
            destination = original_destination(client)
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            upstream.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, RELAY_MARK)
            upstream.setblocking(False)
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await loop.sock_connect(upstream, destination)
            up_reader, up_writer = await asyncio.open_connection(sock=upstream)
        except (OSError, TimeoutError):
            self.stats["connect failures"] += 1
            # Reset, not a clean close: the client sees a refused connection, as it would have.
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()
            return
        pumps = [
            asyncio.create_task(self.pump(reader, up_writer, "bytes out")),
            asyncio.create_task(self.pump(up_reader, writer, "bytes back")),
        ]
        try:
            # A side that fails (reset, broken pipe) ends both: the other gets the reset too.
            await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for side in (writer, up_writer):
                side.close()
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)

    async def pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, counter: str
    ) -> None:
        """Copy ``reader`` to ``writer``, each chunk ``delay_s`` late; then pass the EOF on."""
        line = DelayLine()
        readable = asyncio.Event()
        readable.set()
        arrived = asyncio.Event()
        ended = False

        async def read() -> None:
            nonlocal ended
            try:
                while data := await reader.read(CHUNK_BYTES_MAX):
                    line.push(time.monotonic(), self.delay_s, data)
                    self.stats[counter] += len(data)
                    if self.delay_s > 0:
                        self.stats["bytes delayed"] += len(data)
                    arrived.set()
                    if line.queued_bytes > QUEUED_BYTES_MAX:
                        readable.clear()
                        await readable.wait()
            except OSError:
                pass  # reset: what was read still goes out, then the EOF
            finally:
                ended = True
                arrived.set()

        reading = asyncio.create_task(read())
        try:
            while len(line) or not ended:
                due = line.next_due()
                if due is None:
                    arrived.clear()
                    await arrived.wait()
                    continue
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(line.pop_due(time.monotonic()))
                await writer.drain()
                if line.queued_bytes <= QUEUED_BYTES_MAX:
                    readable.set()
            if writer.can_write_eof():
                writer.write_eof()
        finally:
            reading.cancel()


async def serve_commands(relay: Relay) -> None:
    """``delay <ms>`` and ``stats`` lines on stdin until it closes."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().split():
        if line[0] == "delay" and len(line) == 2:
            relay.delay_s = int(line[1]) / 1000
            answer = "ok"
        elif line == ["stats"]:
            answer = json.dumps(dict(relay.stats), sort_keys=True)
        else:
            answer = f"error: unknown command {' '.join(line)!r}"
        print(answer, flush=True)


async def main(port: int) -> None:
    relay = Relay()
    server = await asyncio.start_server(relay.handle, "0.0.0.0", port)
    print("ready", flush=True)
    async with server:
        await serve_commands(relay)  # stdin closed: the harness is done with us


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
