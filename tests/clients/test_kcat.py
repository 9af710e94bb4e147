"""kcat (librdkafka 2.0 from Debian, older than the Python binding's) against a real pykraft
cluster: metadata with -L, keyed produce with headers, consume by partition and offset,
compression, offset queries (-Q: ListOffsets), and a produce to a topic that does not exist.

kcat cannot create topics; ``pykraft topics`` (kafka-topics.sh's flags) creates them through the
controllers' admin API. kcat cannot set a message's timestamp either: librdkafka stamps the
produce time, and the exact-timestamp check reads what confluent-kafka wrote.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import Producer

from pykraft.storage.record_batch import CompressionType
from tests.clients.conftest import ROOT, DevCluster
from tests.clients.support import (
    Message,
    Placed,
    by_partition,
    check_produced,
    check_read_back,
    keyed_messages,
    now_ms,
    stored_batches,
    unique_topic,
)

pytestmark = pytest.mark.clients

PARTITIONS = 3
TIMEOUT_S = 30.0


def kcat(
    cluster: DevCluster, *args: str, stdin: str | None = None, expect_status: int = 0
) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("kcat")
    assert executable, "kcat is not on PATH: run .ci/install-kcat.sh (Debian package kcat)"
    done = subprocess.run(
        [executable, "-b", cluster.bootstrap_servers, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == expect_status, (
        f"kcat {' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done


def create_topic(cluster: DevCluster, partitions: int = PARTITIONS) -> str:
    topic = unique_topic("kcat")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykraft.topics_cmd",
            "--bootstrap-controller",
            ",".join(cluster.admin_urls),
            "--create",
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert (done.returncode, done.stdout) == (0, f"Created topic {topic}.\n"), done
    cluster.wait_for_topic(topic, partitions)
    return topic


def consume(
    cluster: DevCluster, topic: str, partition: int, offset: int, count: int
) -> list[Placed]:
    """``kcat -C -p P -o OFFSET -c COUNT``: exactly ``count`` messages, then nothing more."""
    done = kcat(
        cluster,
        "-C",
        "-t",
        topic,
        "-p",
        str(partition),
        "-o",
        str(offset),
        "-e",
        "-J",
        "-Z",
        "-c",
        str(count + 1),
    )
    read = [_placed(json.loads(line)) for line in done.stdout.splitlines()]
    assert len(read) == count, f"read {len(read)} of {count}: {done.stdout}\n{done.stderr}"
    return read


def _placed(envelope: dict[str, Any]) -> Placed:
    assert envelope["tstype"] == "create", envelope
    flat = envelope.get("headers") or []
    headers = tuple(
        (flat[i], None if flat[i + 1] is None else flat[i + 1].encode())
        for i in range(0, len(flat), 2))  # fmt: skip
    message = Message(
        _encode(envelope["key"]), _encode(envelope["payload"]), headers, envelope["ts"]
    )
    return Placed(envelope["partition"], envelope["offset"], message)


def _encode(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def test_lists_the_brokers_and_a_new_topic_with_minus_L(cluster: DevCluster) -> None:
    topic = create_topic(cluster)
    listing = json.loads(kcat(cluster, "-L", "-J").stdout)
    assert {(b["id"], b["name"]) for b in listing["brokers"]} == {
        (node_id, f"{host}:{port}") for node_id, (host, port) in cluster.brokers.items()
    }
    [described] = [t for t in listing["topics"] if t["topic"] == topic]
    partitions = sorted(described["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in partitions] == list(range(PARTITIONS))
    for partition in partitions:
        assert partition["leader"] in cluster.brokers
        assert [r["id"] for r in partition["replicas"]] == [partition["leader"]]
        assert [r["id"] for r in partition["isrs"]] == [partition["leader"]]
    # Replication factor 1 over three brokers: the placement spreads the leaders.
    assert len({p["leader"] for p in partitions}) == PARTITIONS


def test_keyed_messages_with_headers_round_trip_by_partition_and_offset(
    cluster: DevCluster,
) -> None:
    topic = create_topic(cluster)
    sent: list[Message] = []
    before_ms = now_ms()
    for key_index in range(6):
        key = f"key-{key_index}"
        # -Z: an empty value is sent as null (a tombstone); headers apply to the whole run.
        values = [None if (key_index, j) == (2, 3) else f"value-{key_index}-{j}" for j in range(5)]
        headers = (("key", key.encode()), ("repeated", b"a"), ("repeated", b"b"), ("empty", b""))
        stdin = "".join(f"{key}:{value or ''}\n" for value in values)
        kcat(
            cluster,
            "-P",
            "-t",
            topic,
            "-K",
            ":",
            "-Z",
            *[arg for name, value in headers for arg in ("-H", f"{name}={value.decode()}")],
            stdin=stdin,
        )
        sent.extend(Message(key.encode(), _encode(v), headers, 0) for v in values)
    after_ms = now_ms()

    read: list[Placed] = []
    for partition in range(PARTITIONS):
        end = _query(cluster, topic, partition, -1)
        read.extend(consume(cluster, topic, partition, 0, end))
    assert all(before_ms <= p.message.timestamp_ms <= after_ms for p in read), read
    check_produced(read, partitions_at_least=2)
    # Every message once, and per key in the order kcat sent it.
    key_order: dict[bytes | None, list[Message]] = defaultdict(list)
    for item in read:
        key_order[item.message.key].append(
            Message(item.message.key, item.message.value, item.message.headers, 0)
        )
    assert dict(key_order) == {
        key: [m for m in sent if m.key == key] for key in {m.key for m in sent}
    }

    # Seek: start at an offset in the middle of a partition.
    partition, items = max(by_partition(read).items(), key=lambda entry: len(entry[1]))
    middle = len(items) // 2
    check_read_back(items[middle:], consume(cluster, topic, partition, middle, len(items) - middle))


def test_reads_what_confluent_kafka_wrote_with_exact_timestamps(cluster: DevCluster) -> None:
    topic = create_topic(cluster)
    produced = _produce_with_confluent(cluster, topic, keyed_messages(30))
    read: list[Placed] = []
    for partition, items in by_partition(produced).items():
        read.extend(consume(cluster, topic, partition, 0, len(items)))
    check_read_back(produced, read)


def _produce_with_confluent(
    cluster: DevCluster, topic: str, messages: list[Message]
) -> list[Placed]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    placed: list[Placed] = []
    errors: list[Any] = []

    def on_delivery(message: Message) -> Any:
        # Reports arrive per partition, not in production order: each carries its message.
        def delivered(error: Any, report: Any) -> None:
            if error is not None:
                errors.append(error)
            else:
                placed.append(Placed(report.partition(), report.offset(), message))

        return delivered

    for message in messages:
        producer.produce(
            topic,
            key=message.key,
            value=message.value,
            headers=list(message.headers),
            timestamp=message.timestamp_ms,
            on_delivery=on_delivery(message),
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert not errors, errors
    return sorted(placed, key=lambda p: p.message.timestamp_ms)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_stored_as_sent_and_read_back(
    cluster: DevCluster, codec: str
) -> None:
    topic = create_topic(cluster, partitions=1)
    lines = [f"key-{i % 5}:value-{i}-{'x' * 200}" for i in range(50)]
    kcat(
        cluster,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-K",
        ":",
        "-z",
        codec,
        "-X",
        "linger.ms=50",
        stdin="\n".join(lines) + "\n",
    )
    read = consume(cluster, topic, 0, 0, len(lines))
    assert [(p.offset, p.message.key, p.message.value) for p in read] == [
        (i, line.split(":")[0].encode(), line.split(":")[1].encode())
        for i, line in enumerate(lines)
    ]
    batches = stored_batches(cluster.data_dir, topic, 0)
    assert {batch.compression for batch in batches} == {CompressionType[codec.upper()]}


def _query(cluster: DevCluster, topic: str, partition: int, timestamp: int) -> int:
    """``kcat -Q -t topic:partition:timestamp`` (-1 latest, -2 earliest): ListOffsets."""
    done = kcat(cluster, "-Q", "-t", f"{topic}:{partition}:{timestamp}")
    prefix = f"{topic} [{partition}] offset "
    [line] = [line for line in done.stdout.splitlines() if line.startswith(prefix)]
    return int(line.removeprefix(prefix))


def test_query_offsets_earliest_latest_and_by_timestamp(cluster: DevCluster) -> None:
    topic = create_topic(cluster, partitions=1)
    produced = _produce_with_confluent(cluster, topic, keyed_messages(10))
    assert _query(cluster, topic, 0, -2) == 0
    assert _query(cluster, topic, 0, -1) == len(produced)
    for item in (produced[0], produced[4], produced[9]):
        assert _query(cluster, topic, 0, item.message.timestamp_ms) == item.offset
        # Between two timestamps: the next offset (the first timestamp >= the one asked for).
        assert _query(cluster, topic, 0, item.message.timestamp_ms - 1) == item.offset
    # -o s@TIMESTAMP: consume from the offset ListOffsets finds for a timestamp.
    done = kcat(
        cluster,
        "-C",
        "-t",
        topic,
        "-p",
        "0",
        "-e",
        "-J",
        "-Z",
        "-o",
        f"s@{produced[6].message.timestamp_ms}",
    )
    assert [json.loads(line)["offset"] for line in done.stdout.splitlines()] == [6, 7, 8, 9]


def test_produce_to_an_unknown_topic_creates_it(cluster: DevCluster) -> None:
    """auto.create.topics.enable is on by default, as in Kafka: librdkafka's producer asks
    Metadata with allow_auto_topic_creation, the broker creates the topic with num.partitions (1)
    and the message is delivered (issue 13: producing to a missing topic failed)."""
    topic = unique_topic("kcat-missing")
    kcat(cluster, "-P", "-t", topic, "-K", ":", stdin="k:v\n")
    [listed] = json.loads(kcat(cluster, "-L", "-J", "-t", topic).stdout)["topics"]
    assert (listed["topic"], len(listed["partitions"])) == (topic, 1), listed
    done = kcat(cluster, "-C", "-t", topic, "-o", "beginning", "-e", "-J")
    [record] = [json.loads(line) for line in done.stdout.splitlines()]
    assert (record["key"], record["payload"]) == ("k", "v")
