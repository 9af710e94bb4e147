"""Topic routes of the controller's HTTP API: create, delete, add partitions, list, describe.

The write requests are the pure controller's inputs (Kafka's CreateTopics, DeleteTopics,
CreatePartitions; ``quorum.controller`` re-exports them). Over HTTP a route carries one topic,
so its codec reads and writes a request of exactly one. Reads (GET) are answered by any
controller from its committed image. Errors: ``errors.py``.

POST /v1/topics  {"name": "pets", "partitions": 3, "replication_factor": 1,
                  "assignments": {"0": [1, 2]}, "configs": {"cleanup.policy": "delete"},
                  "validate_only": false}
                 -> 201 {name, topic_id, partitions, replication_factor} (200 validate_only)
DELETE /v1/topics/{name} -> {name, topic_id}
POST /v1/topics/{name}/partitions {"count": 6, "assignments": [[1], [2], [1]],
                  "validate_only": false} -> {name, partitions}
GET  /v1/topics  -> {"topics": [{name, topic_id, partitions}]}
GET  /v1/topics/{name} -> {name, topic_id, partitions: [{partition, leader, leader_epoch,
                  partition_epoch, replicas, isr, adding_replicas, removing_replicas,
                  leader_recovery_state}], configs: {...}}
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject

# ---------------------------------------------------------------------------- create


@attrs.frozen
class CreatableReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...]


@attrs.frozen
class CreatableTopicConfig:
    name: str
    value: str | None


@attrs.frozen
class CreatableTopic:
    name: str
    # -1: use num.partitions / default.replication.factor (and -1 both with assignments).
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[CreatableReplicaAssignment, ...] = ()
    configs: tuple[CreatableTopicConfig, ...] = ()


@attrs.frozen
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    validate_only: bool = False


@attrs.frozen
class CreatableTopicResult:
    name: str
    error: ApiError = SUCCESS
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@attrs.frozen
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...]


def create_topic_request_to_json(request: CreateTopicsRequest) -> JsonObject:
    (topic,) = request.topics  # one topic a request over HTTP
    return {
        "name": topic.name,
        "partitions": topic.num_partitions,
        "replication_factor": topic.replication_factor,
        "assignments": {str(a.partition_index): list(a.broker_ids) for a in topic.assignments},
        "configs": {c.name: c.value for c in topic.configs},
        "validate_only": request.validate_only,
    }


def _assignments(fields: Fields) -> tuple[CreatableReplicaAssignment, ...]:
    raw = fields.json_object("assignments", {})
    assignments = []
    for key, replicas in raw.items():
        if (
            not (key.isascii() and key.isdigit())
            or not isinstance(replicas, list)
            or not all(type(r) is int for r in replicas)
        ):
            raise JsonBodyError("assignments maps a partition number to a list of broker ids.")
        assignments.append(CreatableReplicaAssignment(int(key), tuple(replicas)))
    return tuple(sorted(assignments, key=lambda a: a.partition_index))


def create_topic_request_from_json(fields: Fields) -> CreateTopicsRequest:
    topic = CreatableTopic(
        name=fields.string("name"),
        num_partitions=fields.integer("partitions", -1),
        replication_factor=fields.integer("replication_factor", -1),
        assignments=_assignments(fields),
        configs=tuple(
            CreatableTopicConfig(name, value)
            for name, value in fields.nullable_string_map("configs", {}).items()
        ),
    )
    return CreateTopicsRequest(
        topics=(topic,), validate_only=fields.boolean("validate_only", False)
    )


def created_topic_to_json(result: CreatableTopicResult) -> JsonObject:
    assert result.error.is_success(), "a refused topic is answered with the error body"
    return {
        "name": result.name,
        "topic_id": result.topic_id,
        "partitions": result.num_partitions,
        "replication_factor": result.replication_factor,
    }


def created_topic_from_json(fields: Fields) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=fields.string("name"),
        topic_id=fields.optional_string("topic_id"),
        num_partitions=fields.integer("partitions"),
        replication_factor=fields.integer("replication_factor"),
    )


# ---------------------------------------------------------------------------- delete


@attrs.frozen
class DeleteTopicsRequest:
    names: tuple[str, ...] = ()
    topic_ids: tuple[str, ...] = ()


@attrs.frozen
class DeletableTopicResult:
    name: str | None
    topic_id: str | None
    error: ApiError = SUCCESS


@attrs.frozen
class DeleteTopicsResponse:
    topics: tuple[DeletableTopicResult, ...]


def deleted_topic_to_json(result: DeletableTopicResult) -> JsonObject:
    assert result.error.is_success(), "a refused deletion is answered with the error body"
    return {"name": result.name, "topic_id": result.topic_id}


def deleted_topic_from_json(fields: Fields) -> DeletableTopicResult:
    return DeletableTopicResult(
        name=fields.optional_string("name"), topic_id=fields.optional_string("topic_id")
    )


# ---------------------------------------------------------------------------- partitions


@attrs.frozen
class CreatePartitionsTopic:
    name: str
    # The new total number of partitions.
    count: int
    # Replicas of each new partition, or None to let the controller place them.
    assignments: tuple[tuple[int, ...], ...] | None = None


@attrs.frozen
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    validate_only: bool = False


@attrs.frozen
class CreatePartitionsTopicResult:
    name: str
    error: ApiError


@attrs.frozen
class CreatePartitionsResponse:
    topics: tuple[CreatePartitionsTopicResult, ...]


def create_partitions_request_to_json(request: CreatePartitionsRequest) -> JsonObject:
    """The body; the topic's name is the path's ``{name}``."""
    (topic,) = request.topics
    return {
        "count": topic.count,
        "validate_only": request.validate_only,
        "assignments": None
        if topic.assignments is None
        else [list(replicas) for replicas in topic.assignments],
    }


def create_partitions_request_from_json(name: str, fields: Fields) -> CreatePartitionsRequest:
    raw = fields.optional_array("assignments")
    assignments = None
    if raw is not None:
        if not all(isinstance(a, list) and all(type(b) is int for b in a) for a in raw):
            raise JsonBodyError("assignments is a list of broker-id lists, one per new partition.")
        assignments = tuple(tuple(a) for a in raw)
    topic = CreatePartitionsTopic(name=name, count=fields.integer("count"), assignments=assignments)
    return CreatePartitionsRequest(
        topics=(topic,), validate_only=fields.boolean("validate_only", False)
    )


@attrs.frozen(kw_only=True)
class PartitionCount:
    """The answer to adding partitions: the topic's new partition count."""

    name: str
    partitions: int


def partition_count_to_json(answer: PartitionCount) -> JsonObject:
    return {"name": answer.name, "partitions": answer.partitions}


def partition_count_from_json(fields: Fields) -> PartitionCount:
    return PartitionCount(name=fields.string("name"), partitions=fields.integer("partitions"))


# ---------------------------------------------------------------------------- reads


@attrs.frozen(kw_only=True)
class TopicListing:
    name: str
    topic_id: str
    partitions: int


def topic_listings_to_json(listings: tuple[TopicListing, ...]) -> JsonObject:
    return {
        "topics": [
            {"name": t.name, "topic_id": t.topic_id, "partitions": t.partitions} for t in listings
        ]
    }


def topic_listings_from_json(fields: Fields) -> tuple[TopicListing, ...]:
    return tuple(
        TopicListing(
            name=t.string("name"), topic_id=t.string("topic_id"), partitions=t.integer("partitions")
        )
        for t in fields.objects("topics")
    )


@attrs.frozen(kw_only=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0
    leader_recovery_state: int = 0
    # KIP-966 ELR and last known ELR; None from a controller that does not report them.
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@attrs.frozen(kw_only=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: tuple[PartitionDescription, ...]
    # Every topic config with its effective value.
    configs: Mapping[str, str] = attrs.field(factory=dict)


def _partition_to_json(p: PartitionDescription) -> JsonObject:
    return {
        "partition": p.partition,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "adding_replicas": list(p.adding_replicas),
        "removing_replicas": list(p.removing_replicas),
        "leader_recovery_state": p.leader_recovery_state,
        "eligible_leader_replicas": _list_or_none(p.eligible_leader_replicas),
        "last_known_elr": _list_or_none(p.last_known_elr),
    }


def _list_or_none(values: tuple[int, ...] | None) -> list[int] | None:
    return None if values is None else list(values)


def _integers_or_none(fields: Fields, name: str) -> tuple[int, ...] | None:
    values = fields.optional_array(name)
    if values is None:
        return None
    return fields.integers(name)


def _partition_from_json(fields: Fields) -> PartitionDescription:
    return PartitionDescription(
        partition=fields.integer("partition"),
        leader=fields.integer("leader"),
        leader_epoch=fields.integer("leader_epoch"),
        replicas=fields.integers("replicas"),
        isr=fields.integers("isr"),
        adding_replicas=fields.integers("adding_replicas", []),
        removing_replicas=fields.integers("removing_replicas", []),
        partition_epoch=fields.integer("partition_epoch", 0),
        leader_recovery_state=fields.integer("leader_recovery_state", 0),
        eligible_leader_replicas=_integers_or_none(fields, "eligible_leader_replicas"),
        last_known_elr=_integers_or_none(fields, "last_known_elr"),
    )


def topic_description_to_json(description: TopicDescription) -> JsonObject:
    return {
        "name": description.name,
        "topic_id": description.topic_id,
        "partitions": [_partition_to_json(p) for p in description.partitions],
        "configs": dict(description.configs),
    }


def topic_description_from_json(fields: Fields) -> TopicDescription:
    return TopicDescription(
        name=fields.string("name"),
        topic_id=fields.string("topic_id"),
        partitions=tuple(_partition_from_json(p) for p in fields.objects("partitions")),
        configs=fields.string_map("configs", {}),
    )
