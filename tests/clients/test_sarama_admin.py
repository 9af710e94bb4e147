"""Sarama 1.22.1's ClusterAdmin against a real pykraft cluster, and Burrow's reading of
``__consumer_offsets`` (Burrow, LinkedIn's lag monitor, is built on Sarama).

ClusterAdmin needs Version 0.11.0.0 at least (Sarama refuses DescribeConfigs below it) and then
sends what 1.22.1 always sends: Metadata v0 for ListTopics and DescribeCluster, DescribeConfigs
v0, ListGroups v0, DescribeGroups v0, OffsetFetch v1 — versions Kafka 3.9 serves and Kafka 4
dropped (KIP-896), which issue 13 asks pykraft to serve.

Burrow decodes ``__consumer_offsets`` records by hand; ``sarama-client burrow`` reads the topic
with Sarama and applies Burrow's rules (tests/clients/sarama/offsets_topic.go, written from
Burrow's ``processConsumerOffsetsMessage``), and ``sarama-client decode`` applies them to
records these tests encode with pykraft's own coordinator codec — no cluster needed for those.
"""

from __future__ import annotations

import base64
import functools
import json
import struct
import subprocess
import time
from typing import Any

import pytest

from pykraft.coordinator.group import records as records_codec
from pykraft.coordinator.group.records import GroupMetadataValue, MemberRecord, OffsetAndMetadata
from pykraft.storage.topic_partition import TopicPartition
from tests.clients.conftest import DevCluster
from tests.clients.sarama_support import (
    GROUP_OFFSET_VALUE_VERSIONS,
    INSTALL,
    NEWER,
    PARTITIONS,
    PROGRAM,
    RECORD_BATCHES,
    admin_stage,
    burrow_refusals,
    create_topic,
    events,
    joined_group,
    next_offsets,
    produce,
    sarama,
)
from tests.clients.support import unique_topic

pytestmark = pytest.mark.clients


# -- ClusterAdmin -------------------------------------------------------------------------


@pytest.mark.parametrize("version", [RECORD_BATCHES, NEWER])
def test_cluster_admin_lists_topics(cluster: DevCluster, version: str) -> None:
    """ClusterAdmin.ListTopics: Metadata v0 for every topic, then DescribeConfigs v0 for all of
    them in one request; DescribeCluster (Metadata v0) and DescribeTopics (v4/v5) too."""
    topic = create_topic(cluster)
    [listed] = events(admin_stage(cluster, version, "list_topics", topic), "topics")
    assert topic in listed["names"], listed
    [detail] = events(admin_stage(cluster, version, "list_topics", topic), "topic")
    assert (detail["partitions"], detail["replication_factor"]) == (PARTITIONS, 1)
    assert detail["configs"] == {}, "a new topic's configs are all defaults"
    [described] = events(admin_stage(cluster, version, "describe_cluster", topic), "cluster")
    assert described["brokers"] == sorted(cluster.brokers)
    [topic_metadata] = events(admin_stage(cluster, version, "describe_topics", topic),
                              "described_topic")  # fmt: skip
    assert (topic_metadata["code"], topic_metadata["partitions"]) == (0, PARTITIONS)


@pytest.mark.parametrize("version", [RECORD_BATCHES, NEWER])
def test_cluster_admin_describes_topic_configs(cluster: DevCluster, version: str) -> None:
    """ClusterAdmin.DescribeConfig of a topic (DescribeConfigs v0): Kafka's topic configs with
    their defaults, flagged as defaults (v0's is_default)."""
    topic = create_topic(cluster)
    entries = events(admin_stage(cluster, version, "topic_config", topic), "topic_config")
    by_name = {e["name"]: e for e in entries}
    defaults = [
        ("cleanup.policy", "delete"), ("retention.ms", "604800000"),
        ("max.message.bytes", "1048588"), ("min.insync.replicas", "1"),
    ]  # fmt: skip
    for name, value in defaults:
        assert by_name[name]["value"] == value, by_name.get(name)
        assert by_name[name]["default"] is True, by_name[name]
        assert by_name[name]["sensitive"] is False


@pytest.mark.parametrize("version", [RECORD_BATCHES, NEWER])
def test_cluster_admin_describes_broker_configs(cluster: DevCluster, version: str) -> None:
    """ClusterAdmin.DescribeConfig of a broker (DescribeConfigs v0, resource type BROKER = 4):
    its configs, its own ``node.id`` among them (Kafka's ``ConfigHelper.describeConfigs`` lists
    every ``KafkaConfig`` entry). Two quirks of Sarama 1.22.1 shape the call: its
    ``BrokerResource`` constant is 5 (an early KIP-133 draft; 1.23 made it 4), so the program
    passes 4 itself; and it sends the request to the controller its Metadata named, while a
    broker answers only for itself ("Unexpected broker id"), so the admin bootstraps from one
    broker — pykraft's Metadata names the answering broker as controller."""
    topic = create_topic(cluster)
    node_id, (host, port) = min(cluster.brokers.items())
    lines = admin_stage(cluster, version, "broker_config", topic, brokers=[f"{host}:{port}"])
    entries = events(lines, "broker_config")
    assert entries, f"no broker config entries: {lines}"
    assert {e["resource"] for e in entries} == {str(node_id)}
    by_name = {e["name"]: e for e in entries}
    assert by_name["node.id"]["value"] == str(node_id), by_name.get("node.id")
    assert by_name["num.partitions"]["value"] == "1", by_name.get("num.partitions")


@pytest.mark.parametrize("version", [RECORD_BATCHES, NEWER])
def test_cluster_admin_manages_topics(cluster: DevCluster, version: str) -> None:
    """ClusterAdmin's topic changes as 1.22.1 sends them: CreateTopics (v1 at 0.11, v2 at 2.0),
    AlterConfigs v0 (read back with DescribeConfigs v0, no longer a default), DeleteRecords v0
    (the log start offset moves: its low watermark), CreatePartitions v0 (from Version 1.0.0;
    Sarama refuses it below), DeleteTopics v1."""
    topic = unique_topic("sarama-admin")
    stage = functools.partial(admin_stage, cluster, version, topic=topic)
    assert events(stage(stage="create_topic", partition_count=PARTITIONS), "done")
    cluster.wait_for_topic(topic, PARTITIONS)
    produced = produce(cluster, topic, 30)
    assert {p for p, *_ in produced} == set(range(PARTITIONS)), "every partition has records"

    assert events(stage(stage="alter_config", configs={"retention.ms": "3600000"}), "done")
    by_name = {e["name"]: e for e in events(stage(stage="topic_config"), "topic_config")}
    assert (by_name["retention.ms"]["value"], by_name["retention.ms"]["default"]) == (
        "3600000", False,
    )  # fmt: skip

    # Sarama sends DeleteRecords to the controller its Metadata named and ignores the errors of
    # partitions that broker does not lead: bootstrap from one broker, which pykraft names.
    _, (host, port) = min(cluster.brokers.items())
    deleted = stage(stage="delete_records", delete_before=1, brokers=[f"{host}:{port}"])
    low_watermarks = events(deleted, "low_watermark")
    assert low_watermarks and {w["offset"] for w in low_watermarks} == {1}, (
        f"DeleteRecords v0 did not move the log start offset (Sarama reports no partition "
        f"error, it ignores them): {deleted}"
    )

    if version != RECORD_BATCHES:  # Sarama sends CreatePartitions only from Version 1.0.0
        assert events(stage(stage="create_partitions", partition_count=PARTITIONS + 1), "done")
        cluster.wait_for_topic(topic, PARTITIONS + 1)

    assert events(stage(stage="delete_topic"), "done")
    deadline = time.monotonic() + 30
    while topic in events(stage(stage="list_topics"), "topics")[0]["names"]:
        assert time.monotonic() < deadline, f"{topic} still listed after DeleteTopics"
        time.sleep(0.2)


def test_sarama_1_22_broker_resource_type_describes_nothing(cluster: DevCluster) -> None:
    """Resource type 5, Sarama 1.22.1's ``BrokerResource``, is no config resource type Kafka
    knows (``ConfigResource.Type.forId(5)`` is UNKNOWN): no broker configs come back — whether
    Sarama sees an error message or an empty resource depends on the answer's error message."""
    topic = create_topic(cluster)
    _, (host, port) = min(cluster.brokers.items())
    lines = sarama(
        cluster, "admin",
        {"topic": topic, "version": NEWER, "stage": "broker_config_1_22",
         "brokers": [f"{host}:{port}"]},
        expect_status=None,
    )  # fmt: skip
    assert events(lines, "broker_config") == [], lines
    errors = [e["stage"] for e in events(lines, "error")]
    counts = [c["count"] for c in events(lines, "broker_configs")]
    assert (errors, counts) in ((["broker_config"], []), ([], [0])), lines


@pytest.mark.parametrize("version", [RECORD_BATCHES, NEWER])
def test_cluster_admin_lists_and_describes_groups(cluster: DevCluster, version: str) -> None:
    """ClusterAdmin's group calls, what lag monitors built on Sarama use: ListConsumerGroups
    (ListGroups v0 to every broker), DescribeConsumerGroups (DescribeGroups v0) of a group with
    one live member, ListConsumerGroupOffsets (OffsetFetch v1) of its commits."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 12)
    group = unique_topic("sarama-admin-group")
    member = joined_group(cluster, topic, group, len(produced))
    try:
        [listed] = events(
            admin_stage(cluster, version, "list_groups", topic, group=group), "groups"
        )
        assert listed["groups"].get(group) == "consumer", listed
        [described] = events(
            admin_stage(cluster, version, "describe_groups", topic, group=group), "group"
        )
        assert (described["group_id"], described["code"], described["state"]) == (
            group, 0, "Stable",
        )  # fmt: skip
        assert (described["protocol_type"], described["protocol"]) == ("consumer", "range")
        assert [m["client_id"] for m in described["members"]] == ["group-check"]
        offsets = events(admin_stage(cluster, version, "group_offsets", topic, group=group),
                         "group_offset")  # fmt: skip
        assert {o["partition"]: (o["offset"], o["code"]) for o in offsets} == {
            p: (end, 0) for p, end in next_offsets(produced).items()
        } | {p: (-1, 0) for p in range(PARTITIONS) if p not in next_offsets(produced)}
    finally:
        member.close()


# -- Burrow -------------------------------------------------------------------------------


def test_offsets_topic_records_decode_as_burrow_decodes_them(cluster: DevCluster) -> None:
    """Burrow reads ``__consumer_offsets`` with Sarama and decodes its records by hand: offset
    commits at value versions 0, 1 and 3, group metadata at 0-3 (Burrow's
    ``processConsumerOffsetsMessage``). A group that subscribes and commits (kafka-python,
    current request versions) must be seen whole: its members' assignment and its offsets."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 12)
    group = unique_topic("sarama-burrow")
    joined_group(cluster, topic, group, len(produced)).close()
    lines = sarama(cluster, "burrow", {"group": group, "version": NEWER})
    assert burrow_refusals(lines) == [], "records Burrow would refuse"
    metadata = events(lines, "group_metadata")
    assert metadata and {m["value_version"] for m in metadata} <= {0, 1, 2, 3}
    assigned = [m for m in metadata if m["members"]]
    assert assigned, f"no group metadata with members: {metadata}"
    [member] = assigned[-1]["members"]
    assert (assigned[-1]["protocol_type"], member["client_id"]) == ("consumer", "group-check")
    assert member["assignment"] == {topic: list(range(PARTITIONS))}
    commits = {(c["topic"], c["partition"]): c for c in events(lines, "offset_commit")}
    assert {c["value_version"] for c in commits.values()} <= GROUP_OFFSET_VALUE_VERSIONS
    expected = next_offsets(produced)
    assert {p: commits[(topic, p)]["offset"] for p in expected} == expected


# -- Burrow's decoding rules, on records pykraft's group coordinator writes ----------------------


def decode(*records: tuple[bytes, bytes]) -> list[dict[str, Any]]:
    """``sarama-client decode``: Burrow's reading of each (key, value); no broker involved."""
    assert PROGRAM.is_file(), f"{PROGRAM} is not built: {INSTALL}"
    spec = {
        "records": [
            {"key": base64.b64encode(k).decode(), "value": base64.b64encode(v).decode()}
            for k, v in records
        ]
    }
    done = subprocess.run(
        [str(PROGRAM), "decode", json.dumps(spec)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return [json.loads(line) for line in done.stdout.splitlines()]


def assignment_bytes(version: int, topics: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment (Kafka's ConsumerProtocolAssignment.json): topics, user data."""
    out = struct.pack(">hi", version, len(topics))
    for topic, partitions in topics.items():
        out += struct.pack(">h", len(topic)) + topic.encode()
        out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return out + struct.pack(">i", -1)  # null user data


OFFSET_KEY = records_codec.offset_commit_key("burrow-group", TopicPartition("orders", 2))


@pytest.mark.parametrize(
    ("value", "version"),
    [
        (OffsetAndMetadata(offset=42, leader_epoch=7, commit_timestamp_ms=1_000), 3),
        (OffsetAndMetadata(offset=42, commit_timestamp_ms=1_000, expire_timestamp_ms=9_000), 1),
    ],
    ids=["no-expire", "expire"],
)
def test_burrow_reads_the_offset_commits_pykraft_writes(
    value: OffsetAndMetadata, version: int
) -> None:
    """Offset commit values as pykraft writes them (v3, or v1 when the commit carried a
    retention) are the versions Burrow reads: group, topic, partition and offset come through."""
    [line] = decode((OFFSET_KEY, records_codec.offset_commit_value(value)))
    assert line["event"] == "offset_commit", line
    assert (line["value_version"], line["group"], line["topic"], line["partition"]) == (
        version, "burrow-group", "orders", 2,
    )  # fmt: skip
    assert line["offset"] == 42


def test_burrow_reads_the_group_metadata_pykraft_writes() -> None:
    """Group metadata (value v3: group instance ids, the current state timestamp) decoded as
    Burrow does: header, then each member and its ConsumerProtocol assignment."""
    member = MemberRecord(
        member_id="m-1", group_instance_id="instance-1", client_id="c-1", client_host="/10.0.0.1",
        rebalance_timeout_ms=60_000, session_timeout_ms=45_000, subscription=b"\x00\x01",
        assignment=assignment_bytes(3, {"orders": [0, 2], "audit": [1]}),
    )  # fmt: skip
    value = GroupMetadataValue(
        protocol_type="consumer", generation=5, protocol="range", leader="m-1",
        current_state_timestamp_ms=1_000, members=(member,),
    )  # fmt: skip
    key = records_codec.group_metadata_key("burrow-group")
    [line] = decode((key, records_codec.group_metadata_value(value)))
    assert line["event"] == "group_metadata", line
    assert (line["key_version"], line["value_version"], line["generation"]) == (2, 3, 5)
    assert (line["protocol_type"], line["protocol"], line["leader"]) == ("consumer", "range", "m-1")
    assert line["members"] == [{
        "member_id": "m-1", "group_instance_id": "instance-1", "client_id": "c-1",
        "client_host": "/10.0.0.1", "assignment": {"orders": [0, 2], "audit": [1]},
    }]  # fmt: skip


def test_burrow_refuses_what_it_cannot_read() -> None:
    """The edges of Burrow's rules, so the check above can fail: offset value v2 (Kafka 2.0's)
    and v4, group metadata v4 (flexible), an unknown key version, a value cut short; an empty
    value is a tombstone."""
    offset_v2 = struct.pack(">hqh", 2, 42, 0) + struct.pack(">q", 1_000)
    offset_v4 = struct.pack(">hqih", 4, 42, -1, 0) + struct.pack(">q", 1_000)
    group_key = records_codec.group_metadata_key("burrow-group")
    group_v4 = struct.pack(">h", 4) + b"\x09consumer"
    cut_short = struct.pack(">hqih", 3, 42, -1, 0)  # no commit timestamp
    lines = decode(
        (OFFSET_KEY, offset_v2), (OFFSET_KEY, offset_v4), (group_key, group_v4),
        (struct.pack(">h", 3) + b"\x00\x01g", b"\x00\x00"), (OFFSET_KEY, cut_short),
        (OFFSET_KEY, b""),
    )  # fmt: skip
    assert [(line["event"], line["reason"]) for line in lines] == [
        ("decode_error", "offset value version 2"),
        ("decode_error", "offset value version 4"),
        ("decode_error", "group metadata value version 4"),
        ("decode_error", "key version 3"),
        ("decode_error", "commit_timestamp"),
        ("tombstone", ""),
    ]
