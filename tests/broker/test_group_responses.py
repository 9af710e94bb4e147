"""The group responses built from the coordinator's typed results, at each version's rules."""

from __future__ import annotations

from pykraft.broker.handlers.group_requests import OffsetFetchGroup
from pykraft.broker.handlers.group_responses import (
    FetchedGroup,
    FoundCoordinator,
    find_coordinator_response,
    join_group_response,
    leave_group_response,
    offset_fetch_response,
)
from pykraft.coordinator.group.effects import JoinGroupResult, LeaveGroupResult, MemberLeaveResult
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

PETS0 = TopicPartition("pets", 0)
PETS1 = TopicPartition("pets", 1)


def left(group: Errors, *members: Errors) -> LeaveGroupResult:
    return LeaveGroupResult(
        error=group,
        members=tuple(MemberLeaveResult(f"m{i}", None, error) for i, error in enumerate(members)),
    )


def check_leave_v2(result: LeaveGroupResult, expected: Errors) -> None:
    assert leave_group_response(2, result).error_code == expected


def test_leave_group_before_v3_has_one_error_the_groups_else_the_first_members() -> None:
    # LeaveGroupResponse.getError
    check_leave_v2(left(Errors.NONE, Errors.NONE), Errors.NONE)
    check_leave_v2(left(Errors.NONE, Errors.UNKNOWN_MEMBER_ID), Errors.UNKNOWN_MEMBER_ID)
    check_leave_v2(left(Errors.NOT_COORDINATOR, Errors.UNKNOWN_MEMBER_ID), Errors.NOT_COORDINATOR)
    check_leave_v2(
        left(Errors.NONE, Errors.NONE, Errors.FENCED_INSTANCE_ID, Errors.UNKNOWN_MEMBER_ID),
        Errors.FENCED_INSTANCE_ID,
    )


def test_leave_group_v3_answers_per_member() -> None:
    response = leave_group_response(3, left(Errors.NONE, Errors.NONE, Errors.UNKNOWN_MEMBER_ID))
    assert response.error_code == Errors.NONE
    assert [(m.member_id, m.error_code) for m in response.members] == [
        ("m0", Errors.NONE),
        ("m1", Errors.UNKNOWN_MEMBER_ID),
    ]


def test_join_group_protocol_name_is_a_string_before_v7() -> None:
    result = JoinGroupResult(member_id="m", error=Errors.MEMBER_ID_REQUIRED)
    assert join_group_response(6, result).protocol_name == ""
    assert join_group_response(7, result).protocol_name is None


def test_find_coordinator_one_answer_before_v4_one_per_key_from_v4() -> None:
    found = FoundCoordinator(key="g", error=Errors.NONE, message=None, node_id=1, host="h", port=9)
    single = find_coordinator_response(3, [found])
    assert (single.error_code, single.node_id, single.host, single.port) == (0, 1, "h", 9)
    missing = FoundCoordinator(key="x", error=Errors.COORDINATOR_NOT_AVAILABLE, message="m")
    batched = find_coordinator_response(4, [found, missing])
    assert [(c.key, c.error_code, c.node_id) for c in batched.coordinators] == [
        ("g", Errors.NONE, 1),
        ("x", Errors.COORDINATOR_NOT_AVAILABLE, -1),
    ]


def test_offset_fetch_v1_puts_the_group_error_on_every_partition_asked_for() -> None:
    group = OffsetFetchGroup(group_id="g", partitions=(PETS0, PETS1))
    fetched = FetchedGroup(group=group, error=Errors.NOT_COORDINATOR, offsets=[])
    v1 = offset_fetch_response(1, [fetched])
    assert [(p.partition_index, p.error_code) for p in v1.topics[0].partitions] == [
        (0, Errors.NOT_COORDINATOR),
        (1, Errors.NOT_COORDINATOR),
    ]
    v2 = offset_fetch_response(2, [fetched])
    assert (v2.error_code, v2.topics) == (Errors.NOT_COORDINATOR, [])


def test_offset_fetch_groups_partitions_under_their_topics() -> None:
    committed = OffsetAndMetadata(
        offset=17, leader_epoch=3, metadata="meta", commit_timestamp_ms=0, expire_timestamp_ms=None
    )
    group = OffsetFetchGroup(group_id="g", partitions=None)
    offsets = [(PETS0, committed), (TopicPartition("birds", 0), None), (PETS1, None)]
    response = offset_fetch_response(
        8, [FetchedGroup(group=group, error=Errors.NONE, offsets=offsets)]
    )
    (answered,) = response.groups
    assert [
        (t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
        for t in answered.topics
    ] == [("pets", [(0, 17), (1, -1)]), ("birds", [(0, -1)])]
