"""CreateTopics, DeleteTopics and CreatePartitions, following Kafka's ReplicationControlManagerTest
(testCreateTopics, testValidateNewTopicNames, testCreateTopicsWithValidateOnlyFlag,
testValidateManualPartitionAssignment, testCreatePartitions, testDeleteTopics) and Kafka's
``Topic.validate`` / ``AdminZkClient`` messages for names, partition counts and replication
factors.
"""

from __future__ import annotations

import random

import pytest

from pykraft.metadata.records import (
    ConfigRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    uuid_to_kafka_string,
)
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    ControllerSettings,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from pykraft.quorum.managers.replication import create_topics, new_topic_id
from tests.quorum.helpers import Harness, image_with, partition, topic_id

THREE = {1: "unfenced", 2: "unfenced", 3: "unfenced", 4: "fenced", 5: "shutdown"}


def create(h: Harness, *topics: CreatableTopic, validate_only: bool = False):
    result = h.controller.create_topics(
        h.image, CreateTopicsRequest(topics, validate_only), h.now_ms
    )
    h.commit(result)
    return result


def check_create(topic: CreatableTopic, error: Errors, message: str | None) -> None:
    h = Harness(image_with(THREE, {"existing": [((1,), (1,), 1)]}))
    result = create(h, topic)
    (topic_result,) = result.response.topics
    assert topic_result.error.error is error
    assert topic_result.error.message == message
    if error is not Errors.NONE:
        assert result.records == ()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        (".", "Topic name is invalid: '.' is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        (
            "a" * 250,
            f"Topic name is invalid: the length of '{'a' * 250}' is longer than the max "
            "allowed length 249",
        ),
        (
            "foo bar",
            "Topic name is invalid: 'foo bar' contains one or more characters other "
            "than ASCII alphanumerics, '.', '_' and '-'",
        ),
        (
            "föö",
            "Topic name is invalid: 'föö' contains one or more characters other than ASCII "
            "alphanumerics, '.', '_' and '-'",
        ),
    ],
)
def test_invalid_topic_names(name: str, message: str) -> None:
    # Kafka's Topic.validate (ReplicationControlManagerTest.testValidateNewTopicNames).
    check_create(CreatableTopic(name, 1, 1), Errors.INVALID_TOPIC_EXCEPTION, message)


@pytest.mark.parametrize("name", ["a" * 249, "foo.bar_baz-1", "...", "A9"])
def test_valid_topic_names(name: str) -> None:
    check_create(CreatableTopic(name, 1, 1), Errors.NONE, None)


@pytest.mark.parametrize(
    ("topic", "error", "message"),
    [
        (
            CreatableTopic("existing", 1, 1),
            Errors.TOPIC_ALREADY_EXISTS,
            "Topic 'existing' already exists.",
        ),
        (
            CreatableTopic("t", 0, 1),
            Errors.INVALID_PARTITIONS,
            "Number of partitions must be larger than 0.",
        ),
        (
            CreatableTopic("t", -2, 1),
            Errors.INVALID_PARTITIONS,
            "Number of partitions must be larger than 0.",
        ),
        (
            CreatableTopic("t", 1, 0),
            Errors.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0.",
        ),
        (
            CreatableTopic("t", 1, -2),
            Errors.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0.",
        ),
        # Fenced (4) and shutting-down (5) brokers do not count.
        (
            CreatableTopic("t", 1, 4),
            Errors.INVALID_REPLICATION_FACTOR,
            "Replication factor: 4 larger than available brokers: 3.",
        ),
        (
            CreatableTopic("t", 100_001, 1),
            Errors.INVALID_PARTITIONS,
            "Excessively large number of partitions per request: at most 100000.",
        ),
        (
            CreatableTopic("t", 1, 1, configs=(CreatableTopicConfig("min.insync.replicas", "0"),)),
            Errors.INVALID_CONFIG,
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            CreatableTopic("t", 1, 1, configs=(CreatableTopicConfig("foo", "1"),)),
            Errors.INVALID_CONFIG,
            "Unknown topic config name: foo",
        ),
        (
            CreatableTopic("t", 1, 1, configs=(CreatableTopicConfig("retention.ms", None),)),
            Errors.INVALID_CONFIG,
            "Null value not supported for topic configs: retention.ms",
        ),
    ],
)
def test_create_topic_errors(topic, error, message) -> None:
    check_create(topic, error, message)


def assign(*replica_lists: tuple[int, ...], indexes: tuple[int, ...] | None = None):
    indexes = indexes if indexes is not None else tuple(range(len(replica_lists)))
    return tuple(
        CreatableReplicaAssignment(i, r) for i, r in zip(indexes, replica_lists, strict=True)
    )


@pytest.mark.parametrize(
    ("topic", "error", "message"),
    [
        # ReplicationControlManager.createTopic / validateManualPartitionAssignment.
        (
            CreatableTopic("t", -1, 2, assign((1, 2))),
            Errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to "
            "-1.",
        ),
        (
            CreatableTopic("t", 1, -1, assign((1, 2))),
            Errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            CreatableTopic("t", assignments=assign(())),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            CreatableTopic("t", assignments=assign((1, 9))),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            CreatableTopic("t", assignments=assign((1, 2, 1))),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            CreatableTopic("t", assignments=assign((1, 2), (3,))),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes a partition with 1 replica(s), but this is "
            "not consistent with previous partitions, which have 2 replica(s).",
        ),
        (
            CreatableTopic("t", assignments=assign((1,), (2,), indexes=(0, 0))),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            CreatableTopic("t", assignments=assign((1,), (2,), indexes=(0, 2))),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            CreatableTopic("t", assignments=assign((4, 5))),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "All brokers specified in the manual partition assignment for partition 0 are fenced "
            "or in controlled shutdown.",
        ),
    ],
)
def test_manual_assignment_errors(topic, error, message) -> None:
    check_create(topic, error, message)


def test_manual_assignment_isr_is_the_active_replicas() -> None:
    h = Harness(image_with(THREE))
    create(h, CreatableTopic("t", assignments=assign((4, 2, 5), (3, 1, 2), indexes=(1, 0))))
    assert (partition(h.image, "t", 0).isr, partition(h.image, "t", 0).leader) == ((3, 1, 2), 3)
    assert (partition(h.image, "t", 1).isr, partition(h.image, "t", 1).leader) == ((2,), 2)


def test_create_topic_records_and_response() -> None:
    # ReplicationControlManagerTest.testCreateTopics: TopicRecord, PartitionRecords with epochs
    # 0 and ISR = replicas, leader = first replica; then the topic's ConfigRecords.
    h = Harness(image_with(THREE), seed=3)
    result = create(
        h, CreatableTopic("orders", 3, 2, configs=(CreatableTopicConfig("retention.ms", "1000"),))
    )
    (topic_result,) = result.response.topics
    assert topic_result.error.is_success()
    assert (topic_result.num_partitions, topic_result.replication_factor) == (3, 2)
    new_id = topic_result.topic_id
    assert isinstance(result.records[0], TopicRecord)
    assert result.records[0] == TopicRecord(name="orders", topic_id=new_id)
    partitions = result.records[1:4]
    for index, record in enumerate(partitions):
        assert isinstance(record, PartitionRecord)
        assert (record.partition_id, record.topic_id) == (index, new_id)
        assert record.isr == record.replicas and record.leader == record.replicas[0]
        assert (record.leader_epoch, record.partition_epoch) == (0, 0)
        assert set(record.replicas) <= {1, 2, 3} and len(set(record.replicas)) == 2
    assert result.records[4:] == (
        ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
    )
    assert h.image.topics.by_name["orders"].topic_id == new_id
    assert dict(h.image.configs.config(2, "orders")) == {"retention.ms": "1000"}


def test_placement_is_deterministic_for_a_seed_and_striped() -> None:
    def placed(seed: int) -> list[tuple[int, ...]]:
        h = Harness(image_with({b: "unfenced" for b in range(6)}), seed=seed)
        create(h, CreatableTopic("t", 6, 3))
        return [partition(h.image, "t", i).replicas for i in range(6)]

    assert placed(5) == placed(5)
    assert sorted(replicas[0] for replicas in placed(5)) == list(range(6))


def test_rack_aware_placement() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    h = Harness(image_with({b: "unfenced" for b in racks}, racks=racks))
    create(h, CreatableTopic("t", 12, 3))
    for index in range(12):
        assert len({racks[b] for b in partition(h.image, "t", index).replicas}) == 3


def test_defaults_from_settings() -> None:
    settings = ControllerSettings(default_num_partitions=4, default_replication_factor=2)
    h = Harness(image_with(THREE), settings=settings)
    create(h, CreatableTopic("t"))
    topic = h.image.topics.by_name["t"]
    assert len(topic.partitions) == 4
    assert {len(p.replicas) for p in topic.partitions.values()} == {2}


def test_validate_only_writes_nothing() -> None:
    # ReplicationControlManagerTest.testCreateTopicsWithValidateOnlyFlag
    h = Harness(image_with(THREE))
    result = create(h, CreatableTopic("t", 2, 2), validate_only=True)
    assert result.records == ()
    assert result.response.topics[0].error.is_success()
    assert "t" not in h.image.topics.by_name


def test_partial_success_and_duplicates() -> None:
    h = Harness(image_with(THREE))
    result = create(
        h,
        CreatableTopic("ok", 1, 1),
        CreatableTopic("bad", 1, 9),
        CreatableTopic("dup", 1, 1),
        CreatableTopic("dup", 1, 1),
    )
    errors = [(r.name, r.error.error) for r in result.response.topics]
    assert errors == [
        ("ok", Errors.NONE),
        ("bad", Errors.INVALID_REPLICATION_FACTOR),
        ("dup", Errors.INVALID_REQUEST),
        ("dup", Errors.INVALID_REQUEST),
    ]
    assert result.response.topics[2].error.message == "Duplicate topic name."
    assert sorted(h.image.topics.by_name) == ["ok"]


def test_two_topics_in_one_request_get_distinct_ids() -> None:
    h = Harness(image_with(THREE))
    result = create(h, CreatableTopic("a", 1, 1), CreatableTopic("b", 1, 1))
    ids = {r.topic_id for r in result.response.topics}
    assert len(ids) == 2 and None not in ids


class Scripted:
    """randrange answers from a script (for the topic-id retry rule)."""

    def __init__(self, values: list[int]) -> None:
        self.values = values

    def randrange(self, stop: int, /) -> int:
        return self.values.pop(0)


def test_topic_id_is_never_zero_metadata_or_dash() -> None:
    # Kafka's Uuid.randomUuid retries ZERO_UUID, METADATA_TOPIC_ID and ids printed with '-'.
    image = image_with(THREE)
    dash = 62 << 122  # base64url index 62 is '-'
    rng = Scripted([0, 1, dash, 2])
    assert new_topic_id(image, rng, set()) == uuid_to_kafka_string((2).to_bytes(16, "big"))
    taken = {uuid_to_kafka_string((3).to_bytes(16, "big"))}
    assert new_topic_id(image, Scripted([3, 4]), taken) == uuid_to_kafka_string(
        (4).to_bytes(16, "big")
    )


def test_create_topics_function_is_pure() -> None:
    image = image_with(THREE)
    request = CreateTopicsRequest((CreatableTopic("t", 3, 3),))
    first = create_topics(image, request, ControllerSettings(), random.Random(9))
    second = create_topics(image, request, ControllerSettings(), random.Random(9))
    assert first == second


# --- DeleteTopics --------------------------------------------------------------------------


def test_delete_topics() -> None:
    # ReplicationControlManagerTest.testDeleteTopics: RemoveTopicRecord; the topic's configs go.
    image = image_with(
        THREE, {"a": [((1,), (1,), 1)], "b": [((2,), (2,), 2)]}, {(2, "a"): {"retention.ms": "5"}}
    )
    h = Harness(image)
    result = h.controller.delete_topics(
        h.image,
        DeleteTopicsRequest(names=("a", "nope", "a"), topic_ids=(topic_id("b"), topic_id("zzz"))),
        0,
    )
    assert result.records == (
        RemoveTopicRecord(topic_id=topic_id("a")),
        RemoveTopicRecord(topic_id=topic_id("b")),
    )
    errors = [(r.name, r.topic_id, r.error.error) for r in result.response.topics]
    assert errors == [
        ("a", topic_id("a"), Errors.NONE),
        ("nope", None, Errors.UNKNOWN_TOPIC_OR_PARTITION),
        ("a", None, Errors.INVALID_REQUEST),
        ("b", topic_id("b"), Errors.NONE),
        (None, topic_id("zzz"), Errors.UNKNOWN_TOPIC_ID),
    ]
    h.commit(result)
    assert dict(h.image.topics.by_name) == {}
    assert dict(h.image.configs.config(2, "a")) == {}


# --- CreatePartitions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_topic", "error", "message"),
    [
        # AdminZkClient.createPartitions wording; ReplicationControlManagerTest.testCreatePartitions
        (
            CreatePartitionsTopic("t", 2),
            Errors.INVALID_PARTITIONS,
            "Topic currently has 3 partitions, which is higher than the requested 2.",
        ),
        (
            CreatePartitionsTopic("t", 3),
            Errors.INVALID_PARTITIONS,
            "Topic already has 3 partitions.",
        ),
        (
            CreatePartitionsTopic("nope", 5),
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        ),
        (
            CreatePartitionsTopic("t", 5, ((1, 2),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            CreatePartitionsTopic("t", 4, ((1,),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes a partition with 1 replica(s), but this is "
            "not consistent with previous partitions, which have 2 replica(s).",
        ),
        (
            CreatePartitionsTopic("t", 4, ((4, 5),)),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "All brokers specified in the manual partition assignment for partition 3 are fenced "
            "or in controlled shutdown.",
        ),
        (
            CreatePartitionsTopic("wide", 2),
            Errors.INVALID_REPLICATION_FACTOR,
            "Replication factor: 4 larger than available brokers: 3.",
        ),
        (
            CreatePartitionsTopic("empty", 2),
            Errors.UNKNOWN_SERVER_ERROR,
            "Invalid state: topic empty appears to have no partitions.",
        ),
    ],
)
def test_create_partitions_errors(request_topic, error, message) -> None:
    image = image_with(
        THREE, {"t": [((1, 2), (1, 2), 1)] * 3, "wide": [((1, 2, 3, 4), (1, 2, 3), 1)], "empty": []}
    )
    h = Harness(image)
    result = h.controller.create_partitions(h.image, CreatePartitionsRequest((request_topic,)), 0)
    assert result.records == ()
    (topic_result,) = result.response.topics
    assert (topic_result.error.error, topic_result.error.message) == (error, message)


def test_create_partitions_adds_placed_and_manual_partitions() -> None:
    image = image_with(THREE, {"t": [((1, 2), (1, 2), 1)], "u": [((2, 3), (2, 3), 2)]})
    h = Harness(image)
    result = h.controller.create_partitions(
        h.image,
        CreatePartitionsRequest(
            (CreatePartitionsTopic("t", 3), CreatePartitionsTopic("u", 2, ((3, 1),)))
        ),
        0,
    )
    assert [r.error.error for r in result.response.topics] == [Errors.NONE, Errors.NONE]
    h.commit(result)
    t = h.image.topics.by_name["t"]
    assert sorted(t.partitions) == [0, 1, 2]
    for index in (1, 2):
        p = t.partitions[index]
        assert len(p.replicas) == 2 and set(p.replicas) <= {1, 2, 3}
        assert (p.isr, p.leader, p.leader_epoch) == (p.replicas, p.replicas[0], 0)
    assert partition(h.image, "u", 1).replicas == (3, 1)


def test_create_partitions_validate_only() -> None:
    h = Harness(image_with(THREE, {"t": [((1,), (1,), 1)]}))
    result = h.controller.create_partitions(
        h.image, CreatePartitionsRequest((CreatePartitionsTopic("t", 2),), validate_only=True), 0
    )
    assert result.records == () and result.response.topics[0].error.is_success()
