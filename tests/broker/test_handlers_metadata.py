"""The Metadata handler against an image built from real records (Kafka's
handleTopicMetadataRequest over KRaftMetadataCache), kafka-python encoding both ways."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.broker.handlers import metadata as metadata_module
from pykraft.broker.handlers.metadata import TopicEntries, metadata_handler
from pykraft.broker.handlers.services import topic_uuid
from pykraft.broker.partition import PartitionRole
from pykraft.metadata.records import FenceBrokerRecord, PartitionChangeRecord, TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.metadata_response import encode_partition
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import (
    BIRDS_ID,
    CLUSTER_ID,
    LOCAL,
    OTHER,
    PETS_ID,
    Cluster,
    InProcessController,
    broker,
    call,
    call_async,
    encode,
    partition_record,
    services,
)

FENCED = 3
ORPHAN_ID = "0hHJ3X5ZQ-CFfQ5xgpj90w"
OFFSETS_ID = "tgHBnRglT5W_RlENnuG5vg"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path)
    try:
        harness.publish(
            broker(LOCAL),
            broker(OTHER),
            broker(FENCED, fenced=True),
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 1, (OTHER, LOCAL), leader_epoch=2),
            partition_record(PETS_ID, 0, (LOCAL, FENCED), isr=(LOCAL,), leader_epoch=5),
            TopicRecord(name="birds", topic_id=BIRDS_ID),
            partition_record(BIRDS_ID, 0, (OTHER,), leader=-1, isr=(), leader_epoch=3),
            TopicRecord(name="__consumer_offsets", topic_id=OFFSETS_ID),
            partition_record(OFFSETS_ID, 0, (LOCAL,)),
        )
        yield harness
    finally:
        harness.close()


def metadata(
    cluster: Cluster,
    version: int,
    topics: list[str | uuid.UUID] | None = None,
    *,
    listener: str = "PLAINTEXT",
    allow_auto_topic_creation: bool = True,
    **overrides: Any,
) -> Any:
    entries = None
    if topics is not None:
        entries = [
            MetadataRequest.MetadataRequestTopic(topic_id=t, name=None)
            if isinstance(t, uuid.UUID)
            else MetadataRequest.MetadataRequestTopic(name=t)
            for t in topics
        ]
    request = MetadataRequest(
        version=version, topics=entries, allow_auto_topic_creation=allow_auto_topic_creation
    )
    handler = metadata_handler(services(cluster, **overrides))
    body = call(handler, ApiKey.METADATA, version, encode(request, version), listener)
    assert body is not None
    return MetadataResponse.decode(body, version=version)


def partitions(response: Any, name: str) -> dict[int, tuple[Any, ...]]:
    """partition -> (error, leader, leader epoch, replicas, isr, offline)."""
    [topic] = [t for t in response.topics if t.name == name]
    return {
        p.partition_index: (
            p.error_code,
            p.leader_id,
            getattr(p, "leader_epoch", None),
            p.replica_nodes,
            p.isr_nodes,
            getattr(p, "offline_replicas", None),
        )
        for p in topic.partitions
    }


@pytest.mark.parametrize("version", range(0, 13))
def test_all_topics_at_every_version(cluster: Cluster, version: int) -> None:
    response = metadata(cluster, version, [] if version == 0 else None)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (LOCAL, "broker1.local", 9091),
        (OTHER, "broker2.local", 9092),
    ]  # the fenced broker is not listed
    if version >= 1:
        assert response.controller_id == LOCAL
        assert [b.rack for b in response.brokers] == [None, "rack-b"]
    if version >= 2:
        assert response.cluster_id == CLUSTER_ID
    assert [t.name for t in response.topics] == ["__consumer_offsets", "birds", "pets"]
    assert all(t.error_code == Errors.NONE for t in response.topics)
    if version >= 1:
        assert [t.is_internal for t in response.topics] == [True, False, False]
    if version >= 10:
        assert [t.topic_id for t in response.topics] == [
            topic_uuid(OFFSETS_ID),
            topic_uuid(BIRDS_ID),
            topic_uuid(PETS_ID),
        ]
    pets = partitions(response, "pets")
    assert list(pets) == [0, 1]  # by partition index
    assert pets[1][:2] == (Errors.NONE, OTHER)
    if version >= 7:
        assert pets[1][2] == 2
    if version == 0:
        # v0 lists live replicas only and says some are missing.
        assert pets[0][:2] + pets[0][3:5] == (Errors.REPLICA_NOT_AVAILABLE, LOCAL, [LOCAL], [LOCAL])
    else:
        assert pets[0][:2] + pets[0][3:5] == (Errors.NONE, LOCAL, [LOCAL, FENCED], [LOCAL])
    if version >= 5:
        assert pets[0][5] == [FENCED]  # fenced: offline
    # birds-0 has no leader.
    assert partitions(response, "birds")[0][:2] == (Errors.LEADER_NOT_AVAILABLE, -1)


def test_named_and_unknown_topics(cluster: Cluster) -> None:
    response = metadata(cluster, 12, ["pets", "nope"])
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("pets", Errors.NONE),
        ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert metadata(cluster, 12, []).topics == []  # v1+: an empty list asks for no topics


def test_topics_by_id(cluster: Cluster) -> None:
    # Metadata v12 may name topics by id (KIP-516).
    response = metadata(cluster, 12, [topic_uuid(BIRDS_ID), topic_uuid(ORPHAN_ID)])
    assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
        ("birds", topic_uuid(BIRDS_ID), Errors.NONE),
        (None, topic_uuid(ORPHAN_ID), Errors.UNKNOWN_TOPIC_ID),
    ]


def test_a_listener_the_brokers_lack(cluster: Cluster) -> None:
    response = metadata(cluster, 12, ["pets"], listener="INTERNAL")
    assert response.brokers == []
    assert response.controller_id == -1
    assert partitions(response, "pets")[1][:2] == (Errors.LISTENER_NOT_FOUND, -1)
    older = metadata(cluster, 5, ["pets"], listener="INTERNAL")
    assert partitions(older, "pets")[1][:2] == (Errors.LEADER_NOT_AVAILABLE, -1)


def test_no_auto_create_unless_enabled(cluster: Cluster) -> None:
    controller = InProcessController(cluster)
    response = metadata(cluster, 12, ["fresh"], controller=controller)
    assert response.topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert controller.calls == []


def test_auto_create_asks_the_controller_and_answers_leader_not_available(
    cluster: Cluster,
) -> None:
    # Kafka AutoTopicCreationManager: LEADER_NOT_AVAILABLE while the topic is being created.
    controller = InProcessController(cluster)
    options: dict[str, Any] = {
        "controller": controller,
        "auto_create_topics_enable": True,
        "num_partitions": 2,
    }
    response = metadata(cluster, 12, ["fresh", "bad name!"], **options)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("fresh", Errors.LEADER_NOT_AVAILABLE),
        ("bad name!", Errors.INVALID_TOPIC_EXCEPTION),
    ]
    topic = cluster.image.topics.by_name["fresh"]
    assert len(topic.partitions) == 2
    hosted = [TopicPartition("fresh", p) for p in (0, 1)]
    assert any(
        (part := cluster.replica_manager.get_partition(tp)) is not None
        and part.role is PartitionRole.LEADER
        for tp in hosted
    )
    # The next request finds it, without creating it again.
    again = metadata(cluster, 12, ["fresh"], **options)
    assert again.topics[0].error_code == Errors.NONE
    assert [call[0] for call in controller.calls] == ["create_topic"]
    # A client that disallows it (v4+) gets UNKNOWN_TOPIC_OR_PARTITION.
    refused = metadata(cluster, 12, ["other"], allow_auto_topic_creation=False, **options)
    assert refused.topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_a_topic_being_auto_created_is_not_asked_for_again(cluster: Cluster) -> None:
    # Kafka's AutoTopicCreationManager.filterCreatableTopics: a topic in flight is not asked for
    # again until the controller answered; meanwhile it is LEADER_NOT_AVAILABLE (being created,
    # as Kafka's own first answer), which clients retry (see _auto_create for why not UNKNOWN).
    class Slow(InProcessController):
        def __init__(self, cluster: Cluster) -> None:
            super().__init__(cluster)
            self.release = asyncio.Event()

        async def create_topic(self, topic: Any, *, validate_only: bool) -> Any:
            await self.release.wait()
            return await super().create_topic(topic, validate_only=validate_only)

    controller = Slow(cluster)
    handler = metadata_handler(
        services(cluster, controller=controller, auto_create_topics_enable=True)
    )
    request = MetadataRequest(
        version=12,
        topics=[MetadataRequest.MetadataRequestTopic(name="fresh")],
        allow_auto_topic_creation=True,
    )

    async def scenario() -> tuple[bytes | None, bytes | None]:
        body = encode(request, 12)
        first = asyncio.ensure_future(call_async(handler, ApiKey.METADATA, 12, body))
        await asyncio.sleep(0)  # the first request now waits for the controller
        # Not asked again, so answered without waiting for the controller.
        second = await asyncio.wait_for(call_async(handler, ApiKey.METADATA, 12, body), 5)
        controller.release.set()
        return await first, second

    first, second = asyncio.run(scenario())
    answers = [
        [(t.name, t.error_code) for t in MetadataResponse.decode(body, version=12).topics]
        for body in (first, second)
        if body is not None
    ]
    assert answers == [
        [("fresh", Errors.LEADER_NOT_AVAILABLE)],
        [("fresh", Errors.LEADER_NOT_AVAILABLE)],
    ]
    assert [c[0] for c in controller.calls] == ["create_topic"]
    again = metadata(cluster, 12, ["fresh"], controller=controller, auto_create_topics_enable=True)
    assert again.topics[0].error_code == Errors.NONE  # created once, then found


def test_a_handler_answers_what_changed_since_its_last_answer(cluster: Cluster) -> None:
    """The handler keeps each topic's encoded entry while the topic and the brokers stay as
    they are: a leader that moved, a broker fenced, a new topic each show in the next answer."""
    handler = metadata_handler(services(cluster))
    request = MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False)

    def ask() -> Any:
        body = call(handler, ApiKey.METADATA, 12, encode(request, 12))
        assert body is not None
        return MetadataResponse.decode(body, version=12)

    before = partitions(ask(), "pets")
    assert before[1][1:3] == (OTHER, 2)
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=1, leader=LOCAL))
    after = partitions(ask(), "pets")
    assert after[1][1:3] == (LOCAL, 3)
    assert after[0] == before[0]  # the partition that did not change, as it was
    assert partitions(ask(), "birds")[0][5] == []  # an unchanged topic, answered again
    cluster.publish(FenceBrokerRecord(id=OTHER, epoch=100 + OTHER))
    assert partitions(ask(), "birds")[0][5] == [OTHER]  # its replica's broker is fenced now
    assert partitions(ask(), "pets")[1][5] == [OTHER]
    cluster.publish(TopicRecord(name="fish", topic_id=ORPHAN_ID))
    assert "fish" in [t.name for t in ask().topics]


@pytest.mark.parametrize("version", [10, 11])
def test_a_topic_asked_by_id_before_v12_is_an_invalid_request(
    cluster: Cluster, version: int
) -> None:
    """Kafka's handleTopicMetadataRequest: topic ids in requests only from v12; the answer is
    MetadataRequest.getErrorResponse (each topic INVALID_REQUEST, a null name as "")."""
    response = metadata(cluster, version, [uuid.UUID(bytes=topic_uuid(PETS_ID).bytes), "pets"])
    assert [(t.error_code, t.name, t.partitions) for t in response.topics] == [
        (Errors.INVALID_REQUEST, "", []),
        (Errors.INVALID_REQUEST, "pets", []),
    ]
    assert response.brokers == [] and response.controller_id == -1


def test_a_changed_topic_replaces_its_kept_entry(cluster: Cluster) -> None:
    """A topic's entry is kept under its id: its leader moving a hundred times keeps one."""
    entries = TopicEntries()
    for _ in range(100):
        cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=1, leader=LOCAL))
        cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=1, leader=OTHER))
        for topic in cluster.image.topics.by_id.values():
            entries.entry(cluster.image, topic, 12, "PLAINTEXT")
    assert len(entries) == len(cluster.image.topics.by_id)


def test_a_handler_encodes_a_partition_once_while_it_stays_as_it_is(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[int] = []
    real = encode_partition

    def counting(version: int, partition: Any) -> bytes:
        encoded.append(partition.partition_index)
        return real(version, partition)

    monkeypatch.setattr(metadata_module, "encode_partition", counting)
    handler = metadata_handler(services(cluster))
    body = encode(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False), 12)
    first = call(handler, ApiKey.METADATA, 12, body)
    assert len(encoded) == 4  # pets 0 and 1, birds 0, __consumer_offsets 0
    assert call(handler, ApiKey.METADATA, 12, body) == first
    assert len(encoded) == 4  # kept
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=1, leader=LOCAL))
    call(handler, ApiKey.METADATA, 12, body)
    assert encoded[4:] == [1]  # only the partition that changed
