"""Real controller processes on free 127.0.0.1 ports, always stopped (even when a test fails)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord

from pykraft.free_ports import pick_free_ports as free_ports  # shared with `pykraft dev`
from pykraft.metadata.records import uuid_to_kafka_string

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "integration-test-password"
STARTUP_TIMEOUT_S = 20.0
REQUEST_TIMEOUT_S = 10.0


class HttpError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


def http(
    method: str,
    url: str,
    body: Any = None,
    timeout: float = REQUEST_TIMEOUT_S,
    raw: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> Any:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
            if response.headers.get_content_type() == "application/json":
                return json.loads(payload)
            return payload
    except urllib.error.HTTPError as error:
        payload = error.read()
        try:
            parsed = json.loads(payload)
        except ValueError:
            parsed = {"raw": payload.decode(errors="replace")}
        raise HttpError(error.code, parsed) from None


def records_to_end(consumer: KafkaConsumer, timeout_s: float = 30.0) -> list[ConsumerRecord]:
    """Every record of the consumer's assigned partitions from its position up to their end
    offsets (the high watermark) at the call: what iterating until an idle timeout reads once
    nothing produces any more, without waiting the timeout out (CI time)."""
    assigned = sorted(consumer.assignment())
    ends = consumer.end_offsets(assigned)
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while any(consumer.position(tp) < ends[tp] for tp in assigned):
        assert time.monotonic() < deadline, f"could not read {assigned} to {ends} in {timeout_s}s"
        for tp, messages in consumer.poll(timeout_ms=200).items():
            records.extend(m for m in messages if m.offset < ends[tp])
    return records


class Controller:
    def __init__(
        self, node_id: int, raft_port: int, http_port: int, data_dir: Path, config_path: Path
    ) -> None:
        self.node_id = node_id
        self.raft_port = raft_port
        self.http_port = http_port
        self.data_dir = data_dir
        self.config_path = config_path
        self.log_path = data_dir.parent / f"controller-{node_id}.log"
        self.process: subprocess.Popen[bytes] | None = None
        # Where it listens, and what runs it (``ip netns exec NS``: tests/chaos/netns.py).
        self.host = "127.0.0.1"
        self.command_prefix: list[str] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [
                *self.command_prefix,
                *(
                    sys.executable,
                    "-m",
                    "pykraft.controller_cmd",
                    "--config",
                    str(self.config_path),
                ),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        log.close()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9: no chance to flush or say goodbye."""
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    def get(self, path: str, **kwargs: Any) -> Any:
        return http("GET", self.url + path, **kwargs)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Cluster:
    def __init__(self, root: Path, size: int, extra: dict[str, str] | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        ports = free_ports(2 * size)
        raft_ports, http_ports = ports[:size], ports[size:]
        voters = ",".join(f"{i + 1}@127.0.0.1:{raft_ports[i]}" for i in range(size))
        http_voters = ",".join(f"{i + 1}@127.0.0.1:{http_ports[i]}" for i in range(size))
        password_file = root / "quorum.password"
        password_file.write_text(PASSWORD)
        password_file.chmod(0o600)
        self.controllers: list[Controller] = []
        # The stand-in brokers' heartbeat connections, kept open (``register_brokers``).
        self.stand_in_connections: list[HTTPConnection] = []
        for index in range(size):
            node_id = index + 1
            data_dir = root / f"controller-{node_id}"
            config = {
                "node.id": str(node_id),
                "process.roles": "controller",
                "controller.quorum.voters": voters,
                "controller.quorum.http.voters": http_voters,
                "listeners": f"CONTROLLER://127.0.0.1:{http_ports[index]}",
                "metadata.log.dir": str(data_dir),
                "controller.quorum.password.file": str(password_file),
                **TEST_PROPERTIES,
                **(extra or {}),
            }
            config_path = root / f"controller-{node_id}.properties"
            config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
            self.controllers.append(
                Controller(node_id, raft_ports[index], http_ports[index], data_dir, config_path)
            )

    def by_id(self, node_id: int) -> Controller:
        return self.controllers[node_id - 1]

    def start(self) -> None:
        for controller in self.controllers:
            controller.start()

    def stop(self) -> None:
        for controller in self.controllers:
            controller.stop()

    def wait_for_leader(
        self, timeout_s: float = STARTUP_TIMEOUT_S, exclude: int | None = None
    ) -> Controller:
        """The controller every live member agrees leads (asked over HTTP)."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            for controller in self.controllers:
                if not controller.alive() or controller.node_id == exclude:
                    continue
                try:
                    quorum = controller.get("/v1/quorum", timeout=2)
                except (OSError, HttpError) as error:
                    last = error
                    continue
                last = quorum
                if quorum["state"] == "leader":
                    return controller
            time.sleep(0.05)
        logs = "\n".join(f"--- controller {c.node_id}\n{c.log_tail()}" for c in self.controllers)
        raise AssertionError(f"no leader within {timeout_s}s (last: {last})\n{logs}")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        via: Controller | None = None,
        timeout_s: float = 15.0,
    ) -> Any:
        """What a client does: send anywhere, follow NOT_CONTROLLER to the leader, retry."""
        target = via or next(c for c in self.controllers if c.alive())
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return http(method, target.url + path, body)
            except HttpError as error:
                if (
                    error.body.get("error") not in ("NOT_CONTROLLER", "REQUEST_TIMED_OUT")
                    or time.monotonic() > deadline
                ):
                    raise
                leader_url = error.body.get("leader")
                target = next(
                    (c for c in self.controllers if c.url == leader_url and c.alive()), target
                )
            except OSError:
                if time.monotonic() > deadline:
                    raise
                others = [c for c in self.controllers if c.alive() and c is not target]
                target = others[0] if others else target
            time.sleep(0.05)

    def register_brokers(self, broker_ids: list[int]) -> dict[int, int]:
        """Register stand-in brokers and heartbeat them unfenced (KIP-631); returns epochs.

        Topic creation places replicas on unfenced brokers only, as in Kafka.
        """
        epochs = {}
        for broker_id in broker_ids:
            answer = self.request(
                "POST",
                "/v1/brokers/register",
                {
                    "broker_id": broker_id,
                    "incarnation_id": uuid_to_kafka_string(os.urandom(16)),
                    "endpoints": [
                        {
                            "name": "PLAINTEXT",
                            "host": "127.0.0.1",
                            "port": 9092 + broker_id,
                            "security_protocol": 0,
                        }
                    ],
                },
            )
            epochs[broker_id] = answer["broker_epoch"]
        deadline = time.monotonic() + 10
        pending = set(broker_ids)
        while pending and time.monotonic() < deadline:
            for broker_id in sorted(pending):
                if self._heartbeat_kept_open(broker_id, epochs[broker_id]) is False:
                    pending.discard(broker_id)
            if pending:
                time.sleep(0.05)
        assert not pending, f"brokers {sorted(pending)} stayed fenced"
        return epochs

    def _heartbeat_kept_open(self, broker_id: int, broker_epoch: int) -> bool | None:
        """One heartbeat to the leader on a connection left open, idle, as a live broker's
        is between beats: the active controller fences a broker whose heartbeat connection
        closed while idle and whose poll's closed too, and one second after the heartbeat's
        alone (quorum/broker_channels.py) — urllib's closes after each request. Returns the
        answer's ``is_fenced``, or None when there was no answer to it (the leader moved:
        NOT_CONTROLLER; not ready; a connection refused or reset): ask again, as ``request``
        does — the next call asks the leader of then."""
        leader = self.wait_for_leader()
        connection = HTTPConnection(leader.host, leader.http_port, timeout=REQUEST_TIMEOUT_S)
        # Claim to have read everything: these brokers follow no metadata log.
        body = {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "current_metadata_offset": 2**62,
        }
        try:
            connection.request(
                "POST",
                "/v1/brokers/heartbeat",
                json.dumps(body),
                {"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            status, text = response.status, response.read()
        except (OSError, HTTPException):
            connection.close()
            return None
        # Kept open even when it answered an error: closed idle, it would count as this
        # broker's heartbeat connection closing.
        self.stand_in_connections.append(connection)
        try:
            answer = json.loads(text)
        except ValueError:
            return None
        if status != 200 or not isinstance(answer, dict) or "is_fenced" not in answer:
            return None
        return bool(answer["is_fenced"])

    def close_stand_in_connections(self) -> None:
        for connection in self.stand_in_connections:
            connection.close()
        self.stand_in_connections.clear()


# Stand-in brokers register once and never heartbeat again: give them a long session.
TEST_PROPERTIES = {"broker.session.timeout.ms": "120000"}


@contextmanager
def clusters_under(root: Path) -> Iterator[Any]:
    """``make(size, extra, start)`` for clusters under ``root``; their controllers die on exit."""
    clusters: list[Cluster] = []

    def make(size: int = 3, extra: dict[str, str] | None = None, start: bool = True) -> Cluster:
        cluster = Cluster(root / f"cluster-{len(clusters)}", size, extra)
        clusters.append(cluster)
        if start:
            cluster.start()
        return cluster

    try:
        yield make
    finally:
        for cluster in clusters:
            for controller in cluster.controllers:
                controller.kill()
            cluster.close_stand_in_connections()


@contextmanager
def killed_on_exit() -> Iterator[list[Any]]:
    """A list for broker processes (``test_broker_process.BrokerProcess``), each killed on exit."""
    started: list[Any] = []
    try:
        yield started
    finally:
        for broker in started:
            broker.kill()


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Any]:
    with clusters_under(tmp_path) as make:
        yield make


@pytest.fixture
def brokers() -> Iterator[list[Any]]:
    """Broker processes a test starts (``test_broker_process.BrokerProcess``), always killed."""
    with killed_on_exit() as started:
        yield started


# The same for a module whose tests share one cluster: cases that only talk to it over the
# wire and check what they need before and after (CI time: one start instead of one a test).
@pytest.fixture(scope="module")
def module_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("module")


@pytest.fixture(scope="module")
def module_cluster_factory(module_path: Path) -> Iterator[Any]:
    with clusters_under(module_path) as make:
        yield make


@pytest.fixture(scope="module")
def module_brokers() -> Iterator[list[Any]]:
    with killed_on_exit() as started:
        yield started


@contextmanager
def dev_cluster(
    data_dir: Path,
    *,
    controllers: int = 1,
    brokers: int = 1,
    broker_properties: tuple[str, ...] = (),
) -> Iterator[Mapping[str, Any]]:
    """``pykraft dev`` on free ports under ``data_dir``: its ``cluster.json`` once ready (the
    output in ``dev.out`` beside it when it is not), always stopped."""
    from pykraft.dev_cluster_file import stop_dev_process
    from pykraft.dev_wait import wait_ready

    command = [
        *(sys.executable, "-m", "pykraft.dev"),
        *("--controllers", str(controllers), "--brokers", str(brokers)),
        *("--base-port", "0", "--data-dir", str(data_dir)),
        *(arg for prop in broker_properties for arg in ("--broker-property", prop)),
    ]
    output = data_dir.parent / "dev.out"
    with open(output, "wb") as out:
        dev = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    try:
        code, info = wait_ready(data_dir, timeout_s=60)
        assert code == 0, output.read_text()
        yield info
    finally:
        stop_dev_process(dev, data_dir, 60)
