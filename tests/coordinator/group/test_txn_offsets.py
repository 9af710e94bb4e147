"""Transactional offset commits in the pure group coordinator (KIP-98, KIP-447): staged until the
transaction's marker, then committed or dropped; OffsetFetch's ``require_stable`` — Kafka's
``GroupMetadataManagerTest`` and ``GroupCoordinatorTest`` transactional cases."""

from __future__ import annotations

from pykraft.coordinator.group.effects import OffsetCommitResult, TransactionalProducer
from pykraft.coordinator.group.offsets import FetchedOffset
from pykraft.coordinator.group.records import offset_commit_key
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.group.harness import (
    GROUP,
    PRODUCER_EPOCH,
    PRODUCER_ID,
    TOPIC0,
    TOPIC1,
    Harness,
)

OTHER_GROUP = "other"  # Java hash places it on the other of two partitions ("group": 1)
NOT_STABLE = FetchedOffset(TOPIC0, None, Errors.UNSTABLE_OFFSET_COMMIT)


def committed(h: Harness, *partitions: TopicPartition, group_id: str = GROUP) -> list[int | None]:
    """The committed offsets an OffsetFetch without ``require_stable`` answers."""
    fetched = h.fetch(list(partitions), group_id=group_id)
    return [None if f.offset is None else f.offset.offset for f in fetched.values()]


def commit_marker(h: Harness, partition: int = 0, producer_id: int = PRODUCER_ID) -> list[str]:
    return h.coordinator.complete_transaction(partition, producer_id, True)


def abort_marker(h: Harness, partition: int = 0, producer_id: int = PRODUCER_ID) -> list[str]:
    return h.coordinator.complete_transaction(partition, producer_id, False)


# ------------------------------------------------------------------ GroupMetadataManagerTest


def test_transactional_commit_offset_committed() -> None:
    # testTransactionalCommitOffsetCommitted: written as the producer's transactional batch,
    # staged after the append, committed by the marker
    h = Harness()
    request = h.send_txn_commit({TOPIC0: 37})
    [append] = h.pending_appends
    assert append.producer == TransactionalProducer(PRODUCER_ID, PRODUCER_EPOCH)
    assert [r.key for r in append.records] == [offset_commit_key(GROUP, TOPIC0)]
    assert h.group().has_offsets() and not h.group().offsets
    h.complete_appends()
    assert h.result(request) == OffsetCommitResult({TOPIC0: Errors.NONE})
    assert h.group().has_offsets() and not h.group().offsets
    assert committed(h, TOPIC0) == [None]
    assert commit_marker(h) == [GROUP]
    assert committed(h, TOPIC0) == [37]
    assert not h.group().has_pending_offset_commits_from_producer(PRODUCER_ID)


def test_transactional_commit_offset_append_failure() -> None:
    # testTransactionalCommitOffsetAppendFailure: nothing stays staged; the client retries
    h = Harness()
    request = h.send_txn_commit({TOPIC0: 37})
    h.complete_appends(Errors.NOT_ENOUGH_REPLICAS)
    assert h.result(request) == OffsetCommitResult({TOPIC0: Errors.COORDINATOR_NOT_AVAILABLE})
    # The empty group the commit created holds nothing, so it is gone again.
    assert GROUP not in h.coordinator.groups
    assert abort_marker(h) == []
    assert committed(h, TOPIC0) == [None]


def test_transactional_commit_offset_aborted() -> None:
    # testTransactionalCommitOffsetAborted
    h = Harness()
    assert h.txn_commit({TOPIC0: 37}) == {TOPIC0: Errors.NONE}
    assert abort_marker(h) == [GROUP]
    assert committed(h, TOPIC0) == [None]
    assert GROUP not in h.coordinator.groups  # nothing left in it


def test_transactional_commit_with_metadata_too_large_partial_failure() -> None:
    # testTransactionalCommitOffsetWithOffsetMetadataTooLargePartialFailure
    h = Harness(offset_metadata_max_bytes=4)
    errors = h.txn_commit({TOPIC0: 37, TOPIC1: h.offset(38, metadata="sssss")})
    assert errors == {TOPIC0: Errors.NONE, TOPIC1: Errors.OFFSET_METADATA_TOO_LARGE}
    [append] = h.appended
    assert [r.key for r in append.records] == [offset_commit_key(GROUP, TOPIC0)]
    commit_marker(h)
    assert committed(h, TOPIC0, TOPIC1) == [37, None]


def test_txn_offset_metadata_too_large() -> None:
    # testTxnOffsetMetadataTooLarge: nothing to write, nothing staged
    h = Harness(offset_metadata_max_bytes=4)
    assert h.txn_commit({TOPIC0: h.offset(37, metadata="sssss")}) == {
        TOPIC0: Errors.OFFSET_METADATA_TOO_LARGE
    }
    assert h.appended == [] and GROUP not in h.coordinator.groups


# ------------------------------------------------------------------ GroupCoordinatorTest: fetch


def test_basic_fetch_txn_offsets() -> None:
    # testBasicFetchTxnOffsets, testFetchPendingTxnOffsetsWithCommit
    h = Harness()
    h.txn_commit({TOPIC0: 25})
    unknown = TopicPartition("non-exist-topic", 0)
    stable = h.fetch([TOPIC0, unknown], require_stable=True)
    assert stable == {TOPIC0: NOT_STABLE, unknown: FetchedOffset(unknown, None)}
    commit_marker(h)
    [fetched] = h.fetch([TOPIC0], require_stable=True).values()
    assert fetched.error is Errors.NONE and fetched.offset is not None
    assert fetched.offset.offset == 25


def test_fetch_pending_txn_offsets_with_abort() -> None:
    # testFetchTxnOffsetsWithAbort, testFetchPendingTxnOffsetsWithAbort
    h = Harness()
    h.txn_commit({TOPIC0: 0})
    assert h.fetch([TOPIC0], require_stable=True) == {TOPIC0: NOT_STABLE}
    abort_marker(h)
    assert h.fetch([TOPIC0], require_stable=True) == {TOPIC0: FetchedOffset(TOPIC0, None)}


def test_without_require_stable_the_last_committed_offset_is_answered() -> None:
    # getOffsets: only require_stable looks at what is pending
    h = Harness()
    h.commit({TOPIC0: 5})
    h.txn_commit({TOPIC0: 9})
    assert committed(h, TOPIC0) == [5]
    assert h.fetch([TOPIC0], require_stable=True) == {TOPIC0: NOT_STABLE}
    # The all-partitions form lists committed partitions, pending ones among them unstable.
    assert h.fetch(None, require_stable=True) == {TOPIC0: NOT_STABLE}
    commit_marker(h)
    assert committed(h, TOPIC0) == [9]


def test_an_offset_commit_in_flight_is_unstable_too() -> None:
    # hasPendingOffsetCommitsForTopicPartition counts pendingOffsetCommits as well
    h = Harness()
    h.commit({TOPIC0: 5})
    h.send_commit({TOPIC0: 6})
    assert h.fetch([TOPIC0, TOPIC1], require_stable=True) == {
        TOPIC0: NOT_STABLE,
        TOPIC1: FetchedOffset(TOPIC1, None),
    }
    assert committed(h, TOPIC0) == [5]
    h.complete_appends()
    assert h.fetch([TOPIC0], require_stable=True)[TOPIC0].error is Errors.NONE
    assert committed(h, TOPIC0) == [6]


def test_fetch_txn_offsets_ignore_spurious_commit() -> None:
    # testFetchTxnOffsetsIgnoreSpuriousCommit: a COMMIT after the ABORT finds nothing
    h = Harness()
    h.txn_commit({TOPIC0: 0})
    abort_marker(h)
    assert commit_marker(h) == []
    assert committed(h, TOPIC0) == [None]


def test_fetch_txn_offsets_one_producer_multiple_groups() -> None:
    # testFetchTxnOffsetsOneProducerMultipleGroups: each partition's marker settles only the
    # groups of that partition
    h = Harness(num_partitions=2)
    first, second = h.coordinator.partition_for(GROUP), h.coordinator.partition_for(OTHER_GROUP)
    assert first != second
    h.txn_commit({TOPIC0: 10}, group_id=GROUP)
    h.txn_commit({TOPIC1: 15}, group_id=OTHER_GROUP)
    assert commit_marker(h, first) == [GROUP]
    assert committed(h, TOPIC0, TOPIC1, group_id=GROUP) == [10, None]
    assert committed(h, TOPIC0, TOPIC1, group_id=OTHER_GROUP) == [None, None]
    assert commit_marker(h, second) == [OTHER_GROUP]
    assert committed(h, TOPIC0, TOPIC1, group_id=OTHER_GROUP) == [None, 15]


def test_fetch_txn_offsets_multiple_producers_one_group() -> None:
    # testFetchTxnOffsetsMultipleProducersOneGroup
    h = Harness()
    h.txn_commit({TOPIC0: 10}, producer_id=1000, producer_epoch=3)
    h.txn_commit({TOPIC1: 15}, producer_id=1005, producer_epoch=4)
    commit_marker(h, producer_id=1000)
    assert committed(h, TOPIC0, TOPIC1) == [10, None]
    assert h.fetch([TOPIC1], require_stable=True)[TOPIC1].error is Errors.UNSTABLE_OFFSET_COMMIT
    commit_marker(h, producer_id=1005)
    assert committed(h, TOPIC0, TOPIC1) == [10, 15]


# ------------------------------------------------------------------ ordering by the log


def test_a_commit_written_later_in_the_log_beats_the_transaction() -> None:
    # completePendingTxnOffsetCommit keeps a cached offset whose record lies further along
    # (the in-memory twin of testGroupLoadWithConsumerAndTransactionalOffsetCommitsConsumerWins)
    h = Harness()
    h.txn_commit({TOPIC0: 23})  # log offset 0
    h.commit({TOPIC0: 24})  # log offset 1
    commit_marker(h)
    assert committed(h, TOPIC0) == [24]


def test_a_transaction_written_later_beats_an_earlier_commit() -> None:
    # ...TransactionWins
    h = Harness()
    h.commit({TOPIC0: 24})
    h.txn_commit({TOPIC0: 23})
    commit_marker(h)
    assert committed(h, TOPIC0) == [23]


def test_the_last_commit_of_a_partition_in_a_transaction_counts() -> None:
    h = Harness()
    h.txn_commit({TOPIC0: 1, TOPIC1: 1})
    h.txn_commit({TOPIC0: 2})
    commit_marker(h)
    assert committed(h, TOPIC0, TOPIC1) == [2, 1]


def test_a_marker_before_the_append_is_answered_still_commits() -> None:
    # The record was appended before the marker, so the log commits it; Kafka raises
    # IllegalStateException here, pykraft caches it with its record offset unknown.
    h = Harness()
    request = h.send_txn_commit({TOPIC0: 7})
    commit_marker(h)
    assert committed(h, TOPIC0) == [7]
    h.complete_appends()  # the late acknowledgement changes nothing
    assert h.result(request) == OffsetCommitResult({TOPIC0: Errors.NONE})
    assert committed(h, TOPIC0) == [7]
    h.commit({TOPIC0: 8})
    assert committed(h, TOPIC0) == [8]


def test_an_abort_before_the_append_is_answered_drops_it() -> None:
    h = Harness()
    request = h.send_txn_commit({TOPIC0: 7})
    abort_marker(h)
    h.complete_appends()
    assert h.result(request) == OffsetCommitResult({TOPIC0: Errors.NONE})
    assert committed(h, TOPIC0) == [None]
    assert h.fetch([TOPIC0], require_stable=True)[TOPIC0].error is Errors.NONE


# ------------------------------------------------------------ GroupCoordinatorTest: validation


def test_txn_commit_offset_with_known_member_and_legal_generation() -> None:
    # testTxnCommitOffsetWithKnownMemberId, testTxnCommitOffsetWithLegalGeneration: allowed even
    # while the group completes its rebalance (unlike OffsetCommit)
    h = Harness()
    member_id = h.join_new_member()
    joined = h.join_result(h.last_join)
    errors = h.txn_commit({TOPIC0: 0}, member_id=member_id, generation_id=joined.generation_id)
    assert errors == {TOPIC0: Errors.NONE}


def test_txn_commit_offset_with_invalid_member_or_illegal_generation() -> None:
    # testTxnCommitOffsetWithInvalidMemberId, testTxnCommitOffsetWithIllegalGeneration
    h = Harness()
    member_id, generation = h.stable_group_of_one()
    assert h.txn_commit({TOPIC0: 0}, member_id="invalid-member", generation_id=generation) == {
        TOPIC0: Errors.UNKNOWN_MEMBER_ID
    }
    assert h.txn_commit({TOPIC0: 0}, member_id=member_id, generation_id=generation + 5) == {
        TOPIC0: Errors.ILLEGAL_GENERATION
    }
    # A known member without a generation, in a group that has members: not this generation.
    assert h.txn_commit({TOPIC0: 0}, member_id=member_id) == {TOPIC0: Errors.ILLEGAL_GENERATION}
    assert h.appended[-1].producer is None  # only the group record was written


def test_txn_commit_without_member_is_allowed_while_the_group_has_members() -> None:
    # validateOffsetCommit(isTransactional = true): TxnOffsetCommit v0-v2 carry no member
    h = Harness()
    h.stable_group_of_one()
    assert h.txn_commit({TOPIC0: 3}) == {TOPIC0: Errors.NONE}
    # The same request as an OffsetCommit is refused.
    assert h.commit({TOPIC0: 3}) == {TOPIC0: Errors.UNKNOWN_MEMBER_ID}


def test_txn_commit_with_an_instance_id_names_no_static_member() -> None:
    # testTxnCommitOffsetWithFencedInstanceId's first step: a dynamic member names an instance
    # id no static member holds, so validateCurrentMember answers UNKNOWN_MEMBER_ID
    h = Harness()
    member_id, generation = h.stable_group_of_one()
    errors = h.txn_commit(
        {TOPIC0: 0}, member_id=member_id, generation_id=generation, group_instance_id="leader"
    )
    assert errors == {TOPIC0: Errors.UNKNOWN_MEMBER_ID}
    # An empty group with generation -1 checks nobody, instance id or not.
    assert h.txn_commit({TOPIC0: 0}, group_id="empty", group_instance_id="x") == {
        TOPIC0: Errors.NONE
    }


def test_txn_commit_coordinator_errors() -> None:
    # validateGroupStatus(TXN_OFFSET_COMMIT): an empty group id is invalid for this API
    h = Harness(num_partitions=2, load=False)
    owned = h.coordinator.partition_for(GROUP)
    h.load(owned, epoch=0)
    assert h.txn_commit({TOPIC0: 0}, group_id="") == {TOPIC0: Errors.INVALID_GROUP_ID}
    assert h.txn_commit({TOPIC0: 0}, group_id=OTHER_GROUP) == {TOPIC0: Errors.NOT_COORDINATOR}
    needed, _ = h.coordinator.begin_loading(1 - owned, 0, h.now_ms)
    assert needed
    assert h.txn_commit({TOPIC0: 0}, group_id=OTHER_GROUP) == {
        TOPIC0: Errors.COORDINATOR_LOAD_IN_PROGRESS
    }
    assert h.appended == []


def test_append_errors_are_mapped_as_for_offset_commits() -> None:
    # storeOffsets' mapping; INVALID_PRODUCER_EPOCH (a fenced producer) passes through
    for error, expected in [
        (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
        (Errors.MESSAGE_TOO_LARGE, Errors.INVALID_COMMIT_OFFSET_SIZE),
        (Errors.INVALID_PRODUCER_EPOCH, Errors.INVALID_PRODUCER_EPOCH),
    ]:
        h = Harness()
        request = h.send_txn_commit({TOPIC0: 1})
        h.complete_appends(error)
        assert h.result(request) == OffsetCommitResult({TOPIC0: expected})


# ------------------------------------------------------------------ leadership


def test_unloading_forgets_the_producers_groups() -> None:
    # removeGroupsAndOffsets -> removeGroupFromAllProducers; the new coordinator's load settles
    # the transaction instead (handleTxnCompletion: "the group has moved away")
    h = Harness()
    h.txn_commit({TOPIC0: 1})
    h.take(h.coordinator.unload(0, h.now_ms))
    assert h.coordinator.producer_groups.producers() == frozenset()
    assert commit_marker(h) == []


def test_a_marker_of_another_partition_settles_nothing() -> None:
    h = Harness(num_partitions=2)
    partition = h.coordinator.partition_for(GROUP)
    h.txn_commit({TOPIC0: 1})
    assert commit_marker(h, 1 - partition) == []
    assert h.fetch([TOPIC0], require_stable=True) == {TOPIC0: NOT_STABLE}
