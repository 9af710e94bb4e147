"""Storage errors on the append path (issue 9): an ``OSError`` from the segment write or the
flush (ENOSPC, EIO) leaves the log exactly as before — log end offset, file size, indexes,
leader-epoch cache and producer state — so the producer's retry is stored exactly once.

Kafka updates producer state only after ``localLog.append`` succeeded
(``UnifiedLog.append``: ``updateProducers`` runs on the appended batches afterwards); a disk
fault is injected here at the one I/O boundary, the segment's positional write.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import segment as segment_module
from storage.log_config import LogConfig
from storage.partition_log import PartitionLog
from storage.record_batch import iter_batches, patch_partition_leader_epoch
from storage.records import SimpleRecord, build_batch, iter_records

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


@pytest.fixture
def log(tmp_path: Path) -> Iterator[PartitionLog]:
    opened = PartitionLog.open(tmp_path / "t-0", CONFIG)
    yield opened
    opened.close_handlers()


def test_the_retry_after_a_failed_write_is_not_answered_as_a_duplicate(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(segment_module, "_write_fully", FailingDisk(errno.ENOSPC, 0).write)
        with pytest.raises(OSError):
            log.append_as_leader(idempotent(b"once", 0), leader_epoch=0, now_ms=0)
    retry = log.append_as_leader(idempotent(b"once", 0), leader_epoch=0, now_ms=0)
    assert (retry.duplicate, retry.first_offset) == (False, 0)
    assert values(log) == [b"once"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize("written_bytes", [0, 30])
def test_a_failed_write_then_the_retry_stores_the_batch_exactly_once(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch, code: int, written_bytes: int
) -> None:
    log.append_as_leader(idempotent(b"first", 0), leader_epoch=0, now_ms=0)
    before = directory_state(log)
    disk = FailingDisk(code, written_bytes)
    with monkeypatch.context() as patch:
        patch.setattr(segment_module, "_write_fully", disk.write)
        with pytest.raises(OSError) as raised:
            log.append_as_leader(idempotent(b"second", 1), leader_epoch=1, now_ms=0)
    assert raised.value.errno == code and disk.failures == 1
    assert log.log_end_offset == 1
    assert log.local_log.active_segment.size == log.local_log.active_segment.log_path.stat().st_size
    assert directory_state(log) == before  # file, indexes and epoch checkpoint as they were
    assert log.leader_epoch_cache.latest_epoch == 0
    retry = log.append_as_leader(idempotent(b"second", 1), leader_epoch=1, now_ms=0)
    assert not retry.duplicate and retry.first_offset == 1
    assert values(log) == [b"first", b"second"]


def test_a_failed_flush_takes_the_written_batch_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(flush_messages=1))
    log.append_as_leader(idempotent(b"first", 0), leader_epoch=0, now_ms=0)
    size = log.local_log.active_segment.size

    def fail_fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fail_fsync)
        with pytest.raises(OSError):
            log.append_as_leader(idempotent(b"second", 1), leader_epoch=0, now_ms=0)
    assert (log.log_end_offset, log.local_log.active_segment.size) == (1, size)
    assert log.local_log.active_segment.log_path.stat().st_size == size
    assert not log.append_as_leader(idempotent(b"second", 1), leader_epoch=0, now_ms=0).duplicate
    assert values(log) == [b"first", b"second"]
    log.close_handlers()


def test_a_failed_write_of_a_plain_batch_leaves_no_trace(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(20):  # enough batches for index entries
        log.append_as_leader(plain(b"v%02d" % n), leader_epoch=0, now_ms=0)
    before = directory_state(log)
    with monkeypatch.context() as patch:
        patch.setattr(segment_module, "_write_fully", FailingDisk(errno.ENOSPC, 10).write)
        with pytest.raises(OSError):
            log.append_as_leader(plain(b"lost"), leader_epoch=0, now_ms=0)
    assert directory_state(log) == before
    assert log.log_end_offset == 20
    log.append_as_leader(plain(b"later"), leader_epoch=0, now_ms=0)
    assert values(log)[-2:] == [b"v19", b"later"]


def test_a_failed_follower_write_records_no_epoch(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader_data = plain(b"from the leader")
    with monkeypatch.context() as patch:
        patch.setattr(segment_module, "_write_fully", FailingDisk(errno.EIO, 5).write)
        with pytest.raises(OSError):
            log.append_as_follower(bytes(_stamped(leader_data, epoch=3)))
    assert (log.log_end_offset, log.leader_epoch_cache.latest_epoch) == (0, None)
    log.append_as_follower(bytes(_stamped(leader_data, epoch=3)))
    assert (log.log_end_offset, log.leader_epoch_cache.latest_epoch) == (1, 3)


def _stamped(data: bytearray, epoch: int) -> bytearray:
    patch_partition_leader_epoch(data, 0, epoch)
    return data


def test_an_index_without_room_fails_with_oserror_before_any_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a full file system a sparse, memory-mapped index would die of SIGBUS on its first
    # entry; its blocks are reserved when it is created, so ENOSPC is an OSError there.
    log = PartitionLog.open(tmp_path / "t-0", CONFIG)
    for n in range(40):
        log.append_as_leader(plain(b"v%02d" % n), leader_epoch=0, now_ms=0)  # fills a segment

    def no_room(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    end, segments = log.log_end_offset, len(log.local_log.segments)
    with monkeypatch.context() as patch:
        patch.setattr(os, "posix_fallocate", no_room)
        with pytest.raises(OSError):
            for n in range(40):  # until the roll needs a new index
                log.append_as_leader(plain(b"w%02d" % n), leader_epoch=0, now_ms=0)
                end, segments = log.log_end_offset, len(log.local_log.segments)
    assert (log.log_end_offset, len(log.local_log.segments)) == (end, segments)
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
