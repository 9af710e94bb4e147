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
(``quorum.password``, generated once, mode 0600) and cluster id, and ``cluster.json``: the
bootstrap servers, the admin URL and every process id, rewritten with ``"state": "stopped"`` at
exit. Running it again on the same directory restarts the same cluster with its data.

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
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import attrs

from pykraft import dev_secure
from pykraft.broker.controller_api import ControllerError
from pykraft.broker_cmd import new_cluster_id
from pykraft.certs import write_private
from pykraft.free_ports import pick_free_ports

ROOT = Path(__file__).resolve().parents[1]
MAX_NODES_PER_ROLE = 10
FIRST_BROKER_ID = 10
BROKER_STOP_TIMEOUT_S = 45.0  # above the broker's 30 s controlled-shutdown bound
CONTROLLER_STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.2


def internal_topic_properties(brokers: int) -> dict[str, str]:
    """The coordinators' internal topics sized to a cluster of ``brokers``: Kafka's defaults
    (replication factor 3, ``transaction.state.log.min.isr`` 2) lowered to what the cluster
    can hold, as Kafka's single-node ``config/kraft/server.properties`` sets them to 1. Kafka
    never auto-creates an internal topic with fewer alive brokers than its replication factor
    (``AutoTopicCreationManager.hasEnoughLiveBrokers``)."""
    return {
        "offsets.topic.replication.factor": str(min(3, brokers)),
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
    }


# node_properties() defaults a user may override; every other key it writes wires the layout.
OVERRIDABLE_PROPERTIES = frozenset(internal_topic_properties(1))


class DevClusterError(Exception):
    """The cluster could not be set up or did not become ready."""


@attrs.frozen(kw_only=True)
class Node:
    role: str  # "controller" or "broker"
    node_id: int
    port: int  # Kafka listener (broker) or Raft (controller)
    http_port: int  # broker HTTP API or controller admin API
    # --secure: a broker's inter-broker SSL listener (0: none); a controller's API on https.
    inter_broker_port: int = 0
    secure: bool = False

    @property
    def name(self) -> str:
        return f"{self.role}-{self.node_id}"

    @property
    def http_url(self) -> str:
        scheme = "https" if self.secure and self.role == "controller" else "http"
        return f"{scheme}://127.0.0.1:{self.http_port}"


@attrs.frozen(kw_only=True)
class ClusterLayout:
    controllers: tuple[Node, ...]
    brokers: tuple[Node, ...]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    @property
    def admin_url(self) -> str:
        return self.controllers[0].http_url

    @property
    def secure(self) -> bool:
        return self.controllers[0].secure


def secured(layout: ClusterLayout, inter_broker_ports: list[int]) -> ClusterLayout:
    """``layout`` with ``--secure``: controllers on https, one inter-broker port per broker."""
    assert len(inter_broker_ports) == len(layout.brokers)
    return ClusterLayout(
        controllers=tuple(attrs.evolve(c, secure=True) for c in layout.controllers),
        brokers=tuple(
            attrs.evolve(b, secure=True, inter_broker_port=port)
            for b, port in zip(layout.brokers, inter_broker_ports, strict=True)
        ),
    )


def plan_layout(
    controllers: int, brokers: int, base_port: int, free_ports: list[int] | None = None
) -> ClusterLayout:
    """Node ids and ports; ``free_ports`` (2 per node) replaces the ``base_port`` scheme."""
    if not 1 <= controllers <= MAX_NODES_PER_ROLE or not 1 <= brokers <= MAX_NODES_PER_ROLE:
        raise DevClusterError(
            f"--controllers and --brokers must be between 1 and {MAX_NODES_PER_ROLE}"
        )
    if free_ports is None:
        if not 1024 <= base_port <= 65535 - 50:
            raise DevClusterError("--base-port must be between 1024 and 65485 (or 0)")
        free_ports = [
            *(base_port + 20 + i for i in range(controllers)),
            *(base_port + 10 + i for i in range(controllers)),
            *(base_port + i for i in range(brokers)),
            *(base_port + 30 + i for i in range(brokers)),
        ]
    assert len(free_ports) == 2 * (controllers + brokers)
    raft, admin = free_ports[:controllers], free_ports[controllers : 2 * controllers]
    kafka, http = free_ports[2 * controllers :][:brokers], free_ports[2 * controllers + brokers :]
    return ClusterLayout(
        controllers=tuple(
            Node(role="controller", node_id=i + 1, port=raft[i], http_port=admin[i])
            for i in range(controllers)
        ),
        brokers=tuple(
            Node(role="broker", node_id=FIRST_BROKER_ID + i, port=kafka[i], http_port=http[i])
            for i in range(brokers)
        ),
    )


def node_properties(
    node: Node,
    layout: ClusterLayout,
    data_dir: Path,
    cluster_id: str,
    material: dev_secure.SecureMaterial | None = None,
) -> dict[str, str]:
    """A node's properties; with ``material`` (``--secure``) its TLS, SASL and ACL ones too."""
    plain = _plain_properties(node, layout, data_dir, cluster_id)
    if material is None:
        return plain
    broker_ids = tuple(b.node_id for b in layout.brokers)
    if node.role == "controller":
        return plain | dev_secure.controller_properties(material, node.node_id, broker_ids)
    return plain | dev_secure.broker_properties(
        material, node.node_id, node.port, node.inter_broker_port, broker_ids
    )


def _plain_properties(
    node: Node, layout: ClusterLayout, data_dir: Path, cluster_id: str
) -> dict[str, str]:
    http_voters = ",".join(f"{c.node_id}@127.0.0.1:{c.http_port}" for c in layout.controllers)
    if node.role == "controller":
        return {
            "node.id": str(node.node_id),
            "process.roles": "controller",
            "controller.quorum.voters": ",".join(
                f"{c.node_id}@127.0.0.1:{c.port}" for c in layout.controllers
            ),
            "controller.quorum.http.voters": http_voters,
            "listeners": f"CONTROLLER://127.0.0.1:{node.http_port}",
            "metadata.log.dir": str(data_dir / node.name),
            "controller.quorum.password.file": str(data_dir / "quorum.password"),
            # Salts the Raft transport's key (quorum/raft_transport.cluster_key).
            "cluster.id": cluster_id,
        }
    return {
        "node.id": str(node.node_id),
        "process.roles": "broker",
        "cluster.id": cluster_id,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "log.dirs": str(data_dir / node.name),
        "controller.quorum.bootstrap.servers": ",".join(
            f"127.0.0.1:{c.http_port}" for c in layout.controllers
        ),
        "http.listener": f"127.0.0.1:{node.http_port}",
        **internal_topic_properties(len(layout.brokers)),
    }


def parse_property(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--controller-property`` / ``--broker-property``."""
    key, separator, value = text.partition("=")
    if not separator or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def check_overrides(
    layout: ClusterLayout, role: str, pairs: list[tuple[str, str]]
) -> dict[str, str]:
    """The extra properties of every ``role`` node; refuses the keys that wire the layout."""
    node = layout.controllers[0] if role == "controller" else layout.brokers[0]
    managed = set(node_properties(node, layout, Path("."), "-")) - OVERRIDABLE_PROPERTIES
    for key, _ in pairs:
        if key in managed:
            raise DevClusterError(
                f"--{role}-property {key}: pykraft dev sets {key} itself "
                f"(from the layout and --data-dir)"
            )
    return dict(pairs)  # a key given twice: the last one wins, as in a .properties file


def ensure_secret_file(path: Path, make: Any) -> str:
    """The file's content, written once (mode 0600) with ``make()`` when absent."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        path.chmod(0o600)
        return path.read_text(encoding="utf-8").strip()
    value = str(make())
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(value + "\n")
    return value


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
        """Until every broker reports RUNNING over its HTTP API (or ``stop`` is set)."""
        deadline = time.monotonic() + timeout_s
        pending = list(self.layout.brokers)
        while pending:
            if stop.is_set():
                raise DevClusterError("interrupted during start-up")
            dead = self.exited()
            if dead:
                raise DevClusterError(
                    f"{', '.join(dead)} exited during start-up\n" + self.log_tails(dead)
                )
            if time.monotonic() > deadline:
                names = [b.name for b in pending]
                raise DevClusterError(
                    f"{', '.join(names)} not RUNNING after {timeout_s:.0f}s\n"
                    + self.log_tails(names)
                )
            pending = [b for b in pending if broker_state(b) != "RUNNING"]
            stop.wait(POLL_INTERVAL_S)

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

        return {
            "state": state,
            "cluster_id": self.cluster_id,
            **(
                {"security": dev_secure.describe(self.material, self.data_dir, self.client_files)}
                if self.material
                else {}
            ),
            "dev_pid": os.getpid(),
            "bootstrap_servers": self.layout.bootstrap_servers,
            "admin_url": self.layout.admin_url,
            "admin_urls": [c.http_url for c in self.layout.controllers],
            "data_dir": str(self.data_dir),
            "controllers": [entry(c) for c in self.layout.controllers],
            "brokers": [entry(b) for b in self.layout.brokers],
        }

    def write_cluster_json(self, state: str) -> Path:
        path = self.data_dir / "cluster.json"
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(self.describe(state), indent=2) + "\n", encoding="utf-8")
        partial.replace(path)
        return path


def read_cluster_json(data_dir: Path) -> dict[str, Any]:
    """``cluster.json`` as ``pykraft dev`` last wrote it in ``data_dir`` ({} before it exists)."""
    try:
        info: dict[str, Any] = json.loads((data_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}
    return info


def stop_dev_process(process: subprocess.Popen[Any], data_dir: Path, timeout_s: float) -> None:
    """Stop a ``pykraft dev`` run started as a subprocess, and every node it started.

    SIGTERM first (brokers stop under control, then controllers); SIGKILL after ``timeout_s``.
    Its nodes run in sessions of their own, so a killed ``pykraft dev`` leaves them behind:
    every node in ``cluster.json`` still running its own config file is killed too.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    info = read_cluster_json(data_dir)
    for node in info.get("controllers", []) + info.get("brokers", []):
        if node.get("pid") and runs_config(node["pid"], node["config"]):
            os.kill(node["pid"], signal.SIGKILL)


def runs_config(pid: int, config: str) -> bool:
    """Whether ``pid`` is still the node started with ``config`` (not a reused pid)."""
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return config.encode() in command_line.split(b"\0")


def broker_state(broker: Node) -> str | None:
    try:
        with urllib.request.urlopen(broker.http_url + "/v1/broker", timeout=2) as response:
            state: str = json.loads(response.read())["state"]
            return state
    except (OSError, ValueError, KeyError):
        return None


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
    path = cluster.write_cluster_json("running")
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
