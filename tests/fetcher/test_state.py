"""The fetch state machine and the pure handling of each leader answer.

Rows cite Kafka's core/src/test/scala/unit/kafka/server/AbstractFetcherThreadTest.scala and
ReplicaFetcherThreadTest.scala, or the AbstractFetcherThread code path they pin down.
"""

from __future__ import annotations

import pytest

from pykraft.fetcher.responses import (
    Append,
    BackOff,
    FailureReason,
    FetchOutcome,
    Ignore,
    LeaderOffsets,
    LocalError,
    MarkFailed,
    ResetOffset,
    ResolveOutOfRange,
    SendOffsetsForLeaderEpoch,
    Truncate,
    follower_high_watermark,
    on_epoch_end_offset,
    on_fetch_response,
    on_leader_offsets,
    on_local_error,
    on_records_appended,
    on_request_failed,
    plan_truncation,
)
from pykraft.fetcher.state import (
    FetchState,
    IllegalFetchStateTransition,
    PartitionFetchState,
    fetch_partition,
    initial_fetch_state,
)
from pykraft.fetcher.truncation import (
    FollowerLog,
    LeaderEpochEndOffset,
    LeaderEpochRequest,
    OffsetReset,
    OffsetResetKind,
    Truncation,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import EpochEndOffset, FetchPartition, PartitionData
from pykraft.storage.leader_epoch_cache import EpochEntry

T, F, D = FetchState.TRUNCATING, FetchState.FETCHING, FetchState.DELAYED
BACKOFF = 1000
FENCED = FailureReason.FENCED_LEADER_EPOCH
NOW = 50_000


def log(history: list[tuple[int, int]], leo: int, hw: int = 0, start: int = 0) -> FollowerLog:
    return FollowerLog(start, leo, hw, tuple(EpochEntry(e, o) for e, o in history))


def fetching(offset: int = 3, epoch: int = 5, last: int | None = 4) -> PartitionFetchState:
    return PartitionFetchState(offset, epoch, F, last)


def truncating(offset: int = 0, epoch: int = 5) -> PartitionFetchState:
    return PartitionFetchState(offset, epoch, T)


# ------------------------------------------------------------------------------- transitions


def test_legal_transitions() -> None:
    assert truncating().transition(F).state is F
    assert truncating().transition(T, fetch_offset=2).fetch_offset == 2
    assert fetching().transition(F, fetch_offset=9).fetch_offset == 9
    delayed = fetching().transition(D, delay_deadline_ms=10)
    assert (delayed.state, delayed.resume_state, delayed.delay_deadline_ms) == (D, F, 10)
    resumed = delayed.transition(F)
    assert (resumed.state, resumed.resume_state, resumed.delay_deadline_ms) == (F, None, None)
    assert truncating().transition(D, delay_deadline_ms=1).transition(T).state is T


@pytest.mark.parametrize(
    ("start", "target", "message"),
    [
        (fetching(), T, "FETCHING -> TRUNCATING"),
        (fetching().delay(0, 5), D, "DELAYED -> DELAYED"),
        (fetching().delay(0, 5), T, "DELAYED -> TRUNCATING: was delayed from FetchState.FETCHING"),
        (truncating().delay(0, 5), F, "DELAYED -> FETCHING: was delayed from"),
    ],
)
def test_illegal_transitions_name_both_states(
    start: PartitionFetchState, target: FetchState, message: str
) -> None:
    with pytest.raises(IllegalFetchStateTransition, match=message):
        start.transition(target)


def test_delay_fields_are_set_exactly_when_delayed() -> None:
    with pytest.raises(AssertionError, match="iff DELAYED"):
        PartitionFetchState(0, 1, D)
    with pytest.raises(AssertionError, match="iff DELAYED"):
        PartitionFetchState(0, 1, F, delay_deadline_ms=5, resume_state=F)


def test_delay_and_resume() -> None:
    delayed = fetching().delay(NOW, BACKOFF)
    assert delayed.delay_deadline_ms == NOW + BACKOFF
    # Kafka delayPartitions: an already delayed partition keeps its deadline.
    assert delayed.delay(NOW + 500, BACKOFF) is delayed
    assert delayed.resume_if_due(NOW + BACKOFF - 1) is delayed
    assert delayed.resume_if_due(NOW + BACKOFF) == fetching()
    assert fetching().resume_if_due(NOW) == fetching()


# --------------------------------------------------------------------------- adding partitions


def check_initial(
    history: list[tuple[int, int]], truncate_on_fetch: bool, expected: PartitionFetchState
) -> None:
    follower = log(history, leo=10, hw=4)
    got = initial_fetch_state(None, 5, follower, truncate_on_fetch=truncate_on_fetch)
    assert got == expected


def test_initial_fetch_state() -> None:
    # ReplicaManager.initialFetchOffset + partitionFetchState: with DivergingEpoch support and
    # an epoch history, fetch from the log end with the latest epoch...
    check_initial([(2, 0), (4, 6)], True, PartitionFetchState(10, 5, F, 4))
    # ...otherwise truncate first, from the high watermark.
    check_initial([], True, PartitionFetchState(4, 5, T))
    check_initial([(2, 0), (4, 6)], False, PartitionFetchState(4, 5, T))


def test_same_leader_epoch_keeps_the_state() -> None:
    # testTruncationSkippedIfNoEpochChange: re-adding under the same epoch does not truncate.
    current = fetching(offset=1, epoch=5)
    follower = log([(5, 0)], leo=1)
    assert initial_fetch_state(current, 5, follower) is current
    assert initial_fetch_state(current, 6, follower) == PartitionFetchState(1, 6, F, 5)


def test_fetch_partition() -> None:
    request = fetch_partition(fetching(offset=7, epoch=5, last=4), 3, 2, 1 << 20)
    assert request == FetchPartition(3, 7, 1 << 20, 5, 4, 2)
    # No epoch yet, or the leader predates KIP-320: last_fetched_epoch is absent (-1).
    assert fetch_partition(fetching(last=None), 0, 0, 1).last_fetched_epoch == -1
    assert fetch_partition(fetching(), 0, 0, 1, truncate_on_fetch=False).last_fetched_epoch == -1
    with pytest.raises(AssertionError, match="only a FETCHING partition"):
        fetch_partition(truncating(), 0, 0, 1)


# ----------------------------------------------------------------------------- fetch responses

FOLLOWER = log([(0, 0), (2, 1), (4, 2)], leo=3)
REQUEST = FetchPartition(0, 3, 1 << 20, 5, 4)


def respond(
    response: PartitionData,
    state: PartitionFetchState | None = None,
    request: FetchPartition = REQUEST,
    truncate_on_fetch: bool = True,
) -> FetchOutcome:
    return on_fetch_response(
        state or fetching(),
        request,
        response,
        FOLLOWER,
        NOW,
        fetch_backoff_ms=BACKOFF,
        truncate_on_fetch=truncate_on_fetch,
    )


def backed_off(error: Errors, resume: FetchState = F) -> FetchOutcome:
    state = PartitionFetchState(3, 5, D, 4, None, NOW + BACKOFF, resume)
    return FetchOutcome(state, BackOff(NOW + BACKOFF, error))


def test_records_are_appended_without_changing_the_state() -> None:
    data = PartitionData(0, high_watermark=9, log_start_offset=1, records=(b"batch",))
    assert respond(data) == (fetching(), Append((b"batch",), 9, 1))
    # Null records: still an Append, so the high watermark and log start still move.
    assert respond(PartitionData(0, high_watermark=9, records=None)).action == Append((), 9, -1)


def test_diverging_epoch_truncates_and_never_carries_the_high_watermark() -> None:
    # testTruncateOnFetchDoesNotUpdateHighWatermark / testTruncateOnFetchDoesNotProcessPartitionData
    data = PartitionData(0, high_watermark=160, diverging_epoch=EpochEndOffset(3, 2))
    state, action = respond(data)
    # KIP-279 loop: the follower lacks epoch 3; cut to where its epoch 2 ends, keep FETCHING
    # and send epoch 2 as last_fetched_epoch next time.
    assert action == Truncate(Truncation(2, truncation_completed=False))
    assert state == PartitionFetchState(2, 5, F, last_fetched_epoch=2)
    # Without KIP-320 support the field is ignored (an old leader never sends it).
    assert isinstance(respond(data, truncate_on_fetch=False).action, Append)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        # testUnknownLeaderEpochWhileFetching: the leader is behind our epoch; retry later.
        (Errors.UNKNOWN_LEADER_EPOCH, backed_off(Errors.UNKNOWN_LEADER_EPOCH)),
        # processFetchRequest: leadership moving, or the partition being created or deleted.
        (Errors.NOT_LEADER_OR_FOLLOWER, backed_off(Errors.NOT_LEADER_OR_FOLLOWER)),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, backed_off(Errors.UNKNOWN_TOPIC_OR_PARTITION)),
        # The leader's own storage or data failed: back off; leadership will move.
        (Errors.KAFKA_STORAGE_ERROR, backed_off(Errors.KAFKA_STORAGE_ERROR)),
        (Errors.CORRUPT_MESSAGE, backed_off(Errors.CORRUPT_MESSAGE)),
        (Errors.UNKNOWN_SERVER_ERROR, backed_off(Errors.UNKNOWN_SERVER_ERROR)),
        (999, backed_off(Errors.UNKNOWN_SERVER_ERROR)),
        # testFencedFetch: fenced under the epoch we still hold -> out until new metadata.
        (Errors.FENCED_LEADER_EPOCH, FetchOutcome(None, MarkFailed(FENCED))),
        # handleOutOfRangeError: ask the leader for its offsets first.
        (Errors.OFFSET_OUT_OF_RANGE, FetchOutcome(fetching(), ResolveOutOfRange(5))),
    ],
)
def test_fetch_errors(error: int, expected: FetchOutcome) -> None:
    assert respond(PartitionData(0, error_code=error)) == expected


def test_fenced_after_our_epoch_moved_on_retries() -> None:
    # onPartitionFenced: the request carried epoch 4 but we already hold 5 -> retry.
    request = FetchPartition(0, 3, 1 << 20, 4, 4)
    outcome = respond(PartitionData(0, error_code=Errors.FENCED_LEADER_EPOCH), request=request)
    assert outcome == backed_off(Errors.FENCED_LEADER_EPOCH)


def test_stale_responses_are_ignored() -> None:
    data = PartitionData(0, records=(b"x",))
    # The partition was truncated or reset since the request: offsets differ.
    assert isinstance(respond(data, request=FetchPartition(0, 9, 1, 5, 4)).action, Ignore)
    # The partition is backing off.
    delayed = fetching().delay(NOW, BACKOFF)
    assert respond(data, state=delayed) == (
        delayed,
        Ignore("fetch state changed since the request"),
    )


def test_records_appended() -> None:
    state = on_records_appended(
        fetching(offset=3), last_offset=5, last_leader_epoch=6, leader_high_watermark=10
    )
    assert state == PartitionFetchState(6, 5, F, last_fetched_epoch=6, lag=4)
    # testLagIsUpdatedWhenNoRecords: lag set, offset and last fetched epoch unchanged.
    state = on_records_appended(
        fetching(offset=0, last=2),
        last_offset=None,
        last_leader_epoch=None,
        leader_high_watermark=0,
    )
    assert state == PartitionFetchState(0, 5, F, last_fetched_epoch=2, lag=0)


def test_follower_high_watermark() -> None:
    # UnifiedLog.updateHighWatermark: the leader's value clamped to [log start, log end].
    assert follower_high_watermark(8, 0, 10) == 8
    assert follower_high_watermark(12, 0, 10) == 10  # never past what we hold
    assert follower_high_watermark(1, 3, 10) == 3
    assert follower_high_watermark(-1, 0, 10) == 0


# ----------------------------------------------------------------- OffsetsForLeaderEpoch path


def answer(
    response: LeaderEpochEndOffset,
    state: PartitionFetchState | None = None,
    follower: FollowerLog = FOLLOWER,
    request_epoch: int = 5,
    truncate_on_fetch: bool = False,
) -> FetchOutcome:
    return on_epoch_end_offset(
        state or truncating(),
        LeaderEpochRequest(request_epoch, 4),
        response,
        follower,
        NOW,
        fetch_backoff_ms=BACKOFF,
        truncate_on_fetch=truncate_on_fetch,
    )


def test_plan_truncation() -> None:
    assert plan_truncation(truncating(), FOLLOWER) == FetchOutcome(
        truncating(), SendOffsetsForLeaderEpoch(LeaderEpochRequest(5, 4))
    )
    # No epoch history: truncate to the high watermark (the fetch offset) and start fetching.
    empty = log([], leo=3, hw=2)
    assert plan_truncation(truncating(offset=2), empty) == FetchOutcome(
        PartitionFetchState(2, 5, F), Truncate(Truncation(2, True))
    )


def test_epoch_end_offset_truncations() -> None:
    # shouldMovePartitionsOutOfTruncatingLogState: a complete truncation -> FETCHING.
    outcome = answer(LeaderEpochEndOffset(Errors.NONE, 4, 3))
    assert outcome == (PartitionFetchState(3, 5, F, 4), Truncate(Truncation(3, True)))
    # KIP-279 intermediate step stays TRUNCATING on this path...
    outcome = answer(LeaderEpochEndOffset(Errors.NONE, 3, 2))
    assert outcome == (PartitionFetchState(2, 5, T, 2), Truncate(Truncation(2, False)))
    # ...but goes to FETCHING when the leader supports DivergingEpoch (the loop moves into
    # the fetches: updateFetchOffsetAndMaybeMarkTruncationComplete).
    outcome = answer(LeaderEpochEndOffset(Errors.NONE, 3, 2), truncate_on_fetch=True)
    assert outcome.state == PartitionFetchState(2, 5, F, 2)


def test_epoch_end_offset_errors() -> None:
    # shouldPollIndefinitelyIfLeaderReturnsAnyException: retry, never truncate.
    for error in (
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.UNKNOWN_SERVER_ERROR,
        Errors.UNKNOWN_LEADER_EPOCH,
    ):
        state, action = answer(LeaderEpochEndOffset(error))
        assert action == BackOff(NOW + BACKOFF, error)
        assert state == PartitionFetchState(0, 5, D, None, None, NOW + BACKOFF, T)
    # testFencedTruncation: fenced under our epoch -> out until new metadata.
    assert answer(LeaderEpochEndOffset(Errors.FENCED_LEADER_EPOCH)) == FetchOutcome(
        None, MarkFailed(FailureReason.FENCED_LEADER_EPOCH)
    )


def test_stale_epoch_end_offsets_are_ignored() -> None:
    # testLeaderEpochChangeDuringFencedFetchEpochsFromLeader and
    # testLeaderEpochChangeDuringSuccessfulFetchEpochsFromLeader: our epoch changed while the
    # request was in flight; the answer (fenced or not) is dropped.
    for response in (
        LeaderEpochEndOffset(Errors.FENCED_LEADER_EPOCH),
        LeaderEpochEndOffset(Errors.NONE, 4, 3),
    ):
        state, action = answer(response, request_epoch=4)
        assert state == truncating() and isinstance(action, Ignore)
    # A partition no longer truncating ignores it as well.
    assert isinstance(answer(LeaderEpochEndOffset(), state=fetching()).action, Ignore)


# -------------------------------------------------------------------------------- out of range


def check_leader_offsets(
    offsets: LeaderOffsets, expected_state: PartitionFetchState | None, expected_action: object
) -> None:
    follower = log([(0, 0), (2, 1), (4, 2)], leo=3)
    outcome = on_leader_offsets(fetching(), 5, offsets, follower, NOW, fetch_backoff_ms=BACKOFF)
    assert outcome == (expected_state, expected_action)


def test_leader_offsets() -> None:
    K = OffsetResetKind
    # testFollowerFetchOutOfRangeHigh: truncate to the leader's end; epoch after the cut.
    check_leader_offsets(
        LeaderOffsets(Errors.NONE, 0, 2),
        PartitionFetchState(2, 5, F, 2, lag=0),
        ResetOffset(OffsetReset(K.TRUNCATE_TO_LEADER_END, 2, 0)),
    )
    # testFollowerFetchOutOfRangeLow: start over at the leader's log start; no epoch left.
    check_leader_offsets(
        LeaderOffsets(Errors.NONE, 5, 8),
        PartitionFetchState(5, 5, F, None, lag=3),
        ResetOffset(OffsetReset(K.TRUNCATE_FULLY_AND_START_AT_LEADER_START, 5, 3)),
    )
    check_leader_offsets(
        LeaderOffsets(Errors.NONE, 0, 9),
        PartitionFetchState(3, 5, F, 4, lag=6),
        ResetOffset(OffsetReset(K.FETCH_FROM_LOG_END, 3, 6)),
    )
    # testFencedOffsetResetAfterOutOfRange: fenced while asking -> marked failed.
    check_leader_offsets(
        LeaderOffsets(Errors.FENCED_LEADER_EPOCH),
        None,
        MarkFailed(FailureReason.FENCED_LEADER_EPOCH),
    )
    # testRetryAfterUnknownLeaderEpochInLatestOffsetFetch: retry later.
    check_leader_offsets(
        LeaderOffsets(Errors.UNKNOWN_LEADER_EPOCH),
        PartitionFetchState(3, 5, D, 4, None, NOW + BACKOFF, F),
        BackOff(NOW + BACKOFF, Errors.UNKNOWN_LEADER_EPOCH),
    )


# ------------------------------------------------------------------------------ local failures


def test_local_errors_isolate_one_partition() -> None:
    # testCorruptMessage: corrupt data is retried after a back-off.
    state, action = on_local_error(
        fetching(), LocalError.CORRUPT_RECORD, NOW, fetch_backoff_ms=BACKOFF
    )
    assert action == BackOff(NOW + BACKOFF, Errors.CORRUPT_MESSAGE) and state is not None
    # testFetcherThreadHandlingPartitionFailureDuringAppending / DuringTruncation.
    assert on_local_error(fetching(), LocalError.STORAGE_ERROR, NOW) == FetchOutcome(
        None, MarkFailed(FailureReason.STORAGE_ERROR)
    )
    assert on_local_error(truncating(), LocalError.UNEXPECTED, NOW) == FetchOutcome(
        None, MarkFailed(FailureReason.UNEXPECTED_ERROR)
    )


def test_request_failure_backs_off() -> None:
    # testDelay: a failed request delays every partition in it.
    state, action = on_request_failed(fetching(), NOW, fetch_backoff_ms=BACKOFF)
    assert action == BackOff(NOW + BACKOFF, Errors.NETWORK_EXCEPTION)
    assert state is not None and state.state is D and state.resume_state is F
