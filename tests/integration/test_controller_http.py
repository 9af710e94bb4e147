"""The controller's HTTP API against one real controller process: JSON errors with the right
status, broker lifecycle (KIP-631), admin operations, long polls, the OpenAPI document."""

import threading
import time
from typing import Any

import pytest

from tests.integration.conftest import Cluster, HttpError, http

pytestmark = pytest.mark.integration


@pytest.fixture
def single(cluster_factory) -> Cluster:
    cluster: Cluster = cluster_factory(1)
    cluster.wait_for_leader()
    return cluster


def error_of(method: str, url: str, body: Any = None, raw: bytes | None = None) -> HttpError:
    with pytest.raises(HttpError) as caught:
        http(method, url, body, raw=raw)
    assert set(caught.value.body) >= {"error", "message"}
    assert caught.value.body["message"].endswith(".")
    return caught.value


def test_bad_requests_answer_400_with_a_sentence(single: Cluster) -> None:
    url = single.controllers[0].url
    bad_json = error_of("POST", url + "/v1/topics", raw=b"{not json")
    assert (bad_json.status, bad_json.body["error"]) == (400, "INVALID_REQUEST")
    missing = error_of("POST", url + "/v1/topics", {"partitions": 1})
    assert missing.status == 400 and "'name'" in missing.body["message"]
    typed = error_of("POST", url + "/v1/topics", {"name": "x", "partitions": "3"})
    assert typed.status == 400 and "integer" in typed.body["message"]
    query = error_of("GET", url + "/v1/metadata/records?from=abc")
    assert query.status == 400
    unknown = error_of("GET", url + "/v1/nothing-here")
    assert (unknown.status, unknown.body["error"]) == (404, "NOT_FOUND")
    no_topic = error_of("GET", url + "/v1/topics/nope")
    assert (no_topic.status, no_topic.body["error"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    no_snapshot = error_of("GET", url + "/v1/metadata/snapshots/../../etc")
    assert no_snapshot.status == 404


def test_broker_lifecycle_and_admin_operations(single: Cluster) -> None:
    epochs = single.register_brokers([1, 2])
    brokers = single.request("GET", "/v1/brokers")["brokers"]
    assert [(b["broker_id"], b["fenced"]) for b in brokers] == [(1, False), (2, False)]
    stale = error_of(
        "POST",
        single.controllers[0].url + "/v1/brokers/heartbeat",
        {"broker_id": 1, "broker_epoch": epochs[1] - 1, "current_metadata_offset": 0},
    )
    assert (stale.status, stale.body["error"]) == (409, "STALE_BROKER_EPOCH")

    created = single.request(
        "POST",
        "/v1/topics",
        {
            "name": "pets",
            "partitions": 2,
            "replication_factor": 2,
            "configs": {"retention.ms": "1000"},
        },
    )
    assert created["partitions"] == 2 and created["replication_factor"] == 2
    duplicate = error_of("POST", single.controllers[0].url + "/v1/topics", {"name": "pets"})
    assert (duplicate.status, duplicate.body["error"]) == (409, "TOPIC_ALREADY_EXISTS")
    topic = single.request("GET", "/v1/topics/pets")
    assert topic["configs"]["retention.ms"] == "1000"
    partition = topic["partitions"][0]
    assert sorted(partition["replicas"]) == [1, 2] and partition["leader"] in (1, 2)

    single.request("POST", "/v1/topics/pets/partitions", {"count": 3})
    assert len(single.request("GET", "/v1/topics/pets")["partitions"]) == 3
    configs = single.request(
        "PUT",
        "/v1/configs/topic/pets",
        {"set": {"cleanup.policy": "compact"}, "delete": ["retention.ms"]},
    )
    assert configs["configs"]["cleanup.policy"] == "compact"
    election = single.request(
        "POST", "/v1/elections", {"election_type": "preferred", "partitions": None}
    )
    assert "results" in election

    # The leader of partition 0 shrinks the ISR to itself (AlterPartition).
    leader = partition["leader"]
    altered = single.request(
        "POST",
        "/v1/alter-partition",
        {
            "broker_id": leader,
            "broker_epoch": epochs[leader],
            "partitions": [
                {
                    "topic_id": topic["topic_id"],
                    "partition_index": 0,
                    "leader_epoch": partition["leader_epoch"],
                    "partition_epoch": partition["partition_epoch"],
                    "new_isr": [leader],
                }
            ],
        },
    )
    assert altered["partitions"][0]["error"] == "NONE"
    assert altered["partitions"][0]["isr"] == [leader]

    block = single.request("POST", "/v1/producer-ids", {"broker_id": 1, "broker_epoch": epochs[1]})
    next_block = single.request(
        "POST", "/v1/producer-ids", {"broker_id": 1, "broker_epoch": epochs[1]}
    )
    assert next_block["producer_id_start"] == block["producer_id_start"] + block["producer_id_len"]

    single.request("DELETE", "/v1/topics/pets")
    assert single.request("GET", "/v1/topics")["topics"] == []
    cluster = single.request("GET", "/v1/cluster")
    assert cluster["controller_id"] == 1 and cluster["brokers"] == 2


def test_a_long_poll_returns_as_soon_as_a_batch_commits(single: Cluster) -> None:
    controller = single.controllers[0]
    single.register_brokers([1])
    end = controller.get("/v1/metadata/records?from=0")["next_offset"]
    # Skip NoOpRecords until our topic appears; each poll must return promptly.
    timer = threading.Timer(0.5, lambda: single.request("POST", "/v1/topics", {"name": "t"}))
    timer.start()
    try:
        deadline = time.monotonic() + 10
        seen: list[str] = []
        while "TopicRecord" not in seen and time.monotonic() < deadline:
            started = time.monotonic()
            answer = controller.get(f"/v1/metadata/records?from={end}&max_wait_ms=5000")
            assert time.monotonic() - started < 2.0  # a NoOp at least every 500 ms
            assert answer["batches"] and answer["batches"][0]["base_offset"] == end
            seen += [r["type"] for b in answer["batches"] for r in b["records"]]
            end = answer["next_offset"]
        assert "TopicRecord" in seen and "PartitionRecord" in seen
    finally:
        timer.cancel()
        timer.join()


def test_a_heartbeat_reporting_an_offline_log_dir_moves_its_leaderships(single: Cluster) -> None:
    # KIP-858 over /v1/brokers/heartbeat: broker 1 leads pets-0 on a dir that failed.
    epochs = single.register_brokers([1, 2])
    created = single.request("POST", "/v1/topics", {"name": "pets", "assignments": {"0": [1, 2]}})
    topic_id = created["topic_id"]
    url = single.controllers[0].url + "/v1/brokers/heartbeat"
    beat = {"broker_id": 1, "broker_epoch": epochs[1], "current_metadata_offset": 2**62}
    failed_dir = "AAAAAAAAAAAAAAAAAAAD6A"  # directory id 1000
    malformed: list[tuple[dict[str, Any], str]] = [
        ({"offline_log_dirs": failed_dir}, "array"),
        ({"offline_log_dirs": [7]}, "directory id"),
        ({"offline_log_dirs": ["AAAAAAAAAAAAAAAAAAAAAQ"]}, "reserved directory id"),
        (
            {"offline_log_dirs": [failed_dir], "offline_replicas": [{"topic_id": topic_id}]},
            "'partition'",
        ),
    ]
    for body, message in malformed:
        bad = error_of("POST", url, {**beat, **body})
        assert (bad.status, bad.body["error"]) == (400, "INVALID_REQUEST")
        assert message in bad.body["message"]
    assert single.request("GET", "/v1/topics/pets")["partitions"][0]["leader"] == 1  # unchanged

    answer = single.request(
        "POST",
        "/v1/brokers/heartbeat",
        {
            **beat,
            "offline_log_dirs": [failed_dir],
            "offline_replicas": [{"topic_id": topic_id, "partition": 0}],
        },
    )
    assert answer["is_fenced"] is False  # the broker keeps serving its other dirs
    partition = single.request("GET", "/v1/topics/pets")["partitions"][0]
    assert (partition["leader"], partition["isr"], partition["leader_epoch"]) == (2, [2], 1)
