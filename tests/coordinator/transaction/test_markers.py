"""Markers in flight and the completion after them, from Kafka's
``TransactionMarkerRequestCompletionHandlerTest`` and ``TransactionMarkerChannelManagerTest``
(names are Kafka's)."""

from __future__ import annotations

import pytest

from pykraft.coordinator.transaction.markers import (
    RETRY_BACKOFF_MAX_MS,
    RETRY_BACKOFF_MS,
    MarkerAction,
    marker_action,
    retry_backoff_ms,
)
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.coordinator.transaction.harness import EPOCH, TP0, TP1, TP2, TXN, Harness

S = TransactionState
RETRIABLE = [
    Errors.UNKNOWN_TOPIC_OR_PARTITION,
    Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    Errors.REQUEST_TIMED_OUT,
    Errors.KAFKA_STORAGE_ERROR,
    Errors.NETWORK_EXCEPTION,  # the connection was lost (wasDisconnected)
]


def prepared(
    h: Harness, commit: bool = True, partitions: tuple[TopicPartition, ...] = (TP0, TP1, TP2)
) -> None:
    """A transaction whose decision is written and whose markers are out."""
    pid, epoch = h.ongoing(partitions)
    ended = h.send_end(pid, epoch, commit)
    h.complete_appends()
    assert h.error(ended) is Errors.NONE
    assert len(h.pending_markers) == 1


def test_marker_actions() -> None:
    assert marker_action(Errors.NONE) is MarkerAction.WRITTEN
    assert marker_action(Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT) is MarkerAction.WRITTEN
    assert marker_action(Errors.UNSUPPORTED_VERSION) is MarkerAction.WRITTEN
    assert marker_action(Errors.INVALID_PRODUCER_EPOCH) is MarkerAction.CANCEL
    assert marker_action(Errors.TRANSACTION_COORDINATOR_FENCED) is MarkerAction.CANCEL
    for error in [*RETRIABLE, Errors.CORRUPT_MESSAGE, Errors.MESSAGE_TOO_LARGE]:
        assert marker_action(error) is MarkerAction.RETRY


def test_retry_backoff_doubles_up_to_its_maximum() -> None:
    assert [retry_backoff_ms(n) for n in (1, 2, 3, 4, 5, 50)] == [
        RETRY_BACKOFF_MS,
        200,
        400,
        800,
        RETRY_BACKOFF_MAX_MS,
        RETRY_BACKOFF_MAX_MS,
    ]


def test_should_complete_when_every_marker_is_written() -> None:
    h = Harness()
    prepared(h)
    h.write_markers()
    [(_, value)] = h.written()
    assert value.transaction_status is S.COMPLETE_COMMIT
    assert h.pending_markers == []


def test_markers_answered_one_broker_at_a_time_complete_after_the_last() -> None:
    h = Harness()
    prepared(h)
    [send] = h.pending_markers
    report = h.coordinator.on_markers_written
    h.take(report(TXN, EPOCH, {TP0: Errors.NONE}, (), h.now_ms))
    h.take(report(TXN, EPOCH, {TP1: Errors.NONE}, (), h.now_ms))
    assert h.metadata().topic_partitions == {TP2}
    assert h.pending_appends == []
    h.take(report(TXN, EPOCH, {TP2: Errors.NONE}, (), h.now_ms))
    assert len(h.pending_appends) == 1
    assert send.marker.partitions == (TP0, TP1, TP2)


@pytest.mark.parametrize("error", RETRIABLE)
def test_should_retry_partition_on_retriable_error(error: Errors) -> None:
    # shouldRetryPartitionWhenUnknownTopicOrPartitionError / NotLeaderOrFollowerError /
    # NotEnoughReplicasException / ...AfterAppend / RequestTimeout / KafkaStorageError,
    # shouldReEnqueuePartitionsWhenBrokerDisconnected
    h = Harness()
    prepared(h)
    h.write_markers({TP1: error})
    assert h.metadata().topic_partitions == {TP1}
    assert h.pending_markers == [] and h.pending_appends == []
    assert h.coordinator.next_deadline_ms() == h.now_ms + RETRY_BACKOFF_MS
    h.advance(RETRY_BACKOFF_MS - 1)
    assert h.pending_markers == []
    h.advance(1)
    [retry] = h.pending_markers
    assert retry.marker.partitions == (TP1,)
    h.write_markers({TP1: error})  # still failing: a longer wait
    assert h.coordinator.next_deadline_ms() == h.now_ms + 2 * RETRY_BACKOFF_MS
    h.advance(2 * RETRY_BACKOFF_MS)
    h.write_markers()
    assert h.written()[0][1].transaction_status is S.COMPLETE_COMMIT


@pytest.mark.parametrize(
    "error", [Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED]
)
def test_should_abort_sending_on_fenced_error(error: Errors) -> None:
    # shouldAbortSendingWhenInvalidProducerEpoch / TransactionCoordinatorFenced: a newer
    # producer or coordinator owns the transaction now.
    h = Harness()
    prepared(h)
    h.write_markers({TP0: error, TP1: Errors.NOT_LEADER_OR_FOLLOWER})
    h.advance(RETRY_BACKOFF_MAX_MS)
    assert h.pending_markers == [] and h.pending_appends == []
    assert TXN not in h.coordinator.markers.pending


@pytest.mark.parametrize(
    "error", [Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION]
)
def test_should_remove_partition_on_unsupported_error(error: Errors) -> None:
    h = Harness()
    prepared(h)
    h.write_markers({TP2: error})
    assert h.written()[0][1].transaction_status is S.COMPLETE_COMMIT


def test_should_skip_partitions_of_a_deleted_topic() -> None:
    # TransactionMarkerChannelManager.addTxnMarkersToBrokerQueue: no leader endpoint, the
    # partition is "likely deleted already and hence can be skipped".
    h = Harness()
    prepared(h, commit=False)
    h.write_markers(deleted=[TP1, TP2])
    assert h.written()[0][1].transaction_status is S.COMPLETE_ABORT


def test_a_stale_report_is_ignored() -> None:
    # Markers of an earlier coordinator epoch: nothing of this epoch's completion changes.
    h = Harness()
    prepared(h)
    h.take(h.coordinator.on_markers_written(TXN, EPOCH - 1, {TP0: Errors.NONE}, (), h.now_ms))
    h.take(h.coordinator.on_markers_written("other", EPOCH, {TP0: Errors.NONE}, (), h.now_ms))
    assert h.metadata().topic_partitions == {TP0, TP1, TP2}
    h.write_markers()
    assert h.written()[0][1].transaction_status is S.COMPLETE_COMMIT


def test_markers_of_a_partition_that_moved_are_dropped() -> None:
    # removeMarkersForTxnTopicPartition: the next coordinator completes it from the log.
    h = Harness()
    prepared(h)
    h.write_markers({TP0: Errors.NOT_LEADER_OR_FOLLOWER})
    h.take(h.coordinator.unload(0, EPOCH, h.now_ms))
    assert h.coordinator.markers.pending == {}
    assert h.coordinator.next_deadline_ms() is None


def test_completion_append_is_retried_until_written() -> None:
    # testPendingStateNotResetOnRetryAppend: COORDINATOR_NOT_AVAILABLE keeps the pending state.
    h = Harness()
    prepared(h)
    h.write_markers()
    h.complete_appends(Errors.NOT_ENOUGH_REPLICAS)
    assert h.metadata().pending_state is S.COMPLETE_COMMIT
    assert h.init().error is Errors.CONCURRENT_TRANSACTIONS
    h.advance(RETRY_BACKOFF_MS)
    assert h.written()[0][1].transaction_status is S.COMPLETE_COMMIT
    h.complete_appends()
    assert (h.metadata().state, h.metadata().pending_state) == (S.COMPLETE_COMMIT, None)


def test_completion_is_dropped_when_the_coordinator_lost_the_partition() -> None:
    h = Harness()
    prepared(h)
    h.write_markers()
    h.complete_appends(Errors.NOT_LEADER_OR_FOLLOWER)
    assert h.coordinator.markers.pending == {}
    assert h.metadata().pending_state is None
    assert h.metadata().state is S.PREPARE_COMMIT  # the next coordinator completes it


def test_a_late_success_does_not_resend_a_written_partition() -> None:
    h = Harness()
    prepared(h)
    report = h.coordinator.on_markers_written
    pending = h.pending_markers
    h.pending_markers = []
    h.take(report(TXN, EPOCH, {TP0: Errors.REQUEST_TIMED_OUT}, (), h.now_ms))
    h.take(report(TXN, EPOCH, {TP1: Errors.NONE, TP2: Errors.NONE}, (), h.now_ms))
    h.advance(RETRY_BACKOFF_MS)
    [retry] = h.pending_markers
    assert retry.marker.partitions == (TP0,)
    assert pending[0].marker.partitions == (TP0, TP1, TP2)
