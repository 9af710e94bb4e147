"""Building images and driving the controller in tests: apply results like the Raft shell does."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage, PartitionRegistration
from pykraft.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    uuid_to_kafka_string,
)
from pykraft.quorum.controller import ControllerResult, ControllerSettings, QuorumController


def incarnation(n: int) -> str:
    return uuid_to_kafka_string(n.to_bytes(16, "big"))


def topic_id(name: str) -> str:
    # A stable, valid Kafka uuid string per topic name.
    return uuid_to_kafka_string(name.encode().ljust(16, b"\x01")[:16])


def endpoint(broker_id: int) -> BrokerEndpoint:
    return BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id)


def apply(image: MetadataImage, records: Iterable[MetadataRecord]) -> MetadataImage:
    """Commit ``records`` after ``image`` as one batch, the way the Raft shell would."""
    batch = list(records)
    if not batch:
        return image
    return apply_records(image, batch, offset=image.offset + len(batch), epoch=1)


def image_with(
    brokers: dict[int, str],
    topics: dict[str, list[tuple[tuple[int, ...], tuple[int, ...], int]]] | None = None,
    configs: dict[tuple[int, str], dict[str, str]] | None = None,
    racks: dict[int, str] | None = None,
) -> MetadataImage:
    """An image with brokers in a state ("unfenced", "fenced", "shutdown") and topics given as
    name -> [(replicas, isr, leader), ...] per partition."""
    records: list[MetadataRecord] = []
    # Each broker's epoch is the offset of its RegisterBrokerRecord, as the controller assigns.
    for offset, broker_id in enumerate(sorted(brokers)):
        records.append(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=incarnation(broker_id),
                broker_epoch=offset,
                end_points=(endpoint(broker_id),),
                rack=(racks or {}).get(broker_id),
            )
        )
    image = apply(MetadataImage.EMPTY, records)
    changes: list[MetadataRecord] = []
    for broker_id, state in sorted(brokers.items()):
        epoch = image.cluster.brokers[broker_id].epoch
        if state in ("unfenced", "shutdown"):
            changes.append(
                BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=-1)
            )
        if state == "shutdown":
            changes.append(
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id, broker_epoch=epoch, in_controlled_shutdown=1
                )
            )
    for name, partitions in (topics or {}).items():
        changes.append(TopicRecord(name=name, topic_id=topic_id(name)))
        for index, (replicas, isr, leader) in enumerate(partitions):
            changes.append(
                PartitionRecord(
                    partition_id=index,
                    topic_id=topic_id(name),
                    replicas=replicas,
                    isr=isr,
                    leader=leader,
                )
            )
    for (resource_type, resource_name), values in (configs or {}).items():
        changes.extend(
            ConfigRecord(
                resource_type=resource_type, resource_name=resource_name, name=key, value=value
            )
            for key, value in values.items()
        )
    return apply(image, changes)


def partition(image: MetadataImage, name: str, index: int) -> PartitionRegistration:
    return image.topics.by_name[name].partitions[index]


def leaders(image: MetadataImage, name: str) -> list[int]:
    topic = image.topics.by_name[name]
    return [topic.partitions[i].leader for i in sorted(topic.partitions)]


class Harness:
    """A controller plus the committed image; ``run`` commits what a request writes."""

    def __init__(
        self,
        image: MetadataImage,
        now_ms: int = 0,
        seed: int = 1,
        settings: ControllerSettings | None = None,
    ) -> None:
        self.image = image
        self.now_ms = now_ms
        self.controller = QuorumController(
            rng=random.Random(seed), now_ms=now_ms, settings=settings
        )

    def run(self, request: Any) -> Any:
        result: ControllerResult[Any] = self.controller.handle(self.image, request, self.now_ms)
        self.image = apply(self.image, result.records)
        return result.response

    def commit(self, result: ControllerResult[Any]) -> Any:
        self.image = apply(self.image, result.records)
        return result.response
