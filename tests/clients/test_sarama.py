"""Sarama 1.22.1 (Go; Debian's golang-github-shopify-sarama-dev) against a real pykraft cluster,
as its users and the tools built on it (Burrow, sarama-cluster) drive it.

Sarama's default ``Config.Version`` is V0_8_2_0, and 1.22.1 hard-codes some request versions
whatever the setting says, so these are what a Sarama program sends out of the box:

* group offsets: FindCoordinator v0, OffsetFetch v1 and OffsetCommit v1 (``offset_manager.go``:
  v2 only when ``Consumer.Offsets.Retention`` is set) — also from a ``ConsumerGroup``;
* ``Client.GetOffset``: ListOffsets v0 (v1 from V0_10_1_0) — Burrow's lag check;
* Metadata v0 (v1 from V0_10_0_0, v5 from V1_0_0_0);
* ``ClusterAdmin``: Metadata v0 for ListTopics/DescribeCluster, DescribeConfigs v0 always.

Kafka 3.9 serves all of them; issue 13 asks the same of pykraft. Produce v0-2 and Fetch v0-3
carry the pre-v2 message formats, which pykraft answers with UNSUPPORTED_VERSION (issue 13), so
records travel with a Version of 0.11.0.0 or later (Produce v3, Fetch v4); the offset
management under test still runs at the default Version.

Each scenario runs ``tests/clients/sarama/bin/sarama-client COMMAND SPEC`` (one Go program,
built by ``.ci/install-sarama.sh`` in GOPATH mode), which prints one JSON line per event. Each
run has its own client id, so a failure message lists the requests the brokers refused from it
by closing the connection (their log's "closing connection ... api_key K vV" lines).
"""

from __future__ import annotations

import base64
import json
import re
import struct
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic

from pykraft.coordinator.group import records as records_codec
from pykraft.coordinator.group.records import GroupMetadataValue, MemberRecord, OffsetAndMetadata
from pykraft.protocol.api_keys import ApiKey
from pykraft.storage.record_batch import CompressionType
from pykraft.storage.topic_partition import TopicPartition
from tests.clients.conftest import DevCluster
from tests.clients.support import stored_batches, unique_topic

pytestmark = pytest.mark.clients

PROGRAM = Path(__file__).resolve().parent / "sarama" / "bin" / "sarama-client"
INSTALL = "run .ci/install-sarama.sh (golang-go + golang-github-shopify-sarama-dev, go build)"
PARTITIONS = 3
TIMEOUT_S = 60.0
RECORD_BATCHES = "0.11.0.0"  # the first Version that produces and fetches RecordBatch v2
NEWER = "2.0.0"  # the "V2_x" path: Metadata v5, ListOffsets v1, ConsumerGroup
UNSUPPORTED_VERSION = 35
UNSUPPORTED_COMPRESSION_TYPE = 76
GROUP_OFFSET_VALUE_VERSIONS = {1, 3}  # Kafka 3.9 writes v1 with an expire time, else v3
STATUS_FAILED = 2  # sarama-client: a stage printed an "error" line


def refused_requests(cluster: DevCluster, client_id: str) -> list[str]:
    """The requests from ``client_id`` that a broker answered by closing the connection."""
    refused: Counter[str] = Counter()
    pattern = re.compile(r"api_key (\d+) v(\d+) correlation_id \d+ client_id '([^']*)'")
    for log in sorted((cluster.data_dir / "logs").glob("broker-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            found = pattern.search(line) if "closing connection" in line else None
            if found and found.group(3) == client_id:
                refused[f"{ApiKey(int(found.group(1))).name} v{found.group(2)}"] += 1
    return [f"{name} (x{count})" for name, count in sorted(refused.items())]


def sarama(
    cluster: DevCluster, command: str, spec: dict[str, Any], *, expect_status: int | None = 0
) -> list[dict[str, Any]]:
    """Run ``sarama-client command`` with ``spec``; its JSON lines. Its own timer fails it first.
    ``expect_status`` None: it may succeed or report a failed stage (0 or 2)."""
    assert PROGRAM.is_file(), f"{PROGRAM} is not built: {INSTALL}"
    client_id = f"sarama-{command}-{uuid.uuid4().hex[:8]}"
    full = {
        "brokers": cluster.bootstrap_servers.split(","), "timeout_ms": int(TIMEOUT_S * 1000),
        "client_id": client_id, **spec,
    }  # fmt: skip
    done = subprocess.run(
        [str(PROGRAM), command, json.dumps(full)],
        capture_output=True, text=True, timeout=TIMEOUT_S + 15,
    )  # fmt: skip
    expected = (0, STATUS_FAILED) if expect_status is None else (expect_status,)
    assert done.returncode in expected, (
        f"sarama-client {command} {spec} exited {done.returncode} (expected {expected})\n"
        f"requests the brokers refused by closing the connection: "
        f"{refused_requests(cluster, client_id) or 'none'}\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def events(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == event]


def create_topic(cluster: DevCluster, partitions: int = PARTITIONS) -> str:
    topic = unique_topic("sarama")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        response = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            timeout_ms=int(TIMEOUT_S * 1000),
        )
    finally:
        admin.close()
    [created] = response["topics"]
    assert (created["name"], created["error_code"]) == (topic, 0), created
    cluster.wait_for_topic(topic, partitions)
    return topic


Record = tuple[int, int, str, str]  # partition, offset, key, value


def produce(
    cluster: DevCluster, topic: str, count: int, version: str = NEWER, **spec: Any
) -> list[Record]:
    """``count`` records through a SyncProducer with Sarama's default producer settings."""
    lines = sarama(
        cluster,
        "produce",
        {"topic": topic, "count": count, "key_prefix": "key-", "version": version, **spec},
    )
    produced = [(p["partition"], p["offset"], p["key"], p["value"]) for p in lines]
    assert [key for _, _, key, _ in produced] == [f"key-{i}" for i in range(count)], lines
    assert len({partition for partition, *_ in produced}) > 1, f"one partition only: {produced}"
    return produced


def records(lines: list[dict[str, Any]]) -> list[Record]:
    return [(r["partition"], r["offset"], r["key"], r["value"]) for r in events(lines, "record")]


def committed(lines: list[dict[str, Any]]) -> dict[int, int]:
    """What OffsetFetch v1 answered after the run: partition -> offset (-1: none)."""
    answers = events(lines, "committed")
    assert answers and all(a["code"] == 0 for a in answers), lines
    return {a["partition"]: a["offset"] for a in answers}


def next_offsets(read: list[Record]) -> dict[int, int]:
    """Per partition, the offset after the last record read: what a commit should say."""
    ends: dict[int, int] = {}
    for partition, offset, _, _ in read:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def check_resumed(
    produced: list[Record], first: list[Record], second: list[Record], after_first: dict[int, int]
) -> None:
    """The two runs read every record exactly once, the second from the first one's commits."""
    assert sorted(first + second) == sorted(produced), (
        f"read twice: {sorted(set(first) & set(second))}; "
        f"never read: {sorted(set(produced) - set(first) - set(second))}"
    )
    for partition, offset, _, _ in second:
        assert offset >= after_first.get(partition, 0), (
            f"partition {partition} offset {offset} re-read below the commit {after_first}"
        )


# -- group offsets ------------------------------------------------------------------------


def commit_and_resume(cluster: DevCluster, **spec: Any) -> str:
    """Two runs of Sarama's OffsetManager over a 30-record topic: the first reads 12 records
    and commits, the second resumes where the commits say and reads the other 18. The group."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 30)
    group = unique_topic("sarama-offsets")
    spec = {"topic": topic, "group": group, "fetch_version": RECORD_BATCHES, **spec}
    first_run = sarama(cluster, "commit", {**spec, "count": 12})
    assert {s["offset"] for s in events(first_run, "start")} == {-2}, "a new group: no offsets"
    first = records(first_run)
    assert len(first) == 12
    after_first = committed(first_run)
    assert after_first == {p: next_offsets(first).get(p, -1) for p in range(PARTITIONS)}

    second_run = sarama(cluster, "commit", {**spec, "count": 18})
    starts = {s["partition"]: s["offset"] for s in events(second_run, "start")}
    assert starts == {p: o if o >= 0 else -2 for p, o in after_first.items()}  # -2: oldest
    check_resumed(produced, first, records(second_run), after_first)
    assert committed(second_run) == next_offsets(produced)
    return group


def test_default_version_offset_commits_are_resumed_from(cluster: DevCluster) -> None:
    """Sarama's OffsetManager at its default Version (FindCoordinator v0, OffsetFetch v1,
    OffsetCommit v1) commits what a first run read; a restarted one resumes there — no record
    read again, none skipped (Kafka's ``OffsetCommitRequest`` v1 with generation -1 and no
    member: a standalone commit, ``GroupCoordinator.handleCommitOffsets``)."""
    commit_and_resume(cluster)


def test_offset_commits_with_a_retention_are_resumed_from(cluster: DevCluster) -> None:
    """With ``Consumer.Offsets.Retention`` Sarama commits with OffsetCommit v2 and a retention
    time (Sarama wants Version 0.9+ for it); Kafka stores such a commit as offset value v1, the
    one with an expire timestamp (``GroupMetadataManager.offsetCommitValue``), which Burrow
    reads."""
    group = commit_and_resume(cluster, version=RECORD_BATCHES, retention_ms=3_600_000)
    lines = sarama(cluster, "burrow", {"group": group, "version": NEWER})
    assert events(lines, "decode_error") == []
    commits = events(lines, "offset_commit")
    assert commits and {c["value_version"] for c in commits} == {1}, commits


def test_consumer_group_commits_are_resumed_from(cluster: DevCluster) -> None:
    """A Sarama ConsumerGroup (Version 2.0.0; it commits with OffsetCommit v1 all the same)
    reads part of a topic and leaves; a new member of the group resumes at the commits."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 30)
    group = unique_topic("sarama-group")
    spec = {"topic": topic, "group": group, "version": NEWER}
    first_run = sarama(cluster, "group", {**spec, "count": 12})
    [assigned] = events(first_run, "assigned")
    assert assigned["claims"] == {topic: list(range(PARTITIONS))}
    first = records(first_run)
    after_first = committed(first_run)
    assert after_first == {p: next_offsets(first).get(p, -1) for p in range(PARTITIONS)}

    second_run = sarama(cluster, "group", {**spec, "count": 18})
    [reassigned] = events(second_run, "assigned")
    assert reassigned["generation"] > assigned["generation"]
    check_resumed(produced, first, records(second_run), after_first)
    assert committed(second_run) == next_offsets(produced)


# -- producing and consuming --------------------------------------------------------------


@pytest.mark.parametrize("version", [RECORD_BATCHES, NEWER])
def test_produced_records_are_read_back(cluster: DevCluster, version: str) -> None:
    """Default producer settings (acks=1, hash partitioner) at ``version``; a PartitionConsumer
    reads every record back once, at the offset the producer was given."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 20, version)
    for partition in {p for p, *_ in produced}:
        offsets = sorted(o for p, o, *_ in produced if p == partition)
        assert offsets == list(range(len(offsets))), f"partition {partition}: {offsets}"
    read = records(sarama(cluster, "consume", {"topic": topic, "count": 20, "version": version}))
    assert sorted(read) == sorted(produced)


@pytest.mark.parametrize(
    ("compression", "stored"),
    [("gzip", CompressionType.GZIP), ("snappy", CompressionType.SNAPPY),
     ("lz4", CompressionType.LZ4)],
)  # fmt: skip
def test_compressed_batches_are_stored_as_sent_and_read_back(
    cluster: DevCluster, compression: str, stored: CompressionType
) -> None:
    """Sarama's own codecs (Go's gzip, xerial-compatible snappy, pierrec/lz4): the broker keeps
    each batch as sent and a consumer decompresses it."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 20, NEWER, compression=compression)
    read = records(sarama(cluster, "consume", {"topic": topic, "count": 20, "version": NEWER}))
    assert sorted(read) == sorted(produced)
    for partition in {p for p, *_ in produced}:
        batches = stored_batches(cluster.data_dir, topic, partition)
        assert {batch.compression for batch in batches} == {stored}


def test_zstd_on_produce_v3_is_answered_unsupported_compression_type(cluster: DevCluster) -> None:
    """Sarama 1.22.1 sends zstd batches with Produce v3 (it never asks for v7, a bug later
    releases fixed); Kafka refuses zstd below Produce v7 with UNSUPPORTED_COMPRESSION_TYPE
    (KIP-110, ``KafkaApis.handleProduceRequest``) — so does pykraft, and nothing is stored."""
    topic = create_topic(cluster)
    lines = sarama(
        cluster, "produce",
        {"topic": topic, "count": 1, "key_prefix": "k", "version": "2.2.0", "compression": "zstd"},
        expect_status=STATUS_FAILED,
    )  # fmt: skip
    assert [(e["stage"], e.get("code")) for e in events(lines, "error")] == [
        ("produce", UNSUPPORTED_COMPRESSION_TYPE)
    ], lines
    offsets = sarama(cluster, "offsets", {"topic": topic, "version": NEWER})
    assert {(o["oldest"], o["newest"]) for o in events(offsets, "offset")} == {(0, 0)}


def test_default_version_producer_is_answered_unsupported_version(cluster: DevCluster) -> None:
    """At its default Version Sarama sends Produce v0 (message format v0): pykraft answers
    UNSUPPORTED_VERSION (issue 13: Produce v0-2 need the pre-v2 formats) — an error Sarama
    reports at once, not a closed connection — and stores nothing."""
    topic = create_topic(cluster)
    lines = sarama(
        cluster, "produce", {"topic": topic, "count": 1, "key_prefix": "k"},
        expect_status=STATUS_FAILED,
    )  # fmt: skip
    assert [(e["stage"], e.get("code")) for e in events(lines, "error")] == [
        ("produce", UNSUPPORTED_VERSION)
    ], lines
    offsets = sarama(cluster, "offsets", {"topic": topic, "version": NEWER})
    assert {(o["oldest"], o["newest"]) for o in events(offsets, "offset")} == {(0, 0)}


def test_default_version_consumer_is_answered_unsupported_version(cluster: DevCluster) -> None:
    """At its default Version a PartitionConsumer asks ListOffsets v0 for the oldest offset, then
    fetches with Fetch v0 (message format v0): UNSUPPORTED_VERSION (issue 13: Fetch v0-3 need
    the pre-v2 formats), which Sarama hands to the application — not a closed connection."""
    topic = create_topic(cluster)
    produce(cluster, topic, 6)
    lines = sarama(cluster, "consume", {"topic": topic, "count": 6}, expect_status=STATUS_FAILED)
    assert events(lines, "record") == []
    [error] = events(lines, "error")
    assert (error["stage"], error.get("code")) == ("fetch", UNSUPPORTED_VERSION), lines


@pytest.mark.parametrize(("version", "list_offsets"), [("", 0), (NEWER, 1)])
def test_get_offset(cluster: DevCluster, version: str, list_offsets: int) -> None:
    """``Client.GetOffset`` for the oldest and newest offsets: ListOffsets v{list_offsets} —
    v0 at the default Version, the request Burrow's lag checks send (EOF there: no lag)."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 20)
    lines = sarama(cluster, "offsets", {"topic": topic, "version": version})
    answered = {o["partition"]: (o["oldest"], o["newest"]) for o in events(lines, "offset")}
    counts = Counter(partition for partition, *_ in produced)
    assert answered == {p: (0, counts[p]) for p in range(PARTITIONS)}, list_offsets


# -- ClusterAdmin -------------------------------------------------------------------------


def admin_stage(
    cluster: DevCluster, version: str, stage: str, topic: str, **spec: Any
) -> list[dict[str, Any]]:
    return sarama(cluster, "admin", {"topic": topic, "version": version, "stage": stage, **spec})


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


# -- Burrow -------------------------------------------------------------------------------


def test_offsets_topic_records_decode_as_burrow_decodes_them(cluster: DevCluster) -> None:
    """Burrow reads ``__consumer_offsets`` with Sarama and decodes its records by hand: offset
    commits at value versions 0, 1 and 3, group metadata at 0-3 (Burrow's
    ``processConsumerOffsetsMessage``). A group that subscribes and commits (kafka-python,
    current request versions) must be seen whole: its members' assignment and its offsets."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 12)
    group = unique_topic("sarama-burrow")
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers.split(","), group_id=group,
        client_id="burrow-check", auto_offset_reset="earliest", enable_auto_commit=False,
        consumer_timeout_ms=20_000,
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        read = [next(consumer) for _ in produced]
        consumer.commit()
    finally:
        consumer.close()
    assert len(read) == len(produced)
    lines = sarama(cluster, "burrow", {"group": group, "version": NEWER})
    assert events(lines, "decode_error") == [], "records Burrow would refuse"
    metadata = events(lines, "group_metadata")
    assert metadata and {m["value_version"] for m in metadata} <= {0, 1, 2, 3}
    assigned = [m for m in metadata if m["members"]]
    assert assigned, f"no group metadata with members: {metadata}"
    [member] = assigned[-1]["members"]
    assert (assigned[-1]["protocol_type"], member["client_id"]) == ("consumer", "burrow-check")
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
