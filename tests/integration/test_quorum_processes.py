"""Three real controller processes: election, redirects, kill -9, catch-up from a snapshot,
full restart (DESIGN.md §3.1). Clients follow NOT_CONTROLLER to the leader as brokers do."""

import time
from typing import Any

import pytest

from tests.integration.conftest import Cluster, Controller, HttpError, http

pytestmark = pytest.mark.integration


def topic_names(controller: Controller) -> set[str]:
    return {t["name"] for t in controller.get("/v1/topics")["topics"]}


def wait_for_topics(controller: Controller, names: set[str], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if names <= topic_names(controller):
                return
        except (OSError, HttpError):
            pass
        time.sleep(0.1)
    raise AssertionError(
        f"controller {controller.node_id} never showed {sorted(names)}\n{controller.log_tail()}"
    )


def create_topic(cluster: Cluster, name: str, partitions: int = 1, **kwargs) -> Any:
    return cluster.request("POST", "/v1/topics", {"name": name, "partitions": partitions}, **kwargs)


def test_three_controllers_elect_one_leader_and_replicate_noops(cluster_factory) -> None:
    cluster = cluster_factory(3)
    leader = cluster.wait_for_leader()
    time.sleep(1.5)  # a few NoOpRecords (metadata.max.idle.interval.ms=500)
    quorum = leader.get("/v1/quorum")
    assert quorum["leader_id"] == leader.node_id
    assert quorum["committed_offset"] >= 1
    assert [v["node_id"] for v in quorum["voters"]] == [1, 2, 3]
    assert all(v["lag"] is not None for v in quorum["voters"])
    for controller in cluster.controllers:
        view = controller.get("/v1/quorum")
        assert view["leader_id"] == leader.node_id
        assert view["leader_url"] == leader.url
    records = leader.get("/v1/metadata/records?from=0")
    assert records["batches"][0]["base_offset"] == 0
    assert records["batches"][0]["records"][0]["type"] == "NoOpRecord"


def test_follower_redirects_and_writes_survive_kill_9_of_the_leader(cluster_factory) -> None:
    cluster = cluster_factory(3)
    leader = cluster.wait_for_leader()
    cluster.register_brokers([1, 2])
    follower = next(c for c in cluster.controllers if c is not leader)
    with pytest.raises(HttpError) as refused:
        http("POST", follower.url + "/v1/topics", {"name": "pets", "partitions": 3})
    assert refused.value.status == 421
    assert refused.value.body["error"] == "NOT_CONTROLLER"
    assert refused.value.body["leader"] == leader.url
    created = create_topic(cluster, "pets", 3, via=follower)
    assert created["partitions"] == 3
    for controller in cluster.controllers:
        wait_for_topics(controller, {"pets"})

    leader.kill()
    new_leader = cluster.wait_for_leader(exclude=leader.node_id)
    assert new_leader is not leader
    assert "pets" in topic_names(new_leader)
    create_topic(cluster, "after-failover", via=follower)
    wait_for_topics(new_leader, {"pets", "after-failover"})

    # The killed controller comes back and catches up with what it missed.
    leader.start()
    wait_for_topics(leader, {"pets", "after-failover"})
    assert cluster.wait_for_leader() is not None


def test_restarted_controller_catches_up_from_a_snapshot(cluster_factory) -> None:
    cluster = cluster_factory(
        3,
        extra={
            "metadata.log.max.records.between.snapshots": "20",
            "metadata.log.window.records": "10",
            "metadata.max.idle.interval.ms": "200",
        },
    )
    leader = cluster.wait_for_leader()
    cluster.register_brokers([1])
    lagging = next(c for c in cluster.controllers if c is not leader)
    assert lagging.stop() == 0  # SIGTERM: a clean stop
    names = {f"topic-{i}" for i in range(15)}
    for name in sorted(names):
        create_topic(cluster, name, 1, via=leader)
    # The leader compacted its journal behind a snapshot (written in the background), and its
    # window no longer reaches offset 0.
    deadline = time.monotonic() + 15
    while leader.get("/v1/metadata/snapshots")["latest"] is None:
        assert time.monotonic() < deadline, leader.log_tail()
        time.sleep(0.1)
    create_topic(cluster, "after-snapshot", 1, via=leader)
    names.add("after-snapshot")
    with pytest.raises(HttpError) as below:
        leader.get("/v1/metadata/records?from=0")
    assert below.value.status == 409
    assert below.value.body["error"] == "SNAPSHOT_REQUIRED"
    snapshot = below.value.body["snapshot"]
    lines = leader.get(f"/v1/metadata/snapshots/{snapshot['id']}").decode().splitlines()
    assert '"SnapshotHeader"' in lines[0] and '"SnapshotFooter"' in lines[-1]
    after = leader.get(f"/v1/metadata/records?from={snapshot['end_offset']}")
    assert after["from_offset"] == snapshot["end_offset"]

    lagging.start()
    wait_for_topics(lagging, names)
    assert lagging.get("/v1/metadata/snapshots")["latest"] is not None


def test_nothing_committed_is_lost_when_all_three_restart(cluster_factory) -> None:
    cluster = cluster_factory(3)
    cluster.wait_for_leader()
    cluster.register_brokers([1, 2])
    names = {f"durable-{i}" for i in range(5)}
    for name in sorted(names):
        create_topic(cluster, name, 2)
    committed = cluster.wait_for_leader().get("/v1/quorum")["committed_offset"]
    for controller in cluster.controllers:
        controller.kill()
    cluster.start()
    leader = cluster.wait_for_leader()
    wait_for_topics(leader, names)
    assert leader.get("/v1/quorum")["committed_offset"] >= committed
    for controller in cluster.controllers:
        wait_for_topics(controller, names)
    create_topic(cluster, "after-restart")
    wait_for_topics(leader, names | {"after-restart"})
