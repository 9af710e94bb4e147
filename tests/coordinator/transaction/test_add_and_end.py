"""AddPartitionsToTxn, AddOffsetsToTxn, KIP-890 verification and EndTxn on the pure
coordinator, from Kafka's ``TransactionCoordinatorTest`` (the test names are Kafka's)."""

from __future__ import annotations

import pytest

from pykraft.coordinator.transaction.effects import error_for_version
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from tests.coordinator.transaction.harness import (
    EPOCH,
    START_MS,
    TP0,
    TP1,
    TP2,
    TXN,
    Harness,
    metadata,
)

S = TransactionState
OFFSETS = TopicPartition("__consumer_offsets", 12)

# ------------------------------------------------------------------ AddPartitionsToTxn


def test_should_respond_with_invalid_pid_mapping_on_add_partitions_when_id_not_present() -> None:
    h = Harness()
    assert h.error(h.send_add(0, 1)) is Errors.INVALID_PRODUCER_ID_MAPPING


def test_should_respond_with_invalid_request_add_partitions_when_transactional_id_is_empty() -> (
    None
):
    h = Harness()
    assert h.error(h.send_add(0, 1, transactional_id="")) is Errors.INVALID_REQUEST


def test_should_respond_with_not_coordinator_on_add_partitions_when_not_coordinator() -> None:
    h = Harness(num_partitions=2, load=False)
    h.load(h.coordinator.partition_for(TXN) ^ 1, EPOCH)
    assert h.error(h.send_add(0, 1)) is Errors.NOT_COORDINATOR


def test_should_respond_with_coordinator_load_in_progress_on_add_partitions() -> None:
    h = Harness(load=False)
    h.take(h.coordinator.begin_loading(0, EPOCH, h.now_ms)[1])
    assert h.error(h.send_add(0, 1)) is Errors.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_should_respond_with_concurrent_transactions_on_add_partitions_when_prepared(
    state: TransactionState,
) -> None:
    h = Harness()
    h.put(metadata(state, producer_id=0, epoch=0))
    assert h.error(h.send_add(0, 0)) is Errors.CONCURRENT_TRANSACTIONS


def test_should_respond_with_producer_fenced_on_add_partitions_when_epochs_are_different() -> None:
    h = Harness()
    h.put(metadata(S.PREPARE_COMMIT, producer_id=0, epoch=10, last_epoch=9))
    assert h.error(h.send_add(0, 0)) is Errors.PRODUCER_FENCED
    # Clients before KIP-588 get INVALID_PRODUCER_EPOCH (KafkaApis, by request version).
    assert error_for_version(Errors.PRODUCER_FENCED, ApiKey.ADD_PARTITIONS_TO_TXN, 1) is (
        Errors.INVALID_PRODUCER_EPOCH
    )
    assert error_for_version(Errors.PRODUCER_FENCED, ApiKey.ADD_PARTITIONS_TO_TXN, 2) is (
        Errors.PRODUCER_FENCED
    )
    assert error_for_version(Errors.PRODUCER_FENCED, ApiKey.INIT_PRODUCER_ID, 3) is (
        Errors.INVALID_PRODUCER_EPOCH
    )
    assert error_for_version(Errors.NOT_COORDINATOR, ApiKey.END_TXN, 0) is Errors.NOT_COORDINATOR


def test_a_pending_transition_answers_concurrent_transactions() -> None:
    h = Harness()
    pid, epoch = h.ongoing()
    first = h.send_add(pid, epoch, [TP1])
    second = h.send_add(pid, epoch, [TP2])
    assert h.error(second) is Errors.CONCURRENT_TRANSACTIONS
    h.complete_appends()
    assert h.error(first) is Errors.NONE


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_should_append_new_metadata_to_log_on_add_partitions_when_partitions_added(
    state: TransactionState,
) -> None:
    # shouldAppendNewMetadataToLogOnAddPartitionsWhenPartitionsAdded / ...WhenStateIs*
    h = Harness()
    earlier = [TP1] if state is S.ONGOING else []
    h.put(metadata(state, epoch=1, partitions=earlier, start_ms=START_MS - 10))
    h.now_ms += 5
    request_id = h.send_add(10, 1, [TP0])
    [(_, value)] = h.written()
    assert value.transaction_status is S.ONGOING
    assert value.topic_partitions == frozenset({TP0, *earlier})
    # A transaction starts when its first partition is added.
    started = START_MS - 10 if state is S.ONGOING else h.now_ms
    assert value.transaction_start_timestamp_ms == started
    assert not h.answered(request_id)
    h.complete_appends()
    assert h.error(request_id) is Errors.NONE
    assert h.metadata().topic_partitions == {TP0, *earlier}


def test_should_respond_with_errors_none_on_add_partition_when_partitions_the_same() -> None:
    h = Harness()
    h.put(metadata(S.ONGOING, producer_id=0, epoch=0, partitions=[TP0, TP1]))
    assert h.error(h.send_add(0, 0, [TP0])) is Errors.NONE
    assert h.appended == []  # nothing to write


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    h = Harness()
    pid, epoch = h.ongoing()
    request_id = h.new_request()
    h.take(h.coordinator.handle_add_offsets(TXN, pid, epoch, OFFSETS, request_id, h.now_ms))
    h.complete_appends()
    assert h.error(request_id) is Errors.NONE
    assert h.metadata().topic_partitions == {TP0, OFFSETS}


def test_a_failed_add_partitions_append_leaves_the_partitions_out() -> None:
    h = Harness()
    pid, epoch = h.ongoing()
    request_id = h.send_add(pid, epoch, [TP1])
    h.complete_appends(Errors.REQUEST_TIMED_OUT)
    assert h.error(request_id) is Errors.COORDINATOR_NOT_AVAILABLE
    assert h.metadata().topic_partitions == {TP0}
    assert h.metadata().pending_state is None


# ------------------------------------------------------------------ KIP-890 verification


def test_verify_partitions_in_transaction() -> None:
    # handleVerifyPartitionsInTransaction: a partition not added gets TRANSACTION_ABORTABLE.
    h = Harness()
    pid, epoch = h.ongoing([TP0])
    verify = h.coordinator.handle_verify_partitions
    assert verify(TXN, pid, epoch, [TP0, TP1]) == {
        TP0: Errors.NONE,
        TP1: Errors.TRANSACTION_ABORTABLE,
    }
    count = len(h.appended)  # verification writes nothing
    assert verify(TXN, pid, epoch + 1, [TP0]) == {TP0: Errors.PRODUCER_FENCED}
    assert verify(TXN, pid + 1, epoch, [TP0]) == {TP0: Errors.INVALID_PRODUCER_ID_MAPPING}
    assert verify("", pid, epoch, [TP0, TP1]) == dict.fromkeys([TP0, TP1], Errors.INVALID_REQUEST)
    assert verify("other", pid, epoch, [TP0]) == {TP0: Errors.INVALID_PRODUCER_ID_MAPPING}
    assert len(h.appended) == count


def test_verify_ignores_a_pending_add_but_not_a_prepared_decision() -> None:
    h = Harness()
    pid, epoch = h.ongoing([TP0])
    h.send_add(pid, epoch, [TP1])  # not yet written: not in the transaction yet
    verify = h.coordinator.handle_verify_partitions
    assert verify(TXN, pid, epoch, [TP1]) == {TP1: Errors.TRANSACTION_ABORTABLE}
    h.complete_appends()
    assert verify(TXN, pid, epoch, [TP1]) == {TP1: Errors.NONE}
    h.send_end(pid, epoch, commit=True)
    h.complete_appends()
    assert verify(TXN, pid, epoch, [TP0]) == {TP0: Errors.CONCURRENT_TRANSACTIONS}


def test_verify_while_loading_or_elsewhere() -> None:
    h = Harness(num_partitions=2, load=False)
    ours = h.coordinator.partition_for(TXN)
    h.take(h.coordinator.begin_loading(ours, EPOCH, h.now_ms)[1])
    verify = h.coordinator.handle_verify_partitions
    assert verify(TXN, 1, 0, [TP0]) == {TP0: Errors.COORDINATOR_LOAD_IN_PROGRESS}
    assert verify("x" if h.coordinator.partition_for("x") != ours else "y", 1, 0, [TP0]) == {
        TP0: Errors.NOT_COORDINATOR
    }


# ------------------------------------------------------------------ EndTxn


def test_should_reply_with_invalid_pid_mapping_on_end_txn_when_txn_id_doesnt_exist() -> None:
    h = Harness()
    assert h.error(h.send_end(0, 0, commit=True)) is Errors.INVALID_PRODUCER_ID_MAPPING


def test_should_reply_with_invalid_pid_mapping_on_end_txn_when_pid_doesnt_match_mapped() -> None:
    h = Harness()
    h.put(metadata(S.ONGOING, producer_id=10, epoch=0))
    assert h.error(h.send_end(0, 0, commit=True)) is Errors.INVALID_PRODUCER_ID_MAPPING


def test_should_reply_with_producer_fenced_on_end_txn_when_epoch_is_not_same() -> None:
    h = Harness()
    h.put(metadata(S.ONGOING, epoch=1, last_epoch=0))
    assert h.error(h.send_end(10, 0, commit=True)) is Errors.PRODUCER_FENCED
    assert error_for_version(Errors.PRODUCER_FENCED, ApiKey.END_TXN, 1) is (
        Errors.INVALID_PRODUCER_EPOCH
    )


@pytest.mark.parametrize(
    ("state", "commit", "expected"),
    [
        # shouldReturnOkOnEndTxnWhenStatusIsCompleteCommitAndResultIsCommit (a retry)
        (S.COMPLETE_COMMIT, True, Errors.NONE),
        (S.COMPLETE_ABORT, False, Errors.NONE),
        # shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsComplete*AndResultIsNot*
        (S.COMPLETE_ABORT, True, Errors.INVALID_TXN_STATE),
        (S.COMPLETE_COMMIT, False, Errors.INVALID_TXN_STATE),
        # shouldReturnConcurrentTxnRequestOnEndTxnRequestWhenStatusIsPrepareCommit
        (S.PREPARE_COMMIT, True, Errors.CONCURRENT_TRANSACTIONS),
        (S.PREPARE_ABORT, False, Errors.CONCURRENT_TRANSACTIONS),
        # shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsPrepareAbort
        (S.PREPARE_ABORT, True, Errors.INVALID_TXN_STATE),
        (S.PREPARE_COMMIT, False, Errors.INVALID_TXN_STATE),
        (S.EMPTY, True, Errors.INVALID_TXN_STATE),
        (S.EMPTY, False, Errors.INVALID_TXN_STATE),
    ],
)
def test_end_txn_on_a_transaction_that_is_not_ongoing(
    state: TransactionState, commit: bool, expected: Errors
) -> None:
    h = Harness()
    h.put(metadata(state, epoch=1, last_epoch=0))
    assert h.error(h.send_end(10, 1, commit)) is expected
    assert h.appended == []


@pytest.mark.parametrize("epoch", [2, 0])
def test_should_return_invalid_epoch_on_end_txn_when_epoch_is_larger_or_smaller(
    epoch: int,
) -> None:
    h = Harness()
    h.put(metadata(S.COMPLETE_COMMIT, epoch=1, last_epoch=0))
    assert h.error(h.send_end(10, epoch, commit=True)) is Errors.PRODUCER_FENCED


def test_should_respond_with_invalid_request_on_end_txn_when_transactional_id_is_empty() -> None:
    h = Harness()
    assert h.error(h.send_end(0, 0, True, transactional_id="")) is Errors.INVALID_REQUEST


def test_end_txn_when_not_coordinator_or_loading() -> None:
    h = Harness(num_partitions=2, load=False)
    ours = h.coordinator.partition_for(TXN)
    assert h.error(h.send_end(0, 0, commit=True)) is Errors.NOT_COORDINATOR
    h.take(h.coordinator.begin_loading(ours, EPOCH, h.now_ms)[1])
    assert h.error(h.send_end(0, 0, commit=True)) is Errors.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize("commit", [True, False])
def test_should_append_prepare_to_log_on_end_txn_when_ongoing(commit: bool) -> None:
    # shouldAppendPrepareCommitToLogOnEndTxnWhenStatusIsOngoingAndResultIsCommit / Abort
    h = Harness()
    pid, epoch = h.ongoing([TP0, TP2])
    h.now_ms += 3
    request_id = h.send_end(pid, epoch, commit)
    [(_, value)] = h.written()
    prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    assert value.transaction_status is prepared
    assert value.topic_partitions == {TP0, TP2}
    assert value.transaction_last_update_timestamp_ms == h.now_ms
    assert not h.answered(request_id) and h.pending_markers == []
    h.complete_appends()
    # Answered once the decision is in the log, before any marker is written.
    assert h.error(request_id) is Errors.NONE
    assert h.metadata().state is prepared
    assert h.metadata().pending_state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    [send] = h.pending_markers
    assert send.transactional_id == TXN
    assert send.marker == TxnMarker(
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=EPOCH,
        commit=commit,
        partitions=(TP0, TP2),
    )


def test_a_whole_transaction_commits_and_the_next_one_starts() -> None:
    h = Harness()
    pid, epoch = h.ongoing([TP0, TP1])
    ended = h.send_end(pid, epoch, commit=True)
    h.complete_appends()
    assert h.error(h.send_end(pid, epoch, commit=True)) is Errors.CONCURRENT_TRANSACTIONS
    assert h.error(h.send_add(pid, epoch, [TP2])) is Errors.CONCURRENT_TRANSACTIONS
    h.write_markers()
    [(_, value)] = h.written()
    assert value.transaction_status is S.COMPLETE_COMMIT
    assert value.transaction_partitions == ()
    h.complete_appends()
    assert h.error(ended) is Errors.NONE
    txn = h.metadata()
    assert (txn.state, txn.topic_partitions, txn.pending_state) == (S.COMPLETE_COMMIT, set(), None)
    # A retried EndTxn is answered NONE now; the next transaction starts.
    assert h.error(h.send_end(pid, epoch, commit=True)) is Errors.NONE
    added = h.send_add(pid, epoch, [TP2])
    h.complete_appends()
    assert h.error(added) is Errors.NONE
    assert h.metadata().state is S.ONGOING


def test_a_failed_prepare_append_answers_the_error_and_changes_nothing() -> None:
    h = Harness()
    pid, epoch = h.ongoing()
    request_id = h.send_end(pid, epoch, commit=True)
    h.complete_appends(Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert h.error(request_id) is Errors.COORDINATOR_NOT_AVAILABLE
    assert (h.metadata().state, h.metadata().pending_state) == (S.ONGOING, None)
    assert h.pending_markers == []
    h.commit(pid, epoch)  # the client retries
