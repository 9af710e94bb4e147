"""Durability of the Raft journal: an entry counts towards commit only once it is fsynced.

Theory of operation
-------------------
pysyncobj writes its journal (``journal.bin``) through ``mmap`` and never syncs it, so a power
loss of a majority of controllers could lose committed metadata. Kafka's KRaft flushes its
metadata log before the leader advances the high watermark and before a follower's fetch
reports the new end offset (``KafkaRaftClient``: ``flushLeaderLog`` before
``updateLocalState``; ``appendAsFollower`` then ``flush``). ``controller.quorum.fsync``
(``ControllerConfig.fsync``, default true) does the same here, with group commit:

* ``DurableJournal`` wraps pysyncobj's ``FileJournal`` and marks itself dirty on every change
  (``add``, ``clear``, truncation). ``sync()`` msyncs the mapping (``mmap.flush``: Linux
  ``msync(MS_SYNC)``, a data sync of the file) only when dirty: one flush covers every entry
  appended since the last one.
* ``DurableJournalMixin`` (mixed into ``MetadataRaft``) syncs at the start of every Raft tick,
  before pysyncobj computes the commit index, so the leader counts its own log end only up to
  what is on disk. A leader whose AppendEntries are due sends them just before that sync, so
  its sync overlaps the followers' (Raft §10.2.1). It also syncs right after becoming leader
  (a one-node quorum commits the leader's no-op in the same tick).
* A follower's AppendEntries answer (``next_node_idx`` with success: its match index) is held
  while the journal is dirty and sent after the sync at the start of the next tick; every
  answer of one poll round waits for the same sync. An answer is sent only to the node that
  is still this follower's leader (pysyncobj's answers carry no term).
* ``currentTerm``/``votedFor`` (``journal.bin.meta``) are fsynced (file, then directory) when
  they change: a vote must survive a power loss too (Raft §5.1).

``controller.quorum.fsync=false`` keeps pysyncobj's old behaviour (tests that want speed).

``DurableImages`` is the fault-injection hook (``pykraft.quorum.durable.images=true``, tests
only): after every sync it copies the synced file to ``<name>.durable`` (atomically). The power
loss of ``tests/sim/journal_faults.power_off`` puts those images back and drops everything
else.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pysyncobj.monotonic import monotonic

DURABLE_SUFFIX = ".durable"


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by path."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class DurableImages:
    """Test hook: keeps, next to each synced file, a copy of exactly what was synced."""

    def record(self, path: Path) -> None:
        image = path.with_name(path.name + DURABLE_SUFFIX)
        temporary = image.with_name(image.name + ".tmp")
        temporary.write_bytes(path.read_bytes())
        os.replace(temporary, image)


class DurableJournal:
    """pysyncobj's ``Journal`` interface over its ``FileJournal``, plus ``sync()``."""

    def __init__(self, inner: Any, path: Path, images: DurableImages | None = None) -> None:
        self._inner = inner
        self._path = path
        self._meta_path = path.with_name(path.name + ".meta")
        self._images = images
        # Invariant: False only when every byte of the journal is on disk. Starts True: the
        # file may be new, or hold entries a previous run never synced.
        self.dirty = True
        self._directory_synced = False
        self.sync_count = 0

    def sync(self) -> bool:
        """Flush the journal if anything changed since the last flush; True if it did."""
        if not self.dirty:
            return False
        self._inner.flush()
        if not self._directory_synced:
            fsync_path(self._path.parent)  # the journal file's own directory entry
            self._directory_synced = True
        self.dirty = False
        self.sync_count += 1
        if self._images is not None:
            self._images.record(self._path)
        return True

    # ---- pysyncobj's Journal interface ----

    def add(self, command: Any, idx: int, term: int) -> None:
        self._inner.add(command, idx, term)
        self.dirty = True

    def clear(self) -> None:
        self._inner.clear()
        self.dirty = True

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        self._inner.deleteEntriesFrom(entryFrom)
        self.dirty = True

    def deleteEntriesTo(self, entryTo: int) -> None:
        self._inner.deleteEntriesTo(entryTo)
        self.dirty = True

    def __getitem__(self, item: Any) -> Any:
        return self._inner[item]

    def __len__(self) -> int:
        return len(self._inner)

    def _destroy(self) -> None:
        self._inner._destroy()

    def flush(self) -> None:
        self._inner.flush()

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        self._inner.setRaftCommitIndex(raftCommitIndex)

    def getRaftCommitIndex(self) -> int:
        return int(self._inner.getRaftCommitIndex())

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        self._inner.setCurrentTerm(term, votedForNodeId)
        fsync_path(self._meta_path)
        fsync_path(self._meta_path.parent)
        if self._images is not None:
            self._images.record(self._meta_path)

    def getCurrentTerm(self) -> int:
        return int(self._inner.getCurrentTerm())

    def getVotedForNodeId(self) -> Any:
        return self._inner.getVotedForNodeId()

    def onOneSecondTimer(self) -> None:
        self._inner.onOneSecondTimer()


class HeldAnswers:
    """A follower's AppendEntries answers waiting for the journal's next sync (group commit)."""

    def __init__(self) -> None:
        # node -> the latest answer's arguments (a later answer supersedes an earlier one).
        self._held: dict[Any, tuple[Any, ...]] = {}

    def hold(self, node: Any, arguments: tuple[Any, ...]) -> None:
        self._held.pop(node, None)
        self._held[node] = arguments

    def release(self, leader: Any, send: Callable[..., None]) -> int:
        """Send the held answer to ``leader`` (answers to other nodes are dropped)."""
        held, self._held = self._held, {}
        sent = 0
        for node, arguments in held.items():
            if node == leader:
                send(node, *arguments)
                sent += 1
        return sent

    def __len__(self) -> int:
        return len(self._held)


class DurableJournalMixin:
    """Mixed into ``MetadataRaft`` ahead of ``SyncObj``: the group commit of the docstring.

    The reaches into pysyncobj's internals (its journal, its leader, the time its next
    AppendEntries is due, three of its private methods) are all here; each override calls
    pysyncobj's own method.
    """

    _journal: DurableJournal | None = None
    # pysyncobj's own attributes, set by SyncObj.__init__.
    _SyncObj__raftLog: Any
    _SyncObj__raftLeader: Any
    _SyncObj__newAppendEntriesTime: float
    _isLeader: Callable[[], bool]
    _SyncObj__sendAppendEntries: Callable[[], None]

    def _init_durability(self, fsync: bool, journal_path: Path, images: bool) -> None:
        """Before ``SyncObj.__init__``; the wrapper is installed on the Raft thread's first tick
        (pysyncobj creates its journal in ``__init__`` and starts ticking right away)."""
        self._fsync = fsync
        self._journal_path = journal_path
        self._images = DurableImages() if images else None
        self._held_answers = HeldAnswers()

    def _onTick(self, timeToWait: float = 0.0) -> None:
        journal = self._journal
        if journal is None and self._fsync:
            journal = DurableJournal(self._SyncObj__raftLog, self._journal_path, self._images)
            self._SyncObj__raftLog = self._journal = journal
        if journal is not None:
            if journal.dirty and self._isLeader() and monotonic() > self._append_entries_due():
                # Raft §10.2.1: the leader may write its log in parallel with replicating it.
                # Due entries go out first, then the sync; pysyncobj's commit computation that
                # follows in this tick counts the leader only after it.
                self._SyncObj__sendAppendEntries()
            self._sync_journal(journal)
        super()._onTick(timeToWait)  # type: ignore[misc]

    def _append_entries_due(self) -> float:
        """When pysyncobj sends its next AppendEntries (controller.quorum.append.linger.ms
        after the last): sending earlier would change its batching."""
        return float(self._SyncObj__newAppendEntriesTime)

    def _sync_after_send(self) -> None:
        """After AppendEntries went out (``raft_prompt.py``): sync what they carried."""
        journal = self._journal
        if journal is not None and journal.dirty:
            self._sync_journal(journal)

    def _sync_journal(self, journal: DurableJournal) -> None:
        journal.sync()
        if len(self._held_answers):
            self._held_answers.release(self._SyncObj__raftLeader, self._send_next_node_idx)

    def _send_next_node_idx(self, node: Any, *arguments: Any) -> None:
        super()._SyncObj__sendNextNodeIdx(node, *arguments)  # type: ignore[misc]

    def _SyncObj__sendNextNodeIdx(
        self,
        node: Any,
        reset: bool = False,
        nextNodeIdx: int | None = None,
        success: bool = False,
    ) -> None:
        journal = self._journal
        if success and journal is not None and journal.dirty:
            self._held_answers.hold(node, (reset, nextNodeIdx, success))
            return
        self._send_next_node_idx(node, reset, nextNodeIdx, success)

    def _SyncObj__onBecomeLeader(self) -> None:
        super()._SyncObj__onBecomeLeader()  # type: ignore[misc]
        if self._journal is not None:
            self._sync_journal(self._journal)
