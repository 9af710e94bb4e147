"""DescribeTopicPartitions, UpdateFeatures and UnregisterBroker against a ``pykraft dev`` cluster
(3 controllers, 3 brokers).

kafka-python 3.0.12's ``KafkaAdminClient.describe_topic_partitions`` (KIP-966, paged by a
cursor) and ``update_features`` (KIP-584; it sends v1 when ``validate_only``, else the highest
version both sides know) are real client calls. No client this project tests has an
UnregisterBroker call (Kafka's is ``kafka-cluster.sh unregister``, a Java tool), so that one goes
out as pykraft's message class over a plain connection; unregistering a live broker of the
shared cluster would disturb the other tests, so the real call asks for an id never registered.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import parse_response_header, response_header_version
from pykraft.protocol.kraft_messages import UnregisterBrokerRequest, UnregisterBrokerResponse
from tests.broker.wire_client import blocking_exchange, request_frame
from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0


def admin_of(cluster: DevCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))


def test_kafka_python_describe_topic_partitions_pages_with_the_cursor(
    cluster: DevCluster,
) -> None:
    topic = unique_topic("paged")
    admin = admin_of(cluster)
    try:
        admin.create_topics(
            [NewTopic(topic, num_partitions=3, replication_factor=3)],
            timeout_ms=int(TIMEOUT_S * 1000),
        )
        cluster.wait_for_topic(topic, 3)
        first = admin.describe_topic_partitions([topic], response_partition_limit=2)
        rest = admin.describe_topic_partitions(
            [topic], response_partition_limit=2, cursor=first["next_cursor"]
        )
        missing = admin.describe_topic_partitions([f"{topic}-missing"])
    finally:
        admin.close()
    [described] = first["topics"]
    assert (described["name"], described["error_code"], described["is_internal"]) == (
        topic, 0, False,
    )  # fmt: skip
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1]
    assert first["next_cursor"] == {"topic_name": topic, "partition_index": 2}
    [tail] = rest["topics"]
    [last] = tail["partitions"]
    assert (last["partition_index"], rest["next_cursor"]) == (2, None)
    assert sorted(last["replica_nodes"]) == sorted(cluster.brokers)
    assert last["leader_id"] in last["isr_nodes"]
    assert last["offline_replicas"] == []
    [unknown] = missing["topics"]
    assert unknown["error_code"] == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_kafka_python_update_features(cluster: DevCluster) -> None:
    """pykraft versions one feature, KIP-966's eligible.leader.replicas.version 0-1, which every
    broker registers (validated only: the shared cluster keeps ELR off); any other level above
    0 is refused per feature with Kafka's INVALID_UPDATE_VERSION message, a level-0 removal
    passes (validated only, then written)."""
    admin = admin_of(cluster)
    try:
        refused = admin.update_features({"metadata.version": 21})
        validated = admin.update_features({"group.version": 0}, validate_only=True)
        written = admin.update_features({"group.version": ("SAFE_DOWNGRADE", 0)})
        elr = admin.update_features({"eligible.leader.replicas.version": 1}, validate_only=True)
        too_high = admin.update_features(
            {"eligible.leader.replicas.version": 2}, validate_only=True
        )
    finally:
        admin.close()
    assert elr == {"eligible.leader.replicas.version": "OK"}
    assert (
        "Local controller only supports versions 0-1"
        in too_high["eligible.leader.replicas.version"]
    )
    assert "INVALID_UPDATE_VERSION" in refused["metadata.version"] or (
        "Invalid update version 21 for feature metadata.version" in refused["metadata.version"]
    )
    assert "Local controller does not support this feature." in refused["metadata.version"]
    assert validated == written == {"group.version": "OK"}


def exchange(port: int, request: Any) -> Any:
    key = ApiKey.UNREGISTER_BROKER
    [frame] = blocking_exchange(port, request_frame(key, 0, 9, bytes(request.encode(version=0))))
    correlation, start = parse_response_header(frame, response_header_version(key, 0))
    assert correlation == 9
    return UnregisterBrokerResponse.decode(frame[start:], version=0)


def test_unregister_an_id_never_registered(cluster: DevCluster) -> None:
    answer = exchange(cluster.broker_ports[0], UnregisterBrokerRequest(version=0, broker_id=4242))
    assert (answer.error_code, answer.error_message) == (Errors.BROKER_ID_NOT_REGISTERED, None)
