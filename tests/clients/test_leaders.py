"""ElectLeaders through real admin clients against a ``pykraft dev`` cluster (3 controllers, 3
brokers): kafka-python's ``KafkaAdminClient.elect_leaders`` and confluent-kafka's
``AdminClient.elect_leaders`` (librdkafka's ``rd_kafka_ElectLeaders``, KIP-460). The brokers
forward the request to the active controller, which answers per partition. A fresh topic is
led by its preferred replicas, so both election types answer ELECTION_NOT_NEEDED; the moves
themselves are shown by tests/broker/test_handlers_elect_leaders.py and
tests/integration/test_leader_balance.py."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import UnknownTopicOrPartitionError

from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0
ELECTION_NOT_NEEDED = 84
PREFERRED, UNCLEAN = 0, 1


def replicated_topic(cluster: DevCluster, partitions: int = 2) -> str:
    topic = unique_topic("leaders")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=3)],
            timeout_ms=int(TIMEOUT_S * 1000),
        )
    finally:
        admin.close()
    cluster.wait_for_topic(topic, partitions)
    return topic


def partition_errors(response: Any) -> dict[tuple[str, int], int]:
    return {
        (result.topic, p.partition_id): p.error_code
        for result in response.replica_election_results
        for p in result.partition_result
    }


def test_kafka_python_elect_leaders(cluster: DevCluster) -> None:
    topic = replicated_topic(cluster)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        for election_type in (PREFERRED, UNCLEAN):
            response = admin.elect_leaders(election_type, {topic: [0, 1]})
            assert response.error_code == 0
            assert partition_errors(response) == {
                (topic, 0): ELECTION_NOT_NEEDED,
                (topic, 1): ELECTION_NOT_NEEDED,
            }
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.elect_leaders(PREFERRED, {topic: [7]})
    finally:
        admin.close()


def test_confluent_kafka_elect_leaders(cluster: DevCluster) -> None:
    topic = replicated_topic(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    # No timeout keywords: confluent-kafka 2.16's binding of elect_leaders refuses them.
    future = admin.elect_leaders(
        ElectionType.PREFERRED,
        [ConfluentPartition(topic, 0), ConfluentPartition(topic, 1), ConfluentPartition(topic, 9)],
    )
    results = {(tp.topic, tp.partition): error for tp, error in future.result(TIMEOUT_S).items()}
    codes = {key: None if error is None else error.code() for key, error in results.items()}
    assert codes == {
        (topic, 0): KafkaError.ELECTION_NOT_NEEDED,
        (topic, 1): KafkaError.ELECTION_NOT_NEEDED,
        (topic, 9): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }


def test_kafka_python_describe_metadata_quorum(cluster: DevCluster) -> None:
    """kafka-metadata-quorum's question, from kafka-python (DescribeQuorum v2, forwarded to the
    active controller): three voters, the leader caught up now, the brokers as observers."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        answer = admin.describe_metadata_quorum()
    finally:
        admin.close()
    [topic] = answer["topics"]
    [partition] = topic["partitions"]
    assert (topic["topic_name"], partition["partition_index"], partition["error"]) == (
        "__cluster_metadata", 0, None,
    )  # fmt: skip
    voters = {v["replica_id"]: v for v in partition["current_voters"]}
    assert sorted(voters) == [1, 2, 3]
    leader = voters[partition["leader_id"]]
    assert partition["leader_epoch"] >= 1
    assert leader["log_end_offset"] == partition["high_watermark"] > 0
    assert leader["last_caught_up_timestamp"] == leader["last_fetch_timestamp"] > 0
    observers = {o["replica_id"] for o in partition["observers"]}
    assert observers == set(cluster.brokers)
    assert sorted(node["node_id"] for node in answer["nodes"]) == [1, 2, 3]
