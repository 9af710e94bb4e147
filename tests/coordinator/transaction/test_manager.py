"""Timeouts, expiration, appends, loading, DescribeTransactions and ListTransactions, from
Kafka's ``TransactionStateManagerTest`` and ``TransactionCoordinatorTest`` (names are Kafka's)."""

from __future__ import annotations

import pytest

from pykraft.coordinator.transaction.effects import (
    InitProducerIdResult,
    TransactionDescription,
    TransactionListing,
)
from pykraft.coordinator.transaction.manager import MAX_TOMBSTONE_BATCH_BYTES
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.coordinator.transaction.writes import coordinator_error
from pykraft.protocol.errors import Errors
from tests.coordinator.transaction.harness import (
    EPOCH,
    START_MS,
    TIMEOUT_MS,
    TP0,
    TP1,
    TP2,
    TXN,
    Harness,
    metadata,
)

S = TransactionState
ABORT_INTERVAL_MS = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
EXPIRATION_MS = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
EXPIRATION_INTERVAL_MS = 3600 * 1000  # transaction.remove.expired.transaction.cleanup.interval.ms

# ------------------------------------------------------------------ appends


@pytest.mark.parametrize(
    ("append_error", "expected"),
    [
        # testAppendFailToCoordinatorNotAvailableError
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.COORDINATOR_NOT_AVAILABLE),
        (Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE),
        (Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.COORDINATOR_NOT_AVAILABLE),
        (Errors.REQUEST_TIMED_OUT, Errors.COORDINATOR_NOT_AVAILABLE),
        # testAppendFailToNotCoordinatorError
        (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
        (Errors.KAFKA_STORAGE_ERROR, Errors.NOT_COORDINATOR),
        # testAppendFailToUnknownError
        (Errors.MESSAGE_TOO_LARGE, Errors.UNKNOWN_SERVER_ERROR),
        (Errors.RECORD_LIST_TOO_LARGE, Errors.UNKNOWN_SERVER_ERROR),
        (Errors.UNKNOWN_SERVER_ERROR, Errors.UNKNOWN_SERVER_ERROR),
        (Errors.NONE, Errors.NONE),
    ],
)
def test_append_errors_map_to_coordinator_errors(append_error: Errors, expected: Errors) -> None:
    assert coordinator_error(append_error) is expected
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=1))
    request_id = h.send_init()
    h.complete_appends(append_error)
    assert h.init_result(request_id).error is expected
    # testCompleteTransitionWhenAppendSucceeded / the pending state is reset on failure.
    assert h.metadata().producer_epoch == (2 if expected is Errors.NONE else 1)
    assert h.metadata().pending_state is None


def test_an_append_completing_after_reloading_in_a_new_epoch_answers_not_coordinator() -> None:
    # appendTransactionToLog: the coordinator epoch changed between append and completion.
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=1))
    request_id = h.send_init()
    h.take(h.coordinator.begin_loading(0, EPOCH + 1, h.now_ms)[1])
    # Answered at once: the write belongs to an epoch this coordinator left.
    assert h.init_result(request_id) == InitProducerIdResult(Errors.NOT_COORDINATOR)
    h.complete_appends()  # its late result changes nothing
    h.take(h.coordinator.complete_loading(0, EPOCH + 1, {}, h.now_ms))
    assert TXN not in h.coordinator.manager.transactions[0]


# ------------------------------------------------------------------ timeouts


def test_should_abort_expired_transactions_in_ongoing_state_and_bump_epoch() -> None:
    h = Harness(transaction_abort_timed_out_transaction_cleanup_interval_ms=ABORT_INTERVAL_MS)
    pid, epoch = h.ongoing([TP0, TP1])
    h.advance(TIMEOUT_MS)  # start + timeout == now: not yet past it
    assert h.metadata().state is S.ONGOING
    h.advance(ABORT_INTERVAL_MS)
    [(_, value)] = h.written()
    assert (value.transaction_status, value.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert value.transaction_last_update_timestamp_ms == h.now_ms
    assert value.topic_partitions == {TP0, TP1}
    h.complete_appends()
    [send] = h.write_markers()
    assert (send.marker.commit, send.marker.producer_epoch) == (False, epoch + 1)
    h.complete_appends()
    assert h.metadata().state is S.COMPLETE_ABORT
    # The producer was fenced by the bump.
    assert h.error(h.send_end(pid, epoch, commit=True)) is Errors.PRODUCER_FENCED
    assert h.error(h.send_add(pid, epoch)) is Errors.PRODUCER_FENCED


def test_the_abort_scan_runs_every_cleanup_interval() -> None:
    h = Harness(transaction_abort_timed_out_transaction_cleanup_interval_ms=ABORT_INTERVAL_MS)
    assert h.coordinator.next_deadline_ms() == START_MS + ABORT_INTERVAL_MS
    h.ongoing()
    h.advance(TIMEOUT_MS + 1)  # past the timeout, scanned at the last interval before it
    assert h.metadata().state is S.ONGOING
    h.advance(ABORT_INTERVAL_MS)
    assert h.metadata().pending_state is S.PREPARE_ABORT


def test_should_not_abort_expired_transactions_that_have_a_pending_state_transition() -> None:
    h = Harness()
    pid, epoch = h.ongoing()
    h.send_add(pid, epoch, [TP1])  # its append is in flight
    h.advance(TIMEOUT_MS + ABORT_INTERVAL_MS)
    assert len(h.pending_appends) == 1


def test_should_not_bump_epoch_when_aborting_expired_transaction_if_append_to_log_fails() -> None:
    h = Harness()
    _, epoch = h.ongoing()
    h.advance(TIMEOUT_MS + ABORT_INTERVAL_MS)
    h.complete_appends(Errors.NOT_ENOUGH_REPLICAS)
    txn = h.metadata()
    assert (txn.producer_epoch, txn.has_failed_epoch_fence, txn.state) == (
        epoch + 1,
        True,
        S.ONGOING,
    )
    h.advance(ABORT_INTERVAL_MS)  # the next scan fences with the same epoch
    assert h.written()[0][1].producer_epoch == epoch + 1


def test_should_only_consider_transactions_in_the_ongoing_state_to_abort() -> None:
    h = Harness(num_partitions=1)
    long_ago = START_MS - 10 * TIMEOUT_MS
    for index, state in enumerate(S):
        if state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            continue
        h.put(metadata(state, transactional_id=f"id{index}", start_ms=long_ago))
    assert [tid for tid, _, _ in h.coordinator.manager.timed_out_transactions(START_MS)] == ["id1"]


# ------------------------------------------------------------------ expiration


@pytest.mark.parametrize("state", [S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.EMPTY])
def test_should_remove_expired_transactional_ids(state: TransactionState) -> None:
    # shouldRemoveCompleteCommitExpiredTransactionalIds / CompleteAbort / Empty
    h = Harness()
    h.put(metadata(state, last_update_ms=START_MS))
    h.put(metadata(state, transactional_id="young", last_update_ms=START_MS + 1))
    h.advance(EXPIRATION_MS)  # the scan runs every hour, the id is idle long enough
    [append] = h.pending_appends
    assert h.written(append) == [(TXN, None)]  # a tombstone
    assert append.timeout_ms == 30_000
    assert h.metadata().pending_state is S.DEAD
    assert h.init().error is Errors.CONCURRENT_TRANSACTIONS  # while the tombstone is written
    h.complete_appends()
    assert TXN not in h.coordinator.manager.transactions[0]
    assert "young" in h.coordinator.manager.transactions[0]
    # A new producer starts over under a new producer id.
    result = h.init()
    assert (result.error, result.producer_epoch) == (Errors.NONE, 0)


def test_should_not_remove_expired_transactional_ids_if_log_append_fails() -> None:
    h = Harness()
    h.put(metadata(S.COMPLETE_COMMIT, last_update_ms=START_MS))
    h.advance(EXPIRATION_MS)
    h.complete_appends(Errors.NOT_ENOUGH_REPLICAS)
    assert h.metadata().pending_state is None
    assert h.metadata().state is S.COMPLETE_COMMIT


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT])
def test_should_not_remove_transactional_ids_in_a_transaction(state: TransactionState) -> None:
    # shouldNotRemoveOngoingTransactionalIds / PrepareAbort / PrepareCommit
    h = Harness(transaction_abort_timed_out_transaction_cleanup_interval_ms=EXPIRATION_MS * 2)
    h.put(metadata(state, last_update_ms=START_MS, timeout_ms=900_000))
    h.advance(EXPIRATION_MS + EXPIRATION_INTERVAL_MS)
    assert h.pending_appends == []


def test_tombstones_are_batched_below_the_max_message_size() -> None:
    h = Harness()
    names = [f"{index:03d}" + "x" * 20_000 for index in range(60)]  # ~1.2 MB of keys
    for name in names:
        h.put(metadata(S.EMPTY, transactional_id=name))
    h.advance(EXPIRATION_MS)
    assert len(h.pending_appends) == 2
    for append in h.pending_appends:
        assert sum(len(r.key) for r in append.records) <= MAX_TOMBSTONE_BATCH_BYTES
    assert sorted(tid for a in h.pending_appends for tid, _ in h.written(a)) == sorted(names)
    h.complete_appends()
    assert h.coordinator.manager.transactions[0] == {}


# ------------------------------------------------------------------ loading


def test_load_and_remove_transactions_for_partition() -> None:
    # testLoadAndRemoveTransactionsForPartition
    h = Harness(load=False)
    needed, _ = h.coordinator.begin_loading(0, EPOCH, h.now_ms)
    assert needed
    assert not h.coordinator.begin_loading(0, EPOCH, h.now_ms)[0]  # already loading
    assert h.init().error is Errors.COORDINATOR_LOAD_IN_PROGRESS
    loaded = {TXN: metadata(S.COMPLETE_COMMIT, epoch=3)}
    h.take(h.coordinator.complete_loading(0, EPOCH, loaded, h.now_ms))
    assert h.init() == InitProducerIdResult(Errors.NONE, 10, 4)
    # shouldRemoveTransactionsForPartitionOnEmigration
    h.take(h.coordinator.unload(0, EPOCH, h.now_ms))
    assert h.init().error is Errors.NOT_COORDINATOR


def test_a_load_of_a_partition_that_moved_on_installs_nothing() -> None:
    h = Harness(load=False)
    h.coordinator.begin_loading(0, EPOCH, h.now_ms)
    h.coordinator.begin_loading(0, EPOCH + 1, h.now_ms)
    h.take(h.coordinator.complete_loading(0, EPOCH, {TXN: metadata(S.EMPTY)}, h.now_ms))
    assert h.init().error is Errors.COORDINATOR_LOAD_IN_PROGRESS


def test_a_stale_resignation_is_ignored() -> None:
    h = Harness(load=False)
    h.load(0, EPOCH + 1)
    h.take(h.coordinator.unload(0, EPOCH, h.now_ms))
    assert h.init().error is Errors.NONE


def test_resigning_answers_callers_waiting_on_writes() -> None:
    h = Harness()
    pid, epoch = h.ongoing()
    added = h.send_add(pid, epoch, [TP1])
    ended = h.send_end(pid, epoch, commit=True, transactional_id=TXN)
    assert h.error(ended) is Errors.CONCURRENT_TRANSACTIONS  # the add is pending
    h.take(h.coordinator.unload(0, None, h.now_ms))
    assert h.error(added) is Errors.NOT_COORDINATOR
    h.complete_appends()  # the late result is ignored
    assert h.coordinator.manager.transactions == {}


@pytest.mark.parametrize(("state", "commit"), [(S.PREPARE_COMMIT, True), (S.PREPARE_ABORT, False)])
def test_should_write_txn_markers_for_transaction_in_prepared_state(
    state: TransactionState, commit: bool
) -> None:
    # shouldWriteTxnMarkersForTransactionInPreparedCommitState / PreparedAbortState
    h = Harness(load=False)
    loaded = {TXN: metadata(state, epoch=4, partitions=[TP0, TP1])}
    h.load(0, EPOCH + 2, loaded)
    [send] = h.pending_markers
    assert (send.marker.commit, send.marker.producer_epoch) == (commit, 4)
    assert send.marker.coordinator_epoch == EPOCH + 2
    assert h.init().error is Errors.CONCURRENT_TRANSACTIONS
    h.write_markers()
    [(_, value)] = h.written()
    assert value.transaction_status is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    h.complete_appends()
    assert h.init() == InitProducerIdResult(Errors.NONE, 10, 5)


def test_a_prepared_transaction_without_partitions_completes_at_once() -> None:
    h = Harness(load=False)
    h.load(0, EPOCH, {TXN: metadata(S.PREPARE_COMMIT)})
    assert h.pending_markers == []
    assert h.written()[0][1].transaction_status is S.COMPLETE_COMMIT


# ------------------------------------------------------------------ describe, list


def test_describe_transactions() -> None:
    # testDescribeTransactions
    h = Harness()
    h.put(metadata(S.ONGOING, partitions=[TP2, TP1, TP0], start_ms=START_MS - 5))
    assert h.coordinator.describe_transaction(TXN) == TransactionDescription(
        transactional_id=TXN,
        error=Errors.NONE,
        state="Ongoing",
        transaction_timeout_ms=TIMEOUT_MS,
        transaction_start_time_ms=START_MS - 5,
        producer_id=10,
        producer_epoch=1,
        topics=(("topic1", (0, 1)), ("topic2", (0,))),
    )


def test_describe_transactions_errors() -> None:
    # testDescribeTransactionsWithEmptyTransactionalId / WithExpiringTransactionalId /
    # WhileCoordinatorLoading
    h = Harness(num_partitions=2, load=False)
    ours = h.coordinator.partition_for(TXN)
    describe = h.coordinator.describe_transaction
    assert describe("").error is Errors.INVALID_REQUEST
    assert describe(TXN).error is Errors.NOT_COORDINATOR
    h.coordinator.begin_loading(ours, EPOCH, h.now_ms)
    assert describe(TXN) == TransactionDescription(
        transactional_id=TXN, error=Errors.COORDINATOR_LOAD_IN_PROGRESS
    )
    h.coordinator.complete_loading(ours, EPOCH, {}, h.now_ms)
    assert describe(TXN).error is Errors.TRANSACTIONAL_ID_NOT_FOUND
    h.put(metadata(S.DEAD))
    assert describe(TXN).error is Errors.TRANSACTIONAL_ID_NOT_FOUND
    h.coordinator.shutdown(h.now_ms)
    assert describe(TXN).error is Errors.COORDINATOR_NOT_AVAILABLE


def test_list_transactions_filtering() -> None:
    # testListTransactionsFiltering
    h = Harness(num_partitions=3)
    h.put(metadata(S.ONGOING, transactional_id="a", producer_id=1))
    h.put(metadata(S.ONGOING, transactional_id="b", producer_id=2))
    h.put(metadata(S.COMPLETE_COMMIT, transactional_id="c", producer_id=3))
    h.put(metadata(S.DEAD, transactional_id="d", producer_id=4))
    listing = h.coordinator.list_transactions
    everything = listing([], [])
    assert everything.error is Errors.NONE
    start = metadata(S.ONGOING).txn_start_timestamp_ms  # what each listing carries (KIP-994)
    assert everything.transactions == (
        TransactionListing("a", 1, "Ongoing", start),
        TransactionListing("b", 2, "Ongoing", start),
        TransactionListing("c", 3, "CompleteCommit", start),
    )
    assert [t.transactional_id for t in listing(["Ongoing"], []).transactions] == ["a", "b"]
    assert [t.transactional_id for t in listing([], [2, 3]).transactions] == ["b", "c"]
    assert [t.transactional_id for t in listing(["Ongoing"], [3]).transactions] == []
    unknown = listing(["Ongoing", "Bogus"], [])
    assert unknown.unknown_state_filters == ("Bogus",)
    assert [t.transactional_id for t in unknown.transactions] == ["a", "b"]


def test_list_transactions_when_loading_or_not_active() -> None:
    # testListTransactionsWhenCoordinatorLoading / WhenCoordinatorNotActive
    h = Harness(num_partitions=2)
    h.take(h.coordinator.begin_loading(1, EPOCH + 1, h.now_ms)[1])
    assert h.coordinator.list_transactions([], []).error is Errors.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.shutdown(h.now_ms)
    assert h.coordinator.list_transactions([], []).error is Errors.COORDINATOR_NOT_AVAILABLE


def test_shutdown_answers_waiting_callers_and_forgets_everything() -> None:
    h = Harness()
    h.put(metadata(S.EMPTY))
    request_id = h.send_init()
    h.take(h.coordinator.shutdown(h.now_ms))
    assert h.init_result(request_id).error is Errors.NOT_COORDINATOR
    assert h.coordinator.next_deadline_ms() is None
    assert h.init().error is Errors.NOT_COORDINATOR


def test_no_deadline_without_partitions() -> None:
    h = Harness(load=False)
    assert h.coordinator.next_deadline_ms() is None
    h.load(0, EPOCH)
    assert h.coordinator.next_deadline_ms() == START_MS + ABORT_INTERVAL_MS
    h.put(metadata(S.ONGOING, transactional_id="t", partitions=[TP0]))
    h.take(h.coordinator.unload(0, EPOCH, h.now_ms))
    assert h.coordinator.next_deadline_ms() is None
