"""Idempotent producing against a real ``pykraft dev --controllers 1 --brokers 1`` cluster.

kafka-python 3.x's KafkaProducer is idempotent by default: it asks any broker for a producer id
(InitProducerId) before its first Produce, and stamps every batch with that id, epoch 0 and a
per-partition sequence. The broker takes the id from a block the controller allocated
(``broker.producer_ids``, KIP-730); the log must hold exactly the records sent, each partition's
batches in sequence order, and a batch sent again over the wire must be answered with the offset
it was first written at, nothing appended. The cluster is always stopped.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.headers import parse_response_header, response_header_version
from pykraft.storage.record_batch import BatchHeader, iter_batches
from pykraft.storage.records import SimpleRecord, build_batch
from tests.broker.wire_client import request_frame
from tests.integration.conftest import http, records_to_end
from tests.integration.test_dev_cluster import kill_everything, start_dev

pytestmark = pytest.mark.integration

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60
PARTITIONS = 3
RECORDS = 300


class DevCluster:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.process = start_dev(data_dir)

    @property
    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = json.loads((self.data_dir / "cluster.json").read_text())
        return info

    def output(self) -> str:
        return (self.data_dir.parent / "dev.out").read_text()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "Press Ctrl-C to stop." not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.1)

    def stop(self) -> int:
        """SIGTERM: controlled shutdown, logs closed cleanly (segments complete on disk)."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_TIMEOUT_S)

    def broker_log(self) -> str:
        return Path(self.info["brokers"][0]["log"]).read_text(errors="replace")


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[DevCluster]:
    cluster = DevCluster(tmp_path / "cluster")
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        kill_everything(cluster.data_dir, cluster.process)


def create_topic(dev: DevCluster, name: str) -> None:
    """Create ``name`` and wait until the broker hosts every partition: the controller answers
    once the records commit, the broker serves them once it applied them (Kafka's CreateTopics
    too); the raw-protocol tests below produce without a client's retries in between."""
    http(
        "POST",
        dev.info["admin_url"] + "/v1/topics",
        {"name": name, "partitions": PARTITIONS, "replication_factor": 1},
    )
    broker_url = dev.info["brokers"][0]["http_url"]
    deadline = time.monotonic() + 10
    while True:
        hosted = {
            row["partition"]
            for row in http("GET", broker_url + "/v1/partitions")["partitions"]
            if row["topic"] == name
        }
        if hosted == set(range(PARTITIONS)):
            return
        assert time.monotonic() < deadline, f"broker hosts {sorted(hosted)} of {name}"
        time.sleep(0.01)


def batches_on_disk(dev: DevCluster, topic: str, partition: int) -> list[BatchHeader]:
    directory = dev.data_dir / "broker-10" / f"{topic}-{partition}"
    headers: list[BatchHeader] = []
    for segment in sorted(directory.glob("*.log")):
        headers.extend(header for _, header in iter_batches(segment.read_bytes()))
    return headers


def test_kafka_python_default_producer_is_idempotent_and_reads_back(dev: DevCluster) -> None:
    create_topic(dev, "orders")
    bootstrap = dev.info["bootstrap_servers"]
    producers = [KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) for _ in range(2)]
    try:
        futures = [
            producers[i % 2].send("orders", key=b"k%d" % (i % 11), value=b"order-%d" % i)
            for i in range(RECORDS)
        ]
        for producer in producers:
            producer.flush(timeout=30)
        written = {(f.get(timeout=1).partition, f.get(timeout=1).offset) for f in futures}
    finally:
        for producer in producers:
            producer.close(timeout=10)
    assert len(written) == RECORDS

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        consumer.assign([TopicPartition("orders", p) for p in range(PARTITIONS)])
        read = {(m.partition, m.offset): m.value for m in records_to_end(consumer)}
    finally:
        consumer.close()
    assert set(read) == written
    assert sorted(read.values()) == sorted(b"order-%d" % i for i in range(RECORDS))

    assert dev.stop() == 0
    producer_ids = set()
    for partition in range(PARTITIONS):
        by_producer: dict[int, list[BatchHeader]] = {}
        for header in batches_on_disk(dev, "orders", partition):
            assert header.producer_id >= 0 and header.producer_epoch == 0, header
            by_producer.setdefault(header.producer_id, []).append(header)
        for headers in by_producer.values():
            # Each producer's batches continue its sequence: 0, then each last sequence + 1.
            expected = 0
            for header in headers:
                assert header.base_sequence == expected, headers
                expected += header.last_offset_delta + 1
        producer_ids |= set(by_producer)
    # Two producers, two ids, both from the broker's first block (the controller's first is 0).
    assert len(producer_ids) == 2 and producer_ids <= set(range(1000))
    assert "producer-id block 0..999" in dev.broker_log()


# ------------------------------------------------------------------ over the wire


class WireClient:
    """One blocking Kafka connection speaking kafka-python's request classes."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation_id = 0

    def request(self, api_key: ApiKey, version: int, message: Any) -> bytes:
        self.correlation_id += 1
        body = bytes(message.encode(version=version))
        self.sock.sendall(request_frame(api_key, version, self.correlation_id, body))
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        correlation_id, start = parse_response_header(
            frame, response_header_version(api_key, version)
        )
        assert correlation_id == self.correlation_id
        return frame[start:]

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def produce(client: WireClient, records: bytes) -> tuple[int, int]:
    request = ProduceRequest(
        version=9,
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="retries",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
                ],
            )
        ],
    )
    response = ProduceResponse.decode(client.request(ApiKey.PRODUCE, 9, request), version=9)
    partition = response.responses[0].partition_responses[0]
    return partition.error_code, partition.base_offset


def test_a_resent_idempotent_batch_gets_its_first_offset(dev: DevCluster) -> None:
    create_topic(dev, "retries")
    client = WireClient(dev.info["bootstrap_servers"])
    try:
        init = InitProducerIdResponse.decode(
            client.request(
                ApiKey.INIT_PRODUCER_ID,
                4,
                InitProducerIdRequest(
                    version=4,
                    transactional_id=None,
                    transaction_timeout_ms=0,
                    producer_id=-1,
                    producer_epoch=-1,
                ),
            ),
            version=4,
        )
        assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
        refused = InitProducerIdResponse.decode(
            client.request(
                ApiKey.INIT_PRODUCER_ID,
                4,
                InitProducerIdRequest(
                    version=4,
                    transactional_id="tx-1",
                    transaction_timeout_ms=60_000,
                    producer_id=-1,
                    producer_epoch=-1,
                ),
            ),
            version=4,
        )
        # A transactional id is its transaction coordinator's: no broker owns one before
        # __transaction_state exists (FindCoordinator creates it), so NOT_COORDINATOR, which
        # clients answer with FindCoordinator; no producer id is handed out.
        assert (refused.error_code, refused.producer_id) == (16, -1)  # NOT_COORDINATOR

        def idempotent(sequence: int, *values: bytes) -> bytes:
            return build_batch(
                [SimpleRecord(value=v, timestamp=1000) for v in values],
                producer_id=init.producer_id,
                producer_epoch=0,
                base_sequence=sequence,
            )

        first = idempotent(0, b"a", b"b")
        assert produce(client, first) == (0, 0)
        assert produce(client, first) == (0, 0)  # the retry: original offset, not appended
        assert produce(client, idempotent(2, b"c")) == (0, 2)
        assert produce(client, first) == (0, 0)
    finally:
        client.close()
    assert dev.stop() == 0
    assert [h.base_offset for h in batches_on_disk(dev, "retries", 0)] == [0, 2]
