"""``pykraft consumer-groups`` (kafka-consumer-groups.sh) against the real cluster, through
confluent-kafka: the output is compared with Kafka 3.9's tables and messages, as Kafka's
``DescribeConsumerGroupTest`` and ``ResetConsumerGroupOffsetTest`` check them
(``testDescribeOffsetsOfExistingGroup``, ``testResetOffsetsNotExistingGroup``,
``testResetOffsetsExistingTopic`` (dry run), ``testResetOffsetsToSpecificOffset`` (execute),
``testResetOffsetsExportImportPlan``, ``testResetWithUnrecognizedNewConsumerOption``-style
refusals), and a reset is followed by a confluent-kafka consumer resuming from the new offset."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from pykraft.cli import main
from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic
from tests.clients.test_kafka_python import create_topic

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0
RECORDS_PER_PARTITION = 10


def tool(cluster: DevCluster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    capsys.readouterr()
    code = main(["consumer-groups", "--bootstrap-server", cluster.bootstrap_servers, *args])
    assert code == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def filled_topic(cluster: DevCluster, partitions: int = 2) -> str:
    topic = create_topic(cluster, partitions=partitions)
    cluster.wait_for_topic(topic, partitions)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for partition in range(partitions):
        for index in range(RECORDS_PER_PARTITION):
            producer.produce(topic, value=f"{partition}-{index}".encode(), partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    return topic


def commit(cluster: DevCluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        partitions = [ConfluentPartition(t, p, o) for (t, p), o in offsets.items()]
        consumer.commit(offsets=partitions, asynchronous=False)
    finally:
        consumer.close()


def committed(cluster: DevCluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        asked = [ConfluentPartition(topic, p) for p in range(partitions)]
        answer = consumer.committed(asked, timeout=TIMEOUT_S)
    finally:
        consumer.close()
    return {p.partition: p.offset for p in answer if p.offset >= 0}


@contextmanager
def member(cluster: DevCluster, group: str, topic: str) -> Iterator[tuple[Consumer, list[Message]]]:
    """A confluent-kafka member of ``group`` holding ``topic``'s partitions, STABLE once this
    yields, with the messages it polled while waiting for its assignment."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
            "client.id": "tool-test", "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        polled = []
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the member got no assignment"
            if (message := consumer.poll(0.2)) is not None:
                polled.append(message)
        yield consumer, polled
    finally:
        consumer.close()


def test_describe_shows_kafkas_columns_for_a_live_member(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = filled_topic(cluster)
    group = unique_topic("describe-group")
    commit(cluster, group, {(topic, 0): 3, (topic, 1): 7})
    with member(cluster, group, topic) as (consumer, _):
        out, _ = tool(cluster, capsys, "--describe", "--group", group)
        lines = out.splitlines()
        assert lines[0] == ""
        assert lines[1].split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID",
        ]  # fmt: skip
        member_id = consumer.memberid()
        assert [line.split() for line in lines[2:4]] == [
            [group, topic, "0", "3", "10", "7", member_id, "/127.0.0.1", "tool-test"],
            [group, topic, "1", "7", "10", "3", member_id, "/127.0.0.1", "tool-test"],
        ]
        members, _ = tool(cluster, capsys, "--describe", "--group", group, "--members")
        assert members.splitlines()[2].split() == [group, member_id, "/127.0.0.1", "tool-test", "2"]
        state, _ = tool(cluster, capsys, "--describe", "--group", group, "--state")
        assert state.splitlines()[2].split()[-3:] == ["range", "Stable", "1"]
        # ResetConsumerGroupOffsetTest: an active group's offsets are never reset.
        refused, _ = tool(
            cluster, capsys, "--reset-offsets", "--group", group, "--all-topics",
            "--to-earliest", "--execute",
        )  # fmt: skip
        assert (
            f"Error: Assignments can only be reset if the group '{group}' is inactive, but the "
            "current state is Stable."
        ) in refused.splitlines()
        listed, _ = tool(cluster, capsys, "--list", "--state", "Stable")
        assert (
            f"{group.ljust(max(15, len(group)) + 10)} {'Stable'.ljust(20)}" in listed.splitlines()
        )
        # KIP-848's --type: librdkafka's default group.protocol is the classic one.
        typed, _ = tool(cluster, capsys, "--list", "--type", "classic", "--state")
        assert typed.splitlines()[0].split() == ["GROUP", "TYPE", "STATE"]
        assert [group, "Classic", "Stable"] in [line.split() for line in typed.splitlines()]
        consumers, _ = tool(cluster, capsys, "--list", "--type", "consumer")
        assert group not in consumers.split()
    assert committed(cluster, group, topic, 2) == {0: 3, 1: 7}


def test_unknown_group(cluster: DevCluster, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = tool(cluster, capsys, "--describe", "--group", unique_topic("no-such-group"))
    assert out.splitlines()[1].startswith("Error: Consumer group 'no-such-group")
    assert out.splitlines()[1].endswith("' does not exist.")


def test_reset_dry_run_then_execute_then_a_consumer_resumes_there(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    topic = filled_topic(cluster)
    group = unique_topic("reset-group")
    commit(cluster, group, {(topic, 0): 9, (topic, 1): 9})
    reset = ["--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "4"]
    out, err = tool(cluster, capsys, *reset)  # no --execute: a dry run, with Kafka's warning
    assert err.startswith("WARN: No action will be performed as the --execute option is missing.")
    assert out.splitlines()[1:4] == [
        f"{'GROUP'.ljust(max(15, len(group)))} {'TOPIC'.ljust(max(15, len(topic)))} "
        "PARTITION  NEW-OFFSET",
        f"{group.ljust(15)} {topic.ljust(15)} 0          4",
        f"{group.ljust(15)} {topic.ljust(15)} 1          4",
    ]
    assert committed(cluster, group, topic, 2) == {0: 9, 1: 9}
    shifted, _ = tool(
        cluster, capsys, "--reset-offsets", "--group", group, "--topic", f"{topic}:1",
        "--shift-by", "-3", "--execute",
    )  # fmt: skip
    assert shifted.splitlines()[2].split() == [group, topic, "1", "6"]
    assert committed(cluster, group, topic, 2) == {0: 9, 1: 6}
    # --export, then --from-file: Kafka's CSV plan.
    exported, _ = tool(cluster, capsys, *reset, "--dry-run", "--export")
    assert exported == f"{topic},0,4\n{topic},1,4\n\n"
    plan = tmp_path / "plan.csv"
    plan.write_text(exported)
    tool(
        cluster, capsys, "--reset-offsets", "--group", group, "--from-file", str(plan),
        "--execute",
    )  # fmt: skip
    assert committed(cluster, group, topic, 2) == {0: 4, 1: 4}
    with member(cluster, group, topic) as (consumer, polled):
        first: dict[int | None, int | None] = {}
        deadline = time.monotonic() + TIMEOUT_S
        while len(first) < 2:
            assert time.monotonic() < deadline, first
            message = polled.pop(0) if polled else consumer.poll(0.5)
            if message is not None and message.error() is None:
                first.setdefault(message.partition(), message.offset())
    assert first == {0: 4, 1: 4}


def test_delete_and_delete_offsets(cluster: DevCluster, capsys: pytest.CaptureFixture[str]) -> None:
    topic = filled_topic(cluster)
    group = unique_topic("delete-group")
    commit(cluster, group, {(topic, 0): 1, (topic, 1): 2})
    out, _ = tool(cluster, capsys, "--delete-offsets", "--group", group, "--topic", f"{topic}:0")
    assert out.splitlines()[:3] == [
        f"Request succeeded for deleting offsets from group {group}.",
        "",
        f"{'TOPIC'.ljust(max(15, len(topic)))} PARTITION  STATUS         ",
    ]
    assert out.splitlines()[3].split() == [topic, "0", "Successful"]
    assert committed(cluster, group, topic, 2) == {1: 2}
    out, _ = tool(cluster, capsys, "--delete", "--group", group)
    assert out == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    out, _ = tool(cluster, capsys, "--list")
    assert group not in out.splitlines()


def get_offsets(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["get-offsets", "--bootstrap-server", cluster.bootstrap_servers, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_get_offsets_prints_topic_partition_offset(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's ``GetOffsetShellTest.testTopicPartitionsArg`` / ``testGetLatestOffsets`` /
    ``testGetEarliestOffsets``: ``topic:partition:offset`` per partition."""
    topic = filled_topic(cluster, partitions=3)
    code, out, _ = get_offsets(cluster, capsys, "--topic", topic)
    assert (code, out) == (0, f"{topic}:0:10\n{topic}:1:10\n{topic}:2:10\n")
    _, out, _ = get_offsets(cluster, capsys, "--topic", topic, "--time", "-2", "--partitions", "1")
    assert out == f"{topic}:1:0\n"
    _, out, _ = get_offsets(cluster, capsys, "--topic-partitions", f"{topic}:1-", "--time", "1")
    assert out == f"{topic}:1:0\n{topic}:2:0\n"  # the first record at or after 1 ms
    _, out, _ = get_offsets(cluster, capsys, "--topic", topic, "--time", "-5")
    assert out == ""  # latest-tiered: no tiered storage, no offset
    code, _, err = get_offsets(cluster, capsys, "--topic", "no-such-topic-anywhere")
    assert (code, err) == (
        1, "Error occurred: Could not match any topic-partitions with the specified filters\n"
    )  # fmt: skip


def configs(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["configs", "--bootstrap-server", cluster.bootstrap_servers, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_configs_alter_and_describe_a_topic(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's ``ConfigCommandIntegrationTest``: alter, describe, delete a topic's configs."""
    topic = create_topic(cluster, partitions=1)
    cluster.wait_for_topic(topic, 1)
    entity = ["--entity-type", "topics", "--entity-name", topic]
    code, out, _ = configs(
        cluster, capsys, "--alter", *entity,
        "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]",
    )  # fmt: skip
    assert (code, out) == (0, f"Completed updating config for topic {topic}.\n")
    _, out, _ = configs(cluster, capsys, "--describe", *entity)
    lines = out.splitlines()
    assert lines[:2] == [
        f"Dynamic configs for topic {topic} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
    ]
    # The broker layers follow as synonyms when set (another test may set the default).
    assert lines[2].startswith(
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000"
    )
    assert len(lines) == 3
    code, _, err = configs(cluster, capsys, "--alter", *entity, "--delete-config", "segment.ms")
    assert (code, err) == (1, "Invalid config(s): segment.ms\n")
    configs(cluster, capsys, "--alter", *entity, "--delete-config", "retention.ms")
    _, out, _ = configs(cluster, capsys, "--describe", *entity)
    assert [line.split("=")[0] for line in out.splitlines()[1:]] == ["  cleanup.policy"]
    _, out, _ = configs(cluster, capsys, "--describe", *entity, "--all")
    assert out.splitlines()[0] == f"All configs for topic {topic} are:"
    assert (
        "  segment.bytes=1073741824 sensitive=false "
        "synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}" in out.splitlines()
    )


def test_configs_of_brokers_loggers_and_scram_users(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = str(min(cluster.brokers))
    code, out, _ = configs(
        cluster, capsys, "--alter", "--entity-type", "brokers", "--entity-default",
        "--add-config", "log.retention.ms=86400000",
    )  # fmt: skip
    assert (code, out) == (0, "Completed updating default config for brokers in the cluster.\n")
    try:
        _, out, _ = configs(cluster, capsys, "--describe", "--entity-type", "brokers")
        lines = out.splitlines()
        assert [line for line in lines if not line.startswith("  ")] == [
            *(f"Dynamic configs for broker {b} are:" for b in sorted(cluster.brokers)),
            "Default configs for brokers in the cluster are:",
        ]
        assert lines[-1] == (
            "  log.retention.ms=86400000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "log.retention.ms=86400000, DEFAULT_CONFIG:log.retention.hours=168}"
        )
    finally:
        configs(
            cluster, capsys, "--alter", "--entity-type", "brokers", "--entity-default",
            "--delete-config", "log.retention.ms",
        )  # fmt: skip
    logger = ["--entity-type", "broker-loggers", "--entity-name", broker]
    code, out, _ = configs(
        cluster, capsys, "--alter", *logger, "--add-config", "pykraft.broker=DEBUG"
    )
    try:
        assert (code, out) == (0, f"Completed updating config for broker-logger {broker}.\n")
        _, out, _ = configs(cluster, capsys, "--describe", *logger)
        assert "  pykraft.broker=DEBUG sensitive=false synonyms={}" in out.splitlines()
    finally:
        reset = ["--alter", *logger, "--add-config", "pykraft.broker=INFO"]
        assert configs(cluster, capsys, *reset)[0] == 0
    user = unique_topic("tool-user")
    code, out, _ = configs(
        cluster, capsys, "--alter", "--entity-type", "users", "--entity-name", user,
        "--add-config", "SCRAM-SHA-256=[iterations=8192,password=tool-secret]",
    )  # fmt: skip
    assert (code, out) == (0, f"Completed updating config for user {user}.\n")
    _, out, _ = configs(
        cluster, capsys, "--describe", "--entity-type", "users", "--entity-name", user
    )
    assert out == (
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192\n"
    )


def test_configs_of_client_quotas(cluster: DevCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka's ``ConfigCommandIntegrationTest.testClientQuotaConfigs``-style round trip."""
    client = unique_topic("tool-client")
    entity = ["--entity-type", "clients", "--entity-name", client]
    code, out, _ = configs(
        cluster, capsys, "--alter", *entity,
        "--add-config", "producer_byte_rate=1024,consumer_byte_rate=20000000",
    )  # fmt: skip
    assert (code, out) == (0, f"Completed updating config for client {client}.\n")
    _, out, _ = configs(cluster, capsys, "--describe", *entity)
    assert out == (
        f"Quota configs for client-id '{client}' are consumer_byte_rate=2.0E7, "
        "producer_byte_rate=1024.0\n"
    )
    code, _, err = configs(
        cluster, capsys, "--alter", *entity, "--delete-config", "request_percentage"
    )
    assert (code, err) == (1, "Invalid config(s): request_percentage\n")
    configs(cluster, capsys, "--alter", *entity, "--delete-config", "producer_byte_rate")
    _, out, _ = configs(cluster, capsys, "--describe", *entity)
    assert out == f"Quota configs for client-id '{client}' are consumer_byte_rate=2.0E7\n"
    configs(cluster, capsys, "--alter", *entity, "--delete-config", "consumer_byte_rate")


def test_configs_of_a_users_client(cluster: DevCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """``<user, client-id>`` quotas: two entity types paired with their names in order."""
    user, client = unique_topic("quota-user"), unique_topic("quota-client")
    entity = ["--entity-type", "users", "--entity-name", user,
              "--entity-type", "clients", "--entity-name", client]  # fmt: skip
    code, out, _ = configs(
        cluster, capsys, "--alter", *entity, "--add-config", "request_percentage=50"
    )
    assert (code, out) == (0, f"Completed updating config for user {user}.\n")
    try:
        _, out, _ = configs(cluster, capsys, "--describe", *entity)
        assert out == (
            f"Quota configs for user-principal '{user}', client-id '{client}' are "
            "request_percentage=50.0\n"
        )
        _, out, _ = configs(cluster, capsys, "--describe", "--entity-type", "users",
                            "--entity-name", user)  # fmt: skip
        # Strict: the user alone has no quota line; it has no SCRAM credential either.
        assert out.startswith(
            f"Error retrieving SCRAM credential configs for user-principal '{user}': "
        )
    finally:
        configs(cluster, capsys, "--alter", *entity, "--delete-config", "request_percentage")
