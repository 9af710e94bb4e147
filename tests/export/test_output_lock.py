"""The export's output lock (review 2): what it records, what a run that finds it says, and
that a run's own failure is never hidden or left holding the name. The filesystem doubles stand
in for Hadoop's (the I/O boundary); no Spark."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pykraft.export.manifest import LOCK_FILE
from pykraft.export.output_lock import (
    holder_alive,
    lock_holder,
    lock_text,
    locked_message,
    release_lock,
)
from pykraft.export.output_store import OutputStore


def test_the_lock_names_the_host_and_process() -> None:
    held = lock_text("a1b2", 0, "worker-3", 4242)
    assert lock_holder(held) == ("worker-3", 4242)
    assert lock_holder(lock_text("a1b2", 0)) is None  # a lock of an earlier build
    assert lock_holder(b"{") is None


def test_the_message_says_whether_the_holder_is_alive() -> None:
    held = lock_text("a1b2", 0, "worker-3", 4242)
    dead = locked_message("file:/out", held, holder_alive=False)
    assert "attempt a1b2 since 1970-01-01 00:00:00 UTC on host worker-3, pid 4242" in dead
    assert "no process 4242 runs on that host: that run was killed" in dead
    assert f"delete {LOCK_FILE} and run again" in dead
    alive = locked_message("file:/out", held, holder_alive=True)
    assert "process 4242 is running on that host" in alive and "wait for it" in alive
    assert "delete" not in alive
    elsewhere = locked_message("file:/out", held)
    assert "on host worker-3, pid 4242: another export-topic run" in elsewhere
    assert f"delete {LOCK_FILE} and run again" in elsewhere


def test_holder_alive_asks_only_on_this_host() -> None:
    here = socket.gethostname()
    assert holder_alive(lock_text("a", 0, here, os.getpid())) is True
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert holder_alive(lock_text("a", 0, here, pid_max + 1)) is False  # no such process
    assert holder_alive(lock_text("a", 0, here + "-elsewhere", os.getpid())) is None
    assert holder_alive(lock_text("a", 0)) is None


class FailingReads:
    """An output whose filesystem fails (py4j raises from every call)."""

    uri = "hdfs://nn/out"

    def read_bytes(self, name: str) -> bytes | None:
        raise RuntimeError("py4j: connection to the namenode lost")

    def delete(self, name: str) -> None:
        raise AssertionError("not reached")


def test_a_failed_release_never_hides_the_runs_own_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store: Any = FailingReads()
    release_lock(store, b"ours", quiet=True)
    assert "WARN could not release hdfs://nn/out/_pykraft_lock: py4j" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="namenode"):  # after a run that succeeded: loud
        release_lock(store, b"ours")


class Stream:
    def write(self, data: bytearray) -> None:
        raise OSError("disk quota exceeded")

    def hsync(self) -> None:
        pass

    def close(self) -> None:
        pass


class FileSystem:
    def __init__(self) -> None:
        self.files: set[str] = set()

    def create(self, path: str, overwrite: bool) -> Stream:
        assert not overwrite and path not in self.files
        self.files.add(path)
        return Stream()

    def delete(self, path: str, recursive: bool) -> bool:
        self.files.discard(path)
        return True


def test_a_lock_that_could_not_be_written_is_not_left_behind() -> None:
    store = object.__new__(OutputStore)
    filesystem = FileSystem()
    hadoop = SimpleNamespace(fs=SimpleNamespace(Path=str))
    store._jvm = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(hadoop=hadoop)))
    store._fs = filesystem
    store.uri = "hdfs://nn/out"
    with pytest.raises(OSError, match="quota"):
        store.create_new(LOCK_FILE, b"lock")
    assert filesystem.files == set()  # the next run can take the lock
