"""KafkaJS 2.2.4 (Node.js; pinned in tests/clients/kafkajs/package-lock.json) against a real
pykraft cluster: its admin client creates topics and lists offsets, its producer sends keyed
messages (plain, gzip, idempotent, transactional), its consumers read them back through a
consumer group — KafkaJS has no group-less consumer — and commit what they read.

Each scenario runs a small script from tests/clients/kafkajs/ (``node SCRIPT SPEC``) that prints
one JSON line per event; bytes travel as base64. ``.ci/install-kafkajs.sh`` (run by
``make test``) installs Node.js and ``npm ci``s the pinned KafkaJS.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pykraft.storage.record_batch import CompressionType
from tests.clients.conftest import DevCluster
from tests.clients.support import (
    UNKNOWN_TOPIC_OR_PARTITION,
    Message,
    Placed,
    by_partition,
    check_produced,
    check_read_back,
    keyed_messages,
    metadata,
    stored_batches,
    unique_topic,
)
from tests.clients.txn_support import (
    check_exactly,
    check_in_offset_order,
    stored_markers,
    wait_for_transaction_end,
)

pytestmark = pytest.mark.clients

SCRIPTS = Path(__file__).resolve().parent / "kafkajs"
PARTITIONS = 3
TIMEOUT_S = 60.0
INSTALL = "run .ci/install-kafkajs.sh (Node.js, then npm ci in tests/clients/kafkajs)"


def node_command(cluster: DevCluster, script: str, spec: dict[str, Any]) -> list[str]:
    executable = shutil.which("node")
    assert executable, f"node is not on PATH: {INSTALL}"
    assert (SCRIPTS / "node_modules" / "kafkajs").is_dir(), f"KafkaJS is not installed: {INSTALL}"
    full = {"brokers": cluster.bootstrap_servers.split(","), "timeout_ms": TIMEOUT_S * 1000, **spec}
    return [executable, str(SCRIPTS / script), json.dumps(full)]


def node(
    cluster: DevCluster, script: str, spec: dict[str, Any], *, expect_status: int = 0
) -> list[dict[str, Any]]:
    """Run ``script`` with ``spec``; its JSON lines. The script's own timer fails it first."""
    done = subprocess.run(
        node_command(cluster, script, spec),
        cwd=SCRIPTS, capture_output=True, text=True, timeout=TIMEOUT_S + 15,
    )  # fmt: skip
    assert done.returncode == expect_status, (
        f"node {script} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def _encode(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _decode(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def to_json(message: Message) -> dict[str, Any]:
    return {
        "key": _encode(message.key),
        "value": _encode(message.value),
        "headers": [[name, _encode(value)] for name, value in message.headers],
        "timestamp_ms": message.timestamp_ms,
    }


def from_json(line: dict[str, Any]) -> Placed:
    headers = tuple((name, _decode(value)) for name, value in line["headers"])
    message = Message(_decode(line["key"]), _decode(line["value"]), headers, line["timestamp_ms"])
    return Placed(line["partition"], line["offset"], message)


def create_topic(cluster: DevCluster, partitions: int = PARTITIONS) -> str:
    topic = unique_topic("kafkajs")
    spec = {"action": "create_topic", "topic": topic, "partitions": partitions}
    [answer] = node(cluster, "admin.js", {**spec, "replication_factor": 1})
    assert answer == {"created": True}
    cluster.wait_for_topic(topic, partitions)
    return topic


def produce(
    cluster: DevCluster, topic: str, messages: Sequence[Message], **spec: Any
) -> list[Placed]:
    lines = node(
        cluster, "produce.js", {"topic": topic, "messages": [to_json(m) for m in messages], **spec}
    )
    assert [line["index"] for line in lines] == list(range(len(messages))), lines
    return [Placed(line["partition"], line["offset"], messages[line["index"]]) for line in lines]


def consume(
    cluster: DevCluster, topic: str, group_id: str, count: int, **spec: Any
) -> list[dict[str, Any]]:
    """The group's members read ``count`` messages (and nothing more within a second)."""
    lines = node(cluster, "consume.js", {
        "topic": topic, "group_id": group_id, "count": count, "partitions": PARTITIONS, **spec,
    })  # fmt: skip
    return [line for line in lines if "offset" in line]


def group_offsets(cluster: DevCluster, topic: str, group_id: str) -> dict[int, int]:
    [answer] = node(
        cluster, "admin.js", {"action": "group_offsets", "topic": topic, "group_id": group_id}
    )
    return {int(partition): offset for partition, offset in answer["committed"].items()}


def end_offsets(produced: Sequence[Placed], partitions: int = PARTITIONS) -> dict[int, int]:
    grouped = by_partition(produced)
    return {p: grouped[p][-1].offset + 1 if p in grouped else -1 for p in range(partitions)}


def test_keyed_messages_round_trip_and_the_group_resumes_where_it_committed(
    cluster: DevCluster,
) -> None:
    topic, group = create_topic(cluster), unique_topic("kafkajs-group")
    # KafkaJS cannot send a header without a value; tombstones (message 5) it sends.
    messages = keyed_messages(50, null_header_values=False)
    produced = produce(cluster, topic, messages[:40])
    check_produced(produced, partitions_at_least=2)
    consumed = [from_json(line) for line in consume(cluster, topic, group, 40)]
    check_read_back(produced, consumed)
    check_in_offset_order(consumed)
    assert group_offsets(cluster, topic, group) == end_offsets(produced)
    # The same group again: only what was produced since its commit.
    more = produce(cluster, topic, messages[40:])
    check_read_back(more, [from_json(line) for line in consume(cluster, topic, group, 10)])
    assert group_offsets(cluster, topic, group) == end_offsets(produced + more)


def test_two_members_of_a_group_share_the_partitions(cluster: DevCluster) -> None:
    """Both members join before anything is produced; each then reads only its own share."""
    topic, group = create_topic(cluster), unique_topic("kafkajs-pair")
    spec = {"topic": topic, "group_id": group, "count": 30, "partitions": PARTITIONS}
    with subprocess.Popen(
        node_command(cluster, "consume.js", {**spec, "members": 2}),
        cwd=SCRIPTS, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as members:  # fmt: skip
        try:
            assert members.stdout is not None
            first = json.loads(members.stdout.readline() or '{"exited": true}')
            assert "ready" in first, first
            produced = produce(cluster, topic, keyed_messages(30, null_header_values=False))
            stdout, stderr = members.communicate(timeout=TIMEOUT_S + 15)
        finally:
            members.kill()
    assert members.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    lines = [json.loads(line) for line in stdout.splitlines()]
    shares = {int(member): set(partitions) for member, partitions in first["ready"].items()}
    assert set(shares) == {0, 1} and set.union(*shares.values()) == set(range(PARTITIONS))
    assert not set.intersection(*shares.values()), shares
    records = [line for line in lines if "offset" in line]
    check_read_back(produced, [from_json(line) for line in records])
    for line in records:
        assert line["partition"] in shares[line["member"]], (line, shares)


def test_gzip_batches_are_stored_as_sent_and_read_back(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=1)
    messages = keyed_messages(50, null_header_values=False, payload_bytes=200)
    produced = produce(cluster, topic, messages, compression="gzip")
    consumed = consume(cluster, topic, unique_topic("kafkajs-gzip"), 50, partitions=1)
    check_read_back(produced, [from_json(line) for line in consumed])
    batches = stored_batches(cluster.data_dir, topic, 0)
    assert {batch.compression for batch in batches} == {CompressionType.GZIP}
    assert sum(batch.records_count for batch in batches) == len(messages)


def test_list_offsets_earliest_latest_and_by_timestamp(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=2)
    produced = produce(cluster, topic, keyed_messages(12, null_header_values=False))
    grouped = by_partition(produced)
    assert set(grouped) == {0, 1}, grouped
    third = grouped[0][2]
    [answer] = node(cluster, "admin.js", {
        "action": "offsets", "topic": topic, "timestamp_ms": third.message.timestamp_ms,
    })  # fmt: skip
    assert answer["earliest"] == {"0": 0, "1": 0}
    assert answer["latest"] == {str(p): len(items) for p, items in grouped.items()}
    # The first offset whose timestamp is at least the one asked for, in each partition.
    expected_1 = next(
        (p.offset for p in grouped[1] if p.message.timestamp_ms >= third.message.timestamp_ms),
        len(grouped[1]),
    )
    assert answer["by_timestamp"] == {"0": third.offset, "1": expected_1}


def test_produce_to_an_unknown_topic_fails_and_creates_nothing(cluster: DevCluster) -> None:
    topic = unique_topic("kafkajs-missing")
    message = to_json(keyed_messages(1)[0])
    # The producer's own Metadata request (a partition given, so the script asks nothing first)
    # with allowAutoTopicCreation false (produce.js): the broker's default auto.create.topics.enable
    # does not override the request's refusal. KafkaJS retries UNKNOWN_TOPIC_OR_PARTITION, then
    # gives up with it.
    spec = {"topic": topic, "messages": [message], "partition": 0, "retries": 1}
    [error] = node(cluster, "produce.js", spec, expect_status=1)
    assert (error["error"], error["type"]) == (
        "KafkaJSNumberOfRetriesExceeded", "UNKNOWN_TOPIC_OR_PARTITION"), error  # fmt: skip
    for port in cluster.broker_ports:
        [answer] = metadata(port, [topic]).topics
        assert answer.error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_idempotent_producer_gets_a_producer_id_and_sequences(cluster: DevCluster) -> None:
    topic = create_topic(cluster)
    messages = keyed_messages(30, null_header_values=False)
    produced = produce(
        cluster, topic, messages, producer={"idempotent": True, "maxInFlightRequests": 1}
    )
    check_produced(produced, partitions_at_least=2)
    producer_ids = set()
    for partition in by_partition(produced):
        batches = stored_batches(cluster.data_dir, topic, partition)
        assert all(b.producer_id >= 0 and b.producer_epoch >= 0 for b in batches), batches
        assert batches[0].base_sequence == 0
        producer_ids |= {b.producer_id for b in batches}
    assert len(producer_ids) == 1, producer_ids


def transactions(
    cluster: DevCluster, topic: str, transactional_id: str, steps: Sequence[dict[str, Any]]
) -> list[list[Placed]]:
    """Run ``steps`` (each ``messages``, ``commit``, maybe ``offsets``) as one producer's
    successive transactions; where each transaction's messages landed."""
    encoded = [{**step, "messages": [to_json(m) for m in step["messages"]]} for step in steps]
    spec = {"topic": topic, "transactional_id": transactional_id, "transactions": encoded}
    lines = node(cluster, "transactions.js", spec)
    placed: list[list[Placed]] = [[] for _ in steps]
    for line in lines:
        if "offset" in line:
            step = steps[line["transaction"]]
            placed[line["transaction"]].append(
                Placed(line["partition"], line["offset"], step["messages"][line["index"]])
            )
    ended = [line["ended"] for line in lines if "ended" in line]
    assert ended == ["commit" if step["commit"] else "abort" for step in steps], lines
    return placed


def test_transactions_as_read_committed_and_read_uncommitted_groups_see_them(
    cluster: DevCluster,
) -> None:
    """TransactionsTest.testBasicTransactions: KafkaJS's own consumer, read_committed by
    default, never surfaces the aborted transaction; read_uncommitted does."""
    topic = create_topic(cluster)
    messages = keyed_messages(24, null_header_values=False)
    first, aborted, last = transactions(cluster, topic, unique_topic("kafkajs-txn"), [
        {"messages": messages[:8], "commit": True},
        {"messages": messages[8:16], "commit": False},
        {"messages": messages[16:], "commit": True},
    ])  # fmt: skip
    committed = consume(cluster, topic, unique_topic("kafkajs-committed"), 16)
    check_exactly(first + last, [from_json(line) for line in committed])
    everything = consume(
        cluster, topic, unique_topic("kafkajs-uncommitted"), 24, read_uncommitted=True
    )
    check_exactly(first + aborted + last, [from_json(line) for line in everything])
    for partition in range(PARTITIONS):
        outcomes = [
            commit
            for placed, commit in ((first, True), (aborted, False), (last, True))
            if any(p.partition == partition for p in placed)
        ]
        markers = stored_markers(cluster.data_dir, topic, partition)
        assert [marker.commit for marker in markers] == outcomes, markers


def test_send_offsets_commits_the_groups_offsets_only_with_the_transaction(
    cluster: DevCluster,
) -> None:
    """sendOffsets (AddOffsetsToTxn + TxnOffsetCommit): the offsets of the aborted
    transaction never become the group's, those of the committed ones do."""
    topic, group = create_topic(cluster, partitions=1), unique_topic("kafkajs-eos")
    transactional_id = unique_topic("kafkajs-sender")
    messages = keyed_messages(6, null_header_values=False)

    def step(chunk: slice, offset: int, commit: bool) -> dict[str, Any]:
        offsets = {
            "group_id": group,
            "topic": topic,
            "partitions": [{"partition": 0, "offset": offset}],
        }
        return {"messages": messages[chunk], "commit": commit, "offsets": offsets}

    transactions(cluster, topic, transactional_id, [
        step(slice(0, 2), 3, True), step(slice(2, 4), 7, False),
    ])  # fmt: skip
    assert wait_for_transaction_end(cluster, transactional_id, TIMEOUT_S) == "CompleteAbort"
    assert group_offsets(cluster, topic, group) == {0: 3}
    [placed] = transactions(cluster, topic, transactional_id, [step(slice(4, 6), 7, True)])
    assert wait_for_transaction_end(cluster, transactional_id, TIMEOUT_S) == "CompleteCommit"
    assert group_offsets(cluster, topic, group) == {0: 7}
    assert [p.offset for p in placed] == [6, 7]  # after 0-1, COMMIT at 2, 3-4, ABORT at 5


# ------------------------------------------------------------------ group admin


def test_reset_and_set_offsets_commit_without_a_retry(cluster: DevCluster) -> None:
    """KafkaJS's admin resetOffsets / setOffsets run a consumer of the group that joins, seeks,
    commits the seeks and leaves at its first fetch. Against the broker this is one round of
    each request: JoinGroup twice (MEMBER_ID_REQUIRED first, KIP-394), one SyncGroup, one
    LeaveGroup, and no error answer otherwise — nothing a client retries or backs off on.

    The seconds each call takes are the client's and the group's, as against Kafka 3.9: KafkaJS's
    consumer with its only topic paused sleeps ``maxWaitTimeInMs`` (5 s) before its first fetch
    event, and a group that is EMPTY waits ``group.initial.rebalance.delay.ms`` (3 s by default,
    Kafka's ``InitialDelayedJoin``; 0 on this test cluster) before its first generation."""
    topic, group = create_topic(cluster, partitions=2), unique_topic("kafkajs-reset")
    produce(cluster, topic, keyed_messages(6, null_header_values=False))
    spec = {"action": "reset_offsets", "topic": topic, "group_id": group, "set": {0: 1, 1: 0}}
    [answer] = node(cluster, "admin.js", spec)
    member_id_required = "JoinGroup: The group member needs to have a valid member id"
    assert len(answer["errors"]) == 2, answer["errors"]
    assert all(e.startswith(member_id_required) for e in answer["errors"]), answer["errors"]
    for call in ("reset", "set"):
        requests = answer[call]["requests"]
        counts = {api: requests.count(api) for api in ("JoinGroup", "SyncGroup", "LeaveGroup")}
        assert counts == {"JoinGroup": 2, "SyncGroup": 1, "LeaveGroup": 1}, requests
        # KafkaJS commits the seeked offsets once per partition.
        assert requests.count("OffsetCommit") <= 2, requests
    # resetOffsets(earliest) commits KafkaJS's EARLIEST sentinel, which its consumers resolve.
    assert answer["reset"]["committed"] == {"0": -2, "1": -2}
    assert answer["set"]["committed"] == {"0": 1, "1": 0}
    assert group_offsets(cluster, topic, group) == {0: 1, 1: 0}


def test_delete_groups(cluster: DevCluster) -> None:
    """admin.deleteGroups (DeleteGroups): an empty group goes, its offsets with it; an unknown
    group is GROUP_ID_NOT_FOUND (69), which KafkaJS raises as a KafkaJSDeleteGroupsError."""
    topic, group = create_topic(cluster, partitions=1), unique_topic("kafkajs-deleted")
    produce(cluster, topic, keyed_messages(2, null_header_values=False))
    consume(cluster, topic, group, 2)
    assert group_offsets(cluster, topic, group) != {0: -1}
    [answer] = node(cluster, "admin.js", {"action": "delete_groups", "group_ids": [group]})
    assert answer == {"deleted": [[group, 0]]}
    assert group_offsets(cluster, topic, group) == {0: -1}
    [refused] = node(
        cluster, "admin.js", {"action": "delete_groups", "group_ids": [group]}, expect_status=1
    )
    assert refused["error"] == "KafkaJSDeleteGroupsError", refused
