"""The truncation decision as tables (Kafka ``AbstractFetcherThread.getOffsetTruncationState``).

Rows cite the Kafka test they come from: core/src/test/scala/unit/kafka/server/
ReplicaFetcherThreadTest.scala and AbstractFetcherThreadTest.scala. Kafka's tests stub
``log.endOffsetForEpoch`` per call; here each row gives one consistent epoch history
(``(epoch, start_offset)`` pairs) from which the same answers follow.
"""

from __future__ import annotations

import pytest

from pykraft.fetcher.truncation import (
    FollowerLog,
    LeaderEpochEndOffset,
    LeaderEpochRequest,
    OffsetReset,
    OffsetResetKind,
    Truncation,
    TruncationError,
    has_diverging_epoch,
    out_of_range_reset,
    truncation_for_diverging_epoch,
    truncation_for_epoch_end_offset,
    truncation_offset,
    truncation_request,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import NO_DIVERGING_EPOCH, EpochEndOffset
from pykraft.storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry

U, UO = UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


def follower(
    history: list[tuple[int, int]], log_end_offset: int, high_watermark: int = 0, start: int = 0
) -> FollowerLog:
    entries = tuple(EpochEntry(epoch, offset) for epoch, offset in history)
    return FollowerLog(start, log_end_offset, high_watermark, entries)


def check(
    history: list[tuple[int, int]],
    log_end_offset: int,
    leader: tuple[int, int],
    expected: tuple[int, bool],
    fetch_offset: int = 0,
) -> None:
    """``leader`` is (leader_epoch, end_offset); ``expected`` is (offset, truncation_completed)."""
    log = follower(history, log_end_offset, high_watermark=min(fetch_offset, log_end_offset))
    got = truncation_offset(leader[0], leader[1], log, fetch_offset)
    assert got == Truncation(*expected), (history, log_end_offset, leader)
    # Both protocols feed the same rule.
    answer = LeaderEpochEndOffset(Errors.NONE, leader[0], leader[1])
    assert truncation_for_epoch_end_offset(answer, log, fetch_offset) == got
    if leader[0] >= 0:
        diverging = EpochEndOffset(leader[0], leader[1])
        assert truncation_for_diverging_epoch(diverging, log, fetch_offset) == got


def test_both_replicas_have_the_leaders_epoch() -> None:
    # shouldTruncateToOffsetSpecifiedInEpochOffsetResponse: follower epoch 5 up to LEO 513.
    check([(5, 0)], 513, (5, 156), (156, True))
    check([(5, 0)], 513, (5, 172), (172, True))
    # testTruncateOnFetchDoesNotUpdateHighWatermark: endOffsetForEpoch(4) = 149, LEO 150.
    check([(4, 100), (5, 149)], 150, (4, 140), (140, True))
    # testTruncationOnFetchSkippedIfPartitionRemoved: log 0@0 1@2 2@4, DivergingEpoch(4, 3).
    check([(0, 0), (2, 1), (4, 2)], 3, (4, 3), (3, True))
    # The follower's own epoch ends first: min(follower end, leader end).
    check([(3, 0), (4, 10), (6, 20)], 30, (4, 25), (20, True))
    # Nothing diverged: the leader's end is at or past ours -> no-op at our log end.
    check([(5, 0)], 200, (5, 202), (200, True))
    # testDivergingEpochs: follower 0@0 1@2 2@4, leader 0@0 1@2 2@5 -> DivergingEpoch(2, 2).
    check([(0, 0), (2, 1), (4, 2)], 3, (2, 2), (2, True))


def test_follower_lacks_the_leaders_epoch_kip_279() -> None:
    # shouldFetchLeaderEpochSecondTimeIfLeaderRepliesWithEpochNotKnownToFollower: the follower
    # has epochs 3 and 5, the leader answers epoch 4 -> cut to the end of epoch 3 (120), ask
    # again; then the leader answers (3, 101) -> 101, complete.
    check([(3, 50), (5, 120)], 200, (4, 155), (120, False))
    check([(3, 50)], 120, (3, 101), (101, True))
    check([(3, 50)], 120, (3, 102), (102, True))
    # shouldTruncateIfLeaderRepliesWithDivergingEpochNotKnownToFollower (loops 2-4): one
    # history gives Kafka's cuts 140 (complete), 129 (not complete), then 119. (Kafka's third
    # answer names epoch 2, which its stub says the follower lacks although the second answer
    # said it had it; in a consistent history the leader's next answer is epoch 1.)
    history = [(1, 100), (2, 119), (4, 129), (5, 149)]
    check(history, 200, (4, 140), (140, True))
    check(history[:3], 140, (3, 130), (129, False))
    check(history[:2], 129, (1, 120), (119, True))
    # The intermediate cut never goes past our own log end.
    check([(1, 0), (3, 50)], 40, (2, 45), (40, False))


def test_leader_does_not_know_the_offset() -> None:
    # shouldTruncateToInitialFetchOffsetIfLeaderReturnsUndefinedOffset: truncate to the fetch
    # offset, which is the high watermark while truncating (the pre-KIP-101 fallback).
    check([(5, 0)], 300, (U, UO), (100, True), fetch_offset=100)
    check([(5, 0)], 300, (5, UO), (100, True), fetch_offset=100)


def test_leader_gives_no_epoch_v0() -> None:
    # shouldUseLeaderEndOffsetIfInterBrokerVersionBelow20: min(leader offset, LEO).
    check([(3, 0), (5, 120)], 200, (U, 155), (155, True))
    check([(3, 0), (5, 120)], 200, (U, 143), (143, True))
    check([(3, 0), (5, 120)], 200, (U, 250), (200, True))


def test_follower_has_no_epoch_history() -> None:
    # shouldTruncateToOffsetSpecifiedInEpochOffsetResponseIfFollowerHasNoMoreEpochs: nothing
    # at or below the leader's epoch -> the leader's offset, capped at our log end.
    check([], 200, (4, 156), (156, True))
    check([], 200, (4, 202), (200, True))


def test_requested_epoch_below_the_followers_history() -> None:
    # The leader answers an epoch older than any we kept (our log start moved past it): our
    # cache answers (first start offset, requested epoch), so the epochs match.
    check([(5, 10), (6, 20)], 30, (3, 15), (10, True))


def test_invalid_leader_answers_are_typed_errors() -> None:
    log = follower([(1, 0)], 10)
    with pytest.raises(TruncationError, match="invalid epoch end offset"):
        truncation_offset(1, -7, log, 0)
    with pytest.raises(TruncationError, match="invalid epoch end offset"):
        truncation_offset(-3, 5, log, 0)
    with pytest.raises(TruncationError, match="no diverging epoch"):
        truncation_for_diverging_epoch(NO_DIVERGING_EPOCH, log, 0)
    with pytest.raises(TruncationError, match="handle errors first"):
        truncation_for_epoch_end_offset(LeaderEpochEndOffset(Errors.FENCED_LEADER_EPOCH), log, 0)


def test_follower_log_rejects_inconsistent_offsets() -> None:
    with pytest.raises(TruncationError, match="log_start_offset <= high_watermark"):
        FollowerLog(5, 3, 4)
    with pytest.raises(TruncationError, match="log_start_offset <= high_watermark"):
        FollowerLog(0, 3, 4)
    with pytest.raises(TruncationError, match="invalid leader epoch history"):
        FollowerLog(0, 3, 0, (EpochEntry(2, 0), EpochEntry(1, 1)))


def test_has_diverging_epoch() -> None:
    # FetchResponse.isDivergingEpoch: present when the epoch is >= 0.
    assert not has_diverging_epoch(NO_DIVERGING_EPOCH)
    assert has_diverging_epoch(EpochEndOffset(0, 0))
    assert not has_diverging_epoch(EpochEndOffset(-1, 5))


def test_follower_log_views() -> None:
    log = follower([(0, 0), (2, 1), (4, 2)], 3)
    assert log.latest_epoch == 4
    assert log.latest_epoch_after_truncation(2) == 2
    assert log.latest_epoch_after_truncation(1) == 0
    assert log.latest_epoch_after_truncation(0) is None
    assert log.latest_epoch_after_truncation(9) == 4
    assert follower([], 0).latest_epoch is None
    # UnifiedLog.endOffsetForEpoch: None where the cache is undefined (above every epoch).
    assert log.end_offset_for_epoch(7) is None
    assert follower([], 5).end_offset_for_epoch(0) is None


def check_request(
    history: list[tuple[int, int]], supported: bool, expected: LeaderEpochRequest | Truncation
) -> None:
    log = follower(history, 10, high_watermark=4)
    got = truncation_request(log, 7, 4, offsets_for_leader_epoch_supported=supported)
    assert got == expected


def test_truncation_request() -> None:
    # fetchTruncatingPartitions: ask about the latest epoch, under the current leader epoch.
    check_request([(2, 0), (6, 5)], True, LeaderEpochRequest(7, 6))
    # No history (testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable) or no
    # OffsetsForLeaderEpoch (testTruncateToHighWatermarkIfLeaderEpochRequestNotSupported):
    # truncate to the high watermark, complete.
    check_request([], True, Truncation(4, True))
    check_request([(2, 0), (6, 5)], False, Truncation(4, True))


def check_reset(
    log_end_offset: int, leader_start: int, leader_end: int, expected: OffsetReset
) -> None:
    assert out_of_range_reset(log_end_offset, leader_start, leader_end) == expected


def test_out_of_range_reset() -> None:
    K = OffsetResetKind
    # testFollowerFetchOutOfRangeHigh: the leader's log was emptied -> truncate to its end.
    check_reset(3, 0, 0, OffsetReset(K.TRUNCATE_TO_LEADER_END, 0, 0))
    check_reset(10, 2, 7, OffsetReset(K.TRUNCATE_TO_LEADER_END, 7, 0))
    # testFollowerFetchOutOfRangeLow: the leader deleted past our end -> start at its start.
    check_reset(1, 2, 3, OffsetReset(K.TRUNCATE_FULLY_AND_START_AT_LEADER_START, 2, 1))
    check_reset(0, 10, 200, OffsetReset(K.TRUNCATE_FULLY_AND_START_AT_LEADER_START, 10, 190))
    # The leader grew past us meanwhile and still holds our end: keep the log, fetch again.
    check_reset(5, 2, 9, OffsetReset(K.FETCH_FROM_LOG_END, 5, 4))
    check_reset(5, 5, 5, OffsetReset(K.FETCH_FROM_LOG_END, 5, 0))
    with pytest.raises(TruncationError, match="log start <= log end"):
        out_of_range_reset(5, 9, 3)
