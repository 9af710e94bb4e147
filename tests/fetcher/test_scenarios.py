"""Kafka's fetcher scenarios, replayed through the pure core on both truncation protocols.

Each test runs twice: ``diverging_epoch`` (KIP-320: the leader reports divergence in Fetch
responses, ``truncate_on_fetch``) and ``offsets_for_leader_epoch`` (KIP-101/KIP-279: the follower
asks before fetching). Tests cite their source: core/src/test/scala/unit/kafka/server/
AbstractFetcherThreadTest.scala (AFTT) and ReplicaFetcherThreadTest.scala (RFTT), or the KIP.
The harness checks after every completed truncation that the follower's log is a prefix of
the leader's and that the truncation did not raise the follower's high watermark.
"""

from __future__ import annotations

import pytest

from pykraft.fetcher.responses import Append, BackOff, FailureReason, Truncate
from pykraft.fetcher.state import FetchState
from pykraft.fetcher.truncation import Truncation, truncation_offset, truncation_request
from pykraft.protocol.errors import Errors
from pykraft.storage.leader_epoch_cache import UNDEFINED_EPOCH
from tests.fetcher.harness import BACKOFF_MS, Follower, MockLeader, MockLog

PATHS = [
    pytest.param(True, id="diverging_epoch"),
    pytest.param(False, id="offsets_for_leader_epoch"),
]
both_paths = pytest.mark.parametrize("truncate_on_fetch", PATHS)


def state_of(follower: Follower) -> FetchState | None:
    """The follower's fetch state now (a call, so mypy does not carry narrowing across work)."""
    return follower.state.state if follower.state is not None else None


def leader_of(epochs: list[int], leader_epoch: int, hw: int, **options: object) -> MockLeader:
    log = MockLog.of(epochs, high_watermark=hw)
    log.become_leader(leader_epoch)
    return MockLeader(log, leader_epoch, **options)  # type: ignore[arg-type]


def follower_of(
    epochs: list[int], current_leader_epoch: int, hw: int, truncate_on_fetch: bool
) -> Follower:
    follower = Follower(MockLog.of(epochs, high_watermark=hw), truncate_on_fetch)
    follower.add_partition(current_leader_epoch)
    return follower


@both_paths
def test_simple_fetch(truncate_on_fetch: bool) -> None:
    # AFTT testSimpleFetch
    leader = leader_of([0, 0], 0, hw=2, max_records=2)
    follower = follower_of([], 0, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert (follower.log.log_end_offset, follower.log.high_watermark) == (2, 2)


@both_paths
def test_truncation_with_interleaved_epochs(truncate_on_fetch: bool) -> None:
    # AFTT testTruncation (DESIGN.md §5): follower epochs 0,2,4 against leader 1,3,5. The
    # follower never had any leader epoch, so each round cuts one epoch off (KIP-279 loop).
    leader = leader_of([1, 3, 5], 5, hw=2)
    follower = follower_of([0, 2, 4], 5, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.run_until_in_sync(leader)
    assert follower.truncations == [Truncation(2, False), Truncation(1, False), Truncation(0, True)]
    log = follower.log
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 3, 2)


@both_paths
def test_diverging_epochs(truncate_on_fetch: bool) -> None:
    # AFTT testDivergingEpochs: only the last record differs (epoch 4 vs 5).
    leader = leader_of([0, 2, 5], 5, hw=2)
    follower = follower_of([0, 2, 4], 5, hw=0, truncate_on_fetch=truncate_on_fetch)
    assert follower.state is not None
    assert follower.state.last_fetched_epoch == (4 if truncate_on_fetch else None)
    follower.do_work(leader)
    assert follower.truncations == [Truncation(2, True)]
    if truncate_on_fetch:
        assert follower.state.last_fetched_epoch == 2  # the next fetch says epoch 2
    follower.run_until_in_sync(leader)
    assert follower.state.last_fetched_epoch == 5


@both_paths
def test_truncating_response_never_advances_the_high_watermark(truncate_on_fetch: bool) -> None:
    # AFTT testTruncateOnFetchDoesNotProcessPartitionData, RFTT
    # testTruncateOnFetchDoesNotUpdateHighWatermark: the leader's high watermark is 4, the
    # follower's 1; the truncation round leaves it at 1.
    leader = leader_of([0, 0, 2, 5, 5], 5, hw=4)
    follower = follower_of([0, 0, 2, 4, 4, 4], 5, hw=1, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert follower.truncations == [Truncation(3, True)]
    if truncate_on_fetch:
        # The whole round was the truncation: nothing appended, high watermark untouched.
        assert not any(isinstance(a, Append) for a in follower.actions)
        assert (follower.log.log_end_offset, follower.log.high_watermark) == (3, 1)
    follower.run_until_in_sync(leader)
    assert len(follower.truncations) == 1
    assert (follower.log.log_end_offset, follower.log.high_watermark) == (5, 4)


@both_paths
def test_truncation_skipped_if_no_epoch_change(truncate_on_fetch: bool) -> None:
    # AFTT testTruncationSkippedIfNoEpochChange
    leader = leader_of([1, 3, 5], 5, hw=2)
    follower = follower_of([], 5, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert (len(follower.truncations), follower.log.log_end_offset) == (1, 1)
    follower.add_partition(5)  # same epoch again: keep the state, no new truncation
    follower.do_work(leader)
    assert (len(follower.truncations), follower.log.log_end_offset) == (1, 2)


@both_paths
def test_fetch_offset_out_of_range_high(truncate_on_fetch: bool) -> None:
    # AFTT testFollowerFetchOutOfRangeHigh: the leader's log shrinks below ours without a
    # truncation phase (unclean election); we truncate to the leader's end.
    leader = leader_of([0, 2, 4], 4, hw=2)
    follower = follower_of([0, 2, 4], 4, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert follower.state is not None and follower.state.state is FetchState.FETCHING
    assert follower.log.log_end_offset == 3
    leader.log = MockLog([])
    follower.do_work(leader)
    log = follower.log
    assert (log.log_end_offset, log.log_start_offset, log.high_watermark) == (0, 0, 0)
    assert follower.state.state is FetchState.FETCHING


@both_paths
def test_fetch_offset_out_of_range_low(truncate_on_fetch: bool) -> None:
    # AFTT testFollowerFetchOutOfRangeLow: the leader deleted everything we have (its log
    # starts at 2); we drop our log and start at the leader's log start.
    leader_log = MockLog.of([4], start=2, high_watermark=2)
    leader = MockLeader(leader_log, 4)
    follower = follower_of([0], 4, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert follower.state is not None and follower.state.state is FetchState.FETCHING
    assert (follower.log.log_start_offset, follower.log.records) == (2, [])
    follower.run_until_in_sync(leader)
    log = follower.log
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (2, 3, 2)


@both_paths
def test_fenced_truncation(truncate_on_fetch: bool) -> None:
    # AFTT testFencedTruncation: the leader is on epoch 1, we still think 0.
    leader = leader_of([1, 1], 1, hw=2)
    for epochs in ([], [0]):  # no history (fetch is fenced) / a history (the epoch query is)
        follower = follower_of(epochs, 0, hw=0, truncate_on_fetch=truncate_on_fetch)
        follower.do_work(leader)
        assert (follower.state, follower.failed) == (None, FailureReason.FENCED_LEADER_EPOCH)
        assert follower.log.records == [(0, 0)] * len(epochs)
        assert follower.log.high_watermark == 0


@both_paths
def test_fenced_fetch(truncate_on_fetch: bool) -> None:
    # AFTT testFencedFetch: in sync, then the leader moves to a new epoch.
    leader = leader_of([0, 0], 0, hw=2, max_records=2)
    follower = follower_of([], 0, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert follower.log.log_end_offset == 2
    leader.leader_epoch += 1
    follower.do_work(leader)
    assert (follower.state, follower.failed) == (None, FailureReason.FENCED_LEADER_EPOCH)


@both_paths
def test_unknown_leader_epoch_in_truncation(truncate_on_fetch: bool) -> None:
    # AFTT testUnknownLeaderEpochInTruncation: our epoch (1) is ahead of the leader's (0).
    leader = leader_of([0, 0], 0, hw=2)
    follower = follower_of([0], 1, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert follower.state is not None and state_of(follower) is FetchState.DELAYED
    expected_resume = FetchState.FETCHING if truncate_on_fetch else FetchState.TRUNCATING
    assert follower.state.resume_state is expected_resume
    assert (follower.log.log_end_offset, follower.truncations) == (1, [])
    assert follower.actions[-1] == BackOff(BACKOFF_MS, Errors.UNKNOWN_LEADER_EPOCH)
    # The leader catches up with epoch 1; after the back-off we make progress.
    leader.leader_epoch = 1
    leader.log.become_leader(1)
    follower.now_ms += BACKOFF_MS
    follower.do_work(leader)
    assert follower.log.log_end_offset == 2
    assert state_of(follower) is FetchState.FETCHING


@both_paths
def test_unknown_leader_epoch_while_fetching(truncate_on_fetch: bool) -> None:
    # AFTT testUnknownLeaderEpochWhileFetching: the leader's epoch "rewinds"; we are stuck
    # (backing off) until it returns.
    leader = leader_of([0, 0], 1, hw=2)
    follower = follower_of([], 1, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert follower.log.log_end_offset == 1
    leader.leader_epoch = 0
    follower.do_work(leader)
    assert follower.log.log_end_offset == 1
    assert state_of(follower) is FetchState.DELAYED
    follower.do_work(leader)  # still backing off: no request at all
    assert follower.fetches == 2
    leader.leader_epoch = 1
    follower.now_ms += BACKOFF_MS
    follower.do_work(leader)
    assert follower.log.log_end_offset == 2
    assert state_of(follower) is FetchState.FETCHING


@both_paths
def test_corrupt_message_is_retried(truncate_on_fetch: bool) -> None:
    # AFTT testCorruptMessage: the first response fails its CRC; the next one succeeds.
    leader = leader_of([0, 0], 0, hw=2, max_records=2, corrupt_next_fetch=True)
    follower = follower_of([], 0, hw=0, truncate_on_fetch=truncate_on_fetch)
    follower.do_work(leader)
    assert follower.log.log_end_offset == 0
    assert follower.actions[-1] == BackOff(BACKOFF_MS, Errors.CORRUPT_MESSAGE)
    follower.now_ms += BACKOFF_MS
    follower.do_work(leader)
    assert follower.log.log_end_offset == 2


@both_paths
@pytest.mark.parametrize("failing", ["append", "truncate"])
def test_partition_failure_is_isolated(truncate_on_fetch: bool, failing: str) -> None:
    # AFTT testFetcherThreadHandlingPartitionFailureDuringAppending / ...DuringTruncation:
    # the failing partition is marked failed, the other keeps replicating, and a leader
    # change adds the failed one back.
    leader1, leader2 = leader_of([0], 0, hw=1), leader_of([0], 0, hw=1)
    broken = follower_of([], 0, hw=0, truncate_on_fetch=truncate_on_fetch)
    healthy = follower_of([], 0, hw=0, truncate_on_fetch=truncate_on_fetch)
    broken.log.failing = frozenset({failing})
    broken.do_work(leader1)
    healthy.do_work(leader2)
    assert (broken.state, broken.failed) == (None, FailureReason.STORAGE_ERROR)
    assert healthy.state is not None and healthy.failed is None
    assert healthy.log.log_end_offset == 1
    broken.log.failing = frozenset()
    broken.add_partition(1)
    assert broken.state is not None and broken.failed is None


def test_poll_indefinitely_while_the_leader_answers_errors() -> None:
    # RFTT shouldPollIndefinitelyIfLeaderReturnsAnyException (OffsetsForLeaderEpoch only).
    leader = leader_of([5, 5, 5], 5, hw=1)
    leader.epoch_errors = [Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_SERVER_ERROR] * 2
    follower = follower_of([5, 5, 5, 5], 5, hw=1, truncate_on_fetch=False)
    for _ in range(4):
        follower.do_work(leader)
        follower.now_ms += BACKOFF_MS
    assert follower.truncations == [] and follower.epoch_requests == 4
    follower.do_work(leader)
    assert follower.truncations == [Truncation(3, True)]


@both_paths
def test_kip_101_scenario_1_hw_truncation_then_immediate_election(truncate_on_fetch: bool) -> None:
    # KIP-101 scenario 1: A leads epoch 0 with m1, m2 (both acknowledged, HW 2); follower B
    # has both but its high watermark is still 1. B restarts, then A fails at once and B is
    # elected. Truncating to the high watermark on restart would lose the acknowledged m2.
    a_log = MockLog.of([0, 0], high_watermark=2)
    a = MockLeader(a_log, 0)
    b = follower_of([0, 0], 0, hw=1, truncate_on_fetch=truncate_on_fetch)
    assert truncation_request(b.log.view(), 0, 1, offsets_for_leader_epoch_supported=False) == (
        Truncation(1, True)  # what pre-KIP-101 truncation to the high watermark did
    )
    b.do_work(a)  # B's restart reconciles with A by epoch: nothing is cut
    assert b.log.records == [(0, 0), (1, 0)]
    # A fails; B becomes leader in epoch 1 and takes m3; A rejoins as its follower.
    b.log.become_leader(1)
    b_leader = MockLeader(b.log, 1)
    b.log.append([(2, 1)])
    a_follower = Follower(a_log, truncate_on_fetch)
    a_follower.add_partition(1)
    a_follower.run_until_in_sync(b_leader)
    assert a_log.records == [(0, 0), (1, 0), (2, 1)]  # m2 survived on both replicas
    assert all(t.offset >= 2 for t in a_follower.truncations)


@both_paths
def test_kip_101_scenario_2_divergence_after_multiple_hard_failures(
    truncate_on_fetch: bool,
) -> None:
    # KIP-101 scenario 2: A leads epoch 0 with m1, m2 (HW 2); B had both but loses the
    # unflushed m2 in a power failure. B comes back first, leads epoch 1 and writes m3 at
    # offset 1. A returns as follower: truncating to its HW (2) would keep m2 where B has m3.
    b_log = MockLog.of([0], high_watermark=1)
    b_log.become_leader(1)
    b_log.append([(1, 1)])
    b = MockLeader(b_log, 1)
    a = follower_of([0, 0], 1, hw=2, truncate_on_fetch=truncate_on_fetch)
    assert truncation_request(a.log.view(), 1, 2, offsets_for_leader_epoch_supported=False) == (
        Truncation(2, True)  # pre-KIP-101: keeps m2 -> the logs would diverge at offset 1
    )
    a.run_until_in_sync(b)
    assert a.truncations == [Truncation(1, True)]
    assert a.log.records == b_log.records == [(0, 0), (1, 1)]


@both_paths
def test_kip_279_fast_leader_failover(truncate_on_fetch: bool) -> None:
    # KIP-279: A leads epoch 1 (offsets 0-4, B copied 0-2). B is elected in epoch 2 and
    # writes 3-4; before anything replicates, A is elected again in epoch 3 (it never saw
    # epoch 2) and writes offset 5. B returns as A's follower with epoch 2 data at 3-4.
    a_log = MockLog.of([1, 1, 1, 1, 1], high_watermark=3)
    a_log.become_leader(3)
    a_log.append([(5, 3)])
    a = MockLeader(a_log, 3, max_records=3)
    b = Follower(MockLog.of([1, 1, 1], high_watermark=3), truncate_on_fetch)
    b.log.become_leader(2)
    b.log.append([(3, 2), (4, 2)])
    b.add_partition(3)
    # Before KIP-279 the leader answered an offset only (the v0 rule): end of epoch 2 on A is
    # where epoch 3 starts, 5 -> B kept its epoch-2 records at 3-4: divergence.
    assert truncation_offset(UNDEFINED_EPOCH, 5, b.log.view(), 3) == Truncation(5, True)
    # With the leader's epoch in the answer (1, 5), B cuts where its own epoch 1 ends: 3.
    b.run_until_in_sync(a)
    assert b.truncations == [Truncation(3, True)]
    assert b.log.records == a_log.records


def test_diverging_epoch_loop_needs_no_offsets_for_leader_epoch() -> None:
    # RFTT shouldTruncateIfLeaderRepliesWithDivergingEpochNotKnownToFollower: the whole
    # KIP-279 loop runs inside fetches; the follower stays FETCHING throughout.
    leader = leader_of([1, 3, 5], 5, hw=2)
    follower = follower_of([0, 2, 4], 5, hw=0, truncate_on_fetch=True)
    for expected in ([Truncation(2, False)], [Truncation(2, False), Truncation(1, False)]):
        follower.do_work(leader)
        assert follower.truncations == expected
        assert follower.state is not None and follower.state.state is FetchState.FETCHING
    follower.run_until_in_sync(leader)
    assert follower.epoch_requests == 0
    assert sum(isinstance(a, Truncate) for a in follower.actions) == 3


@both_paths
def test_kip_279_back_to_back_failovers(truncate_on_fetch: bool) -> None:
    # KIP-279, the case KIP-101 alone got wrong: A leads epoch 1 (0-1, copied by B), is
    # re-elected in epoch 2 and writes 2-3 that B never sees; B leads epoch 3 and writes 2-3;
    # A leads epoch 4 (never having seen epoch 3) and writes 4. B's epoch 3 is unknown to A,
    # and A's epoch 2 is unknown to B: it takes an intermediate cut.
    a_log = MockLog.of([1, 1], high_watermark=2)
    a_log.become_leader(2)
    a_log.append([(2, 2), (3, 2)])
    a_log.become_leader(4)
    a_log.append([(4, 4)])
    a = MockLeader(a_log, 4, max_records=5)
    b = Follower(MockLog.of([1, 1], high_watermark=2), truncate_on_fetch)
    b.log.become_leader(3)
    b.log.append([(2, 3), (3, 3)])
    b.add_partition(4)
    # Pre-KIP-279 (offset only): A's end for epoch 3 is where epoch 4 starts, 4 -> no cut.
    assert truncation_offset(UNDEFINED_EPOCH, 4, b.log.view(), 2) == Truncation(4, True)
    b.run_until_in_sync(a)
    if truncate_on_fetch:  # the second round trip is simply the next fetch
        assert b.truncations == [Truncation(2, False)]
    else:
        assert b.truncations == [Truncation(2, False), Truncation(2, True)]
    assert b.log.records == a_log.records == [(0, 1), (1, 1), (2, 2), (3, 2), (4, 4)]
