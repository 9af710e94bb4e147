"""The server-side assignors (KIP-848), mirroring Kafka's ``UniformAssignorTest``,
``OptimizedUniformAssignmentBuilderTest``, ``GeneralUniformAssignmentBuilderTest`` and
``RangeAssignorTest`` (group-coordinator/src/test/.../assignor)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.coordinator.group.assignors import (
    AssignmentSpec,
    MemberSubscription,
    PartitionAssignorError,
    assign,
    range_assign,
    uniform_assign,
)

T1, T2, T3 = "topic1", "topic2", "topic3"


Members = dict[str, tuple[set[str], dict[str, set[int]]]]
Result = dict[str, dict[str, frozenset[int]]]


def spec(members: Members, counts: dict[str, int]) -> AssignmentSpec:
    return AssignmentSpec(
        members={
            m: MemberSubscription(frozenset(topics), {t: frozenset(p) for t, p in current.items()})
            for m, (topics, current) in members.items()
        },
        partition_counts=counts,
    )


def flat(result: Result) -> dict[str, dict[str, set[int]]]:
    return {m: {t: set(ps) for t, ps in a.items()} for m, a in result.items()}


def sizes(result: Result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def every_partition_once(result: Result, counts: dict[str, int], subscribed: set[str]) -> None:
    seen = [(t, p) for a in result.values() for t, ps in a.items() for p in ps]
    assert len(seen) == len(set(seen))
    assert set(seen) == {(t, p) for t in subscribed for p in range(counts[t])}


# ------------------------------------------------------------------ uniform


def test_one_member_no_topic_subscription_gets_nothing():
    # UniformAssignorTest.testOneMemberNoTopicSubscription
    assert flat(uniform_assign(spec({"A": (set(), {})}, {T1: 3}))) == {"A": {}}


def test_no_members_no_assignment():
    assert uniform_assign(spec({}, {T1: 3})) == {}


def test_first_assignment_two_members_two_topics_is_balanced():
    # OptimizedUniformAssignmentBuilderTest.testFirstAssignmentTwoMembersTwoTopics
    result = uniform_assign(spec({"A": ({T1, T3}, {}), "B": ({T1, T3}, {})}, {T1: 3, T3: 2}))
    assert sorted(sizes(result).values()) == [2, 3]
    every_partition_once(result, {T1: 3, T3: 2}, {T1, T3})


def test_first_assignment_three_members_six_partitions_two_each():
    # OptimizedUniformAssignmentBuilderTest
    # .testFirstAssignmentThreeMembersThreeTopicsWithAllMembersSubscribed
    counts = {T1: 3, T2: 3}
    result = uniform_assign(spec({m: ({T1, T2}, {}) for m in "ABC"}, counts))
    assert sizes(result) == {"A": 2, "B": 2, "C": 2}
    every_partition_once(result, counts, {T1, T2})


def test_adding_a_member_moves_only_what_it_must():
    # OptimizedUniformAssignmentBuilderTest
    # .testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics
    counts = {T1: 6}
    before = {"A": ({T1}, {T1: {0, 1, 2}}), "B": ({T1}, {T1: {3, 4, 5}})}
    result = flat(uniform_assign(spec({**before, "C": ({T1}, {})}, counts)))
    assert len(result["A"][T1]) == len(result["B"][T1]) == len(result["C"][T1]) == 2
    assert result["A"][T1] <= {0, 1, 2} and result["B"][T1] <= {3, 4, 5}


def test_removing_a_member_keeps_the_others_partitions():
    # OptimizedUniformAssignmentBuilderTest
    # .testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics
    counts = {T1: 6}
    current = {"A": ({T1}, {T1: {0, 1}}), "B": ({T1}, {T1: {2, 3}})}
    result = flat(uniform_assign(spec(current, counts)))
    assert result["A"][T1] >= {0, 1} and result["B"][T1] >= {2, 3}
    assert len(result["A"][T1]) == len(result["B"][T1]) == 3


def test_partitions_of_a_deleted_topic_or_shrunk_count_are_dropped():
    counts = {T1: 2}
    current = {"A": ({T1, T2}, {T1: {0, 1, 5}, T2: {0}})}
    assert flat(uniform_assign(spec(current, counts))) == {"A": {T1: {0, 1}}}


def test_heterogeneous_subscriptions_only_subscribers_get_a_topic():
    # GeneralUniformAssignmentBuilderTest
    # .testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions
    counts = {T1: 3, T2: 3, T3: 2}
    members: Members = {"A": ({T1, T2}, {}), "B": ({T3}, {}), "C": ({T2, T3}, {})}
    result = flat(uniform_assign(spec(members, counts)))
    every_partition_once(uniform_assign(spec(members, counts)), counts, {T1, T2, T3})
    assert set(result["B"]) <= {T3} and set(result["A"]) <= {T1, T2}


@settings(max_examples=60, deadline=None)
@given(
    members=st.integers(min_value=1, max_value=7),
    partitions=st.integers(min_value=0, max_value=30),
    seed_owned=st.lists(st.integers(min_value=0, max_value=6), max_size=30),
)
def test_homogeneous_uniform_is_always_balanced(
    members: int, partitions: int, seed_owned: list[int]
) -> None:
    """⌊P/M⌋ or ⌈P/M⌉ each, whatever the current (even conflicting) assignment."""
    names = [f"m{i}" for i in range(members)]
    current: dict[str, dict[str, set[int]]] = {m: {T1: set()} for m in names}
    for partition, owner in enumerate(seed_owned[:partitions]):
        current[names[owner % members]][T1].add(partition)
    result = uniform_assign(spec({m: ({T1}, current[m]) for m in names}, {T1: partitions}))
    every_partition_once(result, {T1: partitions}, {T1} if partitions else set())
    low = partitions // members
    assert all(low <= n <= low + 1 for n in sizes(result).values())


# ------------------------------------------------------------------ range


def test_range_two_members_two_topics_same_subscriptions():
    # RangeAssignorTest.testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions
    members: Members = {"A": ({T1, T3}, {}), "B": ({T1, T3}, {})}
    assert flat(range_assign(spec(members, {T1: 3, T3: 2}))) == {
        "A": {T1: {0, 1}, T3: {0}},
        "B": {T1: {2}, T3: {1}},
    }


def test_range_three_members_different_subscriptions():
    # RangeAssignorTest.testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions
    members: Members = {"A": ({T1, T2}, {}), "B": ({T3}, {}), "C": ({T2, T3}, {})}
    assert flat(range_assign(spec(members, {T1: 3, T2: 3, T3: 2}))) == {
        "A": {T1: {0, 1, 2}, T2: {0, 1}},
        "B": {T3: {0}},
        "C": {T2: {2}, T3: {1}},
    }


def test_range_more_members_than_partitions():
    # RangeAssignorTest.testFirstAssignmentNumMembersGreaterThanNumPartitions
    members: Members = {m: ({T1}, {}) for m in "ABC"}
    assert flat(range_assign(spec(members, {T1: 2}))) == {
        "A": {T1: {0}},
        "B": {T1: {1}},
        "C": {},
    }


def test_range_keeps_current_partitions_within_quota():
    # RangeAssignorTest.testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded
    members: Members = {"A": ({T1}, {T1: {0, 1}}), "B": ({T1}, {T1: {2, 3}}), "C": ({T1}, {})}
    result = flat(range_assign(spec(members, {T1: 4})))
    assert result["A"][T1] == {0, 1} and result["B"][T1] == {2} and result["C"][T1] == {3}


def test_unknown_assignor_is_refused():
    with pytest.raises(PartitionAssignorError):
        assign("sticky", spec({}, {}))
    assert assign("range", spec({"A": ({T1}, {})}, {T1: 1})) == {"A": {T1: frozenset({0})}}
