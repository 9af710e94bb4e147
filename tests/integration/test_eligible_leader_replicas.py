"""KIP-966 end to end on real processes: one controller, two brokers, eligible leader replicas
turned on with UpdateFeatures, a topic with RF 2 and min.insync.replicas 2.

Both brokers stop with SIGTERM (a clean shutdown): the first leaves the ISR below min ISR and
becomes an eligible leader replica, the second leaves the ISR empty. The first comes back: its
clean-shutdown marker holds its broker epoch, its registration sends it as PreviousBrokerEpoch,
so the controller keeps it in the ELR and elects it cleanly — and it serves every record
acknowledged with acks=all. (After a kill -9 it would have no epoch to show, leave the ELR, and
the partition would wait offline: unclean election is off.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.conftest import records_to_end
from tests.integration.test_broker_process import BrokerProcess, start_cluster, wait_for

pytestmark = pytest.mark.integration


def until(read: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    """``read()``'s first truthy value (fails after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while not (value := read()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return value


def partition(cluster: Any) -> dict[str, Any]:
    [only] = cluster.request("GET", "/v1/topics/pets")["partitions"]
    assert isinstance(only, dict)
    return only


def test_a_cleanly_restarted_eligible_replica_is_elected_and_keeps_every_ack(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    cluster = start_cluster(cluster_factory, brokers, tmp_path, 2)
    update = {"feature": "eligible.leader.replicas.version", "max_version_level": 1}
    answer = cluster.request("POST", "/v1/features", {"feature_updates": [update]})
    assert [r["error"] for r in answer["results"]] == ["NONE"], answer
    cluster.request(
        "POST",
        "/v1/topics",
        {
            "name": "pets",
            "partitions": 1,
            "replication_factor": 2,
            "configs": {"min.insync.replicas": "2"},
        },
    )
    wait_for(lambda: cluster.request("GET", "/v1/topics/pets"))
    until(lambda: len(partition(cluster)["isr"]) == 2)
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    futures = [producer.send("pets", value=b"pet-%d" % i) for i in range(100)]
    producer.flush(timeout=30)
    acknowledged = {f.get(timeout=1).offset for f in futures}
    producer.close()

    first_leader = partition(cluster)["leader"]
    follower = next(b for b in brokers if b.node_id != first_leader)
    leader = next(b for b in brokers if b.node_id == first_leader)
    epoch = follower.status()["broker_epoch"]  # type: ignore[index]
    assert follower.terminate() == 0
    marker = json.loads(
        (tmp_path / f"broker-{follower.node_id}" / ".kafka_cleanshutdown").read_text()
    )
    assert marker == {"version": 0, "brokerEpoch": epoch}
    state = partition(cluster)
    assert (state["isr"], state["eligible_leader_replicas"]) == (
        [leader.node_id],
        [follower.node_id],
    )

    assert leader.terminate() == 0  # the last ISR member: the ISR becomes empty
    state = partition(cluster)
    assert (state["leader"], state["isr"]) == (-1, [])
    assert sorted(state["eligible_leader_replicas"]) == sorted(b.node_id for b in brokers)

    follower.start()
    follower.wait_running()
    state = until(lambda: (p := partition(cluster))["leader"] >= 0 and p)
    assert (state["leader"], state["isr"]) == (follower.node_id, [follower.node_id])
    assert state["eligible_leader_replicas"] == [leader.node_id]
    assert state["leader_recovery_state"] == 0  # a clean election, not an unclean one
    # The high watermark moves again once the ISR is back at min ISR (KIP-966's strict rule).
    leader.start()
    leader.wait_running()
    until(lambda: len(partition(cluster)["isr"]) == 2)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    consumer.assign([TopicPartition("pets", 0)])
    assert {m.offset for m in records_to_end(consumer)} == acknowledged
    consumer.close()
