"""``pykraft dev``: a local cluster of real controller and broker processes on 127.0.0.1.

    pykraft dev                                   # 3 controllers, 3 brokers, ports from 9092
    pykraft dev --controllers 1 --brokers 1       # the smallest cluster
    pykraft dev --data-dir /tmp/kraft --base-port 0 --exit-after-ready   # free ports; smoke test
    pykraft dev --secure                          # TLS + SASL/SCRAM + ACLs (pykraft/dev_secure.py)

Ports from ``--base-port`` B (0 picks free ports): broker Kafka listeners B..B+9, controller
HTTP (the admin API) B+10.., controller Raft B+20.., broker HTTP B+30.., and with ``--secure``
the brokers' inter-broker SSL listeners B+40... Node ids: controllers 1..C, brokers 10..10+N-1
(KRaft node ids are unique across roles).

The data directory holds one ``.properties`` file per process (``config/``), their data
(``controller-1/``, ``broker-10/``), their logs (``logs/``), the cluster's quorum password
(``quorum.password``, generated once, mode 0600) and cluster id, and ``cluster.json``
(``pykraft/dev_cluster_file.py``): every process id from the start, and the bootstrap servers and
admin URL as top-level keys only once the cluster is ready (``pykraft/dev_ready.py``: a leader,
every broker registered, unfenced and RUNNING, enough of them for the internal topics) — under
``"not_ready"`` before that and after exit. While starting it prints a line each time a process
moves on. ``pykraft dev-wait DIR`` (``pykraft/dev_wait.py``) blocks a script until then. Running
it again on the same directory restarts the same cluster with its data.

``--controller-property KEY=VALUE`` / ``--broker-property KEY=VALUE`` (repeatable) add a property
to every controller's / broker's file, e.g. ``metadata.log.max.records.between.snapshots=50`` for
frequent snapshots; the properties that wire the layout together (ids, listeners, quorum
addresses, data directories) are refused.

Ctrl-C or SIGTERM stops the brokers first (each runs a controlled shutdown), then the
controllers. Child processes run in their own session so a terminal's Ctrl-C reaches only
``pykraft dev``, which stops them in that order.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pykraft import dev_secure
from pykraft.broker.controller_api import ControllerError
from pykraft.broker_cmd import new_cluster_id
from pykraft.certs import write_private
from pykraft.dev_cluster_file import (
    RUNNING,
    place_addresses,
    read_cluster_json,
    runs_config,
    stop_dev_process,
    write_cluster_json,
)
from pykraft.dev_layout import (
    ClusterLayout,
    DevClusterError,
    Node,
    check_overrides,
    internal_topic_properties,
    node_properties,
    parse_property,
    plan_layout,
    secured,
)
from pykraft.dev_probe import look
from pykraft.dev_ready import Readiness, progress_lines
from pykraft.dev_secure import ensure_secret_file
from pykraft.free_ports import pick_free_ports

# Re-exported where callers have always imported them from (dev_layout, dev_cluster_file).
__all__ = [
    "ClusterLayout", "DevClusterError", "Node", "check_overrides", "internal_topic_properties",
    "parse_property", "plan_layout", "read_cluster_json", "runs_config", "secured",
    "stop_dev_process",
]  # fmt: skip

ROOT = Path(__file__).resolve().parents[1]
BROKER_STOP_TIMEOUT_S = 45.0  # above the broker's 30 s controlled-shutdown bound
CONTROLLER_STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.2


class DevCluster:
    """Starts, watches and stops the processes of one layout."""

    def __init__(
        self,
        layout: ClusterLayout,
        data_dir: Path,
        overrides: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.layout = layout
        self.data_dir = data_dir
        self.overrides = overrides or {}  # role -> extra properties (check_overrides)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.cluster_id = ""
        self.material: dev_secure.SecureMaterial | None = None
        # --secure: the client properties files (dev_secure.write_client_files).
        self.client_files: dict[str, Path] = {}

    def prepare(self, now: datetime.datetime | None = None) -> None:
        for sub in ("config", "logs"):
            (self.data_dir / sub).mkdir(parents=True, exist_ok=True)
        ensure_secret_file(self.data_dir / "quorum.password", lambda: secrets.token_urlsafe(32))
        self.cluster_id = ensure_secret_file(self.data_dir / "cluster.id", new_cluster_id)
        if self.layout.secure:
            self._prepare_secure(now or datetime.datetime.now(datetime.UTC))
        for node in (*self.layout.controllers, *self.layout.brokers):
            props = {
                **node_properties(node, self.layout, self.data_dir, self.cluster_id, self.material),
                **self.overrides.get(node.role, {}),
            }
            # 0600: a file may name secrets (ssl.key.password, a JAAS config) through overrides.
            write_private(self.config_path(node), "".join(f"{k}={v}\n" for k, v in props.items()))

    def _prepare_secure(self, now: datetime.datetime) -> None:
        password = ensure_secret_file(self.data_dir / "admin.password", dev_secure.new_password)
        names = (*(c.name for c in self.layout.controllers), *(b.name for b in self.layout.brokers))
        self.material, self.client_files = dev_secure.prepare(
            self.data_dir, names, password, self.layout.bootstrap_servers, now
        )

    def config_path(self, node: Node) -> Path:
        return self.data_dir / "config" / f"{node.name}.properties"

    def log_path(self, node: Node) -> Path:
        return self.data_dir / "logs" / f"{node.name}.log"

    def start(self, node: Node) -> None:
        module = "pykraft.controller_cmd" if node.role == "controller" else "pykraft.broker_cmd"
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        )
        with open(self.log_path(node), "ab") as log:
            self.processes[node.name] = subprocess.Popen(
                [sys.executable, "-m", module, "--config", str(self.config_path(node))],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def exited(self) -> list[str]:
        return [name for name, p in self.processes.items() if p.poll() is not None]

    def wait_until_ready(self, timeout_s: float, stop: threading.Event) -> None:
        """Until the cluster is ready (``dev_ready.readiness``), printing each process's moves;
        raises when a process exits, ``stop`` is set or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        # start() announced each process; print only what moves from here.
        shown = {node.name: "starting" for node in (*self.layout.controllers, *self.layout.brokers)}
        while True:
            if stop.is_set():
                raise DevClusterError("interrupted during start-up")
            dead = self.exited()
            if dead:
                raise DevClusterError(
                    f"{', '.join(dead)} exited during start-up\n" + self.log_tails(dead)
                )
            state = self.readiness()
            for line in progress_lines(shown, state.progress):
                print(line, flush=True)
            shown = dict(state.progress)
            if state.ready:
                return
            if time.monotonic() > deadline:
                names = [name for name, phrase in state.progress.items() if phrase != "ready"]
                raise DevClusterError(
                    f"not ready after {timeout_s:.0f}s: waiting for "
                    + "; ".join(state.waiting_for)
                    + "\n"
                    + self.log_tails(names)
                )
            stop.wait(POLL_INTERVAL_S)

    def readiness(self) -> Readiness:
        """One look at every process (``dev_probe.look``)."""
        broker = node_properties(self.layout.brokers[0], self.layout, self.data_dir, "-")
        context = None if self.material is None else dev_secure.admin_ssl_context(self.material)
        return look(self.layout, broker | self.overrides.get("broker", {}), context)

    def log_tails(self, names: list[str], lines: int = 15) -> str:
        tails = []
        for node in (*self.layout.controllers, *self.layout.brokers):
            if node.name in names:
                text = self.log_path(node).read_text(errors="replace").splitlines()[-lines:]
                tails.append(f"--- {self.log_path(node)}\n" + "\n".join(text))
        return "\n".join(tails)

    def stop(self) -> None:
        """Brokers first (controlled shutdown needs the controllers), then controllers."""
        for role, timeout_s in (
            ("broker", BROKER_STOP_TIMEOUT_S),
            ("controller", CONTROLLER_STOP_TIMEOUT_S),
        ):
            group = [p for name, p in self.processes.items() if name.startswith(role)]
            for process in group:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            for process in group:
                try:
                    process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)

    def describe(self, state: str) -> dict[str, Any]:
        def entry(node: Node) -> dict[str, Any]:
            process = self.processes.get(node.name)
            return {
                "node_id": node.node_id,
                "pid": process.pid if process else None,
                "http_url": node.http_url,
                "config": str(self.config_path(node)),
                "log": str(self.log_path(node)),
                **(
                    {"raft_port": node.port}
                    if node.role == "controller"
                    else {"bootstrap_server": f"127.0.0.1:{node.port}"}
                ),
            }

        body = {
            "cluster_id": self.cluster_id,
            **(
                {"security": dev_secure.describe(self.material, self.data_dir, self.client_files)}
                if self.material
                else {}
            ),
            "dev_pid": os.getpid(),
            "data_dir": str(self.data_dir),
            "controllers": [entry(c) for c in self.layout.controllers],
            "brokers": [entry(b) for b in self.layout.brokers],
        }
        addresses = {
            "bootstrap_servers": self.layout.bootstrap_servers,
            "admin_url": self.layout.admin_url,
            "admin_urls": [c.http_url for c in self.layout.controllers],
        }
        return place_addresses(body, addresses, state)

    def write_cluster_json(self, state: str) -> Path:
        return write_cluster_json(self.data_dir, self.describe(state))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=Path("data/dev"))
    parser.add_argument(
        "--base-port",
        type=int,
        default=9092,
        help="first port of the layout (0: free ports picked by the kernel)",
    )
    parser.add_argument("--startup-timeout", type=float, default=90.0, metavar="SECONDS")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="TLS, SASL/SCRAM and ACLs on, with a throwaway CA and an admin user "
        "(PLAINTEXT is the default, as in Kafka)",
    )
    parser.add_argument(
        "--exit-after-ready",
        action="store_true",
        help="stop everything as soon as the cluster is ready (smoke checks)",
    )
    for role in ("controller", "broker"):
        parser.add_argument(
            f"--{role}-property",
            type=parse_property,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"add a property to every {role}'s file (repeatable)",
        )


def run(args: argparse.Namespace) -> int:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        count = 2 * (args.controllers + args.brokers)
        free = pick_free_ports(count) if args.base_port == 0 else None
        layout = plan_layout(args.controllers, args.brokers, args.base_port, free)
        if args.secure:
            inter_broker = (
                pick_free_ports(args.brokers)
                if args.base_port == 0
                else [args.base_port + 40 + i for i in range(args.brokers)]
            )
            layout = secured(layout, inter_broker)
        overrides = {
            role: check_overrides(layout, role, getattr(args, f"{role}_property"))
            for role in ("controller", "broker")
        }
    except DevClusterError as error:
        print(f"pykraft dev: {error}", file=sys.stderr)
        return 2
    cluster = DevCluster(layout, args.data_dir.resolve(), overrides)
    try:
        return _run_cluster(cluster, args, stop)
    finally:
        cluster.stop()
        if cluster.processes:
            cluster.write_cluster_json("stopped")
        print("pykraft dev: stopped", flush=True)


def _run_cluster(cluster: DevCluster, args: argparse.Namespace, stop: threading.Event) -> int:
    try:
        cluster.prepare()
    except OSError as error:
        print(f"pykraft dev: cannot prepare {cluster.data_dir}: {error}", file=sys.stderr)
        return 2
    for node in (*cluster.layout.controllers, *cluster.layout.brokers):
        cluster.start(node)
        print(
            f"pykraft dev: {node.name} starting (pid {cluster.processes[node.name].pid}, "
            f"log {cluster.log_path(node)})",
            flush=True,
        )
    cluster.write_cluster_json("starting")
    try:
        cluster.wait_until_ready(args.startup_timeout, stop)
        if cluster.material is not None:
            urls = [c.http_url for c in cluster.layout.controllers]
            asyncio.run(
                dev_secure.write_admin_credentials(cluster.material, urls, args.startup_timeout)
            )
    except (ControllerError, dev_secure.DevSecureError) as error:
        print(f"pykraft dev: writing the admin's SCRAM credentials: {error}", file=sys.stderr)
        return 1
    except DevClusterError as error:
        print(f"pykraft dev: {error}", file=sys.stderr)
        return 1
    path = cluster.write_cluster_json(RUNNING)
    layout = cluster.layout
    print(
        f"pykraft dev: {len(layout.controllers)} controller(s) and {len(layout.brokers)} "
        f"broker(s) are running\nbootstrap servers: {layout.bootstrap_servers}\n"
        f"admin URL: {layout.admin_url}\ncluster file: {path}",
        flush=True,
    )
    if cluster.material is not None:
        print(dev_secure.startup_text(cluster.data_dir, cluster.client_files), flush=True)
    if args.exit_after_ready:
        return 0
    print("Press Ctrl-C to stop.", flush=True)
    reported: set[str] = set()
    while not stop.wait(1.0):
        for name in set(cluster.exited()) - reported:
            print(
                f"pykraft dev: {name} exited; see {cluster.data_dir / 'logs' / name}.log",
                file=sys.stderr,
                flush=True,
            )
            reported.add(name)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m pykraft.dev ...`` (what ``pykraft dev`` runs)."""
    parser = argparse.ArgumentParser(
        prog="pykraft dev",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
