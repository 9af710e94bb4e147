"""KIP-890 part 1 in storage: the verification state in producer state, and a log append that
must carry the guard its verification got.

Each case names the Kafka test it reproduces: ProducerStateManagerTest (storage/src/test/java/
org/apache/kafka/storage/internals/log) and UnifiedLogTest (core/src/test/scala/unit/kafka/log),
in their transaction version 1 form (pykraft's coordinator keeps the epoch across transactions).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import (
    AppendOrigin,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from pykraft.storage.memory_disk import MemoryDisk, MemorySnapshots
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.producer_append import PRODUCER_ID_EXPIRATION_MS, AppendCheckKind
from pykraft.storage.producer_state import ProducerStateManager
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from pykraft.storage.unified_log import UnifiedLog
from pykraft.storage.verification_guard import SENTINEL, VerificationGuard
from tests.storage.test_producer_transactions import end, header

PID = 23
EPOCH = 1
NOW_MS = 1_000
LEADER_EPOCH = 0


def manager() -> ProducerStateManager:
    return ProducerStateManager(Path("test-0"), snapshots=MemorySnapshots())


# ---------------------------------------------------------------------------- the guard


def test_a_guard_verifies_only_itself_and_the_sentinel_nothing() -> None:
    guard, other = VerificationGuard(), VerificationGuard()
    assert guard.verify(guard)
    assert not guard.verify(other)
    assert not guard.verify(SENTINEL)
    assert not SENTINEL.verify(SENTINEL)  # the sentinel verifies nothing, itself included
    assert guard != other  # unique by identity, whatever their fields


# ---------------------------------------------------------------------------- producer state


def test_entry_for_verification_is_reused_and_cleared_by_transactional_data() -> None:
    # ProducerStateManagerTest.testEntryForVerification
    state = manager()
    original = state.maybe_create_verification_state_entry(PID, 0, 0, NOW_MS)
    again = state.maybe_create_verification_state_entry(PID, 0, 0, NOW_MS + 5)
    assert again.guard is original.guard
    assert state.verification_state_entry(PID) == original
    state.update(header(PID, 0, seq=0), 0, 0, NOW_MS)  # the transactional data is written
    assert state.verification_state_entry(PID) is None


def test_sequence_and_epoch_in_verification_entry() -> None:
    # ProducerStateManagerTest.testSequenceAndEpochInVerificationEntry
    state = manager()
    guard = state.maybe_create_verification_state_entry(PID, 1, 0, NOW_MS).guard

    def check(sequence: int, epoch: int, expected: tuple[int, int]) -> None:
        entry = state.maybe_create_verification_state_entry(PID, sequence, epoch, NOW_MS)
        assert entry.guard is guard
        assert (entry.lowest_sequence, entry.epoch) == expected
        assert state.verification_state_entry(PID) == entry

    check(0, 0, (0, 0))  # a lower sequence of the same epoch is the new lowest
    check(2, 1, (2, 1))  # a higher epoch takes its sequence, even a higher one
    check(0, 0, (2, 1))  # a lower epoch is ignored


@pytest.mark.parametrize("transactional", [True, False])
def test_out_of_order_sequence_with_verification_sequence_check(transactional: bool) -> None:
    # ProducerStateManagerTest.testThrowOutOfOrderSequenceWithVerificationSequenceCheck: the
    # check runs whenever an entry exists, whether or not the append asks for verification.
    state = manager()
    original = state.maybe_create_verification_state_entry(PID, 0, 0, NOW_MS)
    check = state.check(header(PID, 0, seq=4, transactional=transactional))
    assert check.kind is AppendCheckKind.OUT_OF_ORDER_SEQUENCE
    assert "earliest seen sequence" in check.message
    assert state.verification_state_entry(PID) == original
    assert state.check(header(PID, 0, seq=0)).is_new


def test_verification_state_entry_expiration() -> None:
    # ProducerStateManagerTest.testVerificationStateEntryExpiration
    state = manager()
    original = state.maybe_create_verification_state_entry(PID, 0, 0, NOW_MS)
    state.remove_expired_producers(NOW_MS + PRODUCER_ID_EXPIRATION_MS // 2)
    assert state.verification_state_entry(PID) == original
    state.remove_expired_producers(NOW_MS + PRODUCER_ID_EXPIRATION_MS)
    assert state.verification_state_entry(PID) is None


def test_idempotent_batches_keep_the_entry_a_marker_clears_it() -> None:
    # Kafka's updateProducers clears it for transactional batches only: data or marker.
    state = manager()
    state.maybe_create_verification_state_entry(PID, 0, 0, NOW_MS)
    state.update(header(PID, 0, seq=0, transactional=False), 0, 0, NOW_MS)
    assert state.verification_state_entry(PID) is not None
    end(state, PID, 1)
    assert state.verification_state_entry(PID) is None


# ---------------------------------------------------------------------------- the log


@pytest.fixture
def log() -> PartitionLog:
    return PartitionLog.open(MemoryDisk(Path("memory/topic-0")), LogConfig())


def batch(sequence: int, *, transactional: bool = True, epoch: int = EPOCH) -> bytearray:
    records = [SimpleRecord(value=b"1", timestamp=NOW_MS), SimpleRecord(value=b"2")]
    data = build_batch(
        records,
        producer_id=PID,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )
    return bytearray(data)


def marker(log: UnifiedLog, *, commit: bool, epoch: int = EPOCH) -> None:
    txn_marker = TxnMarker(
        producer_id=PID,
        producer_epoch=epoch,
        coordinator_epoch=0,
        commit=commit,
        partitions=(TopicPartition("topic", 0),),
    )
    log.append_as_leader(
        txn_marker.control_batch(NOW_MS), LEADER_EPOCH, NOW_MS, origin=AppendOrigin.COORDINATOR
    )


def ongoing(log: UnifiedLog) -> bool:
    return log.producer_state.has_ongoing_transaction(PID)


def test_transaction_is_ongoing_and_verification_guard(log: PartitionLog) -> None:
    # UnifiedLogTest.testTransactionIsOngoingAndVerificationGuardTV1 (origin CLIENT)
    sequence = 3  # TV1: a producer unknown here may start anywhere
    assert not ongoing(log)
    assert log.verification_guard(PID) is SENTINEL
    guard = log.maybe_start_transaction_verification(PID, sequence + 2, EPOCH, NOW_MS)
    assert guard is not SENTINEL

    log.append_as_leader(batch(sequence, transactional=False), LEADER_EPOCH, NOW_MS)
    assert not ongoing(log)
    assert log.verification_guard(PID) is guard  # idempotent records keep the guard

    assert log.verification_guard(PID).verify(guard)
    log.append_as_leader(batch(sequence + 2), LEADER_EPOCH, NOW_MS, verification_guard=guard)
    assert ongoing(log)
    assert log.verification_guard(PID) is SENTINEL  # spent by the first transactional write
    # Already verified: the next write of the transaction needs no verification.
    assert log.maybe_start_transaction_verification(PID, 5, EPOCH, NOW_MS) is SENTINEL

    marker(log, commit=True)
    assert not ongoing(log)
    assert log.verification_guard(PID) is SENTINEL
    # The next transaction must be verified again, with a new guard the old one is not.
    fresh = log.maybe_start_transaction_verification(PID, 6, EPOCH, NOW_MS)
    assert fresh is not SENTINEL and fresh is not guard
    assert not guard.verify(fresh)


def test_empty_transaction_still_clears_verification_guard(log: PartitionLog) -> None:
    # UnifiedLogTest.testEmptyTransactionStillClearsVerificationGuard (supportsEpochBump false)
    guard = log.maybe_start_transaction_verification(PID, 0, EPOCH, NOW_MS)
    assert guard is not SENTINEL
    marker(log, commit=True)
    assert not ongoing(log)
    assert log.verification_guard(PID) is SENTINEL


def test_disabled_verification_clears_verification_guard(log: PartitionLog) -> None:
    # UnifiedLogTest.testDisabledVerificationClearsVerificationGuard: an append that asks for
    # no verification (the config turned off meanwhile) still spends the guard.
    guard = log.maybe_start_transaction_verification(PID, 0, EPOCH, NOW_MS)
    assert guard is not SENTINEL
    log.append_as_leader(batch(0), LEADER_EPOCH, NOW_MS)
    assert ongoing(log)
    assert log.verification_guard(PID) is SENTINEL


def test_enabling_verification_when_request_is_at_log_layer(log: PartitionLog) -> None:
    # UnifiedLogTest.testEnablingVerificationWhenRequestIsAtLogLayer: verification asked, but
    # the write never got a guard (SENTINEL) -> refused, nothing written, nothing opened.
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        log.append_as_leader(batch(0), LEADER_EPOCH, NOW_MS, verification_guard=SENTINEL)
    assert (log.log_end_offset, ongoing(log)) == (0, False)
    assert log.verification_guard(PID) is SENTINEL

    guard = log.maybe_start_transaction_verification(PID, 0, EPOCH, NOW_MS)
    log.append_as_leader(batch(0), LEADER_EPOCH, NOW_MS, verification_guard=guard)
    assert ongoing(log)
    assert log.verification_guard(PID) is SENTINEL


def test_non_zero_sequence_on_first_append_non_zero_epoch(log: PartitionLog) -> None:
    # UnifiedLogTest.testNonZeroSequenceOnFirstAppendNonZeroEpoch, TV1 branch: allowed.
    guard = log.maybe_start_transaction_verification(PID, 3, EPOCH, NOW_MS)
    log.append_as_leader(batch(3), LEADER_EPOCH, NOW_MS, verification_guard=guard)
    assert ongoing(log)


def test_a_marker_between_verification_and_append_refuses_the_stale_write(
    log: PartitionLog,
) -> None:
    # The ABA case of UnifiedLog.analyzeAndValidateProducerState's comment: verified, then the
    # transaction is aborted (its marker clears the guard), then the stale write arrives.
    first = log.maybe_start_transaction_verification(PID, 0, EPOCH, NOW_MS)
    log.append_as_leader(batch(0), LEADER_EPOCH, NOW_MS, verification_guard=first)
    late = log.maybe_start_transaction_verification(PID, 2, EPOCH, NOW_MS)
    assert late is SENTINEL  # in the transaction: the late write needs no verification...
    marker(log, commit=False)
    # ...but the transaction ended before it was appended: no guard, no transaction -> refused.
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(batch(2), LEADER_EPOCH, NOW_MS, verification_guard=late)
    # A guard handed out before the marker is spent too.
    stale = log.maybe_start_transaction_verification(PID, 2, EPOCH, NOW_MS)
    marker(log, commit=False)  # the coordinator aborts again (an empty transaction here)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(batch(2), LEADER_EPOCH, NOW_MS, verification_guard=stale)
    assert not ongoing(log)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset  # nothing hangs


def test_a_later_sequence_waits_for_the_earlier_one_being_verified(log: PartitionLog) -> None:
    # Two writes of one producer asked for verification (sequences 0 and 2): the later one
    # cannot be written first (ProducerAppendInfo.checkSequence's earliest seen sequence).
    guard = log.maybe_start_transaction_verification(PID, 2, EPOCH, NOW_MS)
    assert log.maybe_start_transaction_verification(PID, 0, EPOCH, NOW_MS) is guard
    with pytest.raises(OutOfOrderSequenceError, match="earliest seen sequence"):
        log.append_as_leader(batch(2), LEADER_EPOCH, NOW_MS, verification_guard=guard)
    assert log.verification_guard(PID) is guard  # a refused append changes nothing
    log.append_as_leader(batch(0), LEADER_EPOCH, NOW_MS, verification_guard=guard)
    log.append_as_leader(batch(2), LEADER_EPOCH, NOW_MS, verification_guard=SENTINEL)
    assert log.log_end_offset == 4


def test_only_transactional_data_needs_the_guard(log: PartitionLog) -> None:
    # Idempotent (non-transactional) writes and markers are never verified.
    log.append_as_leader(
        batch(0, transactional=False), LEADER_EPOCH, NOW_MS, verification_guard=SENTINEL
    )
    marker(log, commit=True)
    assert log.log_end_offset == 3


def test_a_duplicate_is_answered_before_the_verification_check(log: PartitionLog) -> None:
    # Kafka checks duplicates first: a retry of a written batch gets its offsets back even
    # after its transaction ended (the guard is long spent).
    guard = log.maybe_start_transaction_verification(PID, 0, EPOCH, NOW_MS)
    log.append_as_leader(batch(0), LEADER_EPOCH, NOW_MS, verification_guard=guard)
    marker(log, commit=True)
    retry = log.append_as_leader(batch(0), LEADER_EPOCH, NOW_MS, verification_guard=SENTINEL)
    assert (retry.duplicate, retry.first_offset, retry.last_offset) == (True, 0, 1)
