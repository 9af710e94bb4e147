"""A follower copies a compacted leader's batches with their offsets, gaps included; a gap
wider than a segment's 32-bit relative offsets opens a new segment at the batch's first offset
(Kafka ``UnifiedLog.maybeRoll``: ``roll(Some(firstOffset))``; LogTest
``testAppendWithOutOfOrderOffsetsThrowsException``'s neighbour
``testSegmentRollAfterOffsetOverflow``-like cases) instead of failing the write."""

from __future__ import annotations

import struct
from pathlib import Path

from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from tests.storage.cleaner_support import CONFIG, open_log, rows

FAR = 3_000_000_000  # past 2**31 from offset 0 or 1


def _batch_at(offset: int, key: bytes, value: bytes) -> bytes:
    data = bytearray(build_batch([SimpleRecord(value, key, timestamp=1)]))
    struct.pack_into(">q", data, 0, offset)  # baseOffset lies outside the CRC
    return bytes(data)


def test_a_gap_past_the_relative_offsets_rolls_at_the_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "f-0")
    log.append_as_follower(_batch_at(0, b"k", b"v"), 10)
    log.append_as_follower(_batch_at(FAR, b"k2", b"w"), 10)
    assert [s.base_offset for s in log.segments] == [0, FAR]
    assert log.log_end_offset == FAR + 1
    log.close()
    reopened = PartitionLog.open(tmp_path / "f-0", CONFIG)
    assert reopened.log_end_offset == FAR + 1
    assert reopened.load_report.truncated_bytes == 0
    assert rows(reopened) == [(0, b"k", b"v"), (FAR, b"k2", b"w")]
    assert reopened.read(FAR, 1000, reopened.log_end_offset).read_bytes()
    reopened.close()


def test_one_fetch_holding_both_sides_of_the_gap(tmp_path: Path) -> None:
    log = open_log(tmp_path / "f-0")
    log.append_as_follower(_batch_at(0, b"k", b"v") + _batch_at(FAR, b"k2", b"w"), 10)
    assert [s.base_offset for s in log.segments] == [0, FAR]
    assert rows(log) == [(0, b"k", b"v"), (FAR, b"k2", b"w")]
    log.close()


def test_an_empty_log_takes_a_first_batch_far_past_its_base(tmp_path: Path) -> None:
    log = open_log(tmp_path / "f-0")
    log.append_as_follower(_batch_at(FAR, b"k", b"v"), 10)
    assert log.active_segment.base_offset == FAR
    assert log.log_end_offset == FAR + 1
    assert rows(log) == [(FAR, b"k", b"v")]
    log.close()
    reopened = PartitionLog.open(tmp_path / "f-0", CONFIG)
    assert rows(reopened) == [(FAR, b"k", b"v")]
    assert reopened.load_report.deleted_segments == ()
    reopened.close()
