"""The low watermark (Kafka's ``Partition.lowWatermarkIfLeader``, PartitionTest's low watermark
cases) and waiting DeleteRecords (``DelayedDeleteRecords.tryComplete`` / ``onExpiration``), one
line per case, pure."""

from __future__ import annotations

import pytest
from immutables import Map

from pykraft.metadata.image import BrokerRegistration
from pykraft.protocol.errors import Errors
from pykraft.replica.delete_records_waiters import (
    INVALID_LOW_WATERMARK,
    DeleteRecordsPurgatory,
    DeleteRecordsResult,
    delete_offset,
    low_watermark,
)
from pykraft.replica.isr import ReplicaState
from pykraft.replica.partition_state import PartitionRole, PartitionState
from pykraft.replica.replica_core import ReplicaCore
from pykraft.storage.topic_partition import TopicPartition

LOCAL, F2, F3 = 1, 2, 3
PETS0, PETS1 = TopicPartition("pets", 0), TopicPartition("pets", 1)


def registration(broker_id: int, fenced: bool = False) -> BrokerRegistration:
    return BrokerRegistration(
        id=broker_id, epoch=100 + broker_id, incarnation_id="i", fenced=fenced
    )


def leading(**log_starts: int) -> PartitionState:
    """Led here; followers f2/f3 with the given log start offsets."""
    followers = {
        int(name[1:]): ReplicaState(log_start_offset=start) for name, start in log_starts.items()
    }
    return PartitionState(
        role=PartitionRole.LEADER,
        leader_id=LOCAL,
        leader_epoch=1,
        partition_epoch=1,
        replicas=(LOCAL, *followers),
        isr=(LOCAL, *followers),
        followers=Map(followers),
    )


ALIVE = {F2: registration(F2), F3: registration(F3)}


@pytest.mark.parametrize(
    ("state", "leader_start", "brokers", "expected"),
    [
        (leading(f2=5, f3=7), 9, ALIVE, 5),  # the smallest over every live replica
        (leading(f2=9, f3=9), 9, ALIVE, 9),  # all followed: the leader's
        (leading(f2=12, f3=12), 9, ALIVE, 9),  # the leader's own counts too
        (leading(f2=-1, f3=9), 9, ALIVE, -1),  # not heard from since it led: unknown holds it
        (leading(f2=2, f3=9), 9, {F3: registration(F3)}, 9),  # f2 not registered: left out
        (leading(f2=2, f3=9), 9, {**ALIVE, F2: registration(F2, fenced=True)}, 9),  # fenced
        (leading(), 4, {}, 4),  # RF=1
        (PartitionState(role=PartitionRole.FOLLOWER), 4, ALIVE, None),  # only the leader knows
    ],
)
def test_low_watermark(
    state: PartitionState,
    leader_start: int,
    brokers: dict[int, BrokerRegistration],
    expected: int | None,
) -> None:
    assert low_watermark(state, leader_start, brokers.get) == expected


@pytest.mark.parametrize(
    ("requested", "high_watermark", "expected"),
    [(-1, 40, 40), (0, 40, 0), (17, 40, 17), (41, 40, 41), (-2, 40, -2)],
)
def test_delete_offset_minus_one_is_the_high_watermark(
    requested: int, high_watermark: int, expected: int
) -> None:
    assert delete_offset(requested, high_watermark) == expected


def fixed(**by_partition: DeleteRecordsResult) -> dict[TopicPartition, DeleteRecordsResult]:
    return {TopicPartition("pets", int(name[1:])): found for name, found in by_partition.items()}


def test_a_waiter_completes_when_every_low_watermark_reaches_its_offset() -> None:
    purgatory = DeleteRecordsPurgatory()
    waiter = purgatory.try_watch({PETS0: (10, 3), PETS1: (4, 0)}, deadline_ms=1_000)
    assert waiter is not None
    lows = {PETS0: DeleteRecordsResult(3), PETS1: DeleteRecordsResult(4)}
    assert purgatory.try_complete(waiter, lows.__getitem__) is None  # pets-0 still at 3
    lows[PETS0] = DeleteRecordsResult(9)
    assert purgatory.check(PETS0, lows.__getitem__) == {}
    lows[PETS0] = DeleteRecordsResult(12)  # past the offset is done too
    assert purgatory.check(PETS0, lows.__getitem__) == {
        waiter: {PETS0: DeleteRecordsResult(12), PETS1: DeleteRecordsResult(4)}
    }
    assert len(purgatory) == 0


def test_an_error_completes_the_partition_with_an_invalid_low_watermark() -> None:
    # DelayedDeleteRecords.tryComplete: leadership moved away -> NOT_LEADER_OR_FOLLOWER, -1.
    purgatory = DeleteRecordsPurgatory()
    waiter = purgatory.try_watch({PETS0: (10, 3)}, deadline_ms=1_000)
    assert waiter is not None
    moved = DeleteRecordsResult(error=Errors.NOT_LEADER_OR_FOLLOWER)
    assert purgatory.check(PETS0, lambda tp: moved) == {
        waiter: {PETS0: DeleteRecordsResult(INVALID_LOW_WATERMARK, Errors.NOT_LEADER_OR_FOLLOWER)}
    }


def test_expiry_answers_request_timed_out_with_the_low_watermark_accepted() -> None:
    # onExpiration: partitions still pending keep REQUEST_TIMED_OUT and their first answer.
    purgatory = DeleteRecordsPurgatory()
    first = purgatory.try_watch({PETS0: (10, 3), PETS1: (4, 0)}, deadline_ms=1_000)
    later = purgatory.try_watch({PETS1: (6, 0)}, deadline_ms=2_000)
    assert first is not None and later is not None
    assert (
        purgatory.try_complete(
            first, fixed(p0=DeleteRecordsResult(3), p1=DeleteRecordsResult(4)).__getitem__
        )
        is None
    )
    assert purgatory.next_deadline_ms() == 1_000
    assert purgatory.expire(999) == {}
    assert purgatory.expire(1_000) == {
        first: {
            PETS0: DeleteRecordsResult(3, Errors.REQUEST_TIMED_OUT),
            PETS1: DeleteRecordsResult(4, Errors.NONE),
        }
    }
    assert purgatory.next_deadline_ms() == 2_000
    assert purgatory.watching(PETS0) == 0 and purgatory.watching(PETS1) == 1


def test_the_purgatory_is_bounded_and_a_full_one_checks_once() -> None:
    purgatory = DeleteRecordsPurgatory(max_waiters=1)
    assert purgatory.try_watch({PETS0: (10, 3)}, deadline_ms=1_000) is not None
    assert purgatory.try_watch({PETS1: (4, 0)}, deadline_ms=1_000) is None
    lows = fixed(p0=DeleteRecordsResult(10), p1=DeleteRecordsResult(2))
    assert purgatory.check_once({PETS0: (10, 3), PETS1: (4, 0)}, lows.__getitem__) == {
        PETS0: DeleteRecordsResult(10, Errors.NONE),
        PETS1: DeleteRecordsResult(0, Errors.REQUEST_TIMED_OUT),
    }


def test_removing_a_waiter_forgets_it() -> None:
    purgatory = DeleteRecordsPurgatory()
    waiter = purgatory.try_watch({PETS0: (10, 3)}, deadline_ms=1_000)
    assert waiter is not None
    assert purgatory.remove(waiter) == {PETS0: DeleteRecordsResult(3, Errors.REQUEST_TIMED_OUT)}
    assert purgatory.remove(waiter) is None
    assert purgatory.watching(PETS0) == 0 and purgatory.next_deadline_ms() is None


def test_the_replica_core_expires_delete_records_at_its_one_deadline() -> None:
    purgatory = DeleteRecordsPurgatory()
    core = ReplicaCore(LOCAL, now_ms=0, delete_records_waiters=purgatory)
    waiter = purgatory.try_watch({PETS0: (10, 3)}, deadline_ms=500)
    assert waiter is not None
    assert core.next_deadline_ms() == 500  # before the ISR expiration (15 s)
    assert core.tick(499, lambda tp: pytest.fail("no led partition")).is_empty
    ready = core.tick(500, lambda tp: pytest.fail("no led partition"))
    assert ready.expired_delete_records == {
        waiter: {PETS0: DeleteRecordsResult(3, Errors.REQUEST_TIMED_OUT)}
    }
    assert not ready.is_empty
