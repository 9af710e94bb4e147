"""Reconciliation of one member (KIP-848), mirroring Kafka's ``CurrentAssignmentBuilderTest``
(group-coordinator/src/test/.../consumer/CurrentAssignmentBuilderTest.java)."""

from __future__ import annotations

from collections.abc import Callable

from pykraft.coordinator.group.consumer_member import (
    ConsumerGroupMember,
    MemberState,
    is_subset,
    reconcile,
)

T1, T2 = "topic-1", "topic-2"


def parts(**topics: set[int]) -> dict[str, frozenset[int]]:
    names = {"t1": T1, "t2": T2}
    return {names[t]: frozenset(p) for t, p in topics.items() if p}


Parts = dict[str, frozenset[int]]
Epochs = Callable[[str, int], int]


def member(
    state: MemberState,
    epoch: int,
    assigned: Parts,
    pending: Parts | None = None,
    previous: int | None = None,
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        member_id="member",
        state=state,
        member_epoch=epoch,
        previous_member_epoch=epoch - 1 if previous is None else previous,
        assigned_partitions=assigned,
        partitions_pending_revocation=pending or {},
    )


def free(topic: str, partition: int) -> int:
    return -1


def owned_by_other(*taken: tuple[str, int]) -> Epochs:
    return lambda topic, partition: 10 if (topic, partition) in taken else -1


def check(
    before: ConsumerGroupMember,
    target_epoch: int,
    target: Parts,
    epochs: Epochs,
    owned: Parts | None,
    expected: ConsumerGroupMember,
) -> None:
    assert reconcile(before, target_epoch, target, epochs, owned) == expected


def test_stable_to_stable():
    before = member(MemberState.STABLE, 10, parts(t1={1, 2, 3}, t2={4, 5, 6}))
    after = member(MemberState.STABLE, 11, parts(t1={1, 2, 3}, t2={4, 5, 6}), previous=10)
    check(before, 11, parts(t1={1, 2, 3}, t2={4, 5, 6}), free, None, after)


def test_stable_to_stable_with_new_partitions():
    before = member(MemberState.STABLE, 10, parts(t1={1, 2, 3}, t2={4, 5, 6}))
    target = parts(t1={1, 2, 3, 4}, t2={4, 5, 6, 7})
    check(before, 11, target, free, None, member(MemberState.STABLE, 11, target, previous=10))


def test_stable_to_unrevoked_partitions():
    before = member(MemberState.STABLE, 10, parts(t1={1, 2, 3}, t2={4, 5, 6}))
    after = member(
        MemberState.UNREVOKED_PARTITIONS,
        10,
        parts(t1={2, 3}, t2={5, 6}),
        parts(t1={1}, t2={4}),
        previous=10,
    )
    check(before, 11, parts(t1={2, 3, 4}, t2={5, 6, 7}), free, None, after)


def test_stable_to_unreleased_partitions():
    before = member(MemberState.STABLE, 10, parts(t1={1, 2, 3}, t2={4, 5, 6}))
    target = parts(t1={1, 2, 3, 4}, t2={4, 5, 6, 7})
    after = member(
        MemberState.UNRELEASED_PARTITIONS, 11, parts(t1={1, 2, 3}, t2={4, 5, 6}), previous=10
    )
    check(before, 11, target, owned_by_other((T1, 4), (T2, 7)), None, after)


def test_stable_to_unreleased_partitions_with_some_free():
    before = member(MemberState.STABLE, 10, parts(t1={1, 2, 3}, t2={4, 5, 6}))
    target = parts(t1={1, 2, 3, 4}, t2={4, 5, 6, 7})
    after = member(
        MemberState.UNRELEASED_PARTITIONS, 11, parts(t1={1, 2, 3, 4}, t2={4, 5, 6}), previous=10
    )
    check(before, 11, target, owned_by_other((T2, 7)), None, after)


def test_stable_at_the_target_epoch_stays():
    before = member(MemberState.STABLE, 11, parts(t1={1}))
    check(before, 11, parts(t1={1, 2}), free, None, before)


def test_unrevoked_partitions_to_stable():
    before = member(
        MemberState.UNREVOKED_PARTITIONS, 10, parts(t1={2, 3}, t2={5, 6}), parts(t1={1}, t2={4})
    )
    owned = parts(t1={2, 3}, t2={5, 6})
    after = member(MemberState.STABLE, 11, parts(t1={2, 3}, t2={5, 6}), previous=10)
    check(before, 11, parts(t1={2, 3}, t2={5, 6}), free, owned, after)


def test_remains_in_unrevoked_partitions_while_it_owns_them():
    before = member(
        MemberState.UNREVOKED_PARTITIONS, 10, parts(t1={2, 3}, t2={5, 6}), parts(t1={1}, t2={4})
    )
    target = parts(t1={3}, t2={6})
    check(before, 12, target, free, parts(t1={1, 2, 3}, t2={5, 6}), before)
    check(before, 12, target, free, None, before)  # no owned list: assume it still owns them


def test_unrevoked_partitions_to_unrevoked_partitions():
    # CurrentAssignmentBuilderTest.testUnrevokedPartitionsToUnrevokedPartitions: revoked, the
    # member moves to epoch 11 (memberEpoch + 1) while it revokes the next ones.
    before = member(
        MemberState.UNREVOKED_PARTITIONS, 10, parts(t1={2, 3}, t2={5, 6}), parts(t1={1}, t2={4})
    )
    after = member(
        MemberState.UNREVOKED_PARTITIONS,
        11,
        parts(t1={3}, t2={6}),
        parts(t1={2}, t2={5}),
        previous=10,
    )
    check(before, 12, parts(t1={3}, t2={6}), free, parts(t1={2, 3}, t2={5, 6}), after)


def test_unrevoked_partitions_to_unreleased_partitions():
    before = member(
        MemberState.UNREVOKED_PARTITIONS, 11, parts(t1={2, 3}, t2={5, 6}), parts(t1={1}, t2={4})
    )
    after = member(MemberState.UNRELEASED_PARTITIONS, 11, parts(t1={2, 3}, t2={5, 6}), previous=11)
    check(
        before,
        11,
        parts(t1={2, 3, 4}, t2={5, 6, 7}),
        owned_by_other((T1, 4), (T2, 7)),
        parts(t1={2, 3}, t2={5, 6}),
        after,
    )


def test_unreleased_partitions_to_stable():
    before = member(MemberState.UNRELEASED_PARTITIONS, 11, parts(t1={2, 3}, t2={5, 6}))
    target = parts(t1={2, 3, 4}, t2={5, 6, 7})
    check(before, 11, target, free, None, member(MemberState.STABLE, 11, target, previous=11))


def test_unreleased_partitions_to_unreleased_partitions():
    before = member(MemberState.UNRELEASED_PARTITIONS, 11, parts(t1={2, 3}, t2={5, 6}), previous=11)
    target = parts(t1={2, 3, 4}, t2={5, 6, 7})
    check(before, 11, target, owned_by_other((T1, 4), (T2, 7)), None, before)


def test_unreleased_partitions_to_unrevoked_partitions():
    before = member(MemberState.UNRELEASED_PARTITIONS, 11, parts(t1={2, 3}, t2={5, 6}))
    after = member(
        MemberState.UNREVOKED_PARTITIONS,
        11,
        parts(t1={3}, t2={6}),
        parts(t1={2}, t2={5}),
        previous=11,
    )
    check(before, 12, parts(t1={3}, t2={6}), free, None, after)


def test_a_partition_it_is_revoking_given_back_is_not_unreleased():
    before = member(MemberState.UNREVOKED_PARTITIONS, 10, parts(t1={2}), parts(t1={1}), previous=9)
    after = member(MemberState.STABLE, 11, parts(t1={1, 2}), previous=10)
    check(before, 11, parts(t1={1, 2}), owned_by_other((T1, 1)), parts(t1={2}), after)


def test_is_subset():
    assert is_subset(parts(t1={1}), parts(t1={1, 2}))
    assert not is_subset(parts(t1={3}), parts(t1={1, 2}))
    assert not is_subset(None, parts(t1={1}))
