"""Incremental fetch sessions (KIP-227): Kafka's FetchSessionTest cases for the cache, the
contexts and the eviction rules, one line per case where possible, pure; a Hypothesis state
walk over the cache's invariants."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.fetcher.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from pykraft.protocol.errors import Errors
from pykraft.replica.fetch_sessions import (
    FetchSessionCache,
    FullContext,
    IncrementalContext,
    PartitionOutcome,
    SessionError,
    Sessionless,
)

Key = tuple[str, int]
FOO0, FOO1, BAR0 = ("foo", 0), ("foo", 1), ("bar", 0)
EVICTION_MS = 1000


def cache(max_entries: int = 3) -> FetchSessionCache[Key, int]:
    ids = itertools.count(1)
    return FetchSessionCache(lambda: next(ids), max_entries, EVICTION_MS)


def outcome(
    hw: int,
    records: int = 0,
    error: Errors = Errors.NONE,
    *,
    diverging_epoch: bool = False,
    preferred_read_replica: bool = False,
) -> PartitionOutcome:
    return PartitionOutcome(
        records_bytes=records, high_watermark=hw, log_start_offset=0, error=error,
        diverging_epoch=diverging_epoch, preferred_read_replica=preferred_read_replica,
    )  # fmt: skip


def open_session(
    sessions: FetchSessionCache[Key, int],
    partitions: dict[Key, int],
    now_ms: int = 0,
    *,
    privileged: bool = False,
) -> int:
    context = sessions.new_context(
        INVALID_SESSION_ID, INITIAL_EPOCH, partitions, (),
        privileged=privileged, uses_topic_ids=True, now_ms=now_ms,
    )  # fmt: skip
    assert isinstance(context, FullContext)
    return sessions.full_response(context, {key: outcome(10) for key in partitions}, now_ms)


def incremental(
    sessions: FetchSessionCache[Key, int],
    session_id: int,
    epoch: int,
    changed: dict[Key, int] | None = None,
    forget: tuple[Key, ...] = (),
    *,
    uses_topic_ids: bool = True,
    now_ms: int = 5,
) -> object:
    return sessions.new_context(
        session_id, epoch, changed or {}, forget,
        privileged=False, uses_topic_ids=uses_topic_ids, now_ms=now_ms,
    )  # fmt: skip


def test_next_epoch_wraps_to_one_and_final_stays_final() -> None:
    assert [next_epoch(0), next_epoch(7), next_epoch(2**31 - 1), next_epoch(-1)] == [1, 8, 1, -1]


def test_full_fetch_with_final_epoch_is_sessionless_and_closes_the_named_session() -> None:
    sessions = cache()
    session_id = open_session(sessions, {FOO0: 0})
    context = sessions.new_context(
        session_id, FINAL_EPOCH, {FOO0: 0}, (), privileged=False, uses_topic_ids=True, now_ms=1
    )
    assert isinstance(context, Sessionless) and sessions.sessions == {}


def test_a_full_fetch_opens_a_session_at_epoch_one() -> None:
    sessions = cache()
    session_id = open_session(sessions, {FOO0: 0, FOO1: 0})
    assert session_id != INVALID_SESSION_ID
    assert sessions.sessions[session_id].epoch == 1
    assert sessions.total_partitions == 2


def test_incremental_errors() -> None:
    sessions = cache()
    session_id = open_session(sessions, {FOO0: 0})
    assert incremental(sessions, 999, 1) == SessionError(Errors.FETCH_SESSION_ID_NOT_FOUND)
    assert incremental(sessions, session_id, 2) == SessionError(Errors.INVALID_FETCH_SESSION_EPOCH)
    assert incremental(sessions, session_id, 1, uses_topic_ids=False) == SessionError(
        Errors.FETCH_SESSION_TOPIC_ID_ERROR
    )


def test_incremental_fetch_reads_the_whole_session_and_answers_what_changed() -> None:
    sessions = cache()
    session_id = open_session(sessions, {FOO0: 0, FOO1: 0})
    context = incremental(sessions, session_id, 1, {BAR0: 3})
    assert isinstance(context, IncrementalContext)
    assert context.partitions == {FOO0: 0, FOO1: 0, BAR0: 3}
    # foo-0 unchanged (same HW, no records), foo-1 has records, bar-0 is new (HW unknown).
    error, answered = sessions.incremental_response(
        context, {FOO0: outcome(10), FOO1: outcome(10, records=100), BAR0: outcome(4)}
    )
    assert (error, answered) == (Errors.NONE, [FOO1, BAR0])
    # Answered partitions moved to the end: the next read starts with the unanswered.
    assert list(sessions.sessions[session_id].partitions) == [FOO0, FOO1, BAR0]
    assert sessions.sessions[session_id].epoch == 2


def test_sizing_an_incremental_answer_leaves_the_session_as_it_was() -> None:
    """``getResponseSize`` (a quota weighs the answer first): same partitions, nothing kept."""
    sessions = cache()
    session_id = open_session(sessions, {FOO0: 0, FOO1: 0})
    context = incremental(sessions, session_id, 1)
    assert isinstance(context, IncrementalContext)
    outcomes = {FOO0: outcome(11), FOO1: outcome(10)}
    sized = sessions.incremental_response(context, outcomes, update=False)
    assert sized == (Errors.NONE, [FOO0])
    assert list(sessions.sessions[session_id].partitions) == [FOO0, FOO1]
    # Not remembered: answering for real still finds foo-0's HW moved, then moves it last.
    assert sessions.incremental_response(context, outcomes) == sized
    assert list(sessions.sessions[session_id].partitions) == [FOO1, FOO0]


def test_hw_and_log_start_moves_errors_and_diverging_epochs_must_be_answered() -> None:
    sessions = cache()
    session_id = open_session(sessions, {FOO0: 0})
    for epoch, answer, expected in [
        (1, outcome(10), []),
        (2, outcome(11), [FOO0]),
        (3, PartitionOutcome(high_watermark=11, log_start_offset=5), [FOO0]),
        (4, PartitionOutcome(high_watermark=11, log_start_offset=5), []),
        (5, outcome(11, error=Errors.NOT_LEADER_OR_FOLLOWER), [FOO0]),
        # The error reset the cached HW: the same HW is answered again once the error is gone.
        (6, outcome(11), [FOO0]),
        (7, outcome(11, diverging_epoch=True), [FOO0]),
        # The follower truncated instead of taking that HW: it is answered again.
        (8, outcome(11), [FOO0]),
        (9, outcome(11), []),
        (10, outcome(11, preferred_read_replica=True), [FOO0]),
    ]:
        context = incremental(sessions, session_id, epoch)
        assert isinstance(context, IncrementalContext)
        assert sessions.incremental_response(context, {FOO0: answer}) == (Errors.NONE, expected)


def test_a_session_opened_by_a_diverging_answer_answers_its_high_watermark_again() -> None:
    """A follower restarted after an unclean election fetches past the new leader's log end:
    the full answer that opens its session carries the divergence, which it truncates to,
    not the high watermark. The next answer carries the same high watermark once more (the
    chaos test that found this: test_unclean_leader_election_is_off_by_default_...)."""
    sessions = cache()
    full = sessions.new_context(
        INVALID_SESSION_ID, INITIAL_EPOCH, {FOO0: 20}, (),
        privileged=True, uses_topic_ids=True, now_ms=0,
    )  # fmt: skip
    assert isinstance(full, FullContext)
    session_id = sessions.full_response(full, {FOO0: outcome(10, diverging_epoch=True)}, 0)
    answers = []
    for epoch, fetch_offset in [(1, 10), (2, 10)]:
        context = incremental(sessions, session_id, epoch, {FOO0: fetch_offset})
        assert isinstance(context, IncrementalContext)
        answers.append(sessions.incremental_response(context, {FOO0: outcome(10)}))
    assert answers == [(Errors.NONE, [FOO0]), (Errors.NONE, [])]


def test_a_duplicate_incremental_request_gets_invalid_epoch_when_answered() -> None:
    sessions = cache()
    session_id = open_session(sessions, {FOO0: 0})
    first = incremental(sessions, session_id, 1)
    second = incremental(sessions, session_id, 2)  # the session moved on meanwhile
    assert isinstance(first, IncrementalContext) and isinstance(second, IncrementalContext)
    assert sessions.incremental_response(first, {FOO0: outcome(11)}) == (
        Errors.INVALID_FETCH_SESSION_EPOCH,
        [],
    )


def test_forgetting_every_partition_closes_the_session() -> None:
    sessions = cache()
    session_id = open_session(sessions, {FOO0: 0})
    context = incremental(sessions, session_id, 1, forget=(FOO0,))
    assert context == Sessionless({})
    assert sessions.sessions == {} and sessions.total_partitions == 0


def test_a_full_cache_creates_no_session_for_a_recent_consumer() -> None:
    sessions = cache(max_entries=2)
    open_session(sessions, {FOO0: 0})
    open_session(sessions, {FOO0: 0})
    assert open_session(sessions, {FOO0: 0, FOO1: 0}, now_ms=10) == INVALID_SESSION_ID
    assert sessions.evictions == 0


def test_a_stale_session_is_evicted_first() -> None:
    sessions = cache(max_entries=2)
    stale = open_session(sessions, {FOO0: 0}, now_ms=0)
    fresh = open_session(sessions, {FOO0: 0}, now_ms=900)
    new = open_session(sessions, {FOO0: 0}, now_ms=EVICTION_MS + 1)
    assert set(sessions.sessions) == {fresh, new} and stale not in sessions.sessions


def test_a_follower_evicts_a_consumer_session() -> None:
    sessions = cache(max_entries=2)
    consumer = open_session(sessions, {FOO0: 0, FOO1: 0}, now_ms=0)
    follower = open_session(sessions, {FOO0: 0}, now_ms=0, privileged=True)
    new_follower = open_session(sessions, {FOO0: 0}, now_ms=10, privileged=True)
    assert set(sessions.sessions) == {follower, new_follower} and consumer not in sessions.sessions
    # A consumer cannot evict a recent follower session.
    assert open_session(sessions, {FOO0: 0}, now_ms=20) == INVALID_SESSION_ID


def test_an_old_session_is_evicted_by_a_bigger_one_not_a_smaller_one() -> None:
    sessions = cache(max_entries=1)
    old = open_session(sessions, {FOO0: 0, FOO1: 0}, now_ms=0)
    # Used recently (not stale) but created long ago: evictable by all.
    context = incremental(sessions, old, 1)
    assert isinstance(context, IncrementalContext)
    sessions.touch(sessions.sessions[old], EVICTION_MS + 1)
    assert open_session(sessions, {FOO0: 0}, now_ms=EVICTION_MS + 2) == INVALID_SESSION_ID
    bigger = open_session(sessions, {FOO0: 0, FOO1: 0, BAR0: 0}, now_ms=EVICTION_MS + 3)
    assert list(sessions.sessions) == [bigger]


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["open", "open_follower", "incremental", "close"]),
        st.integers(0, 4),  # which session / how many partitions
        st.integers(0, 400),  # time step
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(_OPS)
def test_cache_invariants_hold_over_any_sequence(ops: list[tuple[str, int, int]]) -> None:
    """Never over capacity; ids unique and non-zero; the partition count is the sum of the
    sessions' sizes; an open full fetch always gets a session while there is room."""
    sessions = cache(max_entries=3)
    now = 0
    keys = [("t", index) for index in range(5)]
    for op, n, step in ops:
        now += step
        ids = sorted(sessions.sessions)
        if op.startswith("open"):
            had_room = len(sessions.sessions) < sessions.max_entries
            session_id = open_session(
                sessions, dict.fromkeys(keys[: n + 1], 0), now, privileged=op == "open_follower"
            )
            assert session_id != INVALID_SESSION_ID or not had_room
        elif ids:
            session_id = ids[n % len(ids)]
            epoch = sessions.sessions[session_id].epoch
            forget = tuple(keys) if op == "close" else ()
            incremental(sessions, session_id, epoch, forget=forget, now_ms=now)
        assert len(sessions.sessions) <= sessions.max_entries
        assert INVALID_SESSION_ID not in sessions.sessions
        assert all(session.id == key for key, session in sessions.sessions.items())
        assert sessions.total_partitions == sum(
            len(session.partitions) for session in sessions.sessions.values()
        )
