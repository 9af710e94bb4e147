"""BackgroundSerializer: pysyncobj's dump protocol, with the write off the Raft thread."""

import os
import threading
from pathlib import Path
from typing import Any

from pysyncobj import SERIALIZER_STATE

from pykraft.quorum.raft_serializer import BackgroundSerializer

DEADLINE_S = 10.0


def wait_outcome(serializer: BackgroundSerializer) -> tuple[int, Any]:
    # The writer is a thread: wait for it explicitly rather than sleeping.
    serializer.wait_idle()
    return serializer.checkSerializing()


def make(tmp_path: Path, write, prepare=lambda data: data[0]) -> BackgroundSerializer:
    return BackgroundSerializer(
        str(tmp_path / "dump.bin"), 1 << 20, prepare, write, lambda name: (None, None, None)
    )


def test_a_dump_is_written_renamed_and_reported_once(tmp_path: Path) -> None:
    serializer = make(tmp_path, lambda path, data: path.write_bytes(data))
    assert serializer.checkSerializing() == (SERIALIZER_STATE.NOT_SERIALIZING, None)
    serializer.serialize((None, b"state-1", b"prev", set()), 41)
    assert wait_outcome(serializer) == (SERIALIZER_STATE.SUCCESS, 41)
    assert (tmp_path / "dump.bin").read_bytes() == b"state-1"
    assert not (tmp_path / "dump.bin.tmp").exists()
    assert serializer.checkSerializing() == (SERIALIZER_STATE.NOT_SERIALIZING, None)


def test_the_raft_thread_is_not_blocked_while_writing(tmp_path: Path) -> None:
    release = threading.Event()

    def slow_write(path: Path, data: bytes) -> None:
        assert release.wait(DEADLINE_S)
        path.write_bytes(data)

    serializer = make(tmp_path, slow_write)
    serializer.serialize((None, b"big"), 7)
    assert serializer.checkSerializing() == (SERIALIZER_STATE.SERIALIZING, 7)
    serializer.serialize((None, b"second"), 8)  # ignored while one is running, as in pysyncobj
    release.set()
    assert wait_outcome(serializer) == (SERIALIZER_STATE.SUCCESS, 7)
    assert (tmp_path / "dump.bin").read_bytes() == b"big"


def test_a_failed_prepare_is_reported_not_raised(tmp_path: Path) -> None:
    def broken(data: Any) -> Any:
        raise ValueError("no state")

    serializer = make(tmp_path, lambda path, data: None, prepare=broken)
    serializer.serialize((None, b"x"), 9)
    assert wait_outcome(serializer) == (SERIALIZER_STATE.FAILED, 9)


def test_a_failed_write_keeps_the_previous_dump(tmp_path: Path) -> None:
    (tmp_path / "dump.bin").write_bytes(b"previous")

    def failing(path: Path, data: bytes) -> None:
        path.write_bytes(b"partial")
        raise OSError("disk full")

    serializer = make(tmp_path, failing)
    serializer.serialize((None, b"new"), 3)
    assert wait_outcome(serializer) == (SERIALIZER_STATE.FAILED, 3)
    assert (tmp_path / "dump.bin").read_bytes() == b"previous"


def test_an_installed_snapshot_waits_for_a_running_write(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    def write(path: Path, data: bytes) -> None:
        started.set()
        assert release.wait(DEADLINE_S)  # our write is in progress...
        path.write_bytes(data)

    serializer = make(tmp_path, write)
    serializer.serialize((None, b"ours-older"), 5)
    assert started.wait(DEADLINE_S)
    installed: list[bool] = []
    receiver = threading.Thread(
        target=lambda: installed.append(serializer.setTransmissionData((b"installed", True, True)))
    )
    receiver.start()  # ...when the leader's snapshot arrives complete
    release.set()
    receiver.join(DEADLINE_S)
    assert installed == [True]
    # The leader's snapshot was renamed in after ours: it is what stays.
    assert (tmp_path / "dump.bin").read_bytes() == b"installed"


def test_an_installed_snapshot_is_fsynced_before_it_is_loaded(tmp_path: Path, monkeypatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    serializer = make(tmp_path, lambda path, data: path.write_bytes(data))
    assert serializer.setTransmissionData((b"part one ", True, False)) is False
    assert synced == []  # nothing to load yet
    assert serializer.setTransmissionData((b"part two", False, True)) is True
    assert (tmp_path / "dump.bin").read_bytes() == b"part one part two"
    assert synced == [str(tmp_path / "dump.bin"), str(tmp_path)]
