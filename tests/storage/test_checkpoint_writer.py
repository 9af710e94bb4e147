"""The checkpoint writer (storage/checkpoint_writer.py): the periodic checkpoints are written on
its thread, a file's queued write gives way to a newer one, a file never goes back to older
offsets, a failure reaches the event loop's side, and the log manager's checkpoints use it."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pykraft.storage.checkpoint_writer import CheckpointWriter
from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
)
from tests.storage.test_log_manager import ORDERS_0, append, open_manager

WAIT_S = 10.0


class Loop:
    """What the writer hands to ``call_soon``, run when the test says (the event loop's turn)."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.callbacks.append(callback)

    def run(self) -> None:
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()


Errors = list[tuple[str, OSError]]


def writer(loop: Loop, errors: Errors) -> CheckpointWriter[str]:
    return CheckpointWriter(loop.call_soon, lambda key, error: errors.append((key, error)))


def test_a_submitted_write_runs_on_the_worker_and_a_queued_one_gives_way_to_a_newer() -> None:
    loop, errors = Loop(), Errors()
    checkpoints = writer(loop, errors)
    written: list[tuple[str, int, str]] = []
    started, release = threading.Event(), threading.Event()

    def write(key: str, value: int, block: bool = False) -> Callable[[], None]:
        def run() -> None:
            if block:
                started.set()
                assert release.wait(WAIT_S)
            written.append((key, value, threading.current_thread().name))

        return run

    checkpoints.submit("hw", write("hw", 1, block=True))
    assert started.wait(WAIT_S)  # the worker is inside the first write; submit returned
    for value in (2, 3, 4):
        checkpoints.submit("hw", write("hw", value))
    checkpoints.submit("lso", write("lso", 1))
    release.set()
    checkpoints.close()  # writes what is queued, then stops
    assert written == [
        ("hw", 1, "checkpoint-writer"),
        ("hw", 4, "checkpoint-writer"),
        ("lso", 1, "checkpoint-writer"),
    ]
    checkpoints.submit("hw", write("hw", 5))  # closed: on the caller
    assert written[-1] == ("hw", 5, threading.current_thread().name)
    assert errors == [] and loop.callbacks == []


def test_a_file_never_goes_back_to_older_offsets() -> None:
    """``write_now`` (a shutdown's final checkpoint) against queued and running writes."""
    loop, errors = Loop(), Errors()
    checkpoints = writer(loop, errors)
    written: list[int] = []
    started, release = threading.Event(), threading.Event()

    def first() -> None:
        started.set()
        assert release.wait(WAIT_S)
        written.append(1)

    checkpoints.submit("hw", first)
    assert started.wait(WAIT_S)
    checkpoints.submit("hw", lambda: written.append(2))  # queued behind the running write
    now = threading.Thread(target=checkpoints.write_now, args=("hw", lambda: written.append(3)))
    now.start()  # drops the queued write and waits for the running one
    now.join(0.2)
    assert now.is_alive() and written == []
    release.set()
    now.join(WAIT_S)
    checkpoints.close()
    assert written == [1, 3]
    # Interleaved from one thread, as the loop does: every file's writes stay in order.
    values: list[int] = []
    checkpoints = writer(loop, errors)
    for value in range(1, 400):
        record = lambda value=value: values.append(value)  # noqa: E731
        if value % 7 == 0:
            checkpoints.write_now("hw", record)
        else:
            checkpoints.submit("hw", record)
    checkpoints.close()
    assert values == sorted(values) and values[-1] == 399
    assert errors == []


def test_a_failed_write_is_reported_on_the_loop_and_later_writes_go_on() -> None:
    loop, errors = Loop(), Errors()
    checkpoints = writer(loop, errors)
    done = threading.Event()

    def fail() -> None:
        raise OSError(5, "Input/output error")

    checkpoints.submit("hw", fail)
    checkpoints.submit("lso", done.set)
    assert done.wait(WAIT_S)
    checkpoints.close()
    assert errors == []  # not on the worker thread: on the loop's next turn
    loop.run()
    assert [(key, error.errno) for key, error in errors] == [("hw", 5)]
    with pytest.raises(OSError):
        checkpoints.write_now("hw", fail)  # on the caller: the caller's error


def test_a_write_failing_while_closing_is_returned_not_posted_and_discard_drops_queued() -> None:
    """Shutdown closes the writer on its own thread: a failure posted to the loop then would
    race it. A dir gone offline has its queued writes dropped."""
    loop = Loop()
    errors: list[tuple[tuple[str, str], OSError]] = []
    checkpoints = CheckpointWriter[tuple[str, str]](
        loop.call_soon, lambda key, error: errors.append((key, error))
    )
    started, release = threading.Event(), threading.Event()
    written: list[str] = []

    def fail_later() -> None:
        started.set()
        assert release.wait(WAIT_S)
        raise OSError(28, "No space left on device")

    checkpoints.submit(("d1", "hw"), fail_later)
    assert started.wait(WAIT_S)
    checkpoints.submit(("d1", "lso"), lambda: written.append("d1 lso"))
    checkpoints.submit(("d2", "hw"), lambda: written.append("d2 hw"))
    checkpoints.discard(lambda key: key[0] == "d1")
    closed: list[list[tuple[tuple[str, str], OSError]]] = []
    closing = threading.Thread(target=lambda: closed.append(checkpoints.close()))
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # waits for the write under way
    release.set()
    closing.join(WAIT_S)
    assert [(key, error.errno) for key, error in closed[0]] == [(("d1", "hw"), 28)]
    assert written == ["d2 hw"] and loop.callbacks == [] and errors == []


def test_shutdown_writes_the_final_checkpoints_after_what_was_queued(tmp_path: Path) -> None:
    manager = open_manager([tmp_path])
    manager.sync_off_loop(Loop().call_soon)
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 10)
    for high_watermark in (3, 5, 8):
        log.update_high_watermark(high_watermark)
        manager.checkpoint_high_watermarks(background=True)
    log.update_high_watermark(10)
    manager.shutdown()
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT) == {ORDERS_0: 10}


def test_the_log_manager_writes_its_periodic_checkpoints_on_the_writer(tmp_path: Path) -> None:
    manager = open_manager([tmp_path])
    loop = Loop()
    checkpoints = manager.sync_off_loop(loop.call_soon)
    log = manager.get_or_create_log(ORDERS_0, now_ms=0)
    append(log, 10)
    log.update_high_watermark(7)
    manager.checkpoint_high_watermarks(background=True)
    checkpoints.close()
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT) == {ORDERS_0: 7}

    # A dir whose checkpoint cannot be written goes offline, on the loop's side.
    checkpoints = manager.sync_off_loop(loop.call_soon)
    shutil.rmtree(tmp_path)  # the disk is gone
    manager.checkpoint_log_start_offsets(background=True)
    deadline = time.monotonic() + WAIT_S
    while not loop.callbacks:  # posted by the worker
        assert time.monotonic() < deadline, "the failure was not posted"
        time.sleep(0.01)
    assert manager.offline_dirs == {}
    loop.run()
    assert list(manager.offline_dirs) == [tmp_path]
    assert LOG_START_OFFSET_CHECKPOINT in manager.offline_dirs[tmp_path]
