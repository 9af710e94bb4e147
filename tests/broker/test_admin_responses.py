"""admin_responses: the admin handlers' typed results become kafka-python's response objects at
the request's version, in one place (the counterpart of test_admin_requests.py)."""

from __future__ import annotations

import uuid

from pykraft.broker.handlers.admin_responses import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    ClusterBroker,
    ConfigEntry,
    CreatedTopicResult,
    DeletedTopicResult,
    DescribeClusterResult,
    PartitionsResult,
    create_partitions_response,
    create_topics_response,
    delete_topics_response,
    describe_cluster_response,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID

TOPIC_ID = uuid.UUID(int=7)
RETENTION = ConfigEntry(name="retention.ms", value="1", source=DYNAMIC_TOPIC_CONFIG)
POLICY = ConfigEntry(name="cleanup.policy", value="delete", source=DEFAULT_CONFIG)


def test_create_topics_carries_configs_only_when_read_back() -> None:
    created = CreatedTopicResult(
        name="pets",
        error=Errors.NONE,
        topic_id=TOPIC_ID,
        num_partitions=3,
        replication_factor=1,
        configs=(RETENTION, POLICY),
    )
    refused = CreatedTopicResult(
        name="cats", error=Errors.TOPIC_ALREADY_EXISTS, message="Topic 'cats' already exists."
    )
    response = create_topics_response(5, [created, refused])
    first, second = response.topics
    assert (
        first.name,
        first.topic_id,
        first.error_code,
        first.num_partitions,
        first.replication_factor,
    ) == ("pets", TOPIC_ID, Errors.NONE, 3, 1)
    assert [(c.name, c.value, c.config_source) for c in first.configs] == [
        ("retention.ms", "1", DYNAMIC_TOPIC_CONFIG),
        ("cleanup.policy", "delete", DEFAULT_CONFIG),
    ]
    assert (
        second.topic_id,
        second.error_code,
        second.error_message,
        second.num_partitions,
        second.configs,
    ) == (ZERO_UUID, Errors.TOPIC_ALREADY_EXISTS, "Topic 'cats' already exists.", -1, None)


def test_a_config_read_back_failure_is_its_own_error() -> None:
    result = CreatedTopicResult(
        name="pets",
        error=Errors.NONE,
        topic_id=TOPIC_ID,
        topic_config_error=Errors.REQUEST_TIMED_OUT,
    )
    (topic,) = create_topics_response(5, [result]).topics
    assert (topic.error_code, topic.topic_config_error_code) == (
        Errors.NONE,
        Errors.REQUEST_TIMED_OUT,
    )


def test_delete_topics_and_create_partitions() -> None:
    (deleted,) = delete_topics_response(
        6,
        [
            DeletedTopicResult(
                name=None,
                topic_id=None,
                error=Errors.UNKNOWN_TOPIC_ID,
                message="The topic id is unknown.",
            )
        ],
    ).responses
    assert (deleted.name, deleted.topic_id, deleted.error_code) == (
        None,
        ZERO_UUID,
        Errors.UNKNOWN_TOPIC_ID,
    )
    (result,) = create_partitions_response(
        3, [PartitionsResult(name="pets", error=Errors.INVALID_PARTITIONS, message="too few")]
    ).results
    assert (result.name, result.error_code, result.error_message) == (
        "pets",
        Errors.INVALID_PARTITIONS,
        "too few",
    )


def test_describe_cluster() -> None:
    result = DescribeClusterResult(
        error=Errors.NONE,
        message=None,
        endpoint_type=1,
        cluster_id="c",
        controller_id=2,
        brokers=(ClusterBroker(node_id=2, host="h", port=9, rack=None),),
    )
    response = describe_cluster_response(1, result)
    assert (response.cluster_id, response.controller_id, response.endpoint_type) == ("c", 2, 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [(2, "h", 9, None)]
