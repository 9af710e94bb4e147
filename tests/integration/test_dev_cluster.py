"""``pykraft dev --controllers 1 --brokers 1`` as a real process tree on free ports, and
``pykraft topics`` against it (kafka-topics.sh output and messages, TopicCommand.java).

The tests share one cluster and run in file order: it comes up, topics are managed, SIGTERM
stops it cleanly, and the same data directory comes back with ``--exit-after-ready``.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from pykraft.topics_cmd import main as topics_main
from tests.integration.conftest import ROOT, HttpError, http

pytestmark = pytest.mark.integration

READY_TIMEOUT_S = 60.0


@attrs.define
class Dev:
    data_dir: Path
    process: subprocess.Popen[str]

    @property
    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = json.loads((self.data_dir / "cluster.json").read_text())
        return info

    def output(self) -> str:
        return (self.data_dir.parent / "dev.out").read_text()


def start_dev(data_dir: Path, *extra: str) -> subprocess.Popen[str]:
    out = open(data_dir.parent / "dev.out", "a")  # noqa: SIM115 - handed to the child
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pykraft.dev",
            "--controllers",
            "1",
            "--brokers",
            "1",
            "--base-port",
            "0",
            "--data-dir",
            str(data_dir),
            *extra,
        ],
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    out.close()
    return process


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_everything(data_dir: Path, process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(10)
    try:
        info = json.loads((data_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return
    for node in info["controllers"] + info["brokers"]:
        if node["pid"] and pid_alive(node["pid"]):
            os.kill(node["pid"], signal.SIGKILL)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    data_dir = tmp_path_factory.mktemp("dev") / "cluster"
    process = start_dev(data_dir)
    cluster = Dev(data_dir, process)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "Press Ctrl-C to stop." not in cluster.output():
            assert process.poll() is None, cluster.output()
            assert time.monotonic() < deadline, cluster.output()
            time.sleep(0.1)
        yield cluster
    finally:
        kill_everything(data_dir, process)


def topics(dev: Dev, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = topics_main(["--bootstrap-controller", dev.info["admin_url"], *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_dev_cluster_comes_up_with_everything_written_down(dev: Dev) -> None:
    info = dev.info
    assert info["state"] == "running"
    (broker,) = info["brokers"]
    (controller,) = info["controllers"]
    assert info["bootstrap_servers"] == broker["bootstrap_server"]
    assert f"bootstrap servers: {info['bootstrap_servers']}" in dev.output()
    assert f"admin URL: {info['admin_url']}" in dev.output()
    assert all(pid_alive(node["pid"]) for node in (broker, controller))
    # One quorum password per cluster, readable by its owner only.
    password = dev.data_dir / "quorum.password"
    assert stat.S_IMODE(password.stat().st_mode) == 0o600 and password.read_text().strip()
    meta = (dev.data_dir / "broker-10" / "meta.properties").read_text()
    assert f"cluster.id={info['cluster_id']}" in meta and "node.id=10" in meta
    # The broker is unfenced and RUNNING, over both HTTP APIs.
    assert http("GET", broker["http_url"] + "/healthz") == {"status": "ok", "state": "RUNNING"}
    status = http("GET", broker["http_url"] + "/v1/broker")
    assert status["state"] == "RUNNING" and status["node_id"] == 10
    (registered,) = http("GET", info["admin_url"] + "/v1/brokers")["brokers"]
    assert registered["broker_id"] == 10 and not registered["fenced"]
    assert registered["broker_epoch"] == status["broker_epoch"]


def test_topics_create_list_describe_alter_delete(
    dev: Dev, capsys: pytest.CaptureFixture[str]
) -> None:
    assert topics(
        dev, capsys, "--create", "--topic", "pet", "--partitions", "3", "--replication-factor", "1"
    ) == (0, "Created topic pet.\n", "")
    assert topics(dev, capsys, "--create", "--topic", "pet", "--partitions", "3") == (
        1,
        "Error while executing topic command : Topic 'pet' already exists.\n",
        "",
    )
    assert topics(dev, capsys, "--create", "--topic", "pet", "--if-not-exists") == (0, "", "")
    assert (
        topics(dev, capsys, "--create", "--topic", "logs", "--config", "retention.ms=60000")[0] == 0
    )
    assert topics(dev, capsys, "--list") == (0, "logs\npet\n", "")
    assert topics(dev, capsys, "--list", "--topic", "p.*") == (0, "pet\n", "")

    code, out, _ = topics(dev, capsys, "--describe", "--topic", "pet")
    topic_id = http("GET", dev.info["admin_url"] + "/v1/topics/pet")["topic_id"]
    assert code == 0
    assert out.splitlines() == [
        f"Topic: pet\tTopicId: {topic_id}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: ",
        *(
            f"\tTopic: pet\tPartition: {p}\tLeader: 10\tReplicas: 10\tIsr: 10"
            "\tElr: \tLastKnownElr: "
            for p in range(3)
        ),
    ]
    _, out, _ = topics(dev, capsys, "--describe", "--topic", "logs")
    assert out.splitlines()[0].endswith("\tConfigs: retention.ms=60000")

    assert topics(dev, capsys, "--alter", "--topic", "pet", "--partitions", "2") == (
        1,
        "Error while executing topic command : Topic currently has 3 partitions, which is "
        "higher than the requested 2.\n",
        "",
    )
    assert topics(dev, capsys, "--alter", "--topic", "pet", "--partitions", "4")[0] == 0
    assert "PartitionCount: 4" in topics(dev, capsys, "--describe", "--topic", "pet")[1]

    assert topics(dev, capsys, "--delete", "--topic", "pet") == (0, "", "")
    assert topics(dev, capsys, "--describe", "--topic", "pet") == (
        1,
        "",
        "Topic 'pet' does not exist as expected\n",
    )
    assert topics(dev, capsys, "--delete", "--topic", "pet", "--if-exists") == (0, "", "")
    assert topics(dev, capsys, "--list", "--create")[2] == (
        "Command must include exactly one action: --list, --describe, --create, --alter or "
        "--delete\n"
    )
    with pytest.raises(HttpError):
        http("GET", dev.info["admin_url"] + "/v1/topics/pet")


def test_sigterm_stops_every_process_then_the_same_data_comes_back(dev: Dev) -> None:
    info = dev.info
    pids = [node["pid"] for node in info["controllers"] + info["brokers"]]
    dev.process.send_signal(signal.SIGTERM)
    assert dev.process.wait(60) == 0
    assert not any(pid_alive(pid) for pid in pids)
    assert dev.info["state"] == "stopped"
    broker_log = Path(info["brokers"][0]["log"]).read_text()
    assert "controlled shutdown complete" in broker_log

    again = start_dev(dev.data_dir, "--exit-after-ready")
    try:
        assert again.wait(READY_TIMEOUT_S) == 0, dev.output()
    finally:
        kill_everything(dev.data_dir, again)
    restarted = dev.info
    assert restarted["cluster_id"] == info["cluster_id"]
    assert restarted["state"] == "stopped"
    # The topic created before the restart is still there, in the broker's log dir.
    assert (dev.data_dir / "broker-10" / "logs-0").is_dir()
