"""pykraft next to NATS JetStream, in one sitting on this machine.

    bash .ci/install-nats.sh                 # nats-server, Go, nats.go; builds bench/nats
    .venv/bin/python -m bench.peers          # 100 MB per throughput run, best of 3
    .venv/bin/python -m bench.peers --quick  # 16 MB, 1 repeat, 300 latency samples: a smoke run

The peer is NATS JetStream (Debian's ``nats-server`` 2.9, Go client ``nats.go`` 1.22 from
``bench/nats``): a replicated, file-backed log that acknowledges a publish once the stream's
Raft group has it, as an acks=all produce is acknowledged once the ISR has it. Started here on
127.0.0.1 and always stopped: a 3-server JetStream cluster beside a pykraft cluster of one
controller and 3 brokers (``bench.replication.Cluster``).

Measured, the two systems taking turns in every round so a busy moment of the shared machine
does not land on one of them only (best of ``--repeats``):

* throughput of 1 KiB messages: JetStream R3 next to pykraft acks=all RF=3
  (``min.insync.replicas=2``), JetStream R1 next to pykraft RF=1. pykraft's producer is
  confluent-kafka over 3 partitions (one led by each broker); JetStream's side is one natsbench
  process per stream, ``--streams`` streams (3: leaders spread over the servers as pykraft's are),
  each publishing asynchronously with at most 4096 unacknowledged; the figure is all bytes over
  the slowest stream's publishing time;
* the server CPU-seconds per 100 MB of those runs (user + system time of every server process:
  the controller and brokers; the 3 nats-servers);
* latency of one message at a time (send, wait for the acknowledgement), p50 and p99.

Neither side fsyncs each write by default (Kafka leaves it to the OS; JetStream syncs every 2
minutes): both rest on replication. Prints a table, then one JSON line; the ratios are
pykraft's figure over JetStream's (above 1: pykraft is faster; for latency and CPU below 1 is
better). Never run by the tests.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import cpu_seconds, print_figures
from bench.replication import (
    CONFIGURATIONS,
    MB,
    RECORD_BYTES,
    Cluster,
    latency_ms,
    throughput_mb_s,
)
from pykraft.free_ports import pick_free_ports

NATSBENCH = Path(__file__).resolve().parent / "nats" / "bin" / "natsbench"
NATS_SERVERS = 3
READY_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 600.0
# pykraft configuration name -> the JetStream replicas it is set beside.
PEER_REPLICAS = {"acks_all_rf3": 3, "rf1": 1}


class NatsCluster:
    """Three nats-servers with JetStream, routes between them, each with its own store."""

    def __init__(self, root: Path) -> None:
        self.root = root
        ports = pick_free_ports(2 * NATS_SERVERS)
        self.client_ports = ports[:NATS_SERVERS]
        self.route_ports = ports[NATS_SERVERS:]
        self.url = ",".join(f"nats://127.0.0.1:{port}" for port in self.client_ports)
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Self:
        routes = ",".join(f"nats://127.0.0.1:{port}" for port in self.route_ports)
        try:
            for index in range(NATS_SERVERS):
                store = self.root / f"nats-{index}"
                store.mkdir(parents=True)
                log = (self.root / f"nats-{index}.log").open("wb")
                command = [
                    "nats-server",
                    "--jetstream",
                    f"--store_dir={store}",
                    "--addr=127.0.0.1",
                    f"--port={self.client_ports[index]}",
                    f"--server_name=n{index}",
                    "--cluster_name=bench",
                    f"--cluster=nats://127.0.0.1:{self.route_ports[index]}",
                    f"--routes={routes}",
                ]
                self.processes.append(
                    subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
                )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Until a replicated stream can be created (the JetStream meta leader is elected)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            probe = natsbench(self.url, "ready", 3, "throughput", 1)
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"JetStream not ready in {READY_TIMEOUT_S}s: {probe.stderr}")
            time.sleep(0.5)

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(15)

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def natsbench(
    url: str, stream: str, replicas: int, mode: str, count: int
) -> subprocess.CompletedProcess[str]:
    command = [str(NATSBENCH), f"-url={url}", f"-stream={stream}", f"-replicas={replicas}"]
    command += [f"-size={RECORD_BYTES}", f"-count={count}", f"-mode={mode}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def nats_throughput_mb_s(nats: NatsCluster, replicas: int, records: int, streams: int) -> float:
    """All streams publishing at once; bytes over the slowest stream's publishing time."""
    per_stream = records // streams
    command = [str(NATSBENCH), f"-url={nats.url}", f"-replicas={replicas}", f"-count={per_stream}"]
    command += [f"-size={RECORD_BYTES}", "-mode=throughput"]
    running = [
        subprocess.Popen([*command, f"-stream=r{replicas}s{index}"], stdout=subprocess.PIPE)
        for index in range(streams)
    ]
    seconds: list[float] = []
    for process in running:
        out, _ = process.communicate(timeout=RUN_TIMEOUT_S)
        if process.returncode != 0:
            raise RuntimeError(f"natsbench failed (exit {process.returncode})")
        seconds.append(float(json.loads(out)["seconds"]))
    return per_stream * streams * RECORD_BYTES / MB / max(seconds)


def nats_latency_ms(nats: NatsCluster, replicas: int, count: int) -> tuple[float, float]:
    done = natsbench(nats.url, f"latency-r{replicas}", replicas, "latency", count)
    if done.returncode != 0:
        raise RuntimeError(f"natsbench latency failed: {done.stderr.strip()}")
    figures = json.loads(done.stdout)
    return float(figures["p50_ms"]), float(figures["p99_ms"])


def timed(pids: list[int], run: Callable[[], float]) -> tuple[float, float]:
    """``run()``'s figure and the CPU-seconds the server processes ``pids`` spent meanwhile."""
    before = cpu_seconds(pids)
    figure = run()
    return figure, cpu_seconds(pids) - before


def measure(
    nats: NatsCluster, cluster: Cluster, megabytes: int, samples: int, repeats: int, streams: int
) -> dict[str, Any]:
    records = megabytes * MB // RECORD_BYTES
    every_broker = [[10, 11, 12], [11, 12, 10], [12, 10, 11]]
    cluster.create_topic("rf3", every_broker, **{"min.insync.replicas": "2"})
    cluster.create_topic("rf1", [[10], [11], [12]])
    server_pids = [process.pid for process in cluster.dev.processes.values()]
    best: dict[str, tuple[float, float]] = {}

    def keep(name: str, figure: float, cpu: float) -> None:
        if figure > best.get(name, (0.0, 0.0))[0]:
            best[name] = (figure, cpu)

    for _ in range(repeats):
        for name, topic, acks in CONFIGURATIONS:
            if name not in PEER_REPLICAS:
                continue
            replicas = PEER_REPLICAS[name]
            peer = functools.partial(nats_throughput_mb_s, nats, replicas, records, streams)
            keep(f"nats_r{replicas}", *timed(nats.pids(), peer))
            ours = functools.partial(throughput_mb_s, cluster, topic, acks, records)
            keep(name, *timed(server_pids, ours))
    figures: dict[str, Any] = {"record_bytes": RECORD_BYTES, "records": records}
    figures |= {"repeats": repeats, "nats_streams": streams}
    bytes_per_run = records * RECORD_BYTES
    for name, (rate, cpu) in best.items():
        figures[f"{name}_mb_s"] = round(rate, 1)
        figures[f"{name}_cpu_s_per_100mb"] = round(cpu * 100 * MB / bytes_per_run, 2)
    for name, topic, acks in CONFIGURATIONS:
        if name not in PEER_REPLICAS:
            continue
        replicas = PEER_REPLICAS[name]
        p50, p99 = nats_latency_ms(nats, replicas, samples)
        figures[f"nats_r{replicas}_p50_ms"], figures[f"nats_r{replicas}_p99_ms"] = p50, p99
        p50, p99 = latency_ms(cluster.bootstrap_servers, topic, acks, samples)
        figures[f"{name}_p50_ms"], figures[f"{name}_p99_ms"] = round(p50, 3), round(p99, 3)
        peer_name = f"nats_r{replicas}"
        for figure in ("mb_s", "cpu_s_per_100mb", "p50_ms", "p99_ms"):
            ours, theirs = figures[f"{name}_{figure}"], figures[f"{peer_name}_{figure}"]
            figures[f"{name}_over_{peer_name}_{figure}"] = (
                round(ours / theirs, 2) if theirs else None
            )
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=100, help="MB per throughput run")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the best run counts")
    parser.add_argument("--samples", type=int, default=2000, help="latency samples")
    parser.add_argument("--streams", type=int, default=3, help="JetStream streams in parallel")
    parser.add_argument("--quick", action="store_true", help="16 MB, 1 round, 300 samples")
    args = parser.parse_args(argv)
    if not NATSBENCH.exists() or shutil.which("nats-server") is None:
        print("bench.peers: run `bash .ci/install-nats.sh` first", file=sys.stderr)
        return 2
    megabytes, repeats, samples = (
        (16, 1, 300) if args.quick else (args.megabytes, args.repeats, args.samples)
    )
    root = Path(tempfile.mkdtemp(prefix="pykraft-bench-peers-"))
    try:
        with NatsCluster(root / "nats") as nats, Cluster(root) as cluster:
            figures = measure(nats, cluster, megabytes, samples, repeats, args.streams)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
