"""One transactional id's state machine, after Kafka's ``TransactionMetadataTest`` (the test
names are Kafka's) and its ``TransactionState`` table."""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.coordinator.transaction.metadata import TransactionMetadata
from pykraft.coordinator.transaction.state import (
    SHORT_MAX,
    VALID_PREVIOUS_STATES,
    IllegalTransactionStateTransition,
    TransactionState,
    is_epoch_exhausted,
)
from pykraft.storage.topic_partition import TopicPartition

S = TransactionState
NOW = 1_000_000
PRODUCER_ID = 23_423
TP0 = TopicPartition("topic1", 0)
TP1 = TopicPartition("topic2", 0)


def metadata(
    *, epoch: int, state: TransactionState = S.EMPTY, last_epoch: int = -1, **kwargs: Any
) -> TransactionMetadata:
    kwargs.setdefault("txn_last_update_timestamp_ms", NOW)
    return TransactionMetadata(
        transactional_id="txnlId",
        producer_id=PRODUCER_ID,
        producer_epoch=epoch,
        last_producer_epoch=last_epoch,
        txn_timeout_ms=30_000,
        state=state,
        **kwargs,
    )


def bump(txn: TransactionMetadata, expected: int | None, now_ms: int = NOW) -> None:
    transit = txn.prepare_increment_producer_epoch(30_000, expected, now_ms)
    assert transit is not None
    txn.complete_transition_to(transit)


# ------------------------------------------------------------------ the state table


def test_transaction_state_id_and_name_mapping() -> None:
    # testTransactionStateIdAndNameMapping: the status byte and the name Kafka shows.
    names = [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    for state_id, name in enumerate(names):
        state = S.from_id(state_id)
        assert (state.id, state.value) == (state_id, name)
        assert S.from_name(name) is state
    assert S.from_name("Bogus") is None
    with pytest.raises(ValueError):
        S.from_id(8)


def test_only_finished_or_empty_ids_may_expire() -> None:
    allowed = {s for s in S if s.is_expiration_allowed}
    assert allowed == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_a_decision_is_prepared_only_from_the_table(
    source: TransactionState, target: TransactionState
) -> None:
    txn = metadata(epoch=1, state=source, txn_start_timestamp_ms=NOW)
    if source in VALID_PREVIOUS_STATES[target]:
        assert txn.prepare_abort_or_commit(target, NOW).txn_state is target
        assert txn.pending_state is target
    else:
        with pytest.raises(IllegalTransactionStateTransition, match=target.value):
            txn.prepare_abort_or_commit(target, NOW)
        assert txn.pending_state is None


@pytest.mark.parametrize("source", list(S))
def test_add_partitions_only_from_the_table(source: TransactionState) -> None:
    txn = metadata(epoch=1, state=source)
    allowed = source in {S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    if allowed:
        txn.prepare_add_partitions({TP0}, NOW)
    else:
        with pytest.raises(IllegalTransactionStateTransition):
            txn.prepare_add_partitions({TP0}, NOW)


def test_nothing_is_prepared_while_a_transition_is_pending() -> None:
    txn = metadata(epoch=1, state=S.ONGOING)
    txn.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    with pytest.raises(IllegalTransactionStateTransition, match="is pending"):
        txn.prepare_add_partitions({TP0}, NOW)


def test_completing_what_was_not_prepared_is_a_bug() -> None:
    txn = metadata(epoch=1, state=S.ONGOING, txn_start_timestamp_ms=NOW)
    commit = metadata(epoch=1, state=S.ONGOING).prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    with pytest.raises(IllegalTransactionStateTransition):
        txn.complete_transition_to(commit)  # nothing pending
    txn.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)
    with pytest.raises(IllegalTransactionStateTransition):
        txn.complete_transition_to(commit)  # another target
    assert txn.state is S.ONGOING


def test_dead_is_never_completed() -> None:
    txn = metadata(epoch=1, state=S.COMPLETE_COMMIT)
    dead = txn.prepare_dead()
    with pytest.raises(IllegalTransactionStateTransition):
        txn.complete_transition_to(dead)


def test_a_marker_is_removed_only_while_prepared() -> None:
    txn = metadata(epoch=1, state=S.ONGOING, topic_partitions={TP0})
    with pytest.raises(IllegalTransactionStateTransition):
        txn.remove_partition(TP0)
    txn.state = S.PREPARE_COMMIT
    txn.remove_partition(TP0)
    assert txn.topic_partitions == set()


# ------------------------------------------------------------------ epochs


def test_initialize_epoch() -> None:
    # testInitializeEpoch
    txn = metadata(epoch=-1)
    bump(txn, None)
    assert (txn.producer_id, txn.producer_epoch, txn.last_producer_epoch) == (PRODUCER_ID, 0, -1)


def test_normal_epoch_bump() -> None:
    # testNormalEpochBump
    txn = metadata(epoch=735)
    bump(txn, None)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (736, -1)


def test_bump_epoch_not_allowed_if_epochs_exhausted() -> None:
    # testBumpEpochNotAllowedIfEpochsExhausted
    txn = metadata(epoch=SHORT_MAX - 1)
    assert txn.is_producer_epoch_exhausted
    with pytest.raises(IllegalTransactionStateTransition):
        txn.prepare_increment_producer_epoch(30_000, None, NOW)


def test_epoch_exhaustion_leaves_one_epoch_to_fence_with() -> None:
    assert not is_epoch_exhausted(SHORT_MAX - 2)
    assert is_epoch_exhausted(SHORT_MAX - 1) and is_epoch_exhausted(SHORT_MAX)


def test_attempted_epoch_bump_with_newly_created_metadata() -> None:
    # testAttemptedEpochBumpWithNewlyCreatedMetadata
    txn = metadata(epoch=-1)
    bump(txn, 735)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (0, -1)


def test_epoch_bump_with_current_epoch_provided() -> None:
    # testEpochBumpWithCurrentEpochProvided
    txn = metadata(epoch=735)
    bump(txn, 735)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (736, 735)


def test_attempted_epoch_bump_with_last_epoch() -> None:
    # testAttemptedEpochBumpWithLastEpoch: a retry of a bump answers the bumped epoch again.
    txn = metadata(epoch=735, last_epoch=734)
    bump(txn, 734)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (735, 734)


def test_attempted_epoch_bump_with_fenced_epoch() -> None:
    # testAttemptedEpochBumpWithFencedEpoch
    txn = metadata(epoch=735, last_epoch=734)
    assert txn.prepare_increment_producer_epoch(30_000, 733, NOW) is None
    assert txn.pending_state is None


def test_fence_producer_after_epochs_exhausted() -> None:
    # testFenceProducerAfterEpochsExhausted
    txn = metadata(epoch=SHORT_MAX - 1, state=S.ONGOING)
    fence = txn.prepare_fence_producer_epoch()
    assert (fence.producer_epoch, fence.last_producer_epoch) == (SHORT_MAX, -1)
    assert txn.pending_state is S.PREPARE_EPOCH_FENCE
    txn.pending_state = None  # endTransaction makes way for the abort
    abort = txn.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)
    txn.complete_transition_to(abort)
    assert abort.producer_id == PRODUCER_ID


def test_fence_producer_not_allowed_if_it_would_overflow() -> None:
    # testFenceProducerNotAllowedIfItWouldOverflow
    txn = metadata(epoch=SHORT_MAX, state=S.ONGOING)
    with pytest.raises(IllegalTransactionStateTransition, match="overflow"):
        txn.prepare_fence_producer_epoch()


def test_a_failed_fence_is_not_bumped_again() -> None:
    txn = metadata(epoch=5, state=S.ONGOING)
    assert txn.prepare_fence_producer_epoch().producer_epoch == 6
    txn.pending_state = None
    txn.has_failed_epoch_fence = True
    assert txn.prepare_fence_producer_epoch().producer_epoch == 5


def test_rotate_producer_id() -> None:
    # testRotateProducerId
    txn = metadata(epoch=SHORT_MAX - 1)
    transit = txn.prepare_producer_id_rotation(9893, 30_000, NOW, record_last_epoch=True)
    txn.complete_transition_to(transit)
    assert (txn.producer_id, txn.last_producer_id) == (9893, PRODUCER_ID)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (0, SHORT_MAX - 1)


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT])
def test_rotate_producer_id_in_a_transaction(state: TransactionState) -> None:
    # testRotateProducerIdInOngoingState / InPrepareAbortState / InPrepareCommitState
    txn = metadata(epoch=SHORT_MAX - 1, state=state)
    with pytest.raises(IllegalTransactionStateTransition, match="still pending"):
        txn.prepare_producer_id_rotation(9893, 30_000, NOW, record_last_epoch=False)


# ------------------------------------------------------------------ timestamps


def test_tolerate_update_time_shift_during_epoch_bump() -> None:
    # testTolerateUpdateTimeShiftDuringEpochBump: a clock that went back is written as is.
    txn = metadata(epoch=1, txn_start_timestamp_ms=1)
    bump(txn, 1, now_ms=NOW - 1)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (2, 1)
    assert (txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms) == (1, NOW - 1)


def test_tolerate_update_time_reset_during_producer_id_rotation() -> None:
    # testTolerateUpdateTimeResetDuringProducerIdRotation
    txn = metadata(epoch=1, txn_start_timestamp_ms=1)
    transit = txn.prepare_producer_id_rotation(PRODUCER_ID + 1, 30_000, NOW - 1, True)
    txn.complete_transition_to(transit)
    assert (txn.producer_id, txn.producer_epoch, txn.last_producer_epoch) == (
        PRODUCER_ID + 1,
        0,
        1,
    )
    assert (txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms) == (1, NOW - 1)


def test_tolerate_time_shift_during_add_partitions() -> None:
    # testTolerateTimeShiftDuringAddPartitions: starting a transaction sets its start time;
    # adding to an ongoing one keeps it.
    txn = metadata(epoch=1, txn_start_timestamp_ms=NOW)
    txn.complete_transition_to(txn.prepare_add_partitions({TP0}, NOW - 1))
    assert txn.topic_partitions == {TP0}
    assert (txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms) == (NOW - 1, NOW - 1)
    txn.complete_transition_to(txn.prepare_add_partitions({TP1}, NOW - 2))
    assert txn.topic_partitions == {TP0, TP1}
    assert (txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms) == (NOW - 1, NOW - 2)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (1, -1)


@pytest.mark.parametrize("target", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_tolerate_time_shift_during_prepare(target: TransactionState) -> None:
    # testTolerateTimeShiftDuringPrepareCommit / PrepareAbort
    txn = metadata(epoch=1, state=S.ONGOING, txn_start_timestamp_ms=1)
    txn.complete_transition_to(txn.prepare_abort_or_commit(target, NOW - 1))
    assert txn.state is target
    assert (txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms) == (1, NOW - 1)


@pytest.mark.parametrize(
    ("prepared", "complete"),
    [(S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT)],
)
def test_tolerate_time_shift_during_complete(
    prepared: TransactionState, complete: TransactionState
) -> None:
    # testTolerateTimeShiftDuringCompleteCommit / CompleteAbort: the partitions are cleared.
    txn = metadata(epoch=1, state=prepared, txn_start_timestamp_ms=1, topic_partitions={TP0})
    txn.has_failed_epoch_fence = True
    txn.complete_transition_to(txn.prepare_complete(NOW - 1))
    assert txn.state is complete
    assert txn.topic_partitions == set()
    assert not txn.has_failed_epoch_fence
    assert (txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms) == (1, NOW - 1)
