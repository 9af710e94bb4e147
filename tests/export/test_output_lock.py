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
    acquire_lock,
    holder_alive,
    lock_holder,
    lock_text,
    locked_message,
    release_lock,
    takeover_claim,
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


class Files:
    """An output directory in memory with the three calls the lock makes (create-if-absent is
    exclusive, as on HDFS)."""

    uri = "hdfs://nn/out"

    def __init__(self, **files: bytes) -> None:
        self.files = dict(files)

    def create_new(self, name: str, data: bytes) -> bool:
        if name in self.files:
            return False
        self.files[name] = data
        return True

    def read_bytes(self, name: str) -> bytes | None:
        return self.files.get(name)

    def delete(self, name: str) -> None:
        self.files.pop(name, None)


def test_a_dead_drivers_lock_on_this_host_is_taken_over_once() -> None:
    here = socket.gethostname()
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    dead = lock_text("dead1", 0, here, pid_max + 1)
    ours, theirs = lock_text("ours1", 1, here, os.getpid()), lock_text("b2", 1, here, 1)
    said: list[str] = []
    store: Any = Files(**{LOCK_FILE: dead})
    assert acquire_lock(store, ours, said.append) is None
    assert store.files == {LOCK_FILE: ours}  # the claim is gone once the lock is ours
    assert said and "took over _pykraft_lock" in said[0]
    # A second run that found the same dead holder: the claim is free again, but the lock is
    # no longer the dead one's, so it is neither deleted nor taken.
    assert acquire_lock(store, theirs, said.append) == ours
    assert store.files == {LOCK_FILE: ours}
    # While a run holds the claim of a dead holder, another finds it taken and stops.
    racing: Any = Files(**{LOCK_FILE: dead, takeover_claim(dead): b"x"})
    assert acquire_lock(racing, theirs, said.append) == dead
    assert racing.files[LOCK_FILE] == dead


def test_a_live_or_remote_holder_keeps_its_lock() -> None:
    here = socket.gethostname()
    for holder in (lock_text("live", 0, here, os.getpid()), lock_text("far", 0, "elsewhere", 1)):
        store: Any = Files(**{LOCK_FILE: holder})
        assert acquire_lock(store, lock_text("new", 1, here, os.getpid()), print) == holder
        assert store.files == {LOCK_FILE: holder}
