"""DescribeTopicPartitions (v0, KIP-966) from the metadata image, after Kafka's
DescribeTopicPartitionsRequestHandlerTest (testDescribeTopicPartitionsRequest: unauthorized and
unknown topics; testDescribeTopicPartitionsRequestWithEdgeCases: the cursor, the partition
limit, a cursor topic missing from the list) and KRaftMetadataCacheTest
.testGetTopicMetadataForDescribeTopicPartitionsResponse (paging across topics)."""

from __future__ import annotations

from typing import Any, cast

import attrs
import pytest
from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

from pykraft.broker.authorization import ALLOW_EVERYTHING, RequestAuthorizer
from pykraft.broker.handlers.describe_topic_partitions import describe_topic_partitions_handler
from pykraft.broker.handlers.services import BrokerServices, topic_uuid
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.auth.authorizer import SUPPORTED_OPERATIONS, operations_bitfield
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import MetadataRecord, TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.wire import ZERO_UUID
from tests.broker.replica_harness import broker, partition_record, replay
from tests.broker.test_authorization import acl, authorizer, dispatch

A_ID, B_ID, C_ID, OFFSETS_ID = (
    "ThIaNwRnSM2Nt9Mx1v0RvA",
    "f62ptyETTjet8SL5ZeREiw",
    "b66ybsWIQoygs01vdjH07A",
    "AAECAwQFBgcICQoLDA0ODw",
)


def image_of(*records: MetadataRecord) -> MetadataImage:
    return replay(MetadataImage.EMPTY, records).apply()


# Brokers 1 and 2 alive, 3 fenced; 4 never registered. Topics a (3 partitions), b (2), c (1).
IMAGE = image_of(
    broker(1),
    broker(2),
    broker(3, fenced=True),
    TopicRecord(name="a", topic_id=A_ID),
    partition_record(A_ID, 0, (1, 2), leader_epoch=5),
    partition_record(A_ID, 1, (2, 1)),
    partition_record(A_ID, 2, (1, 2)),
    TopicRecord(name="b", topic_id=B_ID),
    partition_record(B_ID, 0, (1, 2)),
    partition_record(B_ID, 1, (2, 1)),
    TopicRecord(name="c", topic_id=C_ID),
    partition_record(C_ID, 0, (3, 4, 1), isr=(3, 1), leader_epoch=7),
    TopicRecord(name="__consumer_offsets", topic_id=OFFSETS_ID),
    partition_record(OFFSETS_ID, 0, (4,), isr=(4,)),
)


def apis(holder: RequestAuthorizer = ALLOW_EVERYTHING, image: MetadataImage = IMAGE) -> KafkaApis:
    services = BrokerServices(
        broker_id=1,
        cluster_id="q1Sh-9_ISia_zwGINzRvyQ",
        replica_manager=cast(Any, None),  # unused: the answer comes from the image alone
        metadata=lambda: image,
        controller=cast(Any, None),
        wall_clock_ms=lambda: 0,
        authorizer=holder,
    )
    kafka_apis = KafkaApis()
    kafka_apis.register(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS, describe_topic_partitions_handler(services)
    )
    return kafka_apis


def describe(
    topics: list[str],
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
    holder: RequestAuthorizer = ALLOW_EVERYTHING,
    image: MetadataImage = IMAGE,
) -> Any:
    request = DescribeTopicPartitionsRequest(
        version=0,
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=name) for name in topics],
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else DescribeTopicPartitionsRequest.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    body = dispatch(apis(holder, image), ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, request)
    return DescribeTopicPartitionsResponse.decode(body, version=0)


def page(response: Any) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    """(topic, error, partition indexes) per topic, and the next cursor."""
    cursor = response.next_cursor
    return (
        [
            (t.name, t.error_code, [p.partition_index for p in t.partitions])
            for t in response.topics
        ],
        None if cursor is None else (cursor.topic_name, cursor.partition_index),
    )


OK = Errors.NONE


def test_every_topic_in_name_order() -> None:
    answer = describe([])
    assert page(answer) == (
        [("__consumer_offsets", OK, [0]), ("a", OK, [0, 1, 2]), ("b", OK, [0, 1]), ("c", OK, [0])],
        None,
    )
    offsets, a = answer.topics[0], answer.topics[1]
    assert (offsets.is_internal, a.is_internal) == (True, False)
    assert a.topic_id == topic_uuid(A_ID)


@pytest.mark.parametrize(
    ("limit", "cursor", "expected"),
    [
        # The limit cuts a topic: next_cursor is its first partition left out.
        (2, None, ([("__consumer_offsets", OK, [0]), ("a", OK, [0])], ("a", 1))),
        # The limit reached exactly at a topic's end: next_cursor is the next topic, at 0.
        (4, None, ([("__consumer_offsets", OK, [0]), ("a", OK, [0, 1, 2])], ("b", 0))),
        # The cursor's topic starts at its partition, the next ones at 0; earlier names skipped.
        (2, ("a", 2), ([("a", OK, [2]), ("b", OK, [0])], ("b", 1))),
        (9, ("b", 1), ([("b", OK, [1]), ("c", OK, [0])], None)),
        # A cursor past the last partition: the topic comes back empty.
        (9, ("c", 5), ([("c", OK, [])], None)),
        # A cursor on a name that is not a topic: the following topics, from 0.
        (9, ("bb", 1), ([("c", OK, [0])], None)),
        # A limit of 0 (or less) answers nothing and points at the first topic.
        (0, ("b", 1), ([], ("b", 0))),
        (-1, None, ([], ("__consumer_offsets", 0))),
    ],
)
def test_paging_every_topic(
    limit: int,
    cursor: tuple[str, int] | None,
    expected: tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None],
) -> None:
    assert page(describe([], limit, cursor)) == expected


def test_the_broker_caps_the_limit_at_max_request_partition_size_limit() -> None:
    many = image_of(
        broker(1),
        TopicRecord(name="wide", topic_id=A_ID),
        *[partition_record(A_ID, index, (1,)) for index in range(2001)],
    )
    services = BrokerServices(
        broker_id=1,
        cluster_id="q1Sh-9_ISia_zwGINzRvyQ",
        replica_manager=cast(Any, None),
        metadata=lambda: many,
        controller=cast(Any, None),
        wall_clock_ms=lambda: 0,
    )
    kafka_apis = KafkaApis()
    kafka_apis.register(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS, describe_topic_partitions_handler(services)
    )
    request = DescribeTopicPartitionsRequest(
        version=0, topics=[], response_partition_limit=5000, cursor=None
    )
    answer = DescribeTopicPartitionsResponse.decode(
        dispatch(kafka_apis, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, request), version=0
    )
    assert len(answer.topics[0].partitions) == 2000
    assert (answer.next_cursor.topic_name, answer.next_cursor.partition_index) == ("wide", 2000)


def test_named_topics_unknown_and_illegal_ones_answer_their_error_in_order() -> None:
    assert page(describe(["c", "missing", "a", "bad/name"])) == (
        [
            ("a", OK, [0, 1, 2]),
            ("bad/name", Errors.INVALID_TOPIC_EXCEPTION, []),
            ("c", OK, [0]),
            ("missing", Errors.UNKNOWN_TOPIC_OR_PARTITION, []),
        ],
        None,
    )


def test_named_topics_page_with_the_cursor() -> None:
    assert page(describe(["c", "a", "b"], 2, ("a", 1))) == (
        [("a", OK, [1, 2])],
        ("b", 0),
    )


def test_a_cursor_topic_not_among_the_named_ones_is_an_invalid_request() -> None:
    answer = describe(["a", "c"], cursor=("b", 0))
    assert page(answer) == (
        [("a", Errors.INVALID_REQUEST, []), ("c", Errors.INVALID_REQUEST, [])],
        None,
    )


def test_partition_fields_leaders_offline_replicas_and_an_empty_elr() -> None:
    [c] = describe(["c"]).topics
    [partition] = c.partitions
    # Leader 3 is fenced but registered with this listener: still named (getAliveEndpoint).
    assert (partition.leader_id, partition.leader_epoch) == (3, 7)
    assert (partition.replica_nodes, partition.isr_nodes) == ([3, 4, 1], [3, 1])
    assert partition.offline_replicas == [3, 4]  # fenced, never registered
    assert (partition.eligible_leader_replicas, partition.last_known_elr) == ([], [])
    [offsets] = describe(["__consumer_offsets"]).topics
    assert offsets.partitions[0].leader_id == -1  # broker 4 is not registered


def test_partition_elr_fields_come_from_the_image() -> None:
    # KIP-966: the ISR is empty, 1 and 3 are eligible, 4 is the last known ELR.
    image = image_of(
        broker(1),
        TopicRecord(name="d", topic_id=C_ID),
        attrs.evolve(
            partition_record(C_ID, 0, (3, 4, 1), isr=(), leader=-1),
            eligible_leader_replicas=(1, 3),
            last_known_elr=(4,),
        ),
    )
    [d] = describe(["d"], image=image).topics
    [partition] = d.partitions
    assert (partition.isr_nodes, partition.eligible_leader_replicas) == ([], [1, 3])
    assert partition.last_known_elr == [4]


def test_authorized_operations_without_an_authorizer_are_every_topic_operation() -> None:
    [a] = describe(["a"]).topics
    assert a.topic_authorized_operations == operations_bitfield(
        SUPPORTED_OPERATIONS[ResourceType.TOPIC]
    )


def test_topics_the_principal_may_not_describe() -> None:
    holder = authorizer(acl(AclOperation.DESCRIBE, "a"), acl(AclOperation.DESCRIBE, "b"))
    # Named: refused ones last, existing or not, with no id; asked for all: left out.
    answer = describe(["c", "b", "nope", "a"], holder=holder)
    assert page(answer) == (
        [
            ("a", OK, [0, 1, 2]),
            ("b", OK, [0, 1]),
            ("c", Errors.TOPIC_AUTHORIZATION_FAILED, []),
            ("nope", Errors.TOPIC_AUTHORIZATION_FAILED, []),
        ],
        None,
    )
    assert answer.topics[2].topic_id in (None, ZERO_UUID)  # kafka-python reads zero as None
    assert answer.topics[0].topic_authorized_operations == operations_bitfield(
        {AclOperation.DESCRIBE}
    )
    assert page(describe([], holder=holder)) == (
        [("a", OK, [0, 1, 2]), ("b", OK, [0, 1])],
        None,
    )


def test_a_cursor_on_a_topic_the_principal_may_not_describe_starts_at_0() -> None:
    holder = authorizer(acl(AclOperation.DESCRIBE, "b"), acl(AclOperation.DESCRIBE, "c"))
    assert page(describe([], 9, ("a", 2), holder=holder)) == (
        [("b", OK, [0, 1]), ("c", OK, [0])],
        None,
    )
