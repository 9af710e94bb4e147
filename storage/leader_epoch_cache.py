"""The leader-epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

Theory of operation
-------------------
Each partition keeps an ordered history of ``EpochEntry(epoch, start_offset)``: the first offset
written in each leader epoch. Followers use it to find where their log diverged from the leader's
(``end_offset_for`` answers OffsetsForLeaderEpoch and the Fetch ``DivergingEpoch`` check);
consumers use it to validate positions after a leader change.

The rules are Kafka's ``LeaderEpochFileCache`` (storage/src/main/java/org/apache/kafka/storage/
internals/epoch/LeaderEpochFileCache.java), written here as pure functions over a tuple of entries:

* ``assign_epoch``: re-assigning the latest epoch at the same or a later offset changes nothing.
  Anything else is written, after removing from the tail every entry whose epoch is >= the new
  epoch or whose start offset is >= the new start offset (those entries describe history the
  new entry overrides, e.g. a follower that truncated and re-fetched). So a LOWER epoch is not
  ignored: it replaces the newer entries it conflicts with.
* ``end_offset_for``: see its docstring; ``truncate_from_end`` / ``truncate_from_start`` follow
  log truncation and log-start-offset movement.

Invariant: epochs and start offsets both strictly increase along the tuple.

This module is pure (no files: fetchers and the partition state import it). ``LeaderEpochCache``
is the stateful wrapper: it holds the tuple and writes it to an ``EpochCheckpoint`` after every
change; ``storage.leader_epoch_file`` supplies the ``leader-epoch-checkpoint`` file.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from typing import Protocol

import attrs

# Kafka's OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@attrs.frozen(order=True)
class EpochEntry:
    epoch: int
    start_offset: int


@attrs.frozen
class OffsetAndEpoch:
    offset: int
    leader_epoch: int


UNDEFINED = OffsetAndEpoch(UNDEFINED_EPOCH_OFFSET, UNDEFINED_EPOCH)
Entries = tuple[EpochEntry, ...]


def _epoch_key(entry: EpochEntry) -> int:
    return entry.epoch


def is_valid_history(entries: Entries) -> bool:
    """The invariant: epochs and start offsets strictly increase, none negative."""
    if any(e.epoch < 0 or e.start_offset < 0 for e in entries):
        return False
    return all(
        a.epoch < b.epoch and a.start_offset < b.start_offset
        for a, b in itertools.pairwise(entries)
    )


def assign_epoch(entries: Entries, epoch: int, start_offset: int) -> Entries:
    """Kafka's ``assign``: the history after recording that ``epoch`` starts at ``start_offset``.

    Returns ``entries`` itself when nothing changes. Raises ValueError for a negative epoch or
    offset (Kafka: IllegalArgumentException "Received invalid partition leader epoch entry").
    """
    if epoch < 0 or start_offset < 0:
        raise ValueError(
            f"invalid partition leader epoch entry (epoch={epoch}, start_offset={start_offset})"
        )
    if entries and entries[-1].epoch == epoch and start_offset >= entries[-1].start_offset:
        return entries  # Kafka's isUpdateNeeded is false: the epoch is already recorded.
    kept = len(entries)
    # maybeTruncateNonMonotonicEntries: drop conflicting entries from the tail.
    while kept and (
        entries[kept - 1].epoch >= epoch or entries[kept - 1].start_offset >= start_offset
    ):
        kept -= 1
    return (*entries[:kept], EpochEntry(epoch, start_offset))


def end_offset_for(entries: Entries, requested_epoch: int, log_end_offset: int) -> OffsetAndEpoch:
    """Kafka's ``endOffsetFor``: the end offset of the largest epoch <= ``requested_epoch``.

    * requested UNDEFINED_EPOCH -> (UNDEFINED_EPOCH_OFFSET, UNDEFINED_EPOCH);
    * requested == latest epoch -> (log_end_offset, requested): the epoch is still being written;
    * no epoch above the requested one (including an empty cache) -> undefined;
    * requested below every known epoch -> (start offset of the first epoch, requested): the
      older data is gone, so the follower should start from the leader's start;
    * otherwise -> (start offset of the next higher epoch, largest epoch <= requested).
    """
    if requested_epoch == UNDEFINED_EPOCH:
        return UNDEFINED
    if entries and entries[-1].epoch == requested_epoch:
        return OffsetAndEpoch(log_end_offset, requested_epoch)
    higher = bisect.bisect_right(entries, requested_epoch, key=_epoch_key)
    if higher == len(entries):
        return UNDEFINED
    end_offset = entries[higher].start_offset
    if higher == 0:
        return OffsetAndEpoch(end_offset, requested_epoch)
    return OffsetAndEpoch(end_offset, entries[higher - 1].epoch)


def epoch_for_offset(entries: Entries, offset: int) -> int | None:
    """Kafka's ``epochForOffset``: the epoch that wrote ``offset``; None below the first entry."""
    index = bisect.bisect_right(entries, offset, key=lambda entry: entry.start_offset)
    return entries[index - 1].epoch if index else None


def truncate_from_end(entries: Entries, end_offset: int) -> Entries:
    """Drop entries starting at or after ``end_offset`` (the log was truncated to it).

    A negative ``end_offset`` (UNDEFINED_EPOCH_OFFSET) changes nothing, as in Kafka.
    """
    if end_offset < 0:
        return entries
    kept = len(entries)
    while kept and entries[kept - 1].start_offset >= end_offset:
        kept -= 1
    return entries if kept == len(entries) else entries[:kept]


def truncate_from_start(entries: Entries, start_offset: int) -> Entries:
    """Drop history below a new log start offset, keeping the epoch that covers it.

    Entries starting at or below ``start_offset`` go, except the last of them, which moves up to
    start exactly at ``start_offset`` (so ``truncate_from_start(6)`` keeps an entry at 6).
    """
    covered = bisect.bisect_right(entries, start_offset, key=lambda entry: entry.start_offset)
    if covered == 0:
        return entries
    first = EpochEntry(entries[covered - 1].epoch, start_offset)
    return (first, *entries[covered:])


def previous_epoch(entries: Entries, epoch: int) -> int | None:
    """The largest recorded epoch below ``epoch`` (Kafka ``previousEpoch(epoch)``)."""
    entry = previous_entry(entries, epoch)
    return entry.epoch if entry else None


def previous_entry(entries: Entries, epoch: int) -> EpochEntry | None:
    index = bisect.bisect_left(entries, epoch, key=_epoch_key)
    return entries[index - 1] if index else None


def next_epoch(entries: Entries, epoch: int) -> int | None:
    """The smallest recorded epoch above ``epoch`` (Kafka ``nextEpoch``)."""
    index = bisect.bisect_right(entries, epoch, key=_epoch_key)
    return entries[index].epoch if index < len(entries) else None


def epoch_entry(entries: Entries, epoch: int) -> EpochEntry | None:
    index = bisect.bisect_left(entries, epoch, key=_epoch_key)
    if index < len(entries) and entries[index].epoch == epoch:
        return entries[index]
    return None


def epoch_entries_in_range(entries: Entries, start_offset: int, end_offset: int) -> Entries:
    """Entries covering ``[start_offset, end_offset)`` (Kafka ``epochEntriesInRange``)."""
    if start_offset >= 0:
        entries = truncate_from_start(entries, start_offset)
    return truncate_from_end(entries, end_offset)


class EpochCheckpoint(Protocol):
    """Where the history is persisted: the checkpoint file, or memory (the simulation)."""

    def read(self) -> Entries: ...

    def write(self, entries: Entries, *, durable: bool = True) -> None:
        """Replace the stored history atomically; durably unless ``durable=False``."""
        ...

    def sync(self) -> None:
        """Make the last ``write(durable=False)`` durable."""
        ...


class LeaderEpochCache:
    """A partition's epoch history, written to its checkpoint on every change (Kafka's
    ``LeaderEpochFileCache``; ``storage.leader_epoch_file`` puts the checkpoint in a file)."""

    def __init__(self, checkpoint: EpochCheckpoint) -> None:
        self.checkpoint = checkpoint
        self._entries: Entries = checkpoint.read()
        # What the checkpoint holds: ``_entries`` except after ``truncate_loaded_from_end``.
        self._written: Entries = self._entries
        # What was read may be an unsynced write of an earlier process (killed, or stopped
        # before any flush): only the page cache holds it, so the first flush syncs it too.
        self._unsynced = bool(self._entries)
        self._writes = 0  # which write ``synced`` is told about

    @property
    def entries(self) -> Entries:
        return self._entries

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def previous_epoch(self) -> int | None:
        """The epoch before the latest one (Kafka ``previousEpoch()``)."""
        latest = self.latest_entry
        return previous_epoch(self._entries, latest.epoch) if latest else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record ``epoch`` starting at ``start_offset``; True if the history changed.

        A new entry at the tail is written without fsync: the log's next flush syncs it before
        the recovery point can pass ``start_offset`` (``flush``, through the segment store's
        ``before_flush``). An assign that also drops entries (it overrides history) is synced
        at once, like a truncation, so a power loss only ever loses a suffix of new entries.
        ``storage.leader_epoch_file`` has the argument why that loses nothing.
        """
        return self._replace(assign_epoch(self._entries, epoch, start_offset), durable=False)

    def truncate_loaded_from_end(self, end_offset: int) -> None:
        """``truncate_from_end`` at load, the file rewritten only when the log next changes.

        Kafka's ``LogLoader`` does the same (``truncateFromEndAsyncFlush(nextOffset)``: the
        stale entries are cut in memory, the file later). An empty partition's only entry starts
        at its log end, so a restart cut it here and its leader's ``assign`` of the same epoch
        wrote it back: two rewrites per partition for no change (3.6 s of reopening 2,000
        partitions, bench/scale.py). Now the ``assign`` that restores what the file holds writes
        nothing. Until then the file keeps entries starting at or above ``end_offset``, which
        every load cuts again (the log end cannot have grown: ``write_pending`` runs before an
        append, and ``flush`` before the recovery point moves)."""
        self._entries = truncate_from_end(self._entries, end_offset)

    def write_pending(self) -> None:
        """Write, with fsync, a ``truncate_loaded_from_end`` still only in memory (before the
        log end moves up: an entry above it would then describe batches it does not)."""
        if self._entries != self._written:
            self._write()

    def flush(self) -> None:
        """fsync the history if an ``assign`` left it unsynced (before the recovery point moves)."""
        self.write_pending()
        if self._unsynced:
            self.checkpoint.sync()
            self._unsynced = False

    def prepare_flush(self) -> tuple[Callable[[], None], int] | None:
        """``flush`` for a flush off the loop: the write here, and the fsync to run on any thread
        (the file by name), with the token to pass ``synced`` once it ran; None: nothing to
        sync."""
        self.write_pending()
        return (self.checkpoint.sync, self._writes) if self._unsynced else None

    def synced(self, writes: int) -> None:
        """The sync ``prepare_flush`` returned ran: unless the file was written again since,
        the history is durable."""
        if writes == self._writes:
            self._unsynced = False

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> OffsetAndEpoch:
        return end_offset_for(self._entries, requested_epoch, log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        return epoch_for_offset(self._entries, offset)

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        return epoch_entry(self._entries, epoch)

    def previous_entry(self, epoch: int) -> EpochEntry | None:
        return previous_entry(self._entries, epoch)

    def next_epoch(self, epoch: int) -> int | None:
        return next_epoch(self._entries, epoch)

    def truncate_from_end(self, end_offset: int) -> None:
        self._replace(truncate_from_end(self._entries, end_offset))

    def truncate_from_start(self, start_offset: int) -> None:
        self._replace(truncate_from_start(self._entries, start_offset))

    def clear(self) -> None:
        """Forget all history and persist the empty file (Kafka ``clearAndFlush``)."""
        self._entries = ()
        self._write()

    def _replace(self, entries: Entries, *, durable: bool = True) -> bool:
        """``durable=False``: unsynced if the new history only appends to the file's."""
        if entries == self._entries:
            return False
        assert is_valid_history(entries), f"epoch history broke its invariant: {entries}"
        self._entries = entries
        if entries != self._written:  # else the file already holds it (and stays as synced)
            self._write(durable=durable or entries[:-1] != self._written)
        return True

    def _write(self, *, durable: bool = True) -> None:
        self.checkpoint.write(self._entries, durable=durable)
        self._written = self._entries
        self._unsynced = not durable
        self._writes += 1
