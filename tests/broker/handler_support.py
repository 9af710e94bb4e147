"""What the handler tests build their requests and clusters from, beyond ``replica_harness``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from pykraft.broker.authorization import RequestAuthorizer
from pykraft.broker.handlers import broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.records import MetadataRecord, TopicRecord
from tests.broker.replica_harness import (
    BIRDS_ID,
    LOCAL,
    OTHER,
    PETS_ID,
    Cluster,
    InProcessController,
    partition_record,
    pets_led_here,
    services,
)

T = TypeVar("T")
C = TypeVar("C", bound=Cluster)


def by_topic(partitions: Iterable[tuple[str, T]]) -> dict[str, list[T]]:
    """A request's per-partition entries grouped under their topic, in request order (Kafka
    requests nest partitions in topics)."""
    topics: dict[str, list[T]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return topics


def pets_and_birds(pets0_leader_epoch: int) -> list[MetadataRecord]:
    """pets-0 led here at ``pets0_leader_epoch``, pets-1 led here at epoch 1 (OTHER follows),
    birds-0 followed here (OTHER leads at epoch 6)."""
    return [
        *pets_led_here(leader_epoch=pets0_leader_epoch, partition_epoch=pets0_leader_epoch),
        partition_record(PETS_ID, 1, (LOCAL, OTHER), leader_epoch=1),
        TopicRecord(name="birds", topic_id=BIRDS_ID),
        partition_record(BIRDS_ID, 0, (OTHER, LOCAL), leader_epoch=6),
    ]


def started_cluster(harness: C, *topic_records: MetadataRecord) -> Iterator[C]:
    """A ``cluster`` fixture's body (``yield from`` it): brokers LOCAL and OTHER registered and
    ``topic_records`` published on ``harness``, which is closed after the test, however it
    ended."""
    try:
        harness.start(*topic_records)
        yield harness
    finally:
        harness.close()


def apis_over(
    cluster: Cluster, controller: InProcessController, holder: RequestAuthorizer | None = None
) -> KafkaApis:
    """``KafkaApis`` with every broker handler over ``cluster``, forwarding to ``controller``;
    ``holder`` says who may do what (None: everyone may everything)."""
    overrides: dict[str, Any] = {"controller": controller}
    if holder is not None:
        overrides["authorizer"] = holder
    apis = KafkaApis()
    apis.register_all(broker_handlers(services(cluster, **overrides)))
    return apis
