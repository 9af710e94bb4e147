"""One real pykraft cluster for the whole client test session: ``pykraft dev`` with three
controllers and three brokers on free 127.0.0.1 ports, started once, always stopped.

The cluster is a subprocess (``python -m pykraft.cli dev``) in its own session, so stopping it
reaches every controller and broker it started: SIGTERM first (controlled shutdown), SIGKILL to
its process group if it does not exit in time — also when start-up itself failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.support import NONE, metadata

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
PORT_SPAN = 40  # ports from --base-port that `pykraft dev` may use for 3 + 3 nodes
CONTROLLERS = 3
BROKERS = 3


def free_base_port(span: int = PORT_SPAN, attempts: int = 50) -> int:
    """A port P such that P .. P+span-1 were all free a moment ago (kernel's range start)."""
    for _ in range(attempts):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base: int = probe.getsockname()[1]
        if base + span >= 65535:
            continue
        if all(_port_is_free(port) for port in range(base, base + span)):
            return base
    raise AssertionError(f"no run of {span} free ports found in {attempts} attempts")


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class DevCluster:
    """A ``pykraft dev`` cluster: its Kafka listeners, data directory and log."""

    def __init__(self, data_dir: Path, controllers: int = CONTROLLERS,
                 brokers: int = BROKERS) -> None:
        self.data_dir = data_dir
        self.controllers = controllers
        self.broker_count = brokers
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.brokers: dict[int, tuple[str, int]] = {}  # node id -> Kafka listener

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.brokers.values())

    @property
    def broker_ports(self) -> list[int]:
        return [port for _, port in self.brokers.values()]

    def start(self) -> None:
        command = [
            sys.executable, "-m", "pykraft.cli", "dev",
            "--controllers", str(self.controllers), "--brokers", str(self.broker_count),
            "--data-dir", str(self.data_dir), "--base-port", str(free_base_port()),
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(os.environ, PYTHONPATH=str(ROOT)), start_new_session=True)

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """cluster.json written, and every broker's Metadata lists every broker."""
        deadline = time.monotonic() + timeout_s
        cluster_json = self.data_dir / "cluster.json"
        while not cluster_json.exists():
            self._check_alive_before(deadline, f"{cluster_json} never appeared")
            time.sleep(0.1)
        self.brokers = read_brokers(cluster_json)
        assert len(self.brokers) == self.broker_count, f"{cluster_json}: {self.brokers}"
        last: Any = None
        pending = set(self.brokers)
        while pending:
            self._check_alive_before(deadline, f"brokers {sorted(pending)} not ready: {last}")
            for node_id in sorted(pending):
                try:
                    answer = metadata(self.brokers[node_id][1], [])
                except (OSError, ValueError, AssertionError) as error:
                    last = error
                    continue
                last = answer
                if {b.node_id for b in answer.brokers} == set(self.brokers):
                    pending.discard(node_id)
            time.sleep(0.1)

    def _check_alive_before(self, deadline: float, what: str) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"pykraft dev exited with {self.process.returncode}: {what}\n"
                                 f"{self.log_tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} after {STARTUP_TIMEOUT_S}s\n{self.log_tail()}")

    def wait_for_topic(self, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
        """Every broker knows ``topic`` with ``partitions`` partitions, each with a leader."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        for port in self.broker_ports:
            while True:
                last = metadata(port, [topic])
                [answer] = last.topics
                if answer.error_code == NONE and len(answer.partitions) == partitions and all(
                        p.error_code == NONE and p.leader_id >= 0 for p in answer.partitions):
                    break
                assert time.monotonic() < deadline, f"{topic} not ready on :{port}: {last}"
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, wait; then SIGKILL the whole process group. Never raises on a dead cluster."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_TIMEOUT_S)
        # The children of `pykraft dev` share its process group (start_new_session above).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def read_brokers(cluster_json: Path) -> dict[int, tuple[str, int]]:
    """Node id -> (host, port) of each broker's Kafka listener, from ``pykraft dev``'s file."""
    document = json.loads(cluster_json.read_text())
    return {int(b["node_id"]): (b["host"], int(b["port"])) for b in document["brokers"]}


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    dev = DevCluster(tmp_path_factory.mktemp("clients") / "cluster")
    try:
        dev.start()
        dev.wait_ready()
        yield dev
    finally:
        dev.stop()
