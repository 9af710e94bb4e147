"""One real pykraft cluster for the client tests: ``pykraft dev`` with three controllers and
three brokers on free 127.0.0.1 ports, started once, always stopped — package-scoped, so it stops
as soon as the client tests are done instead of idling through the rest of ``make test``.

``pykraft dev`` (``python -m pykraft.dev``) runs the nodes and writes ``cluster.json`` (state,
bootstrap servers, admin URLs, node pids). Stopping sends it SIGTERM, so brokers shut down under
control before the controllers; if it does not exit in time it is killed, and so is every node
it listed that still runs — also when start-up itself failed.

The session cluster sets two broker properties as Kafka's own ``TransactionsTest.serverProps``
does: the coordinator looks for timed-out transactions every 500 ms (Kafka's default is 10 s), and
a new group's first rebalance starts at once (``group.initial.rebalance.delay.ms=0``), so the
transaction-timeout and consumer-group tests stay within seconds.

``PYKRAFT_CLIENTS_CLUSTER=DATA_DIR`` runs the tests against a ``pykraft dev`` cluster already
running on ``DATA_DIR`` (started with ``SESSION_ARGS``' properties) instead of starting one: handy
while writing a client test; the cluster is left running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.dev import read_cluster_json, stop_dev_process
from tests.clients.support import NONE, metadata

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 90.0  # pykraft dev: brokers' controlled shutdowns (45 s), then controllers
CONTROLLERS = 3
BROKERS = 3
SESSION_ARGS = (
    "--broker-property", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
    "--broker-property", "group.initial.rebalance.delay.ms=0",
    # KIP-848 consumers heartbeat every 500 ms, as in Kafka's consumer-protocol tests.
    "--broker-property", "group.consumer.heartbeat.interval.ms=500",
    "--broker-property", "group.consumer.min.heartbeat.interval.ms=500",
)  # fmt: skip
ATTACH_ENVIRONMENT = "PYKRAFT_CLIENTS_CLUSTER"


class DevCluster:
    """A ``pykraft dev`` cluster: its Kafka listeners, admin URLs, data directory and logs."""

    def __init__(
        self,
        data_dir: Path,
        controllers: int = CONTROLLERS,
        brokers: int = BROKERS,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args  # e.g. ("--secure",)
        self.controllers = controllers
        self.broker_count = brokers
        self.output_path = data_dir.parent / f"{data_dir.name}.out"
        self.process: subprocess.Popen[bytes] | None = None
        self.brokers: dict[int, tuple[str, int]] = {}  # node id -> Kafka listener
        self.admin_urls: list[str] = []

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.brokers.values())

    @property
    def broker_ports(self) -> list[int]:
        return [port for _, port in self.brokers.values()]

    def start(self) -> None:
        command = [
            sys.executable, "-m", "pykraft.dev",
            "--controllers", str(self.controllers), "--brokers", str(self.broker_count),
            "--data-dir", str(self.data_dir), "--base-port", "0",  # 0: free ports
            "--startup-timeout", str(STARTUP_TIMEOUT_S), *self.extra_args,
        ]  # fmt: skip
        with open(self.output_path, "ab") as output:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
            )

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S + 10) -> None:
        """cluster.json says running, and every broker's Metadata lists every broker."""
        deadline = time.monotonic() + timeout_s
        while (info := self.info()).get("state") != "running":
            self._check_alive_before(deadline, f"cluster.json state {info.get('state')!r}")
            time.sleep(0.1)
        self.brokers = {}
        for broker in info["brokers"]:
            host, port = broker["bootstrap_server"].rsplit(":", 1)
            self.brokers[int(broker["node_id"])] = (host, int(port))
        self.admin_urls = list(info["admin_urls"])
        assert len(self.brokers) == self.broker_count, info
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

    def info(self) -> dict[str, Any]:
        """``cluster.json`` as ``pykraft dev`` last wrote it ({} before it exists)."""
        return read_cluster_json(self.data_dir)

    def _check_alive_before(self, deadline: float, what: str) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"pykraft dev exited with {self.process.returncode}: {what}\n{self.log_tail()}"
            )
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
                if (
                    answer.error_code == NONE
                    and len(answer.partitions) == partitions
                    and all(p.error_code == NONE and p.leader_id >= 0 for p in answer.partitions)
                ):
                    break
                assert time.monotonic() < deadline, f"{topic} not ready on :{port}: {last}"
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM to ``pykraft dev`` (it stops brokers, then controllers); after a timeout,
        SIGKILL to it and to every process it listed in cluster.json that still runs."""
        if self.process is not None:
            stop_dev_process(self.process, self.data_dir, STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 30) -> str:
        tails = []
        for path in [self.output_path, *sorted((self.data_dir / "logs").glob("*.log"))]:
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            tails.append(f"--- {path}\n" + "\n".join(text))
        return "\n".join(tails)


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    running = os.environ.get(ATTACH_ENVIRONMENT)
    if running:
        attached = DevCluster(Path(running))
        attached.wait_ready()
        yield attached
        return
    dev = DevCluster(tmp_path_factory.mktemp("clients") / "cluster", extra_args=SESSION_ARGS)
    try:
        dev.start()
        dev.wait_ready()
        yield dev
    finally:
        dev.stop()
