"""The reassignment routes' JSON codec (metadata/api/reassignments.py): round trips, refusals of
bad bodies, and the ListPartitionReassignments selection (Kafka's
ReplicationControlManager.listReassignments: unknown topics and idle partitions left out)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from pykraft.metadata.api import reassignments as r
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.api.json_fields import Fields, JsonBodyError
from pykraft.protocol.errors import Errors


def through_json(
    to_json: Callable[[Any], Any], from_json: Callable[[Fields], Any], value: Any
) -> Any:
    return from_json(Fields(json.loads(json.dumps(to_json(value)))))


ALTER = r.AlterPartitionReassignmentsRequest(
    (
        r.ReassignableTopic(
            "pets", (r.ReassignablePartition(0, (11, 12)), r.ReassignablePartition(1, None))
        ),
        r.ReassignableTopic("cars", (r.ReassignablePartition(3, (10,)),)),
    )
)


def test_alter_request_round_trip() -> None:
    assert (
        through_json(
            r.alter_reassignments_request_to_json, r.alter_reassignments_request_from_json, ALTER
        )
        == ALTER
    )


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"partitions": [{"topic": "t", "partition": 0, "replicas": ["1"]}]},
        {"partitions": [{"topic": "t", "partition": 0, "replicas": [True]}]},
        {"partitions": [{"topic": "t", "replicas": [1]}]},
        {"partitions": [{"partition": 0, "replicas": [1]}]},
    ],
)
def test_bad_alter_bodies_are_refused(body) -> None:
    with pytest.raises(JsonBodyError):
        r.alter_reassignments_request_from_json(Fields(body))


def test_alter_response_round_trip() -> None:
    response = r.AlterPartitionReassignmentsResponse(
        responses=(
            r.ReassignableTopicResult(
                "pets",
                (
                    r.ReassignablePartitionResult(0),
                    r.ReassignablePartitionResult(
                        1, ApiError.of(Errors.NO_REASSIGNMENT_IN_PROGRESS, "none")
                    ),
                ),
            ),
        )
    )
    decoded = through_json(
        r.alter_reassignments_response_to_json, r.alter_reassignments_response_from_json, response
    )
    assert [(p.partition_index, p.error.error) for p in decoded.responses[0].partitions] == [
        (0, Errors.NONE),
        (1, Errors.NO_REASSIGNMENT_IN_PROGRESS),
    ]


ONGOING = r.ListPartitionReassignmentsResponse(
    topics=(
        r.OngoingTopicReassignment(
            "cars", (r.OngoingPartitionReassignment(2, (11, 12, 10), (12,), (10,)),)
        ),
        r.OngoingTopicReassignment(
            "pets",
            (
                r.OngoingPartitionReassignment(0, (1, 2), (2,), ()),
                r.OngoingPartitionReassignment(4, (3, 1), (), (1,)),
            ),
        ),
    )
)


def test_list_response_round_trip() -> None:
    assert (
        through_json(
            r.list_reassignments_response_to_json, r.list_reassignments_response_from_json, ONGOING
        )
        == ONGOING
    )


def test_select_everything_or_what_is_asked_in_its_order() -> None:
    assert r.select_reassignments(ONGOING, None) == ONGOING
    asked = (
        r.ListReassignmentsTopic("pets", (4, 9, 4)),
        r.ListReassignmentsTopic("nope", (0,)),
        r.ListReassignmentsTopic("cars", ()),
    )
    selected = r.select_reassignments(ONGOING, asked)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in selected.topics] == [
        ("pets", [4])
    ]
