"""Corruption below the recovery point is caught on the read path and never served (issue 9):
a bit flipped in an old segment stops the read before the bad batch; a read starting on it
fails with CorruptRecordError; each bad batch is logged once and counted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import CorruptRecordError, iter_batches
from pykraft.storage.records import SimpleRecord, build_batch, iter_records

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=128, segment_index_bytes=4096)


def written(tmp_path: Path, batches: int = 30) -> PartitionLog:
    log = PartitionLog.open(tmp_path / "t-0", CONFIG)
    for n in range(batches):
        records = [SimpleRecord(value=b"v%03d" % n, timestamp=1000)]
        log.append_as_leader(bytearray(build_batch(records)), leader_epoch=0, now_ms=0)
    return log


def offsets(data: bytes) -> list[int]:
    return [r.offset for position, _ in iter_batches(data) for r in iter_records(data, position)]


def flip_a_bit_in_batch(log: PartitionLog, offset: int) -> None:
    """Flip one bit inside the record data of the batch holding ``offset``."""
    segment = next(s for s in reversed(log.local_log.segments) if s.base_offset <= offset)
    location = segment.translate_offset(offset)
    assert location is not None
    position = location.position + location.header.size_in_bytes - 3
    with segment.log_path.open("r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ 0x10]))


def test_a_read_stops_before_a_corrupt_batch_below_the_recovery_point(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = written(tmp_path)
    log.flush()
    assert log.recovery_point == 30 and len(log.local_log.segments) > 2
    flip_a_bit_in_batch(log, 17)
    with caplog.at_level(logging.ERROR):
        info = log.read(0, 10**8, 30)
        again = log.read(0, 10**8, 30)
    assert offsets(info.read_bytes()) == list(range(17))
    assert info.next_offset == again.next_offset == 17
    assert log.corruptions.count == 2
    assert len([r for r in caplog.records if "is corrupt and is not served" in r.message]) == 1
    with pytest.raises(CorruptRecordError, match="crc"):
        log.read(17, 10**8, 30)
    assert offsets(log.read(18, 10**8, 30).read_bytes()) == list(range(18, 30))
    log.close_handlers()


def test_a_corrupt_first_batch_of_a_later_segment_ends_the_read_at_the_segment_before(
    tmp_path: Path,
) -> None:
    log = written(tmp_path)
    log.flush()
    second = log.local_log.segments[1].base_offset
    flip_a_bit_in_batch(log, second)
    info = log.read(0, 10**8, 30)
    assert offsets(info.read_bytes()) == list(range(second))
    assert info.next_offset == second
    log.close_handlers()


def test_batches_above_the_recovery_point_are_not_rechecked(tmp_path: Path) -> None:
    # Checked on append by this process; after a crash, recovery re-checks them.
    log = written(tmp_path)
    assert log.recovery_point == 0
    log.flush(10)
    flip_a_bit_in_batch(log, 20)
    assert log.read(0, 10**8, 30).next_offset == 30
    assert log.corruptions.count == 0
    log.close_handlers()


def test_a_flipped_base_offset_outside_the_crc_is_caught_by_the_offsets(tmp_path: Path) -> None:
    log = written(tmp_path)
    log.flush()
    location = log.local_log.segments[0].translate_offset(5)
    assert location is not None
    with log.local_log.segments[0].log_path.open("r+b") as file:
        file.seek(location.position)  # baseOffset's most significant byte
        file.write(b"\x04")
    info = log.read(0, 10**8, 30)
    assert (offsets(info.read_bytes()), info.next_offset) == (list(range(5)), 5)
    with pytest.raises(CorruptRecordError, match="baseOffset"):
        log.read(5, 10**8, 30)
    log.close_handlers()
