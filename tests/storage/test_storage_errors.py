"""Storage errors on the append path (issue 9): an ``OSError`` from the segment write or the
flush (ENOSPC, EIO) leaves the log exactly as before — log end offset, file size, indexes,
leader-epoch cache and producer state — so the producer's retry is stored exactly once.

Kafka updates producer state only after ``localLog.append`` succeeded
(``UnifiedLog.append``: ``updateProducers`` runs on the appended batches afterwards); a disk
fault is injected here at the one I/O boundary, the segment's positional write.

Every case runs on both segment stores (``storage.segment_store``): on files the fault is
injected into the positional write, ``fsync`` or ``posix_fallocate``; in memory it is armed on
the ``MemoryDisk`` (``MemoryFaults``). ``Disk`` below hides which.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from pykraft.storage import segment as segment_module
from pykraft.storage.log_config import LogConfig
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import iter_batches, patch_partition_leader_epoch
from pykraft.storage.records import SimpleRecord, build_batch, iter_records

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=64, segment_index_bytes=4096)


def idempotent(value: bytes, sequence: int) -> bytearray:
    records = [SimpleRecord(value=value, timestamp=1000)]
    built = build_batch(records, producer_id=7, producer_epoch=0, base_sequence=sequence)
    return bytearray(built)


def plain(value: bytes) -> bytearray:
    return bytearray(build_batch([SimpleRecord(value=value, timestamp=1000)]))


def values(log: PartitionLog) -> list[bytes | None]:
    data = log.read(log.log_start_offset, 10**8, log.log_end_offset).read_bytes()
    return [r.value for position, _ in iter_batches(data) for r in iter_records(data, position)]


def directory_state(log: PartitionLog) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(log.directory.iterdir())}


class Disk(Protocol):
    """Where a test's log lives and how a fault is injected into it."""

    @property
    def write_failures(self) -> int: ...

    def open(self, config: LogConfig = CONFIG) -> PartitionLog: ...

    def failing_writes(
        self, code: int, written_bytes: int
    ) -> contextlib.AbstractContextManager[None]: ...

    def failing_flushes(self, code: int) -> contextlib.AbstractContextManager[None]: ...

    def failing_rolls(self, code: int) -> contextlib.AbstractContextManager[None]: ...

    def state(self, log: PartitionLog) -> object:
        """Everything stored: segments, indexes, epoch checkpoint, producer snapshots."""
        ...


class FailingDisk:
    """The segment write writes ``written_bytes`` of the buffer, then fails with ``errno``."""

    def __init__(self, code: int, written_bytes: int) -> None:
        self.code = code
        self.written_bytes = written_bytes
        self.failures = 0

    def write(self, fd: int, data: memoryview, position: int) -> None:
        self.failures += 1
        os.pwrite(fd, data[: self.written_bytes], position)
        raise OSError(self.code, os.strerror(self.code))


class FileDisk:
    def __init__(self, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.directory = directory
        self.monkeypatch = monkeypatch
        self.write_failures = 0

    def open(self, config: LogConfig = CONFIG) -> PartitionLog:
        return PartitionLog.open(self.directory, config)

    @contextlib.contextmanager
    def failing_writes(self, code: int, written_bytes: int) -> Iterator[None]:
        disk = FailingDisk(code, written_bytes)
        try:
            with self.monkeypatch.context() as patch:
                patch.setattr(segment_module, "_write_fully", disk.write)
                yield
        finally:
            self.write_failures += disk.failures

    @contextlib.contextmanager
    def failing_flushes(self, code: int) -> Iterator[None]:
        def fail_fsync(fd: int) -> None:
            raise OSError(code, os.strerror(code))

        with self.monkeypatch.context() as patch:
            patch.setattr(os, "fsync", fail_fsync)
            yield

    @contextlib.contextmanager
    def failing_rolls(self, code: int) -> Iterator[None]:
        # On a full file system a sparse, memory-mapped index would die of SIGBUS on its
        # first entry; its blocks are reserved when it is created, so ENOSPC is an OSError.
        def no_room(fd: int, offset: int, length: int) -> None:
            raise OSError(code, os.strerror(code))

        with self.monkeypatch.context() as patch:
            patch.setattr(os, "posix_fallocate", no_room)
            yield

    def state(self, log: PartitionLog) -> object:
        active = log.local_log.active_segment
        assert active.size == active.log_path.stat().st_size
        return directory_state(log)


class InMemoryDisk:
    # Armed per failing block: more than any case here writes, rolls or flushes inside one.
    FAULTS_PER_BLOCK = 50

    def __init__(self) -> None:
        self.disk = MemoryDisk(Path("memory/t-0"))

    def open(self, config: LogConfig = CONFIG) -> PartitionLog:
        return PartitionLog.open(self.disk, config)

    @property
    def write_failures(self) -> int:
        return self.disk.faults.fired

    @contextlib.contextmanager
    def _failing(self, operation: str, code: int) -> Iterator[None]:
        self.disk.faults.fail(operation, code, times=self.FAULTS_PER_BLOCK)
        try:
            yield
        finally:
            self.disk.faults.clear()

    def failing_writes(
        self, code: int, written_bytes: int
    ) -> contextlib.AbstractContextManager[None]:
        return self._failing("write", code)  # memory fails before writing anything

    def failing_flushes(self, code: int) -> contextlib.AbstractContextManager[None]:
        return self._failing("flush", code)

    def failing_rolls(self, code: int) -> contextlib.AbstractContextManager[None]:
        return self._failing("roll", code)

    def state(self, log: PartitionLog) -> object:
        segments = [
            (s.base_offset, bytes(s.data), tuple(s.headers), s.flushed_size)
            for s in self.disk.segments
        ]
        return segments, self.disk.epoch_entries, dict(self.disk.snapshots.data)


@pytest.fixture(params=["files", "memory"])
def disk(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Disk:
    if request.param == "files":
        return FileDisk(tmp_path / "t-0", monkeypatch)
    return InMemoryDisk()


@pytest.fixture
def log(disk: Disk) -> Iterator[PartitionLog]:
    opened = disk.open()
    yield opened
    opened.close_handlers()


def test_the_retry_after_a_failed_write_is_not_answered_as_a_duplicate(
    log: PartitionLog, disk: Disk
) -> None:
    with disk.failing_writes(errno.ENOSPC, 0), pytest.raises(OSError):
        log.append_as_leader(idempotent(b"once", 0), leader_epoch=0, now_ms=0)
    retry = log.append_as_leader(idempotent(b"once", 0), leader_epoch=0, now_ms=0)
    assert (retry.duplicate, retry.first_offset) == (False, 0)
    assert values(log) == [b"once"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize("written_bytes", [0, 30])
def test_a_failed_write_then_the_retry_stores_the_batch_exactly_once(
    log: PartitionLog, disk: Disk, code: int, written_bytes: int
) -> None:
    log.append_as_leader(idempotent(b"first", 0), leader_epoch=0, now_ms=0)
    before = disk.state(log)
    with disk.failing_writes(code, written_bytes), pytest.raises(OSError) as raised:
        log.append_as_leader(idempotent(b"second", 1), leader_epoch=1, now_ms=0)
    assert raised.value.errno == code and disk.write_failures == 1
    assert log.log_end_offset == 1
    assert disk.state(log) == before  # file, indexes and epoch checkpoint as they were
    assert log.leader_epoch_cache.latest_epoch == 0
    retry = log.append_as_leader(idempotent(b"second", 1), leader_epoch=1, now_ms=0)
    assert not retry.duplicate and retry.first_offset == 1
    assert values(log) == [b"first", b"second"]


def test_a_failed_flush_takes_the_written_batch_back(disk: Disk) -> None:
    log = disk.open(LogConfig(flush_messages=1))
    log.append_as_leader(idempotent(b"first", 0), leader_epoch=0, now_ms=0)
    size = log.active_segment.size
    before = disk.state(log)
    with disk.failing_flushes(errno.EIO), pytest.raises(OSError):
        log.append_as_leader(idempotent(b"second", 1), leader_epoch=0, now_ms=0)
    assert (log.log_end_offset, log.active_segment.size) == (1, size)
    assert disk.state(log) == before
    assert not log.append_as_leader(idempotent(b"second", 1), leader_epoch=0, now_ms=0).duplicate
    assert values(log) == [b"first", b"second"]
    log.close_handlers()


def test_a_failed_write_of_a_plain_batch_leaves_no_trace(log: PartitionLog, disk: Disk) -> None:
    for n in range(20):  # enough batches for index entries
        log.append_as_leader(plain(b"v%02d" % n), leader_epoch=0, now_ms=0)
    before = disk.state(log)
    with disk.failing_writes(errno.ENOSPC, 10), pytest.raises(OSError):
        log.append_as_leader(plain(b"lost"), leader_epoch=0, now_ms=0)
    assert disk.state(log) == before
    assert log.log_end_offset == 20
    log.append_as_leader(plain(b"later"), leader_epoch=0, now_ms=0)
    assert values(log)[-2:] == [b"v19", b"later"]


def test_a_failed_follower_write_records_no_epoch(log: PartitionLog, disk: Disk) -> None:
    leader_data = plain(b"from the leader")
    with disk.failing_writes(errno.EIO, 5), pytest.raises(OSError):
        log.append_as_follower(bytes(_stamped(leader_data, epoch=3)))
    assert (log.log_end_offset, log.leader_epoch_cache.latest_epoch) == (0, None)
    log.append_as_follower(bytes(_stamped(leader_data, epoch=3)))
    assert (log.log_end_offset, log.leader_epoch_cache.latest_epoch) == (1, 3)


def _stamped(data: bytearray, epoch: int) -> bytearray:
    patch_partition_leader_epoch(data, 0, epoch)
    return data


def test_a_failed_roll_fails_with_oserror_before_any_write(disk: Disk) -> None:
    # Files: the new segment's index files have no room (ENOSPC from posix_fallocate).
    log = disk.open()
    for n in range(40):
        log.append_as_leader(plain(b"v%02d" % n), leader_epoch=0, now_ms=0)  # fills a segment
    end, segments = log.log_end_offset, len(log.segments)
    with disk.failing_rolls(errno.ENOSPC), pytest.raises(OSError):
        for n in range(40):  # until the roll needs a new segment
            log.append_as_leader(plain(b"w%02d" % n), leader_epoch=0, now_ms=0)
            end, segments = log.log_end_offset, len(log.segments)
    assert (log.log_end_offset, len(log.segments)) == (end, segments)
    if isinstance(disk, FileDisk):
        assert len(list(log.directory.glob("*.log"))) == segments  # the failed roll left nothing
    log.append_as_leader(plain(b"after"), leader_epoch=0, now_ms=0)
    assert values(log)[-1] == b"after"
    log.close_handlers()


def test_a_log_whose_files_were_released_fails_with_ebadf_and_touches_no_other_file(
    tmp_path: Path,
) -> None:
    # A log dir taken offline releases its logs' files while others may still hold the log:
    # the freed descriptor number must not lead a late write into whatever reuses it.
    log = PartitionLog.open(tmp_path / "t-0", CONFIG)
    log.append_as_leader(plain(b"kept"), leader_epoch=0, now_ms=0)
    log.close_handlers()
    bystander = tmp_path / "bystander"
    fd = os.open(bystander, os.O_RDWR | os.O_CREAT)  # likely gets the freed number
    try:
        with pytest.raises(OSError) as raised:
            log.append_as_leader(plain(b"late"), leader_epoch=0, now_ms=0)
        assert raised.value.errno == errno.EBADF
        assert bystander.read_bytes() == b""
    finally:
        os.close(fd)


def test_a_released_in_memory_log_fails_with_ebadf() -> None:
    log = InMemoryDisk().open()
    log.append_as_leader(plain(b"kept"), leader_epoch=0, now_ms=0)
    log.close_handlers()
    with pytest.raises(OSError) as raised:
        log.append_as_leader(plain(b"late"), leader_epoch=0, now_ms=0)
    assert raised.value.errno == errno.EBADF
