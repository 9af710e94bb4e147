"""What each leader answer makes a follower do: the actions and the ``on_*`` handlers.

Theory of operation
-------------------
The ``on_*`` functions are the pure half of Kafka's ``AbstractFetcherThread``: each takes the
partition's ``PartitionFetchState`` (``fetcher.state``), what the leader said, a
``FollowerLog`` snapshot and ``now_ms``, and returns a ``FetchOutcome``: the new state (None
when the partition leaves the fetcher) and one action for the asyncio shell to carry out
against the log (append, truncate, ask for offsets, back off, mark failed). Every state change
goes through ``PartitionFetchState.transition``. The shell owns the clock, the sockets and the
log.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import attrs

from pykraft.fetcher.state import FetchState, PartitionFetchState
from pykraft.fetcher.truncation import (
    FollowerLog,
    LeaderEpochEndOffset,
    LeaderEpochRequest,
    OffsetReset,
    OffsetResetKind,
    Truncation,
    has_diverging_epoch,
    out_of_range_reset,
    truncation_for_diverging_epoch,
    truncation_for_epoch_end_offset,
    truncation_request,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import FetchPartition, PartitionData
from pykraft.protocol.segments import Segment

# replica.fetch.backoff.ms default: how long a partition waits after an error before retrying.
REPLICA_FETCH_BACKOFF_MS_DEFAULT = 1000


# ------------------------------------------------------------------------------------ actions


@attrs.frozen
class Ignore:
    """Nothing to do: the answer is for an older request or a state that moved on."""

    reason: str


@attrs.frozen
class Append:
    """Append ``records`` (possibly none) as follower, then set the high watermark to
    ``follower_high_watermark(high_watermark, ...)`` and raise the log start offset to
    ``log_start_offset`` if it is higher; report back through ``on_records_appended``."""

    records: tuple[Segment, ...]
    high_watermark: int
    log_start_offset: int


@attrs.frozen
class Truncate:
    """Truncate the log to ``truncation.offset``. Never touches the high watermark beyond
    lowering it to the new log end: a truncating answer carries no high watermark."""

    truncation: Truncation


@attrs.frozen
class SendOffsetsForLeaderEpoch:
    request: LeaderEpochRequest


@attrs.frozen
class ResolveOutOfRange:
    """Ask the leader (ListOffsets, under ``current_leader_epoch``) for its log start and end
    offsets, then call ``on_leader_offsets``."""

    current_leader_epoch: int


@attrs.frozen
class ResetOffset:
    """Apply an out-of-range reset: truncate to, or restart the log at, ``reset.fetch_offset``."""

    reset: OffsetReset


@attrs.frozen
class BackOff:
    until_ms: int
    error: Errors


class FailureReason(enum.Enum):
    # A newer leader epoch exists: wait for metadata to re-add the partition.
    FENCED_LEADER_EPOCH = "fenced_leader_epoch"
    # The local log failed (KafkaStorageException): isolate this partition only.
    STORAGE_ERROR = "storage_error"
    # Anything unexpected while appending or truncating: isolate this partition only.
    UNEXPECTED_ERROR = "unexpected_error"


@attrs.frozen
class MarkFailed:
    """Remove the partition from the fetcher and count it failed (``markPartitionFailed``)."""

    reason: FailureReason


FetchAction = (
    Ignore
    | Append
    | Truncate
    | SendOffsetsForLeaderEpoch
    | ResolveOutOfRange
    | ResetOffset
    | BackOff
    | MarkFailed
)


class FetchOutcome(NamedTuple):
    state: PartitionFetchState | None
    action: FetchAction


class LocalError(enum.Enum):
    """What went wrong while the shell applied an action to the local log."""

    CORRUPT_RECORD = "corrupt_record"  # CorruptRecordException / InvalidRecordException
    STORAGE_ERROR = "storage_error"  # KafkaStorageException
    UNEXPECTED = "unexpected"


@attrs.frozen
class LeaderOffsets:
    """The leader's ListOffsets answers (earliest and latest) for an out-of-range reset."""

    error_code: int = Errors.NONE
    log_start_offset: int = -1
    log_end_offset: int = -1


# ------------------------------------------------------------------------- truncation phase


def plan_truncation(
    state: PartitionFetchState,
    follower: FollowerLog,
    *,
    offsets_for_leader_epoch_supported: bool = True,
    truncate_on_fetch: bool = True,
) -> FetchOutcome:
    """A TRUNCATING partition either asks the leader (OffsetsForLeaderEpoch) or, with no epoch
    history, truncates to its high watermark right away."""
    assert state.is_truncating, f"only a TRUNCATING partition plans truncation: {state}"
    step = truncation_request(
        follower,
        state.current_leader_epoch,
        state.fetch_offset,
        offsets_for_leader_epoch_supported=offsets_for_leader_epoch_supported,
    )
    if isinstance(step, LeaderEpochRequest):
        return FetchOutcome(state, SendOffsetsForLeaderEpoch(step))
    return _truncated(state, step, follower, truncate_on_fetch)


def on_epoch_end_offset(
    state: PartitionFetchState,
    request: LeaderEpochRequest,
    response: LeaderEpochEndOffset,
    follower: FollowerLog,
    now_ms: int,
    *,
    fetch_backoff_ms: int = REPLICA_FETCH_BACKOFF_MS_DEFAULT,
    truncate_on_fetch: bool = True,
) -> FetchOutcome:
    """Handle one partition of an OffsetsForLeaderEpoch answer (Kafka
    ``truncateToEpochEndOffsets`` / ``maybeTruncateToEpochEndOffsets``)."""
    if not state.is_truncating or request.current_leader_epoch != state.current_leader_epoch:
        # The leader epoch changed while the request was in flight: its answer is stale.
        return FetchOutcome(state, Ignore("leader epoch changed during OffsetsForLeaderEpoch"))
    error = _error(response.error_code)
    if error is Errors.NONE:
        truncation = truncation_for_epoch_end_offset(response, follower, state.fetch_offset)
        return _truncated(state, truncation, follower, truncate_on_fetch)
    if error is Errors.FENCED_LEADER_EPOCH:
        return _on_partition_fenced(state, request.current_leader_epoch, now_ms, fetch_backoff_ms)
    return _back_off(state, error, now_ms, fetch_backoff_ms)


def _truncated(
    state: PartitionFetchState,
    truncation: Truncation,
    follower: FollowerLog,
    truncate_on_fetch: bool,
) -> FetchOutcome:
    """Kafka ``updateFetchOffsetAndMaybeMarkTruncationComplete``: fetch from the truncation
    offset with the epoch the log will end in; keep TRUNCATING only for an incomplete
    truncation on the OffsetsForLeaderEpoch path (the DivergingEpoch loop runs in fetches)."""
    completed = truncate_on_fetch or truncation.truncation_completed
    target = FetchState.FETCHING if completed else FetchState.TRUNCATING
    new_state = state.transition(
        target,
        fetch_offset=truncation.offset,
        last_fetched_epoch=follower.latest_epoch_after_truncation(truncation.offset),
    )
    return FetchOutcome(new_state, Truncate(truncation))


# --------------------------------------------------------------------------- fetch responses


def on_fetch_response(
    state: PartitionFetchState,
    request: FetchPartition,
    response: PartitionData,
    follower: FollowerLog,
    now_ms: int,
    *,
    fetch_backoff_ms: int = REPLICA_FETCH_BACKOFF_MS_DEFAULT,
    truncate_on_fetch: bool = True,
) -> FetchOutcome:
    """Handle one partition of a Fetch response (Kafka ``processFetchRequest``)."""
    if request.fetch_offset != state.fetch_offset or not state.is_ready_for_fetch:
        # Truncated, reset or delayed since the request was sent: its data no longer fits.
        return FetchOutcome(state, Ignore("fetch state changed since the request"))
    error = _error(response.error_code)
    if error is Errors.NONE:
        if truncate_on_fetch and has_diverging_epoch(response.diverging_epoch):
            truncation = truncation_for_diverging_epoch(
                response.diverging_epoch, follower, state.fetch_offset
            )
            return _truncated(state, truncation, follower, truncate_on_fetch)
        records = response.records or ()
        return FetchOutcome(
            state, Append(records, response.high_watermark, response.log_start_offset)
        )
    if error is Errors.OFFSET_OUT_OF_RANGE:
        return FetchOutcome(state, ResolveOutOfRange(state.current_leader_epoch))
    if error is Errors.FENCED_LEADER_EPOCH:
        return _on_partition_fenced(state, request.current_leader_epoch, now_ms, fetch_backoff_ms)
    # UNKNOWN_LEADER_EPOCH (the leader has not caught up with our epoch yet),
    # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION (transient while partitions are created
    # or deleted), and any other error from the leader: back off and retry.
    return _back_off(state, error, now_ms, fetch_backoff_ms)


def on_records_appended(
    state: PartitionFetchState,
    *,
    last_offset: int | None,
    last_leader_epoch: int | None,
    leader_high_watermark: int,
) -> PartitionFetchState:
    """After an ``Append``: advance past the appended records (``last_offset`` None when none
    were valid) and record the lag ``max(0, leader high watermark - next offset)``."""
    assert state.is_ready_for_fetch, f"appended to a partition that is not FETCHING: {state}"
    if last_offset is None:
        return state.transition(
            FetchState.FETCHING, lag=max(0, leader_high_watermark - state.fetch_offset)
        )
    assert last_offset >= state.fetch_offset, f"append ended at {last_offset} before {state}"
    next_offset = last_offset + 1
    return state.transition(
        FetchState.FETCHING,
        fetch_offset=next_offset,
        last_fetched_epoch=last_leader_epoch,
        lag=max(0, leader_high_watermark - next_offset),
    )


def follower_high_watermark(
    leader_high_watermark: int, log_start_offset: int, log_end_offset: int
) -> int:
    """A follower's high watermark after a fetch: the leader's, clamped to the local log
    (Kafka ``UnifiedLog.updateHighWatermark``): never past what this replica holds."""
    return min(max(leader_high_watermark, log_start_offset), log_end_offset)


def on_leader_offsets(
    state: PartitionFetchState,
    request_epoch: int,
    offsets: LeaderOffsets,
    follower: FollowerLog,
    now_ms: int,
    *,
    fetch_backoff_ms: int = REPLICA_FETCH_BACKOFF_MS_DEFAULT,
) -> FetchOutcome:
    """Finish an out-of-range reset with the leader's offsets (Kafka ``handleOutOfRangeError``)."""
    error = _error(offsets.error_code)
    if error is Errors.FENCED_LEADER_EPOCH:
        return _on_partition_fenced(state, request_epoch, now_ms, fetch_backoff_ms)
    if error is not Errors.NONE:
        return _back_off(state, error, now_ms, fetch_backoff_ms)
    reset = out_of_range_reset(
        follower.log_end_offset, offsets.log_start_offset, offsets.log_end_offset
    )
    if reset.kind is OffsetResetKind.TRUNCATE_TO_LEADER_END:
        last_epoch = follower.latest_epoch_after_truncation(reset.fetch_offset)
    elif reset.kind is OffsetResetKind.TRUNCATE_FULLY_AND_START_AT_LEADER_START:
        last_epoch = None  # the log and its epoch history are emptied
    else:
        last_epoch = follower.latest_epoch
    new_state = state.transition(
        FetchState.FETCHING,
        fetch_offset=reset.fetch_offset,
        last_fetched_epoch=last_epoch,
        lag=reset.lag,
    )
    return FetchOutcome(new_state, ResetOffset(reset))


# -------------------------------------------------------------------------------- failures


def on_local_error(
    state: PartitionFetchState,
    error: LocalError,
    now_ms: int,
    *,
    fetch_backoff_ms: int = REPLICA_FETCH_BACKOFF_MS_DEFAULT,
) -> FetchOutcome:
    """The shell failed to apply an action. Corrupt fetched data is retried after a back-off
    (it may be a transient read of a log being truncated); a storage failure or anything
    unexpected removes only this partition, so the others keep replicating."""
    if error is LocalError.CORRUPT_RECORD:
        return _back_off(state, Errors.CORRUPT_MESSAGE, now_ms, fetch_backoff_ms)
    if error is LocalError.STORAGE_ERROR:
        return FetchOutcome(None, MarkFailed(FailureReason.STORAGE_ERROR))
    return FetchOutcome(None, MarkFailed(FailureReason.UNEXPECTED_ERROR))


def on_request_failed(
    state: PartitionFetchState,
    now_ms: int,
    *,
    fetch_backoff_ms: int = REPLICA_FETCH_BACKOFF_MS_DEFAULT,
) -> FetchOutcome:
    """The whole request failed (connection lost, timeout): every partition in it backs off."""
    return _back_off(state, Errors.NETWORK_EXCEPTION, now_ms, fetch_backoff_ms)


def _on_partition_fenced(
    state: PartitionFetchState, request_epoch: int, now_ms: int, backoff_ms: int
) -> FetchOutcome:
    """Kafka ``onPartitionFenced``: fenced under the epoch we still hold -> wait for new
    metadata; our epoch already moved on since the request -> just retry later."""
    if request_epoch == state.current_leader_epoch:
        return FetchOutcome(None, MarkFailed(FailureReason.FENCED_LEADER_EPOCH))
    return _back_off(state, Errors.FENCED_LEADER_EPOCH, now_ms, backoff_ms)


def _error(code: int) -> Errors:
    """The error a code names; a code this broker does not know is an unknown server error."""
    try:
        return Errors(code)
    except ValueError:
        return Errors.UNKNOWN_SERVER_ERROR


def _back_off(
    state: PartitionFetchState, error: Errors, now_ms: int, backoff_ms: int
) -> FetchOutcome:
    delayed = state.delay(now_ms, backoff_ms)
    assert delayed.delay_deadline_ms is not None
    return FetchOutcome(delayed, BackOff(delayed.delay_deadline_ms, error))
