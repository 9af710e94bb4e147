"""AlterPartitionQueue: one change per partition, one request in flight, late answers ignored,
missing partitions sent again (Kafka's DefaultAlterPartitionManager, AlterPartitionManagerTest)."""

from __future__ import annotations

from pykraft.protocol.errors import Errors
from pykraft.replica.alter_partition_queue import (
    AlterPartitionCallback,
    AlterPartitionItem,
    AlterPartitionQueue,
)
from pykraft.replica.isr import AlterPartitionResult, BrokerState, IsrState, PendingIsrChange

TOPIC_ID = "ThIaNwRnSM2Nt9Mx1v0RvA"
OK = AlterPartitionResult(error=Errors.NONE, leader_id=1, leader_epoch=1, isr=(1,))


def item(partition: int) -> AlterPartitionItem:
    change = PendingIsrChange(
        kind=IsrState.PENDING_SHRINK,
        leader_epoch=1,
        partition_epoch=1,
        new_isr=(BrokerState(broker_id=1, broker_epoch=101),),
        changed=frozenset({2}),
    )
    return AlterPartitionItem(
        topic_id=TOPIC_ID, partition_index=partition, leader_id=1, change=change
    )


class Answers:
    def __init__(self) -> None:
        self.results: list[tuple[int, AlterPartitionResult]] = []

    def to(self, partition: int) -> AlterPartitionCallback:
        return lambda result: self.results.append((partition, result))


def test_one_change_per_partition_and_one_request_in_flight() -> None:
    queue, answers = AlterPartitionQueue(), Answers()
    assert queue.submit(item(0), answers.to(0))
    assert not queue.submit(item(0), answers.to(0))  # already queued: refused
    first = queue.next_request()
    assert first is not None and first.items == (item(0),)
    assert queue.submit(item(1), answers.to(1))
    assert queue.next_request() is None  # one in flight
    delivered = queue.on_answer(first, {(TOPIC_ID, 0): OK})
    for callback, result in delivered:
        callback(result)
    assert answers.results == [(0, OK)]
    second = queue.next_request()
    assert second is not None and second.items == (item(1),)


def test_a_failed_request_keeps_every_change_and_a_late_answer_is_ignored() -> None:
    queue, answers = AlterPartitionQueue(), Answers()
    queue.submit(item(0), answers.to(0))
    first = queue.next_request()
    assert first is not None
    assert queue.on_answer(first, None) == []
    assert queue.queued == 1 and not queue.idle
    retry = queue.next_request()
    assert retry is not None and retry.number != first.number
    assert queue.on_answer(first, {(TOPIC_ID, 0): OK}) == []  # the given-up request
    assert queue.in_flight == retry.number
    assert len(queue.on_answer(retry, {(TOPIC_ID, 0): OK})) == 1
    assert queue.idle


def test_a_partition_missing_from_the_answer_is_sent_again() -> None:
    queue, answers = AlterPartitionQueue(), Answers()
    queue.submit(item(0), answers.to(0))
    queue.submit(item(1), answers.to(1))
    batch = queue.next_request()
    assert batch is not None
    results = {(TOPIC_ID, 1): OK}
    assert queue.missing(batch, results) == [(TOPIC_ID, 0)]
    assert [result for _, result in queue.on_answer(batch, results)] == [OK]
    again = queue.next_request()
    assert again is not None and again.items == (item(0),)


def test_a_closed_queue_refuses_and_sends_nothing() -> None:
    queue, answers = AlterPartitionQueue(), Answers()
    queue.submit(item(0), answers.to(0))
    queue.close()
    assert queue.next_request() is None
    assert not queue.submit(item(1), answers.to(1))
    assert queue.idle
