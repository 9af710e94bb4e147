"""A split starting inside a segment reads from the batch the offset index points at (issue 15:
an incremental export's cost follows the new data, not the segment's size), and an index that
cannot be trusted only costs a read from byte 0, never a record."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.export.segment_reader import (
    SegmentReadError,
    SegmentSplit,
    read_segment_rows,
    start_position,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import SimpleRecord, build_batch

BATCHES, PER_BATCH = 40, 10


def _segment(tmp_path: Path) -> tuple[Path, Path]:
    """One segment of 40 batches of 10 records, an index entry about every 1 KiB."""
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig(index_interval_bytes=1024))
    for n in range(BATCHES):
        records = [SimpleRecord(key=b"k", value=b"v" * 40, timestamp=n) for _ in range(PER_BATCH)]
        log.append_as_leader(bytearray(build_batch(records)), 0, n)
    log.flush()
    log.close()
    [segment] = sorted(directory.glob("*.log"))
    return segment, segment.with_suffix(".index")


def _position(segment: Path, index: Path, start: int) -> int:
    with segment.open("rb") as file:
        return start_position(file.fileno(), index, 0, start)


def _offsets(segment: Path, start: int) -> list[int]:
    split = SegmentSplit(str(segment), "t", 0, 0, start, None)
    return [row.offset for row in read_segment_rows(split)]


def test_the_read_starts_at_the_indexed_batch_below_the_start(tmp_path: Path) -> None:
    segment, index = _segment(tmp_path)
    assert index.stat().st_size > 0
    last = BATCHES * PER_BATCH - 1
    positions = [_position(segment, index, start) for start in (0, 150, 300, last)]
    assert positions[0] == 0
    assert 0 < positions[1] < positions[2] < positions[3] < segment.stat().st_size
    for start in (0, 5, 150, 299, 300, last):
        assert _offsets(segment, start) == list(range(start, last + 1))


def test_a_preallocated_index_with_a_zero_tail_is_read_to_its_last_entry(tmp_path: Path) -> None:
    segment, index = _segment(tmp_path)
    trimmed = _position(segment, index, 350)
    with index.open("ab") as file:  # the active segment's index: zeros past its entries
        file.write(bytes(8 * 1000))
    assert _position(segment, index, 350) == trimmed > 0
    assert _offsets(segment, 350) == list(range(350, BATCHES * PER_BATCH))


@pytest.mark.parametrize("damage", ["missing", "wrong position", "offset past the batch"])
def test_an_index_that_does_not_match_the_log_means_reading_from_byte_0(
    tmp_path: Path, damage: str
) -> None:
    segment, index = _segment(tmp_path)
    if damage == "missing":
        index.unlink()
    else:
        entries = bytearray(index.read_bytes())
        if damage == "wrong position":  # every entry one byte off a batch boundary
            for slot in range(len(entries) // 8):
                position = int.from_bytes(entries[slot * 8 + 4 : slot * 8 + 8], "big")
                entries[slot * 8 + 4 : slot * 8 + 8] = (position + 1).to_bytes(4, "big")
        else:  # every entry claims a later offset than its batch holds
            for slot in range(len(entries) // 8):
                relative = int.from_bytes(entries[slot * 8 : slot * 8 + 4], "big")
                entries[slot * 8 : slot * 8 + 4] = (relative + 5).to_bytes(4, "big")
        index.write_bytes(bytes(entries))
    assert _position(segment, index, 350) == 0
    assert _offsets(segment, 350) == list(range(350, BATCHES * PER_BATCH))


def test_a_read_error_names_the_byte_in_the_segment(tmp_path: Path) -> None:
    segment, index = _segment(tmp_path)
    data = bytearray(segment.read_bytes())
    position = next(p for p, header in iter_batches(data) if header.last_offset >= 350)
    assert 0 < _position(segment, index, 350) <= position
    data[position + 61] ^= 0xFF  # a byte of the batch holding offset 350: its CRC fails
    segment.write_bytes(bytes(data))
    with pytest.raises(SegmentReadError, match=f"at byte {position}:"):
        _offsets(segment, 350)
