"""Voter changes (KIP-853) with real processes. A static quorum (controller.quorum.voters,
kraft.version 0) refuses them with Kafka 3.9's UNSUPPORTED_VERSION, through the broker and
``kafka-metadata-quorum add-controller``. A dynamic quorum (controller.quorum.bootstrap.servers
and pykraft.quorum.initial.controllers, kraft.version 1) replaces a controller without stopping
the cluster: three controllers and one broker. Controller 3 is removed (RemoveRaftVoter through
the broker, as
``kafka-metadata-quorum remove-controller``); a fresh controller 4 starts as an observer from
``controller.quorum.bootstrap.servers`` and is added (``add-controller``), catching up; with
controller 1 stopped, the quorum {2, 4} still elects a leader and commits writes; after a
restart of every controller the voter set is still {1, 2, 4}. Every process is always stopped.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pykraft.free_ports import pick_free_ports as free_ports
from tests.integration.conftest import (
    PASSWORD,
    ROOT,
    TEST_PROPERTIES,
    Cluster,
    Controller,
    HttpError,
    http,
)
from tests.integration.test_broker_process import CONTROLLER_PROPERTIES, BrokerProcess

pytestmark = pytest.mark.integration

STATIC_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # a static voter's: Kafka's NO_DIRECTORY_ID
TIMEOUT_S = 40.0


def tool(bootstrap: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "metadata-quorum", "--bootstrap-server",
         bootstrap, *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


def eventually(condition: Callable[[], Any], what: str, cluster: Cluster) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except (OSError, HttpError) as error:
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.2)
    logs = "\n".join(f"--- controller {c.node_id}\n{c.log_tail(25)}" for c in cluster.controllers)
    raise AssertionError(f"{what} not reached in {TIMEOUT_S}s (last: {last})\n{logs}")


def replication(bootstrap: str) -> dict[int, str]:
    """``describe --replication`` (padded columns): node id -> Status, or {} when it failed."""
    done = tool(bootstrap, "describe", "--replication")
    if done.returncode != 0:
        return {}
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    return {int(row[0]): row[6] for row in rows}


def voters(bootstrap: str) -> list[int]:
    return sorted(n for n, status in replication(bootstrap).items() if status != "Observer")


def topics(controller: Controller) -> set[str]:
    return {t["name"] for t in controller.get("/v1/topics")["topics"]}


def holds_every_topic(controller: Controller) -> bool:
    return {"after-remove", "without-1", "after-restart"} <= topics(controller)


def create_topic(cluster: Cluster, name: str) -> None:
    cluster.request("POST", "/v1/topics", {"name": name, "partitions": 1, "replication_factor": 1})


def dynamic_cluster(cluster_factory: Any, extra: dict[str, str] | None = None) -> Cluster:
    """Three controllers of a dynamic quorum (kraft.version 1): each finds the quorum through
    controller.quorum.bootstrap.servers and was "formatted" with the founding voters (Kafka's
    ``kafka-storage format --initial-controllers``)."""
    cluster: Cluster = cluster_factory(size=3, extra=extra, start=False)
    founders = ",".join(f"{c.node_id}@127.0.0.1:{c.raft_port}" for c in cluster.controllers)
    servers = ",".join(f"127.0.0.1:{c.raft_port}" for c in cluster.controllers)
    for controller in cluster.controllers:
        text = re.sub(
            r"^controller\.quorum\.voters=.*$",
            f"controller.quorum.bootstrap.servers={servers}\n"
            f"pykraft.quorum.initial.controllers={founders}",
            controller.config_path.read_text(),
            flags=re.M,
        )
        text = re.sub(
            r"^listeners=(.*)$",
            rf"listeners=\1,RAFT://127.0.0.1:{controller.raft_port}",
            text,
            flags=re.M,
        )
        controller.config_path.write_text(text)
    cluster.start()
    return cluster


def test_a_static_quorum_answers_unsupported_version(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    """Kafka 3.9 at kraft.version 0: ``AddVoterHandler`` / ``RemoveVoterHandler`` answer
    UNSUPPORTED_VERSION and ``kafka-metadata-quorum`` prints their message; nothing changes."""
    cluster: Cluster = cluster_factory(size=3, extra=CONTROLLER_PROPERTIES)
    cluster.wait_for_leader()
    broker = broker_of(cluster, tmp_path)
    brokers.append(broker)
    broker.start()
    broker.wait_running()
    four = observer(cluster, cluster.controllers[0].data_dir.parent)
    cluster.controllers.append(four)
    four.start()  # writes its meta.properties (its directory id)
    assert eventually((four.data_dir / "meta.properties").exists, "meta.properties", cluster)
    added = tool(broker.bootstrap, "--command-config", str(four.config_path), "add-controller")
    assert added.returncode == 1, added.stdout
    assert (
        "UNSUPPORTED_VERSION: Cluster doesn't support adding voter because the kraft.version "
        "feature is 0" in added.stderr
    ), added.stderr
    removed = tool(broker.bootstrap, "remove-controller", "--controller-id", "3",
                   "--controller-directory-id", STATIC_DIRECTORY_ID)  # fmt: skip
    assert removed.returncode == 1, removed.stdout
    assert (
        "UNSUPPORTED_VERSION: Cluster doesn't support removing voter because the kraft.version "
        "feature is 0" in removed.stderr
    ), removed.stderr
    assert voters(broker.bootstrap) == [1, 2, 3]
    for controller in cluster.controllers:
        assert not (controller.data_dir / "raft" / "voters.json").exists()


def broker_of(cluster: Cluster, tmp_path: Path) -> BrokerProcess:
    """Broker 10, bootstrapped from every controller's HTTP listener."""
    servers = ",".join(c.url.removeprefix("http://") for c in cluster.controllers)
    broker = BrokerProcess(tmp_path, 10, cluster.controllers[0].url)
    broker.config_path.write_text(
        re.sub(
            r"^controller\.quorum\.bootstrap\.servers=.*$",
            f"controller.quorum.bootstrap.servers={servers}",
            broker.config_path.read_text(),
            flags=re.M,
        )
    )
    return broker


def observer(cluster: Cluster, root: Path) -> Controller:
    """Controller 4's files: bootstrap servers (the voters' Raft addresses) and a RAFT listener."""
    raft_port, http_port = free_ports(2)
    bootstrap = ",".join(f"127.0.0.1:{c.raft_port}" for c in cluster.controllers[:2])
    data_dir = root / "controller-4"
    config = {
        "node.id": "4",
        "process.roles": "controller",
        "controller.quorum.bootstrap.servers": bootstrap,
        "listeners": f"CONTROLLER://127.0.0.1:{http_port},RAFT://127.0.0.1:{raft_port}",
        "metadata.log.dir": str(data_dir),
        "controller.quorum.password.file": str(root / "quorum.password"),
        **TEST_PROPERTIES,
        **CONTROLLER_PROPERTIES,
    }
    config_path = root / "controller-4.properties"
    config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    return Controller(4, raft_port, http_port, data_dir, config_path)


def test_a_controller_is_replaced_while_the_cluster_runs(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    cluster = dynamic_cluster(cluster_factory, CONTROLLER_PROPERTIES)
    root = cluster.controllers[0].data_dir.parent
    assert (root / "quorum.password").read_text() == PASSWORD
    cluster.wait_for_leader()
    broker = broker_of(cluster, tmp_path)
    brokers.append(broker)
    broker.start()
    broker.wait_running()
    bootstrap = broker.bootstrap
    assert eventually(lambda: voters(bootstrap) == [1, 2, 3], "3 voters", cluster)

    # Remove controller 3 (were it the leader, it hands its leadership over first).
    removed = tool(bootstrap, "remove-controller", "--controller-id", "3",
                   "--controller-directory-id", STATIC_DIRECTORY_ID)  # fmt: skip
    assert removed.returncode == 0, removed.stderr + broker.log_tail()
    assert "Removed KRaft controller 3" in removed.stdout
    cluster.by_id(3).stop()
    assert eventually(lambda: voters(bootstrap) == [1, 2], "voters 1, 2", cluster)
    create_topic(cluster, "after-remove")

    # A fresh controller 4 follows as an observer, then is added and catches up.
    four = observer(cluster, root)
    cluster.controllers.append(four)
    four.start()
    assert eventually(lambda: four.get("/v1/quorum")["state"] == "observer", "observer", cluster)
    added = tool(bootstrap, "--command-config", str(four.config_path), "add-controller")
    assert added.returncode == 0, added.stderr + four.log_tail()
    assert added.stdout.startswith("Added controller 4 with directory id ")
    assert eventually(lambda: voters(bootstrap) == [1, 2, 4], "voters 1, 2, 4", cluster)
    leader_offset = cluster.request("GET", "/v1/quorum")["committed_offset"]
    assert eventually(
        lambda: four.get("/v1/quorum")["committed_offset"] >= leader_offset, "catch-up", cluster
    )
    assert {"after-remove"} <= {t["name"] for t in four.get("/v1/topics")["topics"]}
    status = tool(bootstrap, "describe", "--status")
    assert status.returncode == 0, status.stderr
    assert '"id": 4' in status.stdout and '"id": 3' not in status.stdout.split("Observers")[0]

    # Without controller 1, the quorum {2, 4} elects a leader and commits.
    cluster.by_id(1).stop()
    cluster.wait_for_leader(timeout_s=TIMEOUT_S, exclude=1)
    create_topic(cluster, "without-1")
    assert eventually(
        lambda: "without-1" in {t["name"] for t in four.get("/v1/topics")["topics"]},
        "topic on controller 4",
        cluster,
    )

    # Every controller restarted: the voter set is still {1, 2, 4}.
    for node_id in (2, 4):
        cluster.by_id(node_id).stop()
    for node_id in (1, 2, 4):
        cluster.by_id(node_id).start()
    cluster.wait_for_leader(timeout_s=TIMEOUT_S, exclude=3)
    for node_id in (1, 2, 4):
        controller = cluster.by_id(node_id)
        quorum = eventually(functools.partial(controller.get, "/v1/quorum"), "up", cluster)
        assert [v["node_id"] for v in quorum["voters"]] == [1, 2, 4], (node_id, quorum)
    assert eventually(lambda: voters(bootstrap) == [1, 2, 4], "voters after restart", cluster)
    create_topic(cluster, "after-restart")
    for node_id in (1, 2, 4):  # every voter holds every write (reads are any controller's)
        assert eventually(
            functools.partial(holds_every_topic, cluster.by_id(node_id)),
            f"every topic on controller {node_id}",
            cluster,
        )


def test_voter_changes_refused_and_the_leader_removing_itself(cluster_factory: Any) -> None:
    """Kafka's refusals over the controller's route (KafkaRaftClientReconfigTest's cases:
    testAddVoterInvalidClusterId, testDuplicateVoterIsRejected, testRemoveVoterNonExistingVoter,
    a new voter that does not answer: REQUEST_TIMED_OUT, nothing appended), then the active
    controller removed: it hands its leadership over (NOT_CONTROLLER) and the retried request
    succeeds."""
    cluster = dynamic_cluster(cluster_factory, {"cluster.id": "MkU3OEVBNTcwNTJENDM2Qk"})
    leader = cluster.wait_for_leader()

    def refusal(path: str, body: dict[str, Any]) -> str:
        with pytest.raises(HttpError) as refused:
            http("POST", leader.url + path, body, timeout=30)
        return str(refused.value.body["error"])

    dead_raft, dead_http = free_ports(2)
    new_voter = {
        "cluster_id": None,
        "timeout_ms": 1500,
        "voter_id": 9,
        "voter_directory_id": "hFnSqqNsQQm7ZhaWQxTbcA",
        "listeners": [
            {"name": "CONTROLLER", "host": "127.0.0.1", "port": dead_http},
            {"name": "RAFT", "host": "127.0.0.1", "port": dead_raft},
        ],
    }
    add = "/v1/quorum/voters/add"
    remove = "/v1/quorum/voters/remove"
    assert refusal(add, {**new_voter, "cluster_id": "other"}) == "INCONSISTENT_CLUSTER_ID"
    assert refusal(add, {**new_voter, "voter_id": 2}) == "DUPLICATE_VOTER"
    assert refusal(add, {**new_voter, "listeners": []}) == "INVALID_REQUEST"
    static = {"cluster_id": None, "voter_directory_id": STATIC_DIRECTORY_ID}
    assert refusal(remove, {**static, "voter_id": 7}) == "VOTER_NOT_FOUND"
    assert (
        refusal(remove, {**static, "voter_id": 2, "voter_directory_id": "hFnSqqNsQQm7ZhaWQxTbcA"})
        == "VOTER_NOT_FOUND"
    )
    # A voter that never comes up is refused before anything is appended (Kafka's
    # AddVoterHandler probes it first): REQUEST_TIMED_OUT, and the voters are unchanged.
    assert refusal(add, new_voter) == "REQUEST_TIMED_OUT"
    assert [v["node_id"] for v in leader.get("/v1/quorum")["voters"]] == [1, 2, 3]
    assert [v["node_id"] for v in cluster.request("GET", "/v1/quorum/describe")["nodes"]] == [
        1,
        2,
        3,
    ]

    # The active controller removes itself: leadership moves, the retried request succeeds.
    with pytest.raises(HttpError) as handed_over:
        http("POST", leader.url + remove, {**static, "voter_id": leader.node_id})
    assert handed_over.value.body["error"] == "NOT_CONTROLLER"
    cluster.request("POST", remove, {**static, "voter_id": leader.node_id}, timeout_s=30)
    rest = sorted({1, 2, 3} - {leader.node_id})
    new_leader = cluster.wait_for_leader(exclude=leader.node_id)
    assert [v["node_id"] for v in new_leader.get("/v1/quorum")["voters"]] == rest
    described = cluster.request("GET", "/v1/quorum/describe")
    assert sorted(v["replica_id"] for v in described["voters"]) == rest
    leader.stop()
    create = {"name": "after-leader-removed", "partitions": 1}
    cluster.register_brokers([1])
    cluster.request("POST", "/v1/topics", create)
