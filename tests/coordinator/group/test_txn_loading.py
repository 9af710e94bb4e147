"""Loading a ``__consumer_offsets`` partition that holds transactional offset commits: offsets
wait for their producer's marker, COMMIT keeps them, ABORT drops them, open transactions stay
pending — Kafka's ``GroupMetadataManagerTest`` load cases (``loadGroupsAndOffsets``)."""

from __future__ import annotations

from pykraft.coordinator.group.offsets import LogRecord, TransactionMarker, load_groups
from pykraft.coordinator.group.records import (
    OffsetAndMetadata,
    offset_commit_key,
    offset_commit_value,
)
from pykraft.coordinator.group.state import GroupState
from pykraft.storage.records import ControlRecordType
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.group.harness import GROUP, Harness

PRODUCER = 1000
FOO0, FOO1, FOO2 = (TopicPartition("foo", i) for i in range(3))
FOO3, FOO4 = TopicPartition("foo", 3), TopicPartition("foo", 4)
BAR0, BAR1, BAR2 = (TopicPartition("bar", i) for i in range(3))
COMMITTED = {FOO0: 23, FOO1: 455, BAR0: 8992}
ABORTED = {FOO2: 231, FOO3: 4551, BAR1: 89921}

Entry = LogRecord | TransactionMarker


class Log:
    """Batches as Kafka's test helpers append them: each record takes one offset, every record
    of a batch carries the batch's base offset."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.next_offset = 0

    def commits(self, offsets: dict[TopicPartition, int], producer_id: int | None = None) -> int:
        """``appendTransactionalOffsetCommits`` (a producer id) or ``appendConsumerOffsetCommit``;
        returns the batch's base offset."""
        base = self.next_offset
        for tp, offset in offsets.items():
            value = OffsetAndMetadata(offset=offset, commit_timestamp_ms=0)
            key = offset_commit_key(GROUP, tp)
            self.entries.append(LogRecord(base, key, offset_commit_value(value), producer_id))
        self.next_offset += len(offsets)
        return base

    def tombstone(self, tp: TopicPartition, producer_id: int | None = None) -> None:
        self.entries.append(
            LogRecord(self.next_offset, offset_commit_key(GROUP, tp), None, producer_id)
        )
        self.next_offset += 1

    def marker(self, producer_id: int, commit: bool) -> None:
        """``completeTransactionalOffsetCommit``."""
        control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        self.entries.append(TransactionMarker(self.next_offset, producer_id, int(control)))
        self.next_offset += 1


def loaded(log: Log) -> Harness:
    h = Harness(load=False)
    assert h.load(0, epoch=2, records=log.entries) == ()
    return h


def offsets_of(h: Harness) -> dict[TopicPartition, int]:
    return {tp: c.value.offset for tp, c in h.group().offsets.items()}


def test_load_transactional_offsets_without_group() -> None:
    # testLoadTransactionalOffsetsWithoutGroup
    log = Log()
    log.commits(COMMITTED, PRODUCER)
    log.marker(PRODUCER, commit=True)
    h = loaded(log)
    assert h.group().state is GroupState.EMPTY
    assert offsets_of(h) == COMMITTED


def test_do_not_load_aborted_transactional_offset_commits() -> None:
    # testDoNotLoadAbortedTransactionalOffsetCommits: nothing committed, no group
    log = Log()
    log.commits(ABORTED, PRODUCER)
    log.marker(PRODUCER, commit=False)
    assert GROUP not in loaded(log).coordinator.groups


def test_group_loaded_with_pending_commits() -> None:
    # testGroupLoadedWithPendingCommits: an open transaction at the end of the log
    log = Log()
    log.commits(COMMITTED, PRODUCER)
    h = loaded(log)
    group = h.group()
    assert group.state is GroupState.EMPTY and group.offsets == {}
    assert group.has_offsets() and group.has_pending_offset_commits_from_producer(PRODUCER)
    assert all(group.has_pending_offset_commits_for(tp) for tp in COMMITTED)
    assert h.coordinator.producer_groups.groups_of(PRODUCER) == [GROUP]


def test_load_with_committed_and_aborted_transactional_offset_commits() -> None:
    # testLoadWithCommittedAndAbortedTransactionalOffsetCommits
    log = Log()
    log.commits(ABORTED, PRODUCER)
    log.marker(PRODUCER, commit=False)
    log.commits(COMMITTED, PRODUCER)
    log.marker(PRODUCER, commit=True)
    h = loaded(log)
    assert offsets_of(h) == COMMITTED
    assert not h.group().has_pending_offset_commits_from_producer(PRODUCER)


def test_load_with_committed_aborted_and_pending_transactional_offset_commits() -> None:
    # testLoadWithCommittedAndAbortedAndPendingTransactionalOffsetCommits: the pending ones
    # materialize when the marker comes after the load
    pending = {FOO3: 2312, FOO4: 45512, BAR2: 899212}
    log = Log()
    committed_at = log.commits(COMMITTED, PRODUCER)
    log.marker(PRODUCER, commit=True)
    log.commits(ABORTED, PRODUCER)
    log.marker(PRODUCER, commit=False)
    log.commits(pending, PRODUCER)
    h = loaded(log)
    group = h.group()
    assert offsets_of(h) == COMMITTED
    assert {c.record_offset for c in group.offsets.values()} == {committed_at}
    assert group.has_pending_offset_commits_for(FOO3)
    assert h.coordinator.complete_transaction(0, PRODUCER, True) == [GROUP]
    assert not group.has_pending_offset_commits_from_producer(PRODUCER)
    assert offsets_of(h) == COMMITTED | pending


def test_load_transactional_offset_commits_from_multiple_producers() -> None:
    # testLoadTransactionalOffsetCommitsFromMultipleProducers
    second = {FOO2: 231, FOO3: 4551, BAR1: 89921}
    log = Log()
    first_at = log.commits(COMMITTED, 1000)
    log.marker(1000, commit=True)
    second_at = log.commits(second, 1001)
    log.marker(1001, commit=True)
    h = loaded(log)
    assert offsets_of(h) == COMMITTED | second
    group = h.group()
    assert {group.offsets[tp].record_offset for tp in COMMITTED} == {first_at}
    assert {group.offsets[tp].record_offset for tp in second} == {second_at}


def test_interleaved_producers_are_settled_each_by_its_own_marker() -> None:
    log = Log()
    log.commits({FOO0: 1}, 1000)
    log.commits({FOO1: 2}, 1001)
    log.marker(1001, commit=False)
    log.marker(1000, commit=True)
    h = loaded(log)
    assert offsets_of(h) == {FOO0: 1}


def test_consumer_commit_later_in_the_log_wins() -> None:
    # testGroupLoadWithConsumerAndTransactionalOffsetCommitsConsumerWins
    log = Log()
    log.commits({FOO0: 23}, PRODUCER)
    consumer_at = log.commits({FOO0: 24})
    log.marker(PRODUCER, commit=True)
    h = loaded(log)
    assert offsets_of(h) == {FOO0: 24}
    assert h.group().offsets[FOO0].record_offset == consumer_at
    assert not h.group().has_pending_offset_commits_from_producer(PRODUCER)


def test_transaction_later_in_the_log_wins() -> None:
    # testGroupLoadWithConsumerAndTransactionalOffsetCommitsTransactionWins
    log = Log()
    log.commits({FOO0: 24})
    log.commits({FOO0: 23}, PRODUCER)
    log.marker(PRODUCER, commit=True)
    assert offsets_of(loaded(log)) == {FOO0: 23}


def test_a_tombstone_in_a_transaction_unstages_only() -> None:
    # loadGroupsAndOffsets: a transactional tombstone removes the staged offset, not the
    # committed one
    log = Log()
    log.commits({FOO0: 5})
    log.commits({FOO0: 6, FOO1: 7}, PRODUCER)
    log.tombstone(FOO0, PRODUCER)
    log.marker(PRODUCER, commit=True)
    assert offsets_of(loaded(log)) == {FOO0: 5, FOO1: 7}


def test_an_unreadable_marker_aborts_and_is_reported() -> None:
    # Kafka parses the control key (ControlRecordType.parse); any type but COMMIT drops the
    # producer's staged offsets
    log = Log()
    log.commits({FOO0: 5}, PRODUCER)
    log.entries.append(TransactionMarker(log.next_offset, PRODUCER, None))
    groups = load_groups(log.entries, now_ms=0)
    assert groups.groups == ()
    [problem] = groups.problems
    assert f"producer {PRODUCER}" in problem and "aborted" in problem
