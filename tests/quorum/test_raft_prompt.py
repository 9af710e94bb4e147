"""The Raft thread's wake pipe (quorum/raft_prompt.py): it wakes the poller and is closed with
the Raft instance."""

from __future__ import annotations

import os

import pytest
from pysyncobj.poller import PollPoller

from pykraft.quorum.raft_prompt import PromptAppendMixin, WakePipe


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
