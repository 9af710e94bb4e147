"""Where a follower cuts its log to be a prefix of the leader's (KIP-101, KIP-279, KIP-320).

Theory of operation
-------------------
A follower's log may hold records the leader never had (it was leader once and wrote records
that never replicated, or the leader changed twice in quick succession). Before appending what
the leader sends it must cut those off, and it finds the cut by **leader epoch**: records written
in the same epoch at the same offset are the same records, so the two logs agree up to the end
of the largest epoch they share. Two protocols carry the leader's side of that comparison:

* **DivergingEpoch** (KIP-320, Fetch v12+): every fetch carries ``last_fetched_epoch``; when the
  leader's log ends that epoch earlier than the fetch offset (or does not know it), it answers
  with no records and ``DivergingEpoch(epoch, end_offset)``: the largest epoch it has that is
  <= the follower's, and where that epoch ends on the leader.
* **OffsetsForLeaderEpoch** (KIP-101, KIP-279): the follower asks for the end offset of its
  latest epoch before fetching and gets the same ``(leader_epoch, end_offset)`` pair.

Both answers go through one rule, Kafka's ``AbstractFetcherThread.getOffsetTruncationState``
(``truncation_offset`` here):

1. the leader does not know the offset (UNDEFINED_EPOCH_OFFSET: no epoch history, or the
   follower asked below every epoch it has) -> truncate to the fetch offset, which is the
   follower's high watermark while it is still truncating (the pre-KIP-101 fallback);
2. the leader gave an offset but no epoch (OffsetsForLeaderEpoch v0) -> min(leader end, LEO);
3. the follower does not have the leader's epoch (its largest epoch <= it is smaller) ->
   truncate to where *that* epoch ends locally, min(LEO), and ask again: the truncation is not
   complete (KIP-279's multi-round-trip loop; with DivergingEpoch the next fetch carries the
   follower's now-latest epoch as ``last_fetched_epoch``);
4. the follower has no epoch <= the leader's (no history) -> min(leader end, LEO);
5. otherwise both have the epoch -> min(follower end, leader end, LEO), truncation complete.

The functions are pure: they read a ``FollowerLog`` value (offsets plus the epoch history, the
shape ``storage.leader_epoch_cache`` keeps) and return a ``Truncation``; the fetcher shell
truncates the real log. Out-of-range handling (Kafka's ``fetchOffsetAndTruncate``) is here too,
as ``out_of_range_reset``: it is the other way a follower's log gets cut.
"""

from __future__ import annotations

import enum

import attrs

from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import EpochEndOffset
from pykraft.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    Entries,
    OffsetAndEpoch,
    end_offset_for,
    is_valid_history,
    truncate_from_end,
)


class TruncationError(ValueError):
    """A truncation input that cannot come from a correct leader or log."""


@attrs.frozen
class Truncation:
    """Kafka's ``OffsetTruncationState``: truncate the log to ``offset`` (a no-op if at or past
    the log end); ``truncation_completed`` is False when another round trip must follow."""

    offset: int
    truncation_completed: bool


@attrs.frozen
class FollowerLog:
    """What the truncation decisions read from the follower's local log.

    Invariant: 0 <= log_start_offset <= high_watermark <= log_end_offset, and
    ``epoch_entries`` is a valid leader-epoch history (epochs and start offsets increasing).
    """

    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    epoch_entries: Entries = ()

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.log_start_offset <= self.high_watermark <= self.log_end_offset:
            raise TruncationError(
                "follower log offsets must satisfy 0 <= log_start_offset <= high_watermark <= "
                f"log_end_offset, got {self.log_start_offset}, {self.high_watermark}, "
                f"{self.log_end_offset}"
            )
        if not is_valid_history(self.epoch_entries):
            raise TruncationError(f"invalid leader epoch history {self.epoch_entries}")

    @property
    def latest_epoch(self) -> int | None:
        """Kafka ``UnifiedLog.latestEpoch``: the latest epoch in the history, if any."""
        return self.epoch_entries[-1].epoch if self.epoch_entries else None

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch | None:
        """Kafka ``UnifiedLog.endOffsetForEpoch``: None where the cache answers undefined."""
        found = end_offset_for(self.epoch_entries, epoch, self.log_end_offset)
        return None if found.offset == UNDEFINED_EPOCH_OFFSET else found

    def latest_epoch_after_truncation(self, offset: int) -> int | None:
        """The latest epoch once the log is truncated to ``offset``: the next last_fetched_epoch."""
        entries = truncate_from_end(self.epoch_entries, offset)
        return entries[-1].epoch if entries else None


@attrs.frozen
class LeaderEpochEndOffset:
    """One partition of an OffsetsForLeaderEpoch response (Kafka's
    ``OffsetForLeaderEpochResponseData.EpochEndOffset``; named apart from the Fetch
    ``DivergingEpoch`` struct, ``protocol.fetch.EpochEndOffset``)."""

    error_code: int = Errors.NONE
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_EPOCH_OFFSET


@attrs.frozen
class LeaderEpochRequest:
    """One partition of an OffsetsForLeaderEpoch request (``OffsetForLeaderPartition``)."""

    current_leader_epoch: int
    leader_epoch: int


def truncation_offset(
    leader_epoch: int, leader_end_offset: int, follower: FollowerLog, fetch_offset: int
) -> Truncation:
    """Kafka's ``getOffsetTruncationState`` for the leader's ``(leader_epoch, end_offset)``.

    ``fetch_offset`` is the partition's fetch offset, used only when the leader does not know
    the end offset; for a partition that is still truncating it is the follower's high
    watermark (``ReplicaManager.initialFetchOffset``).
    """
    if leader_end_offset < UNDEFINED_EPOCH_OFFSET or leader_epoch < UNDEFINED_EPOCH:
        raise TruncationError(
            f"leader returned an invalid epoch end offset (epoch {leader_epoch}, "
            f"end offset {leader_end_offset})"
        )
    log_end_offset = follower.log_end_offset
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return Truncation(fetch_offset, truncation_completed=True)
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), truncation_completed=True)
    found = follower.end_offset_for_epoch(leader_epoch)
    if found is None:
        # The follower kept no epochs at or below the leader's: the leader's offset is all we
        # have (post-KIP-101, pre-KIP-279 behaviour).
        return Truncation(min(leader_end_offset, log_end_offset), truncation_completed=True)
    if found.leader_epoch != leader_epoch:
        # KIP-279: the follower never had the leader's epoch. Cut back to where its own
        # largest smaller epoch ends and ask again with that epoch.
        return Truncation(min(found.offset, log_end_offset), truncation_completed=False)
    offset = min(found.offset, leader_end_offset, log_end_offset)
    return Truncation(offset, truncation_completed=True)


def has_diverging_epoch(diverging_epoch: EpochEndOffset) -> bool:
    """Kafka ``FetchResponse.isDivergingEpoch``: the tagged field is present (epoch >= 0)."""
    return diverging_epoch.epoch >= 0


def truncation_for_diverging_epoch(
    diverging_epoch: EpochEndOffset, follower: FollowerLog, fetch_offset: int
) -> Truncation:
    """The truncation a Fetch response's ``DivergingEpoch`` calls for (KIP-320).

    Kafka's ``truncateOnFetchResponse``: the pair goes through the same rule as an
    OffsetsForLeaderEpoch answer. An incomplete truncation needs no special request: the next
    fetch sends the follower's new latest epoch as ``last_fetched_epoch`` and the leader answers
    with the next DivergingEpoch, until the follower has the leader's epoch.
    """
    if not has_diverging_epoch(diverging_epoch):
        raise TruncationError(f"fetch response carries no diverging epoch: {diverging_epoch}")
    return truncation_offset(
        diverging_epoch.epoch, diverging_epoch.end_offset, follower, fetch_offset
    )


def truncation_for_epoch_end_offset(
    response: LeaderEpochEndOffset, follower: FollowerLog, fetch_offset: int
) -> Truncation:
    """The truncation an error-free OffsetsForLeaderEpoch answer calls for (KIP-101, KIP-279)."""
    if response.error_code != Errors.NONE:
        raise TruncationError(
            f"OffsetsForLeaderEpoch answered error {response.error_code}; handle errors first"
        )
    return truncation_offset(response.leader_epoch, response.end_offset, follower, fetch_offset)


def truncation_request(
    follower: FollowerLog,
    current_leader_epoch: int,
    fetch_offset: int,
    *,
    offsets_for_leader_epoch_supported: bool = True,
) -> LeaderEpochRequest | Truncation:
    """What a TRUNCATING partition does next (Kafka ``fetchTruncatingPartitions``).

    With an epoch history it asks the leader for the end of its latest epoch; without one (an
    empty log, or data from before leader epochs) it truncates to the fetch offset, its high
    watermark (``truncateToHighWatermark``), and that truncation is complete.
    """
    latest = follower.latest_epoch
    if latest is not None and offsets_for_leader_epoch_supported:
        return LeaderEpochRequest(current_leader_epoch=current_leader_epoch, leader_epoch=latest)
    return Truncation(fetch_offset, truncation_completed=True)


class OffsetResetKind(enum.Enum):
    """How an out-of-range fetch is resolved (Kafka ``fetchOffsetAndApplyTruncateAndBuild``)."""

    # Out of range high: the leader's log ends below ours (an unclean election); truncate to it.
    TRUNCATE_TO_LEADER_END = "truncate_to_leader_end"
    # Out of range low: the leader deleted everything we have; start over at its log start.
    TRUNCATE_FULLY_AND_START_AT_LEADER_START = "truncate_fully_and_start_at_leader_start"
    # Neither (the leader grew meanwhile): keep the log and fetch from our own end again.
    FETCH_FROM_LOG_END = "fetch_from_log_end"


@attrs.frozen
class OffsetReset:
    kind: OffsetResetKind
    fetch_offset: int
    # Kafka's initial lag after the reset: leader end - fetch offset (0 when truncated to it).
    lag: int


def out_of_range_reset(
    log_end_offset: int, leader_log_start_offset: int, leader_log_end_offset: int
) -> OffsetReset:
    """Resolve OFFSET_OUT_OF_RANGE from the leader's log start and end offsets.

    Kafka's ``fetchOffsetAndTruncate``: if the leader ends below our log end, truncate to its
    end (possible divergence Kafka accepts after an unclean election); else if its start is
    above our end, drop our log and start at its start; else fetch from our end again.
    """
    if not 0 <= leader_log_start_offset <= leader_log_end_offset:
        raise TruncationError(
            f"leader offsets must satisfy 0 <= log start <= log end, got "
            f"{leader_log_start_offset}, {leader_log_end_offset}"
        )
    if leader_log_end_offset < log_end_offset:
        return OffsetReset(OffsetResetKind.TRUNCATE_TO_LEADER_END, leader_log_end_offset, 0)
    if leader_log_start_offset > log_end_offset:
        return OffsetReset(
            OffsetResetKind.TRUNCATE_FULLY_AND_START_AT_LEADER_START,
            leader_log_start_offset,
            leader_log_end_offset - leader_log_start_offset,
        )
    return OffsetReset(
        OffsetResetKind.FETCH_FROM_LOG_END, log_end_offset, leader_log_end_offset - log_end_offset
    )
