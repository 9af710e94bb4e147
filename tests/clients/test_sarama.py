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
built by ``.ci/install-sarama.sh`` in GOPATH mode; ``sarama_support``). Its ClusterAdmin and
Burrow's reading of ``__consumer_offsets`` are in ``test_sarama_admin.py``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pykraft.storage.record_batch import CompressionType
from tests.clients.conftest import DevCluster
from tests.clients.sarama_support import (
    NEWER,
    PARTITIONS,
    RECORD_BATCHES,
    STATUS_FAILED,
    UNSUPPORTED_COMPRESSION_TYPE,
    UNSUPPORTED_VERSION,
    Record,
    burrow_refusals,
    committed,
    create_topic,
    events,
    next_offsets,
    produce,
    records,
    sarama,
)
from tests.clients.support import stored_batches, unique_topic

pytestmark = pytest.mark.clients


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
    assert burrow_refusals(lines) == []
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


@pytest.mark.parametrize(("version", "list_offsets"), [("", 0), (NEWER, 1)], ids=["default", NEWER])
def test_get_offset(cluster: DevCluster, version: str, list_offsets: int) -> None:
    """``Client.GetOffset`` for the oldest and newest offsets: ListOffsets v{list_offsets} —
    v0 at the default Version, the request Burrow's lag checks send (EOF there: no lag)."""
    topic = create_topic(cluster)
    produced = produce(cluster, topic, 20)
    lines = sarama(cluster, "offsets", {"topic": topic, "version": version})
    answered = {o["partition"]: (o["oldest"], o["newest"]) for o in events(lines, "offset")}
    counts = Counter(partition for partition, *_ in produced)
    assert answered == {p: (0, counts[p]) for p in range(PARTITIONS)}, list_offsets
