"""Partition reassignment routes of the controller's HTTP API (KIP-455).

The request and response types are the controller's inputs and answers for Kafka's
AlterPartitionReassignments and ListPartitionReassignments (``quorum.managers.reassignment``);
the broker forwards the Kafka APIs here, and ``pykraft reassign-partitions`` calls the Kafka
APIs. Errors: ``errors.py``.

POST /v1/reassignments {"partitions": [{"topic": "pets", "partition": 0,
                                        "replicas": [11, 12] | null}]}
        (null replicas cancels the partition's reassignment)
     -> {"results": [{"topic", "partition", "error", "message"}]}
GET  /v1/reassignments
     -> {"reassignments": [{"topic", "partition", "replicas", "adding_replicas",
                            "removing_replicas"}]}   (every reassignment in progress)
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from pykraft.metadata.api.errors import (
    SUCCESS,
    ApiError,
    error_field_from_json,
    error_field_to_json,
)
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject


@attrs.frozen
class ReassignablePartition:
    partition_index: int
    # None cancels the partition's reassignment in progress.
    replicas: tuple[int, ...] | None


@attrs.frozen
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...]


@attrs.frozen
class AlterPartitionReassignmentsRequest:
    topics: tuple[ReassignableTopic, ...]


@attrs.frozen
class ReassignablePartitionResult:
    partition_index: int
    error: ApiError = SUCCESS


@attrs.frozen
class ReassignableTopicResult:
    name: str
    partitions: tuple[ReassignablePartitionResult, ...]


@attrs.frozen
class AlterPartitionReassignmentsResponse:
    error: ApiError = SUCCESS
    responses: tuple[ReassignableTopicResult, ...] = ()


@attrs.frozen
class ListReassignmentsTopic:
    name: str
    partition_indexes: tuple[int, ...]


@attrs.frozen
class ListPartitionReassignmentsRequest:
    # None: every reassignment in progress.
    topics: tuple[ListReassignmentsTopic, ...] | None = None


@attrs.frozen
class OngoingPartitionReassignment:
    partition_index: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@attrs.frozen
class OngoingTopicReassignment:
    name: str
    partitions: tuple[OngoingPartitionReassignment, ...]


@attrs.frozen
class ListPartitionReassignmentsResponse:
    error: ApiError = SUCCESS
    topics: tuple[OngoingTopicReassignment, ...] = ()


def select_reassignments(
    everything: ListPartitionReassignmentsResponse,
    topics: Sequence[ListReassignmentsTopic] | None,
) -> ListPartitionReassignmentsResponse:
    """The part of ``everything`` that ``topics`` asks for, in the order asked (Kafka's
    ``ReplicationControlManager.listReassignments``: unknown topics and partitions not being
    reassigned are left out)."""
    if topics is None:
        return everything
    by_name = {topic.name: topic for topic in everything.topics}
    selected: list[OngoingTopicReassignment] = []
    for wanted in topics:
        topic = by_name.get(wanted.name)
        if topic is None:
            continue
        by_index = {p.partition_index: p for p in topic.partitions}
        partitions = tuple(
            by_index[index]
            for index in dict.fromkeys(wanted.partition_indexes)
            if index in by_index
        )
        if partitions:
            selected.append(OngoingTopicReassignment(wanted.name, partitions))
    return ListPartitionReassignmentsResponse(everything.error, tuple(selected))


# ---------------------------------------------------------------------------- JSON codec


def alter_reassignments_request_to_json(request: AlterPartitionReassignmentsRequest) -> JsonObject:
    return {
        "partitions": [
            {
                "topic": topic.name,
                "partition": p.partition_index,
                "replicas": None if p.replicas is None else list(p.replicas),
            }
            for topic in request.topics
            for p in topic.partitions
        ]
    }


def alter_reassignments_request_from_json(fields: Fields) -> AlterPartitionReassignmentsRequest:
    topics: dict[str, list[ReassignablePartition]] = {}
    for item in fields.objects("partitions"):
        raw = item.optional_array("replicas")
        if raw is not None and not all(type(replica) is int for replica in raw):
            raise JsonBodyError("'replicas' must be a list of broker ids or null.")
        topics.setdefault(item.string("topic"), []).append(
            ReassignablePartition(item.integer("partition"), None if raw is None else tuple(raw))
        )
    return AlterPartitionReassignmentsRequest(
        tuple(ReassignableTopic(name, tuple(parts)) for name, parts in topics.items())
    )


def alter_reassignments_response_to_json(
    response: AlterPartitionReassignmentsResponse,
) -> JsonObject:
    assert response.error.is_success(), "a refused request is answered with the error body"
    return {
        "results": [
            {"topic": topic.name, "partition": p.partition_index, **error_field_to_json(p.error)}
            for topic in response.responses
            for p in topic.partitions
        ]
    }


def alter_reassignments_response_from_json(fields: Fields) -> AlterPartitionReassignmentsResponse:
    topics: dict[str, list[ReassignablePartitionResult]] = {}
    for item in fields.objects("results"):
        topics.setdefault(item.string("topic"), []).append(
            ReassignablePartitionResult(item.integer("partition"), error_field_from_json(item))
        )
    return AlterPartitionReassignmentsResponse(
        responses=tuple(
            ReassignableTopicResult(name, tuple(parts)) for name, parts in topics.items()
        )
    )


def list_reassignments_response_to_json(response: ListPartitionReassignmentsResponse) -> JsonObject:
    assert response.error.is_success(), "a refused request is answered with the error body"
    return {
        "reassignments": [
            {
                "topic": topic.name,
                "partition": p.partition_index,
                "replicas": list(p.replicas),
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
            }
            for topic in response.topics
            for p in topic.partitions
        ]
    }


def list_reassignments_response_from_json(fields: Fields) -> ListPartitionReassignmentsResponse:
    topics: dict[str, list[OngoingPartitionReassignment]] = {}
    for item in fields.objects("reassignments"):
        topics.setdefault(item.string("topic"), []).append(
            OngoingPartitionReassignment(
                partition_index=item.integer("partition"),
                replicas=item.integers("replicas"),
                adding_replicas=item.integers("adding_replicas"),
                removing_replicas=item.integers("removing_replicas"),
            )
        )
    return ListPartitionReassignmentsResponse(
        topics=tuple(OngoingTopicReassignment(name, tuple(parts)) for name, parts in topics.items())
    )
