"""The leader-epoch cache's file: ``leader-epoch-checkpoint`` under the pure cache.

``storage.leader_epoch_cache`` holds Kafka's rules as pure functions over a tuple of entries and
``LeaderEpochCache``, which keeps the tuple and writes it to a checkpoint after every change.
This module gives it its file: ``LeaderEpochFileCache`` loads the checkpoint through the same
``assign`` rule Kafka uses on load and rewrites it atomically (temp file, rename) on every change.

When it is fsynced
------------------
Truncations, ``clear`` and an ``assign`` that drops entries are fsynced at once (file and
directory). An ``assign`` that only adds an entry at the tail — every partition a broker becomes
leader of, every new epoch a follower copies — is renamed into place without fsync; the log
syncs it in ``LeaderEpochCache.flush``, which the segment store calls (``before_flush``) before
its recovery point moves up: before a flush (``flush.messages``, a roll's flush, the periodic
flush, a clean shutdown) and before a new log start moves it. A history read at startup counts
as unsynced until then (a killed process's write may be in the page cache only). Becoming
leader of 2,000 new partitions was 4,000 fsyncs, 44% of the time (py-spy); now it is none, and
a partition that never flushes never pays for it.

At load the entries at or above the log end are cut in memory only
(``LeaderEpochCache.truncate_loaded_from_end``; Kafka's ``LogLoader`` also defers that write,
``truncateFromEndAsyncFlush(nextOffset)``); the file is rewritten, with fsync, before the log
next grows or its recovery point moves (``write_pending``), unless an ``assign`` first restores
exactly what the file holds: an empty partition led again in the same epoch after a restart.
Meanwhile the file only has extra entries at or above a log end that has not moved, which any
load cuts again, so the argument below holds unchanged.

Kafka does it the other way round: since KAFKA-16541 (apache/kafka#15993, reverting part of
KAFKA-15046, #14242) ``LeaderEpochFileCache.assign`` writes with fsync and only
``truncateFromStartAsyncFlush`` / ``truncateFromEndAsyncFlush`` write later on the scheduler
(``writeIfDirExists``), stale extra entries being cut on load by ``truncateFromEnd``. Here the
truncations stay synchronous and the additions wait, because recovery rebuilds additions from
the batches (``recovery._recovered_epoch_assigner``, Kafka's ``LogSegment.recover``) but could
not tell a stale extra entry from a real one inside the log.

Why a power loss loses no acknowledged record and no follower truncates below its high watermark
----------------------------------------------------------------------------------------------
1. After a power loss the file holds the last synced history S followed by some of the entries
   added after it (each write is a whole-file rename; every write that removes entries is
   synced, so the unsynced writes only append). A torn or empty file fails to parse (an empty
   one is refused by ``load_entries``: pykraft never writes one) and the loader rebuilds the
   history from every batch (``recovery.load_log``: recovery point 0).
2. Every entry added after S starts at or above the recovery point R that survives: entries are
   added at the log end (a leader's new epoch, a follower's or recovery's first batch of an
   epoch), which is never below R, and R cannot move past an offset while an unsynced entry
   exists, since ``before_flush`` syncs first (and the recovery-point checkpoint only ever
   records a point the log reached).
3. An unclean restart re-reads every batch from the segment holding R and assigns each epoch
   above the history's latest at its first batch (``_recovered_epoch_assigner``). An entry lost
   in 1 starts, by 2, at or above R, and it was added at the first batch of its epoch, so
   if any batch of that epoch survived, recovery adds the same entry back; if none did, the
   replica holds no record of that epoch, which is the history of a replica that never wrote it.
4. So the recovered history describes exactly the recovered batches, as a synced-on-every-assign
   history would. The answers built from it (OffsetsForLeaderEpoch, the Fetch DivergingEpoch
   check, a follower's truncation offset) are the ones a fully synced broker gives for the same
   surviving batches; which batches survive a power loss did not change (segment flushes are as
   before). A follower truncates only to where its batches and the leader's diverge, never
   below records both hold, so never below its high watermark; and which replica may be elected
   after a power loss (KIP-966, ``tests/sim``'s ``CrashRule.KIP_966``) depends on its batches
   only. The replication simulation checks both invariants under that crash rule
   (``tests/sim/test_replication_sim.py``); the memory disk keeps only synced entries on a crash.
"""

from __future__ import annotations

from pathlib import Path

from pykraft.storage.atomic_file import sync_file
from pykraft.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)
from pykraft.storage.leader_epoch_cache import Entries, LeaderEpochCache, assign_epoch


def load_entries(path: Path) -> Entries:
    """Read a leader-epoch-checkpoint, folding its lines through ``assign_epoch`` as Kafka does.

    An empty file is torn, never written: pykraft always writes the version and count lines,
    and an unsynced rewrite renamed over the synced copy can come back empty after a power loss
    (file systems that do not flush a file's data before a rename over it; KAFKA-16541)."""
    try:
        if path.stat().st_size == 0:
            raise CheckpointError(path, 1, "empty file (a write torn by a power loss)")
    except FileNotFoundError:
        return ()
    entries: Entries = ()
    for line, (epoch, start_offset) in enumerate(read_leader_epoch_checkpoint(path), start=3):
        try:
            entries = assign_epoch(entries, epoch, start_offset)
        except ValueError as error:
            raise CheckpointError(path, line, str(error)) from None
    return entries


class EpochCheckpointFile:
    """The ``leader-epoch-checkpoint`` file, rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> Entries:
        return load_entries(self.path)

    def write(self, entries: Entries, *, durable: bool = True) -> None:
        pairs = ((e.epoch, e.start_offset) for e in entries)
        write_leader_epoch_checkpoint(self.path, pairs, durable=durable)

    def sync(self) -> None:
        sync_file(self.path)


class LeaderEpochFileCache(LeaderEpochCache):
    """A partition's epoch history, persisted to ``leader-epoch-checkpoint`` on every change."""

    def __init__(self, path: Path) -> None:
        """``path`` is the checkpoint file, or the partition directory that holds it."""
        self.path = path / LEADER_EPOCH_CHECKPOINT if path.is_dir() else path
        super().__init__(EpochCheckpointFile(self.path))
