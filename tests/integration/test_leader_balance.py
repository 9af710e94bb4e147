"""Automatic preferred-leader balancing with real processes (auto.leader.rebalance.enable, on
by default as in Kafka): one controller, three brokers, a topic of three partitions whose
preferred replicas are the three brokers. After a full restart in which broker 10 was the last
to stop, it is the only ISR member of every partition and leads them all; once the others are
back in the ISRs the controller moves each leadership to its preferred replica within
``leader.imbalance.check.interval.seconds`` (1 s here). Issue 13: "After a full restart all
leaders stay on one broker". Every process is always stopped."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cluster
from tests.integration.test_broker_process import CONTROLLER_PROPERTIES, BrokerProcess

pytestmark = pytest.mark.integration

TOPIC = "balanced"
BROKER_PROPERTIES = {"replica.fetch.wait.max.ms": "200", "replica.fetch.backoff.ms": "200"}
TIMEOUT_S = 40.0


def partitions(cluster: Cluster) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = cluster.request("GET", f"/v1/topics/{TOPIC}")["partitions"]
    return rows


def eventually(
    condition: Callable[[], bool], what: str, cluster: Cluster, brokers: list[BrokerProcess]
) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- broker {b.node_id}\n{b.log_tail(15)}" for b in brokers)
            controller = cluster.controllers[0].log_tail(20)
            raise AssertionError(
                f"{what} not reached in {TIMEOUT_S}s: {partitions(cluster)}\n{tails}\n"
                f"--- controller\n{controller}"
            )
        time.sleep(0.2)


def led_by_preferred_replicas(cluster: Cluster) -> bool:
    return all(
        p["leader"] == p["replicas"][0] and sorted(p["isr"]) == [10, 11, 12]
        for p in partitions(cluster)
    )


def test_leaders_return_to_their_preferred_replicas_after_a_full_restart(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    cluster: Cluster = cluster_factory(
        size=1, extra={**CONTROLLER_PROPERTIES, "leader.imbalance.check.interval.seconds": "1"}
    )
    cluster.wait_for_leader()
    for node_id in (10, 11, 12):
        broker = BrokerProcess(tmp_path, node_id, cluster.controllers[0].url)
        with broker.config_path.open("a") as config:
            config.writelines(f"{key}={value}\n" for key, value in BROKER_PROPERTIES.items())
        brokers.append(broker)
        broker.start()
    for broker in brokers:
        broker.wait_running()
    cluster.request("POST", "/v1/topics", {"name": TOPIC, "partitions": 3, "replication_factor": 3})
    eventually(lambda: led_by_preferred_replicas(cluster), "the topic created", cluster, brokers)
    assert sorted(p["replicas"][0] for p in partitions(cluster)) == [10, 11, 12]

    # A full restart, broker 10 last: controlled shutdowns move every leadership to it and
    # leave it the only ISR member; its own shutdown leaves the partitions leaderless.
    for broker in (brokers[1], brokers[2], brokers[0]):
        assert broker.terminate() == 0
    assert all(p["isr"] == [10] for p in partitions(cluster)), partitions(cluster)
    for broker in brokers:
        broker.start()
    for broker in brokers:
        broker.wait_running()

    # Broker 10 leads everything at first (the only eligible leader); the followers rejoin
    # the ISRs, and the controller's balancing moves each leadership home.
    eventually(
        lambda: led_by_preferred_replicas(cluster), "leaders back on preferred replicas",
        cluster, brokers,
    )  # fmt: skip
    controller_log = cluster.controllers[0].log_path.read_text(errors="replace")
    assert "Traceback" not in controller_log
