"""A split starting inside a segment reads from the batch the offset index points at (issue 15:
an incremental export's cost follows the new data, not the segment's size), and an index that
cannot be trusted only costs a read from byte 0, never a record."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def _position(segment: Path, index: Path, start: int, base: int = 0) -> int:
    with segment.open("rb") as file:
        return start_position(file.fileno(), index, base, start)


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


def test_stale_entries_after_a_truncation_do_not_send_the_read_to_byte_0(tmp_path: Path) -> None:
    """Review of issue 15, finding 5: truncate_to leaves the entries past the truncation point
    in the active index; a search landing on one falls back to earlier slots, which hold
    valid entries, instead of reading the whole segment."""
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig(index_interval_bytes=100))
    try:
        for n in range(200):  # one-record batches: an entry about every other batch
            batch = build_batch([SimpleRecord(key=b"k", value=b"v" * 40, timestamp=n)])
            log.append_as_leader(bytearray(batch), 0, 0)
        log.truncate_to(20)
        for n in range(20):  # the new leader's 10-record batches: fewer entries
            batch = build_batch([SimpleRecord(key=b"k", value=b"v" * 40, timestamp=n)] * 10)
            log.append_as_leader(bytearray(batch), 1, 0)
        [segment] = sorted(directory.glob("*.log"))
        index = segment.with_suffix(".index")
        for start in (25, 60, 100, 150, 210):
            assert _position(segment, index, start) > 0, start
            assert _offsets(segment, start) == list(range(start, 220))
    finally:
        log.close()


def test_an_entry_whose_batch_fails_its_crc_is_not_used(tmp_path: Path) -> None:
    """Finding 6: the header alone can look right (a stale entry pointing into other bytes);
    the batch's CRC is checked too, and an earlier entry is used."""
    segment, index = _segment(tmp_path)
    position = _position(segment, index, 350)
    data = bytearray(segment.read_bytes())
    header = next(h for p, h in iter_batches(data) if p == position)
    assert position > 0 and header.last_offset < 350  # a batch below the start
    data[position + header.size_in_bytes - 1] ^= 0xFF  # its last record byte
    segment.write_bytes(bytes(data))
    assert 0 < _position(segment, index, 350) < position
    assert _offsets(segment, 350) == list(range(350, BATCHES * PER_BATCH))


_BATCH_SIZES = st.lists(st.integers(1, 12), min_size=1, max_size=12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(_BATCH_SIZES, st.integers(1, 60), st.one_of(st.none(), st.integers(1, 80))),
        min_size=1,
        max_size=6,
    ),
    index_interval=st.sampled_from([64, 200, 700]),
    segment_bytes=st.sampled_from([4096, 20000, 1 << 20]),
)
def test_the_indexed_read_equals_the_read_from_byte_0(
    steps: list[tuple[list[int], int, int | None]], index_interval: int, segment_bytes: int
) -> None:
    """Property (the review's fuzz as a test): for any log built by appends, truncations and
    re-appends with other batch sizes, and rolls, with the log still open (the active index
    preallocated, stale entries past a truncation), every start offset of every segment reads
    exactly the records the read from byte 0 reads from that offset on."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        config = LogConfig(index_interval_bytes=index_interval, segment_bytes=segment_bytes)
        log = PartitionLog.open(directory, config)
        try:
            for epoch, (sizes, value_size, truncate_back) in enumerate(steps):
                for n in sizes:
                    value = bytes([epoch]) * value_size
                    records = [SimpleRecord(key=b"k", value=value, timestamp=epoch)] * n
                    log.append_as_leader(bytearray(build_batch(records)), epoch, 0)
                if truncate_back is not None and log.log_end_offset > 1:
                    log.truncate_to(max(1, log.log_end_offset - truncate_back))
            for segment in sorted(directory.glob("*.log")):
                base = int(segment.stem)
                whole = _rows(segment, base, base)
                first = _first_entry(segment)
                for start in range(base, (whole[-1][0] if whole else base) + 2):
                    wanted = [row for row in whole if row[0] >= start]
                    assert _rows(segment, base, start) == wanted, (segment.name, start)
                    # Whatever stale entries the search meets, the valid first entry is
                    # reached: the read never falls back to byte 0 past it.
                    if first is not None and base + first[0] <= start:
                        index = segment.with_suffix(".index")
                        assert _position(segment, index, start, base) > 0, (segment.name, start)
        finally:
            log.close()


def _rows(segment: Path, base: int, start: int) -> list[tuple[int, bytes | None]]:
    split = SegmentSplit(str(segment), "t", 0, base, start, None)
    return [(row.offset, row.value) for row in read_segment_rows(split)]


def _first_entry(segment: Path) -> tuple[int, int] | None:
    """The index's first entry if it names a batch of the segment as it is now."""
    raw = segment.with_suffix(".index").read_bytes()[:8]
    if len(raw) < 8 or raw == bytes(8):
        return None
    relative, position = int.from_bytes(raw[:4], "big"), int.from_bytes(raw[4:], "big")
    batches = dict(iter_batches(segment.read_bytes()))
    if position not in batches or batches[position].last_offset != int(segment.stem) + relative:
        return None
    return relative, position
