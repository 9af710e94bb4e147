"""Commit latency: a proposal goes to the followers in the Raft tick that appends it (issue 18).

Theory of operation
-------------------
pysyncobj in batch mode (``appendEntriesUseBatch``, the mode ``raft.py`` keeps) sends
AppendEntries only every ``appendEntriesPeriod``, and its Raft thread notices a proposal only
when its poll times out (``pykraft.raft.tick.ms``). A commit on 3 controllers waited for both:
p50 5.3-6.8 ms, most of it the old 5 ms period. ``PromptAppendMixin`` removes the two waits:

* ``propose`` wakes the Raft thread through a pipe the poller watches (``WakePipe``, like
  pysyncobj's ``PipeNotifier`` — which it installs only in non-batch mode — but closed with the
  Raft instance: ``_doDestroy``);
* a tick callback, run after pysyncobj appended the tick's proposals, sends AppendEntries at once
  when some connected follower lacks entries — or, with ``controller.quorum.append.linger.ms`` >
  0, once the oldest unsent entry has waited that long (Kafka's linger: let writes accumulate);
* followers learn the commit index only from AppendEntries (a standby controller answers reads
  from what it applied): a new one rides on the next entries' AppendEntries when they come within
  ``COMMIT_NOTICE_DELAY_S`` (1 ms), else it goes out alone then (within a
  ``pykraft.raft.tick.ms`` poll). Sent at once, as before, it cost every commit two more frames
  each way, encoded and decoded on the leader right while its event loop answered the write;
  one-at-a-time writes now carry it in the next write's AppendEntries (issue 18, the commit
  trace of ``quorum/commit_trace.py``: frames per commit 8 -> 4);
* a quorum of one has no follower whose answer wakes its Raft thread: once a tick appended
  entries, the next tick starts at once and commits them (one controller: 2.96 -> 0.65 ms p50
  per write, ``_commit_alone``);
* ``appendEntriesPeriod`` is then only the heartbeat of an idle leader (``HEARTBEAT_PERIOD_S``,
  or a tenth of the election timeout if that is shorter), no longer a delay on every commit.

Batching is not lost: everything proposed while the previous AppendEntries was on the wire is
appended in one tick and goes out as one message, and the journal's group commit
(``raft_journal.py``) syncs it once, right after the send so the leader's sync overlaps the
followers' round trip. The follower side needs nothing: it appends and answers in
the poll that received the entries (after its sync, with ``controller.quorum.fsync``).

The reaches into pysyncobj's internals here (its poller, next-index map, connected nodes, log
index, commit index and ``__sendAppendEntries``, wrapped to note the commit index every
AppendEntries carries) are read-only but for the send, which is pysyncobj's own.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

from pysyncobj.monotonic import monotonic
from pysyncobj.poller import POLL_EVENT_TYPE

# An idle leader's AppendEntries (heartbeat) period; pysyncobj's default is 100 ms.
HEARTBEAT_PERIOD_S = 0.05
# How long a new commit index waits for the next entries' AppendEntries to carry it before it is
# sent on its own (then within a pysyncobj.raft.tick.ms poll): see the module docstring.
COMMIT_NOTICE_DELAY_S = 0.001


def heartbeat_period_s(election_timeout_ms: int) -> float:
    """``appendEntriesPeriod``: pysyncobj wants it under a third of the election timeout."""
    return min(HEARTBEAT_PERIOD_S, election_timeout_ms / 1000 / 10)


class WakePipe:
    """A pipe whose read end the Raft thread's poller watches; ``notify`` from any thread ends
    its poll. ``close`` (on the Raft thread) unsubscribes and closes both ends; a ``notify``
    after it does nothing — never a write to a descriptor number since reused."""

    def __init__(self, poller: Any) -> None:
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.Lock()
        poller.subscribe(self._read, self._drain, POLL_EVENT_TYPE.READ)

    def notify(self) -> None:
        with self._lock:
            if self._write < 0:
                return
            # A full pipe means a wake-up is already pending.
            with contextlib.suppress(BlockingIOError):
                os.write(self._write, b"w")

    def _drain(self, descriptor: int, event_mask: int) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 1024):
                pass

    def close(self, poller: Any) -> None:
        """Idempotent: a second call closes nothing (never a descriptor number since reused)."""
        if self._read < 0:
            return
        poller.unsubscribe(self._read)
        with self._lock:
            os.close(self._write)
            self._write = -1
        os.close(self._read)
        self._read = -1


class PromptAppendMixin:
    """Mixed into ``MetadataRaft`` ahead of ``SyncObj``; see the module docstring."""

    # pysyncobj's own attributes, set by SyncObj.__init__.
    _poller: Any
    _SyncObj__raftNextIndex: dict[Any, int]
    _SyncObj__connectedNodes: set[Any]
    _SyncObj__otherNodes: set[Any]
    _SyncObj__getCurrentLogIndex: Callable[[], int]
    _SyncObj__raftCommitIndex: int
    _isLeader: Callable[[], bool]
    # raft_journal.DurableJournalMixin's: sync the journal if it has unsynced entries.
    _sync_after_send: Callable[[], None]

    def _init_prompt_append(self, linger_ms: int) -> None:
        """Before ``SyncObj.__init__``."""
        self._linger_s = linger_ms / 1000
        # Installed on the Raft thread's first tick (the poller is not thread-safe).
        self._wake: WakePipe | None = None
        # When an entry was first seen unsent (for the linger); None when all are sent.
        self._unsent_since: float | None = None
        # The commit index the followers were last told of (by any AppendEntries).
        self._commit_sent = 0
        # When a commit index no AppendEntries carried yet goes out on its own; None: none.
        self._commit_notice_due: float | None = None
        # The last log index a quorum of one woke its Raft thread to commit (``_commit_alone``).
        self._woken_for_index = 0

    def _wake_raft_thread(self) -> None:
        """From any thread: end the Raft thread's poll now."""
        notifier = self._wake
        if notifier is not None:
            notifier.notify()

    def _doDestroy(self) -> None:
        """pysyncobj's teardown, then the wake pipe's descriptors (on the Raft thread)."""
        try:
            super()._doDestroy()  # type: ignore[misc]
        finally:
            wake, self._wake = self._wake, None
            if wake is not None:
                wake.close(self._poller)

    def _SyncObj__sendAppendEntries(self) -> None:
        """Every AppendEntries carries the commit index: it is the followers' notice."""
        commit = self._SyncObj__raftCommitIndex
        super()._SyncObj__sendAppendEntries()  # type: ignore[misc]
        self._commit_sent = max(self._commit_sent, commit)
        self._commit_notice_due = None

    def _send_new_entries(self) -> None:
        """Tick callback (on the Raft thread, after pysyncobj appended the tick's proposals)."""
        if self._wake is None:
            self._wake = WakePipe(self._poller)
        self._send_new_entries_at(monotonic())

    def _send_new_entries_at(self, now: float) -> None:
        """AppendEntries now if a connected follower lacks entries, or when a new commit index
        waited ``COMMIT_NOTICE_DELAY_S`` for entries to carry it."""
        if not self._isLeader():
            self._unsent_since = None
            self._commit_notice_due = None
            return
        if not self._SyncObj__otherNodes:
            self._commit_alone()
            return
        if self._entries_due(now):
            self._SyncObj__sendAppendEntries()
            self._unsent_since = None
            # With controller.quorum.fsync the leader's own sync overlaps the followers' round
            # trip instead of waiting for the next tick (Raft §10.2.1).
            self._sync_after_send()
            return
        if self._SyncObj__raftCommitIndex <= self._commit_sent:
            return
        if self._commit_notice_due is None:
            self._commit_notice_due = now + COMMIT_NOTICE_DELAY_S
        elif now >= self._commit_notice_due:
            self._SyncObj__sendAppendEntries()
            self._sync_after_send()

    def _commit_alone(self) -> None:
        """A quorum of one: no follower's answer wakes the Raft thread to commit what this tick
        appended, so the commit waited for the poll's timeout (``pykraft.raft.tick.ms``): 2.8 ms
        p50 per write on one controller in ``bench/quorum.py``. The next tick starts at once
        instead; it syncs the journal, then counts the leader's own log end. Once per new log
        index: an entry that tick cannot commit (an older term's) does not keep it spinning."""
        last = self._SyncObj__getCurrentLogIndex()
        if last > self._SyncObj__raftCommitIndex and last > self._woken_for_index:
            self._woken_for_index = last
            self._wake_raft_thread()

    def _entries_due(self, now: float) -> bool:
        """Whether a connected follower lacks entries that waited the linger."""
        last = self._SyncObj__getCurrentLogIndex()
        next_index = self._SyncObj__raftNextIndex
        connected = self._SyncObj__connectedNodes
        if not any(
            next_index.get(node, last + 1) <= last
            for node in self._SyncObj__otherNodes
            if node in connected
        ):
            self._unsent_since = None
            return False
        if self._unsent_since is None:
            self._unsent_since = now
        return now - self._unsent_since >= self._linger_s
