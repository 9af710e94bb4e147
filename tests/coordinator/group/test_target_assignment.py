"""The target assignment's records (KIP-848), mirroring Kafka's ``TargetAssignmentBuilderTest``:
a new target writes a ``ConsumerGroupTargetAssignmentMember`` record only for the members whose
target changed, then the ``ConsumerGroupTargetAssignmentMetadata`` epoch record."""

from __future__ import annotations

from pykraft.coordinator.group import consumer_records as rec
from tests.coordinator.group.consumer_harness import ConsumerHarness, topic

FOO = topic("foo", 6)
BAR = topic("bar", 6)


def written_since(h: ConsumerHarness, start: int) -> list[tuple[int, str | None]]:
    """(record type, member id) of every record appended after ``start`` appends."""
    return [
        (key.record_type, key.member_id)
        for append in h.appended[start:]
        for key in (rec.decode_consumer_key(r.key) for r in append.records)
    ]


def targets(h: ConsumerHarness, start: int) -> list[str | None]:
    return [m for t, m in written_since(h, start) if t == rec.TARGET_ASSIGNMENT_MEMBER]


def test_new_member_writes_the_targets_that_changed_then_the_epoch() -> None:
    # TargetAssignmentBuilderTest.testNewMember
    h = ConsumerHarness([FOO, BAR])
    a = h.join(("foo", "bar"))
    start = len(h.appended)
    b = h.join(("foo", "bar"))
    assert sorted(x for x in targets(h, start) if x) == sorted([a.member_id, b.member_id])
    kinds = [t for t, _ in written_since(h, start)]
    assert kinds == [
        rec.MEMBER_METADATA,
        rec.GROUP_METADATA,
        rec.TARGET_ASSIGNMENT_MEMBER,
        rec.TARGET_ASSIGNMENT_MEMBER,
        rec.TARGET_ASSIGNMENT_METADATA,
        rec.CURRENT_MEMBER_ASSIGNMENT,
    ]


def test_assignment_has_not_changed_writes_only_the_epoch() -> None:
    # TargetAssignmentBuilderTest.testAssignmentHasNotChanged: a change that moves nothing
    h = ConsumerHarness([FOO, BAR])
    a = h.join(("foo",))
    start = len(h.appended)
    # Subscribing to a topic that does not exist bumps the epoch but assigns the same.
    h.call(member_id=a.member_id, member_epoch=1, subscribed_topic_names=("foo", "nothing"))
    assert targets(h, start) == []
    assert (rec.TARGET_ASSIGNMENT_METADATA, None) in written_since(h, start)
    assert h.coordinator.consumer_groups["orders-app"].assignment_epoch == 2


def test_deleted_member_leaves_the_others_targets_to_the_next_heartbeat() -> None:
    # TargetAssignmentBuilderTest.testDeleteMember: the leave bumps the epoch; the next
    # heartbeat computes the target (the leaver's tombstones were written with the leave).
    h = ConsumerHarness([FOO])
    a = h.join(("foo",))
    b = h.join(("foo",))
    start = len(h.appended)
    h.call(member_id=b.member_id, member_epoch=-1)
    # Tombstones in Kafka's order, then the new group epoch (the subscribed topics are the same).
    assert written_since(h, start) == [
        (rec.CURRENT_MEMBER_ASSIGNMENT, b.member_id),
        (rec.TARGET_ASSIGNMENT_MEMBER, b.member_id),
        (rec.MEMBER_METADATA, b.member_id),
        (rec.GROUP_METADATA, None),
    ]
    start = len(h.appended)
    h.call(member_id=a.member_id, member_epoch=1)
    assert targets(h, start) == [a.member_id]
    group = h.coordinator.consumer_groups["orders-app"]
    assert group.target_of(a.member_id) == {FOO.topic_id: frozenset(range(6))}
