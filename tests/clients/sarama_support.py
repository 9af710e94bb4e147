"""What the Sarama client tests share: running ``sarama-client`` (tests/clients/sarama/, built
by ``.ci/install-sarama.sh``), reading its JSON lines, the requests a broker refused from it, and
the topics, records and groups the tests set up.

``sarama-client COMMAND SPEC`` prints one JSON line per event. Each run has its own client id,
so a failure message lists the requests the brokers refused from it by closing the connection
(their log's "closing connection ... api_key K vV" lines): the request version or API missing.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic

from pykraft.protocol.api_keys import ApiKey
from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic

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


# KIP-848 consumer groups' records in __consumer_offsets (key versions 3-8): Burrow knows key
# versions 0-2 only, logs "failed to decode" with reason "key version" and skips the record
# (``processConsumerOffsetsMessage``) — as it does against Kafka 4, where such groups are the
# default. The other groups of the shared client cluster write them (tests/clients/
# test_consumer_protocol.py).
KIP_848_KEY_VERSIONS = range(3, 9)


def burrow_refusals(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records Burrow would refuse, but for the KIP-848 records it skips by design."""
    return [
        line
        for line in events(lines, "decode_error")
        if line["reason"] not in {f"key version {v}" for v in KIP_848_KEY_VERSIONS}
    ]


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


def admin_stage(
    cluster: DevCluster, version: str, stage: str, topic: str, **spec: Any
) -> list[dict[str, Any]]:
    return sarama(cluster, "admin", {"topic": topic, "version": version, "stage": stage, **spec})


def joined_group(cluster: DevCluster, topic: str, group: str, count: int) -> KafkaConsumer:
    """A kafka-python member of ``group`` (client id "group-check") that read ``count`` records
    of ``topic`` and committed them — current request versions; the caller closes it."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers.split(","), group_id=group,
        client_id="group-check", auto_offset_reset="earliest", enable_auto_commit=False,
        consumer_timeout_ms=20_000,
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        read = [next(consumer) for _ in range(count)]
        consumer.commit()
    except BaseException:
        consumer.close()
        raise
    assert len(read) == count
    return consumer
