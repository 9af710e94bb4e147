"""The Raft thread's wake pipe (quorum/raft_prompt.py): it wakes the poller and is closed with
the Raft instance; a new commit index reaches the followers with the next entries, or alone
after COMMIT_NOTICE_DELAY_S."""

from __future__ import annotations

import os

import pytest
from pysyncobj.poller import PollPoller

from pykraft.quorum.raft_prompt import COMMIT_NOTICE_DELAY_S, PromptAppendMixin, WakePipe


def is_open(descriptor: int) -> bool:
    try:
        os.fstat(descriptor)
    except OSError:
        return False
    return True


def test_a_notify_ends_the_poll_and_close_releases_both_ends() -> None:
    poller = PollPoller()
    pipe = WakePipe(poller)
    descriptors = (pipe._read, pipe._write)
    assert all(is_open(descriptor) for descriptor in descriptors)
    pipe.notify()
    pipe.notify()  # a second wake-up before the poll: still one poll's worth of work
    poller.poll(5.0)  # returns at once: the read end is readable
    with pytest.raises(BlockingIOError):
        os.read(pipe._read, 1)  # drained by the poll's callback
    pipe.close(poller)
    assert not any(is_open(descriptor) for descriptor in descriptors)
    reused = os.open(os.devnull, os.O_RDONLY)  # may take one of the numbers just freed
    try:
        pipe.close(poller)  # idempotent: closes nothing more
        assert is_open(reused)
    finally:
        os.close(reused)
    pipe.notify()  # after close: nothing written anywhere, no error


class Teardown:
    """pysyncobj's ``_doDestroy`` as the mixin sees it (its poller, its own teardown)."""

    def __init__(self) -> None:
        self._poller = PollPoller()
        self.torn_down = False

    def _doDestroy(self) -> None:
        self.torn_down = True


class Raft(PromptAppendMixin, Teardown):
    pass


def test_destroying_the_raft_closes_its_wake_pipe() -> None:
    raft = Raft()
    raft._init_prompt_append(0)
    raft._wake = WakePipe(raft._poller)
    descriptors = (raft._wake._read, raft._wake._write)
    raft._doDestroy()
    assert raft.torn_down
    assert not any(is_open(descriptor) for descriptor in descriptors)


class Leader:
    """What ``_send_new_entries_at`` reads of pysyncobj: a leader with two connected followers
    that have every entry; ``sends`` lists the commit index each AppendEntries carried."""

    def __init__(self) -> None:
        self._poller = PollPoller()
        self._SyncObj__otherNodes = {"f1", "f2"}
        self._SyncObj__connectedNodes = {"f1", "f2"}
        self._SyncObj__raftNextIndex = {"f1": 11, "f2": 11}
        self._SyncObj__raftCommitIndex = 10
        self.log_index = 10
        self.sends: list[int] = []

    def _isLeader(self) -> bool:
        return True

    def _SyncObj__getCurrentLogIndex(self) -> int:
        return self.log_index

    def _SyncObj__sendAppendEntries(self) -> None:
        self.sends.append(self._SyncObj__raftCommitIndex)
        for node in self._SyncObj__raftNextIndex:
            self._SyncObj__raftNextIndex[node] = self.log_index + 1

    def _sync_after_send(self) -> None:
        pass


class PromptLeader(PromptAppendMixin, Leader):
    def __init__(self) -> None:
        super().__init__()
        self._init_prompt_append(0)
        self._commit_sent = 10


def test_a_new_commit_index_goes_out_alone_after_the_notice_delay() -> None:
    leader = PromptLeader()
    leader._SyncObj__raftCommitIndex = 11  # committed; no entry waits
    leader._send_new_entries_at(100.0)
    leader._send_new_entries_at(100.0 + COMMIT_NOTICE_DELAY_S / 2)
    assert leader.sends == []
    leader._send_new_entries_at(100.0 + COMMIT_NOTICE_DELAY_S)
    leader._send_new_entries_at(100.0 + 2 * COMMIT_NOTICE_DELAY_S)
    assert leader.sends == [11]  # once


def test_a_new_commit_index_rides_on_the_next_entries() -> None:
    leader = PromptLeader()
    leader._SyncObj__raftCommitIndex = 11
    leader._send_new_entries_at(100.0)
    leader.log_index = 12  # the next write, appended before the notice was due
    leader._send_new_entries_at(100.0 + COMMIT_NOTICE_DELAY_S / 2)
    leader._send_new_entries_at(100.0 + 2 * COMMIT_NOTICE_DELAY_S)
    assert leader.sends == [11]  # the entries' AppendEntries told the followers


class Notices:
    """A wake pipe that counts its wake-ups."""

    def __init__(self) -> None:
        self.count = 0

    def notify(self) -> None:
        self.count += 1


def test_a_quorum_of_one_wakes_its_raft_thread_once_per_entry_to_commit() -> None:
    leader = PromptLeader()
    leader._SyncObj__otherNodes = set()
    leader._SyncObj__connectedNodes = set()
    leader._SyncObj__raftNextIndex = {}
    notices = Notices()
    leader._wake = notices  # type: ignore[assignment]
    leader._send_new_entries_at(100.0)
    assert notices.count == 0  # everything committed: the poll may wait its tick
    leader.log_index = 11  # a write appended in this tick; no follower will answer for it
    leader._send_new_entries_at(100.0)
    assert notices.count == 1  # the next tick syncs and commits it at once
    leader._send_new_entries_at(100.0)
    assert notices.count == 1  # not committed in that tick (an older term's): no spinning
    leader.log_index = 12
    leader._send_new_entries_at(100.0)
    assert notices.count == 2
    leader._SyncObj__raftCommitIndex = 12
    leader.log_index = 12
    leader._send_new_entries_at(100.0)
    assert notices.count == 2
    assert leader.sends == []  # nobody to send AppendEntries to
