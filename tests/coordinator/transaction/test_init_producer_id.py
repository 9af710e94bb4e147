"""InitProducerId on the pure coordinator, scenario by scenario from Kafka's
``TransactionCoordinatorTest`` (the test names are Kafka's) and KIP-360."""

from __future__ import annotations

import pytest

from pykraft.coordinator.transaction.effects import InitProducerIdResult
from pykraft.coordinator.transaction.state import SHORT_MAX, TransactionState
from pykraft.protocol.errors import Errors
from tests.coordinator.transaction.harness import (
    EPOCH,
    FIRST_PRODUCER_ID,
    TIMEOUT_MS,
    TP0,
    TXN,
    Harness,
    metadata,
)

S = TransactionState
FAILED = InitProducerIdResult  # an error answer carries producer id -1 and epoch -1


def test_should_return_invalid_request_when_transactional_id_is_empty() -> None:
    h = Harness()
    assert h.init("") == FAILED(Errors.INVALID_REQUEST, -1, -1)
    assert h.next_producer_id == FIRST_PRODUCER_ID  # no producer id was taken


def test_should_accept_init_pid_and_return_next_pid_when_transactional_id_is_null() -> None:
    h = Harness()
    assert h.init(None) == InitProducerIdResult(Errors.NONE, FIRST_PRODUCER_ID, 0)
    assert h.init(None) == InitProducerIdResult(Errors.NONE, FIRST_PRODUCER_ID + 1, 0)
    assert h.appended == []  # nothing is written for an idempotent producer


def test_no_producer_id_at_hand_is_retriable() -> None:
    # RPCProducerIdManager: no block yet -> COORDINATOR_LOAD_IN_PROGRESS (clients retry).
    h = Harness()
    h.producer_ids_available = False
    assert h.init(None).error is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert h.init(TXN).error is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert TXN not in h.coordinator.manager.transactions[0]


def test_should_init_pid_with_epoch_zero_for_new_transactional_id() -> None:
    h = Harness()
    request_id = h.send_init()
    assert not h.answered(request_id)  # answered once the state is written
    [(key, value)] = h.written()
    assert (key, value.transaction_status, value.producer_epoch) == (TXN, S.EMPTY, 0)
    assert value.transaction_timeout_ms == TIMEOUT_MS
    assert h.appended[-1].partition == 0 and h.appended[-1].timeout_ms == TIMEOUT_MS
    h.complete_appends()
    assert h.init_result(request_id) == InitProducerIdResult(Errors.NONE, FIRST_PRODUCER_ID, 0)


def test_should_generate_new_producer_id_if_no_state_and_producer_id_and_epoch_provided() -> None:
    h = Harness()
    result = h.init(expected=(10, 1))
    assert result == InitProducerIdResult(Errors.NONE, FIRST_PRODUCER_ID, 0)


def test_should_generate_new_producer_id_if_epochs_exhausted() -> None:
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=SHORT_MAX - 1, last_epoch=SHORT_MAX - 2))
    result = h.init()
    assert result == InitProducerIdResult(Errors.NONE, FIRST_PRODUCER_ID, 0)
    assert h.metadata().last_producer_id == 10


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_invalid_transaction_timeout(timeout_ms: int) -> None:
    # TransactionStateManagerTest.testValidateTransactionTimeout: 0 < timeout <= max.
    h = Harness()
    assert h.init(timeout_ms=timeout_ms).error is Errors.INVALID_TRANSACTION_TIMEOUT
    # Refused before a producer id is taken (Kafka validates the timeout first).
    assert h.next_producer_id == FIRST_PRODUCER_ID
    assert h.init(timeout_ms=900_000).error is Errors.NONE


def test_should_respond_with_not_coordinator_on_init_pid_when_not_coordinator() -> None:
    h = Harness(num_partitions=2, load=False)
    h.load(h.coordinator.partition_for(TXN) ^ 1, EPOCH)
    assert h.init() == FAILED(Errors.NOT_COORDINATOR)


def test_should_respond_with_coordinator_load_in_progress_on_init_pid_when_loading() -> None:
    h = Harness(load=False)
    h.take(h.coordinator.begin_loading(0, EPOCH, h.now_ms)[1])
    assert h.init() == FAILED(Errors.COORDINATOR_LOAD_IN_PROGRESS)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT])
def test_should_increment_epoch_and_update_metadata_on_handle_init_pid(
    state: TransactionState,
) -> None:
    # shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhenExisting{Empty,Complete}Transaction
    h = Harness()
    h.put(metadata(state, epoch=1))
    h.now_ms += 5
    assert h.init(timeout_ms=10) == InitProducerIdResult(Errors.NONE, 10, 2)
    txn = h.metadata()
    assert (txn.state, txn.txn_timeout_ms, txn.txn_last_update_timestamp_ms) == (
        S.EMPTY,
        10,
        h.now_ms,
    )
    assert txn.topic_partitions == set()


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_should_wait_for_commit_to_complete_on_handle_init_pid_in_prepare_state(
    state: TransactionState,
) -> None:
    h = Harness()
    h.put(metadata(state, partitions=[TP0]))
    assert h.init() == FAILED(Errors.CONCURRENT_TRANSACTIONS)
    assert h.appended == []


def test_should_abort_transaction_on_handle_init_pid_when_existing_transaction_ongoing() -> None:
    h = Harness()
    h.put(metadata(S.ONGOING, epoch=1, last_epoch=0, partitions=[TP0]))
    request_id = h.send_init()
    # PrepareAbort under the fencing epoch, never returned to a client.
    [(_, value)] = h.written()
    assert (value.transaction_status, value.producer_epoch) == (S.PREPARE_ABORT, 2)
    assert h.metadata().last_producer_epoch == -1
    h.complete_appends()
    assert h.init_result(request_id) == FAILED(Errors.CONCURRENT_TRANSACTIONS)
    # The markers go out under the fencing epoch; the client retries meanwhile.
    [send] = h.pending_markers
    assert (send.marker.producer_epoch, send.marker.commit) == (2, False)
    assert h.init() == FAILED(Errors.CONCURRENT_TRANSACTIONS)
    h.write_markers()
    h.complete_appends()
    assert h.metadata().state is S.COMPLETE_ABORT
    assert h.init() == InitProducerIdResult(Errors.NONE, 10, 3)


def test_should_not_repeatedly_bump_epoch_due_to_init_pid_during_ongoing_txn_if_append_fails() -> (
    None
):
    h = Harness()
    h.put(metadata(S.ONGOING, epoch=1, partitions=[TP0]))
    for _ in range(2):
        request_id = h.send_init()
        h.complete_appends(Errors.NOT_ENOUGH_REPLICAS)
        assert h.init_result(request_id) == FAILED(Errors.COORDINATOR_NOT_AVAILABLE)
        txn = h.metadata()
        assert (txn.producer_epoch, txn.has_failed_epoch_fence) == (2, True)
        assert (txn.state, txn.pending_state) == (S.ONGOING, None)
    request_id = h.send_init()
    assert h.written()[0][1].producer_epoch == 2
    h.complete_appends()
    assert h.init_result(request_id) == FAILED(Errors.CONCURRENT_TRANSACTIONS)
    assert (h.metadata().producer_epoch, h.metadata().has_failed_epoch_fence) == (2, False)


def test_should_use_last_epoch_to_fence_when_epochs_are_exhausted() -> None:
    h = Harness()
    h.put(metadata(S.ONGOING, epoch=SHORT_MAX - 1, last_epoch=SHORT_MAX - 2, partitions=[TP0]))
    request_id = h.send_init()
    [(_, value)] = h.written()
    assert (value.transaction_status, value.producer_epoch) == (S.PREPARE_ABORT, SHORT_MAX)
    h.complete_appends()
    assert h.init_result(request_id) == FAILED(Errors.CONCURRENT_TRANSACTIONS)
    assert h.metadata().producer_epoch == SHORT_MAX
    h.write_markers()
    h.complete_appends()
    # The retry rotates to a new producer id.
    assert h.init() == InitProducerIdResult(Errors.NONE, FIRST_PRODUCER_ID, 0)


def test_init_producer_id_with_no_last_producer_data() -> None:
    # A state written without the previous producer data (v0 values have none): a retry
    # naming the old epoch is fenced.
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=2, last_producer_id=-1, last_epoch=-1))
    assert h.init(expected=(10, 1)) == FAILED(Errors.PRODUCER_FENCED)


def test_fence_producer_when_mapping_exists_with_different_producer_id() -> None:
    h = Harness()
    h.put(metadata(S.EMPTY, producer_id=11, last_producer_id=10, epoch=1, last_epoch=0))
    assert h.init(expected=(10, 1)) == FAILED(Errors.PRODUCER_FENCED)


def test_init_producer_id_with_current_epoch_provided() -> None:
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=10, last_epoch=9))
    assert h.init(expected=(10, 10)) == InitProducerIdResult(Errors.NONE, 10, 11)
    # The producer retries: its answer was lost.
    assert h.init(expected=(10, 10)) == InitProducerIdResult(Errors.NONE, 10, 11)


def test_init_producer_id_stale_current_epoch_provided() -> None:
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=10, last_epoch=9))
    assert h.init() == InitProducerIdResult(Errors.NONE, 10, 11)  # a new instance
    assert h.init(expected=(10, 10)) == FAILED(Errors.PRODUCER_FENCED)  # the old one


def test_retry_init_producer_id_after_producer_id_rotation() -> None:
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=SHORT_MAX - 1, last_epoch=SHORT_MAX - 2))
    rotated = InitProducerIdResult(Errors.NONE, FIRST_PRODUCER_ID, 0)
    assert h.init(expected=(10, SHORT_MAX - 1)) == rotated
    assert h.metadata().last_producer_epoch == SHORT_MAX - 1
    assert h.init(expected=(10, SHORT_MAX - 1)) == rotated


def test_init_producer_id_with_invalid_epoch_after_producer_id_rotation() -> None:
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=SHORT_MAX - 1, last_epoch=SHORT_MAX - 2))
    assert h.init(expected=(10, SHORT_MAX - 1)).producer_id == FIRST_PRODUCER_ID
    assert h.init(expected=(10, SHORT_MAX - 2)) == FAILED(Errors.PRODUCER_FENCED)


def test_an_exhausted_producer_naming_a_stale_epoch_is_fenced() -> None:
    # Kafka throws IllegalStateException here (UNKNOWN_SERVER_ERROR); pykraft fences.
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=SHORT_MAX - 1, last_epoch=SHORT_MAX - 2))
    assert h.init(expected=(10, 5)) == FAILED(Errors.PRODUCER_FENCED)
    assert h.metadata().pending_state is None


def test_should_not_bump_epoch_with_pending_transaction() -> None:
    h = Harness()
    txn = h.put(metadata(S.ONGOING, partitions=[TP0]))
    txn.prepare_abort_or_commit(S.PREPARE_COMMIT, h.now_ms)
    assert h.init(expected=(10, 10)) == FAILED(Errors.CONCURRENT_TRANSACTIONS)


def test_a_failed_append_leaves_the_state_as_it_was() -> None:
    # TransactionStateManagerTest.testAppendFailToNotCoordinatorError and friends.
    h = Harness()
    h.put(metadata(S.EMPTY, epoch=1))
    request_id = h.send_init()
    h.complete_appends(Errors.NOT_LEADER_OR_FOLLOWER)
    assert h.init_result(request_id) == FAILED(Errors.NOT_COORDINATOR)
    txn = h.metadata()
    assert (txn.producer_epoch, txn.pending_state, txn.state) == (1, None, S.EMPTY)
