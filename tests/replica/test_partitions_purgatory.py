"""The waiting both acks-waiting purgatories share (``replica.waiters.PartitionsPurgatory``), over
a rule small enough to read in one line: a partition is done once its "high watermark" reaches
the required offset, or with the error set for it. Kafka's ``DelayedOperationTest`` cases:
completion only when every partition is done, a done partition never asked again, expiry
answering what stands, a full purgatory checked once and answered."""

from __future__ import annotations

from collections import Counter

from pykraft.protocol.errors import Errors
from pykraft.replica.waiters import PartitionsPurgatory
from pykraft.storage.topic_partition import TopicPartition

A, B = TopicPartition("a", 0), TopicPartition("b", 0)


class Log:
    """The checker: settable high watermarks and errors; counts what it was asked."""

    def __init__(self) -> None:
        self.high_watermarks: dict[TopicPartition, int] = {A: 0, B: 0}
        self.errors: dict[TopicPartition, Errors] = {}
        self.asked: Counter[TopicPartition] = Counter()


class Purgatory(PartitionsPurgatory[int, Log, str]):
    """Accepts a required offset; answers "timed out", "done" or the error's name."""

    def _accept(self, value: int) -> tuple[int, str]:
        return value, "timed out"

    def _try_answer(
        self, topic_partition: TopicPartition, required_offset: int, log: Log
    ) -> str | None:
        log.asked[topic_partition] += 1
        if topic_partition in log.errors:
            return log.errors[topic_partition].name
        return "done" if log.high_watermarks[topic_partition] >= required_offset else None


def test_a_waiter_completes_with_its_last_partition_and_done_ones_are_not_asked_again() -> None:
    purgatory, log = Purgatory(10), Log()
    waiter = purgatory.try_watch({A: 5, B: 3}, deadline_ms=1_000)
    assert waiter is not None and purgatory.try_complete(waiter, log) is None
    log.high_watermarks[A] = 5
    assert purgatory.check(A, log) == {}
    log.errors[B] = Errors.NOT_LEADER_OR_FOLLOWER
    assert purgatory.check(B, log) == {waiter: {A: "done", B: "NOT_LEADER_OR_FOLLOWER"}}
    assert log.asked == Counter({A: 2, B: 3})  # A was done after its second check
    assert len(purgatory) == 0 and purgatory.watching(A) == purgatory.watching(B) == 0


def test_expiry_answers_what_stands_and_forgets_the_waiter() -> None:
    purgatory, log = Purgatory(10), Log()
    early = purgatory.try_watch({A: 5, B: 3}, deadline_ms=100)
    late = purgatory.try_watch({A: 9}, deadline_ms=200)
    assert early is not None and late is not None
    log.high_watermarks[B] = 3
    assert purgatory.check(B, log) == {}
    assert purgatory.next_deadline_ms() == 100
    assert purgatory.expire(99) == {}
    assert purgatory.expire(100) == {early: {A: "timed out", B: "done"}}
    assert purgatory.next_deadline_ms() == 200 and purgatory.watching(B) == 0
    assert purgatory.remove(late) == {A: "timed out"} and purgatory.remove(late) is None


def test_a_full_purgatory_refuses_the_waiter_and_check_once_answers_now() -> None:
    purgatory, log = Purgatory(1), Log()
    assert purgatory.try_watch({A: 5}, deadline_ms=100) is not None
    assert purgatory.try_watch({B: 1}, deadline_ms=100) is None
    log.high_watermarks[B] = 1
    assert purgatory.check_once({A: 5, B: 1}, log) == {A: "timed out", B: "done"}
    assert len(purgatory) == 1  # check_once adds nothing


def test_a_check_stops_asking_at_the_first_required_offset_still_waiting() -> None:
    # Produces in flight on A wait for 5, 10 and 15 (and 12 with B): the high watermark at 11
    # completes 5 and 10; 15 waits as 12 does, so it is not asked, and nothing is answered
    # differently from asking every waiter (the rule is monotonic in the required offset).
    purgatory, log = Purgatory(10), Log()
    first, second, with_b, last = (
        purgatory.try_watch({A: 5}, deadline_ms=100),
        purgatory.try_watch({A: 10}, deadline_ms=100),
        purgatory.try_watch({A: 12, B: 1}, deadline_ms=100),
        purgatory.try_watch({A: 15}, deadline_ms=100),
    )
    log.high_watermarks[A] = 11
    assert purgatory.check(A, log) == {first: {A: "done"}, second: {A: "done"}}
    assert log.asked[A] == 3  # 5, 10 and 12; not 15
    log.high_watermarks[B] = 1
    assert purgatory.check(B, log) == {}  # B done, A still waits at 12
    log.high_watermarks[A] = 15
    assert purgatory.check(A, log) == {with_b: {A: "done", B: "done"}, last: {A: "done"}}
    assert len(purgatory) == 0


def test_a_check_still_asks_every_waiter_when_the_partition_fails() -> None:
    # An error answers every required offset: nothing waits, so nothing is skipped.
    purgatory, log = Purgatory(10), Log()
    waiters = [purgatory.try_watch({A: offset}, deadline_ms=100) for offset in (5, 10, 15)]
    assert purgatory.check(A, log) == {}
    assert log.asked[A] == 1  # 5 waits, so 10 and 15 were not asked
    log.errors[A] = Errors.NOT_LEADER_OR_FOLLOWER
    assert purgatory.check(A, log) == {
        waiter: {A: "NOT_LEADER_OR_FOLLOWER"} for waiter in waiters if waiter is not None
    }
