"""GET /v1/quorum/describe (Kafka's DescribeQuorum) on three real controllers: only the active
controller answers, a standby redirects with 421 NOT_CONTROLLER naming it (as only Kafka's Raft
leader answers DescribeQuorum), and once the followers hold every committed entry they are
described at the high watermark, caught up; a registered broker is an observer at the offset
its heartbeat reports. Every process is always stopped."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.conftest import Cluster, HttpError, http

pytestmark = pytest.mark.integration


def test_only_the_leader_describes_the_quorum(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(size=3)
    leader = cluster.wait_for_leader()
    cluster.register_brokers([10])  # heartbeats claim offset 2**62: everything read
    standby = next(c for c in cluster.controllers if c is not leader)
    with pytest.raises(HttpError) as refused:
        http("GET", standby.url + "/v1/quorum/describe")
    assert refused.value.status == 421
    assert (refused.value.body["error"], refused.value.body["leader"]) == (
        "NOT_CONTROLLER", leader.url,
    )  # fmt: skip

    deadline = time.monotonic() + 10
    while True:
        answer = http("GET", leader.url + "/v1/quorum/describe")
        voters = {v["replica_id"]: v for v in answer["voters"]}
        if all(v["log_end_offset"] == answer["high_watermark"] for v in voters.values()):
            break
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)
    assert answer["leader_id"] == leader.node_id and answer["leader_epoch"] >= 1
    assert answer["high_watermark"] > 0 and sorted(voters) == [1, 2, 3]
    assert all(v["last_caught_up_timestamp"] > 0 for v in voters.values())
    assert [o["replica_id"] for o in answer["observers"]] == [10]
    assert answer["observers"][0]["log_end_offset"] == 2**62 + 1
    assert sorted(node["node_id"] for node in answer["nodes"]) == [1, 2, 3]
