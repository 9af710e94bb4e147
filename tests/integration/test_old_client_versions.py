"""Issue 13's symptom, end to end: the request versions old clients send — Sarama 1.22.1's
defaults (Metadata v0, OffsetCommit v1, OffsetFetch v1), its ClusterAdmin (DescribeConfigs v0),
Burrow (ListOffsets v0) — are answered on one connection by a real broker process, which closed
it before. Bytes come from kafka-python's legacy ``Struct`` classes, as those clients built them;
Fetch v0 (message format v0/v1) gets UNSUPPORTED_VERSION and the connection stays open."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.protocol.old import admin as old_admin
from kafka.protocol.old import commit as old_commit
from kafka.protocol.old import fetch as old_fetch
from kafka.protocol.old import find_coordinator as old_find_coordinator
from kafka.protocol.old import list_offsets as old_list_offsets
from kafka.protocol.old import metadata as old_metadata

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from tests.broker.wire_client import request_frame
from tests.integration.test_broker_process import BrokerProcess, start_cluster, wait_for

TOPIC = "sarama"
GROUP = "burrow-watched"
TIMEOUT_S = 15.0


class Connection:
    """One TCP connection speaking old request versions (non-flexible headers)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        self.correlation = 0

    def call(self, api_key: ApiKey, version: int, request: Any, response_cls: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(request_frame(api_key, version, self.correlation, request.encode()))
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        assert struct.unpack_from(">i", frame)[0] == self.correlation
        return response_cls.decode(frame[4:])  # response header v0: the correlation id only

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data


def test_sarama_and_burrow_versions_on_one_connection(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> None:
    cluster = start_cluster(cluster_factory, brokers, tmp_path, 1)
    broker = brokers[0]
    cluster.request("POST", "/v1/topics", {"name": TOPIC, "partitions": 1, "replication_factor": 1})
    wait_for(lambda: cluster.request("GET", f"/v1/topics/{TOPIC}"))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for value in (b"a", b"b", b"c"):
            producer.send(TOPIC, value).get(timeout=TIMEOUT_S)
    finally:
        producer.close()

    connection = Connection(broker.kafka_port)
    metadata = connection.call(
        ApiKey.METADATA, 0, old_metadata.MetadataRequest_v0([]), old_metadata.MetadataResponse_v0
    )
    assert TOPIC in [topic[1] for topic in metadata.topics]  # v0: [] means every topic

    # Burrow: the newest offset, ListOffsets v0 (old-style offsets).
    offsets = connection.call(
        ApiKey.LIST_OFFSETS,
        0,
        old_list_offsets.ListOffsetsRequest_v0(-1, [(TOPIC, [(0, -1, 1)])]),
        old_list_offsets.ListOffsetsResponse_v0,
    )
    assert offsets.topics == [(TOPIC, [(0, Errors.NONE, [3])])]

    # Sarama's offset manager: FindCoordinator v0 until the offsets topic is up, then
    # OffsetCommit v1 (generation -1, no member) and OffsetFetch v1.
    deadline = time.monotonic() + 60
    while True:
        found = connection.call(
            ApiKey.FIND_COORDINATOR,
            0,
            old_find_coordinator.FindCoordinatorRequest_v0(GROUP),
            old_find_coordinator.FindCoordinatorResponse_v0,
        )
        if found.error_code == Errors.NONE:
            break
        assert found.error_code == Errors.COORDINATOR_NOT_AVAILABLE and time.monotonic() < deadline
        time.sleep(0.5)
    while True:
        committed = connection.call(
            ApiKey.OFFSET_COMMIT,
            1,
            old_commit.OffsetCommitRequest_v1(GROUP, -1, "", [(TOPIC, [(0, 2, -1, "")])]),
            old_commit.OffsetCommitResponse_v1,
        )
        [(_, [(_, error)])] = committed.topics
        if error == Errors.NONE:
            break
        assert error == Errors.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline
        time.sleep(0.5)
    fetched = connection.call(
        ApiKey.OFFSET_FETCH,
        1,
        old_commit.OffsetFetchRequest_v1(GROUP, [(TOPIC, [0])]),
        old_commit.OffsetFetchResponse_v1,
    )
    assert fetched.topics == [(TOPIC, [(0, 2, "", Errors.NONE)])]

    # Sarama's ClusterAdmin: DescribeConfigs v0.
    described = connection.call(
        ApiKey.DESCRIBE_CONFIGS,
        0,
        old_admin.DescribeConfigsRequest_v0([(2, TOPIC, ["cleanup.policy"])]),
        old_admin.DescribeConfigsResponse_v0,
    )
    [(error, _message, _type, name, entries)] = described.resources
    assert (error, name, [entry[:2] for entry in entries]) == (
        Errors.NONE,
        TOPIC,
        [("cleanup.policy", "delete")],
    )

    # A v0 fetch: message format v0 is not served, and the connection stays open.
    refused = connection.call(
        ApiKey.FETCH,
        0,
        old_fetch.FetchRequest_v0(-1, 100, 1, [(TOPIC, [(0, 0, 1024)])]),
        old_fetch.FetchResponse_v0,
    )
    assert [(p[0], p[1]) for p in refused.topics[0][1]] == [(0, Errors.UNSUPPORTED_VERSION)]
    again = connection.call(
        ApiKey.METADATA,
        0,
        old_metadata.MetadataRequest_v0([TOPIC]),
        old_metadata.MetadataResponse_v0,
    )
    assert [topic[1] for topic in again.topics] == [TOPIC]
