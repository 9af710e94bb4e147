"""The Raft journal's group commit (quorum/raft_journal.py) against a simulated power loss.

pysyncobj's own ``FileJournal`` is written in a temporary directory; ``DurableJournalMixin``
runs over a stand-in for the rest of ``SyncObj`` (the tick and the AppendEntries answer it
overrides); the power loss (tests/sim/journal_faults.py) keeps only what was synced. With
``controller.quorum.fsync`` on, every entry a follower acknowledged or a leader counted
survives; off (pysyncobj's old mode), acknowledged entries are lost.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from pysyncobj.journal import FileJournal

from pykraft.quorum.raft_journal import DurableJournal, DurableJournalMixin
from tests.sim.journal_faults import power_off

LEADER = "leader"


class SyncObjStandIn:
    """The part of pysyncobj's SyncObj the mixin overrides, recording what it sends."""

    def __init__(self, journal_path: Path) -> None:
        self._SyncObj__raftLog = FileJournal(str(journal_path))
        self._SyncObj__raftLeader: Any = LEADER
        self.answers: list[tuple[Any, int]] = []
        self.ticks = 0
        self.leader = False
        self._SyncObj__newAppendEntriesTime = 0.0
        # For each AppendEntries sent: was the journal still unsynced then?
        self.appends_sent_dirty: list[bool] = []

    def _isLeader(self) -> bool:
        return self.leader

    def _SyncObj__sendAppendEntries(self) -> None:
        self.appends_sent_dirty.append(self._SyncObj__raftLog.dirty)
        self._SyncObj__newAppendEntriesTime = math.inf  # the next one after the linger

    def _onTick(self, timeToWait: float = 0.0) -> None:
        self.ticks += 1

    def _SyncObj__sendNextNodeIdx(
        self, node: Any, reset: bool = False, nextNodeIdx: Any = None, success: bool = False
    ) -> None:
        assert nextNodeIdx is not None
        self.answers.append((node, nextNodeIdx))

    def _SyncObj__onBecomeLeader(self) -> None:
        log = self._SyncObj__raftLog
        log.add(b"\x00", log[-1][1] + 1, 2)


class Follower(DurableJournalMixin, SyncObjStandIn):
    def __init__(self, journal_path: Path, fsync: bool) -> None:
        self._init_durability(fsync, journal_path, images=True)
        super().__init__(journal_path)

    @property
    def log(self) -> Any:
        return self._SyncObj__raftLog

    def receive_entries(self, count: int) -> None:
        """One AppendEntries: append, then answer (pysyncobj's __onMessageReceived)."""
        for _ in range(count):
            self.log.add(b"entry %d" % (self.log[-1][1] + 1), self.log[-1][1] + 1, 1)
        self._SyncObj__sendNextNodeIdx(LEADER, nextNodeIdx=self.log[-1][1] + 1, success=True)

    def acknowledged_index(self) -> int:
        return max((index - 1 for _, index in self.answers), default=0)


def run_until_power_loss(tmp_path: Path, fsync: bool, seed: int) -> tuple[int, list[int]]:
    """Random AppendEntries and ticks, then a power loss at a random moment; returns the
    highest index acknowledged before it and the indexes found after reopening."""
    rng = random.Random(seed)
    raft_dir = tmp_path / f"raft-{fsync}-{seed}"
    raft_dir.mkdir()
    follower = Follower(raft_dir / "journal.bin", fsync)
    follower.log.add(b"\x00", 1, 0)  # pysyncobj's first no-op, written in SyncObj.__init__
    follower._onTick()
    for _ in range(rng.randrange(20, 60)):
        if rng.random() < 0.6:
            follower.receive_entries(rng.randrange(1, 8))
        else:
            follower._onTick()
    acknowledged = follower.acknowledged_index()
    power_off(raft_dir)  # the follower object is abandoned, never closed: a crash
    journal_path = raft_dir / "journal.bin"
    reopened = FileJournal(str(journal_path)) if journal_path.exists() else None
    indexes = [] if reopened is None else [reopened[i][1] for i in range(len(reopened))]
    return acknowledged, indexes


def test_with_fsync_no_acknowledged_entry_is_lost_at_a_power_loss(tmp_path: Path) -> None:
    for seed in range(30):
        acknowledged, indexes = run_until_power_loss(tmp_path, fsync=True, seed=seed)
        assert acknowledged > 0
        assert indexes == list(range(1, len(indexes) + 1))
        assert len(indexes) >= acknowledged, f"seed {seed}: acknowledged {acknowledged}"


def test_without_fsync_acknowledged_entries_are_lost_at_a_power_loss(tmp_path: Path) -> None:
    losses = 0
    for seed in range(30):
        acknowledged, indexes = run_until_power_loss(tmp_path, fsync=False, seed=seed)
        losses += len(indexes) < acknowledged
    assert losses == 30  # nothing was ever synced: every acknowledged entry is gone


def test_answers_wait_for_one_sync_that_covers_the_whole_poll_round(tmp_path: Path) -> None:
    follower = Follower(tmp_path / "journal.bin", fsync=True)
    follower.log.add(b"\x00", 1, 0)
    follower._onTick()
    journal = follower._journal
    assert isinstance(journal, DurableJournal)
    syncs = journal.sync_count
    for _ in range(5):  # five AppendEntries in one poll round
        follower.receive_entries(3)
    assert follower.answers == []  # held: nothing of them is on disk yet
    follower._onTick()
    assert journal.sync_count == syncs + 1  # one flush for all of them
    assert follower.answers == [(LEADER, 17)]  # the latest answer only: entries 2..16
    follower._onTick()
    assert journal.sync_count == syncs + 1  # nothing new: no flush


def test_an_answer_is_sent_at_once_when_the_journal_is_clean(tmp_path: Path) -> None:
    follower = Follower(tmp_path / "journal.bin", fsync=True)
    follower.log.add(b"\x00", 1, 0)
    follower._onTick()
    follower._SyncObj__sendNextNodeIdx(LEADER, nextNodeIdx=2, success=True)  # a heartbeat
    assert follower.answers == [(LEADER, 2)]


def test_a_held_answer_goes_only_to_the_node_still_leading(tmp_path: Path) -> None:
    follower = Follower(tmp_path / "journal.bin", fsync=True)
    follower.log.add(b"\x00", 1, 0)
    follower._onTick()
    follower.receive_entries(2)
    follower._SyncObj__raftLeader = "new-leader"  # a new leader's term began in the same poll
    follower._onTick()
    assert follower.answers == []


def test_becoming_leader_syncs_the_new_terms_no_op(tmp_path: Path) -> None:
    node = Follower(tmp_path / "journal.bin", fsync=True)
    node.log.add(b"\x00", 1, 0)
    node._onTick()
    journal = node._journal
    assert journal is not None
    node._SyncObj__onBecomeLeader()
    assert not journal.dirty


def test_without_fsync_pysyncobj_journal_is_left_alone(tmp_path: Path) -> None:
    node = Follower(tmp_path / "journal.bin", fsync=False)
    node.log.add(b"\x00", 1, 0)
    node._onTick()
    assert node._journal is None and isinstance(node.log, FileJournal)
    node.receive_entries(1)
    assert node.answers == [(LEADER, 3)]


def test_a_leader_sends_due_entries_before_its_sync_and_counts_them_after(tmp_path: Path) -> None:
    leader = Follower(tmp_path / "journal.bin", fsync=True)
    leader.log.add(b"\x00", 1, 0)
    leader._onTick()
    leader.leader = True
    journal = leader._journal
    assert journal is not None
    leader.log.add(b"entry 2", 2, 1)  # appended by _checkCommandsToApply
    leader._onTick()  # AppendEntries due: sent while the entry is unsynced, then the sync
    assert leader.appends_sent_dirty == [True]
    assert not journal.dirty  # before pysyncobj's commit computation (super()._onTick)
    leader.log.add(b"entry 3", 3, 1)
    leader._onTick()  # not due (the linger): synced now, sent when pysyncobj's time comes
    assert leader.appends_sent_dirty == [True]
    assert not journal.dirty
