"""LogSegment: append, index maintenance, reads in whole batches, truncation, recovery, roll
decisions (Kafka's LogSegmentTest behaviour)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.storage.index import TimestampOffset
from pykraft.storage.log_config import LogConfig
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.segment import (
    LogSegment,
    parse_base_offset,
    segment_file_name,
)
from pykraft.storage.segment_store import AppendedBatch, should_roll

CONFIG = LogConfig(index_interval_bytes=100, segment_index_bytes=1024)


def make_batch(base: int, count: int = 1, timestamp: int = 1000, value_size: int = 20) -> bytes:
    records = [
        SimpleRecord(value=bytes([65 + i % 26]) * value_size, timestamp=timestamp + i)
        for i in range(count)
    ]
    return build_batch(records, base_offset=base)


def append(segment: LogSegment, data: bytes) -> None:
    batches = [
        AppendedBatch(position, header.size_in_bytes, header.last_offset, header.max_timestamp)
        for position, header in iter_batches(data)
    ]
    segment.append(data, batches)


def fill(segment: LogSegment, first: int, batches: int, per_batch: int = 2) -> list[bytes]:
    """Append ``batches`` batches of ``per_batch`` records from offset ``first``."""
    written = []
    for number in range(batches):
        data = make_batch(first + number * per_batch, per_batch, timestamp=1000 + number)
        append(segment, data)
        written.append(data)
    return written


def test_file_names_have_twenty_digits() -> None:
    assert segment_file_name(1034, ".log") == "00000000000000001034.log"
    assert parse_base_offset("00000000000000001034.log", ".log") == 1034
    assert parse_base_offset("1034.log", ".log") is None
    assert parse_base_offset("0000000000000000103x.log", ".log") is None
    assert parse_base_offset("00000000000000001034.index", ".log") is None


def test_append_then_read_everything(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    written = fill(segment, 0, 10)
    result = segment.read(0, 10_000, segment.size, min_one_batch=False)
    assert result is not None
    assert result.slice.read_bytes() == b"".join(written)
    assert result.next_offset == 20
    assert segment.read_next_offset() == 20


def test_index_gets_an_entry_after_each_interval(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    written = fill(segment, 0, 10)
    size = len(written[0])  # every batch has the same size
    # Kafka: an entry for the batch that follows more than index.interval.bytes of log.
    per_entry = CONFIG.index_interval_bytes // size + 1
    assert segment.offset_index.entries == (10 - 1) // per_entry
    first = segment.offset_index.lookup(1000)
    assert first.position % size == 0


def test_translate_offset_scans_from_the_floor_entry(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 1034, CONFIG, now_ms=0)
    written = fill(segment, 1034, 10)
    location = segment.translate_offset(1041)
    assert location is not None
    assert location.header.base_offset == 1040  # batch 1040-1041 holds 1041
    assert location.position == 3 * len(written[0])
    assert segment.translate_offset(1054) is None


def test_read_mid_batch_starts_at_the_batch(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    written = fill(segment, 0, 3)
    result = segment.read(3, 10_000, segment.size, min_one_batch=True)
    assert result is not None
    assert result.slice.position == len(written[0])
    assert result.slice.read_bytes() == written[1] + written[2]


def test_read_respects_max_bytes_in_whole_batches(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    written = fill(segment, 0, 10)
    size = len(written[0])
    result = segment.read(0, size * 3 + size // 2, segment.size, min_one_batch=False)
    assert result is not None
    assert result.slice.length == size * 3
    assert result.next_offset == 6


def test_min_one_batch_returns_a_batch_larger_than_max_bytes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    written = fill(segment, 0, 2)
    size = len(written[0])
    with_min = segment.read(0, 10, segment.size, min_one_batch=True)
    without = segment.read(0, 10, segment.size, min_one_batch=False)
    assert with_min is not None and without is not None
    assert with_min.slice.length == size
    assert without.slice.length == 0


def test_read_stops_at_max_position(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    written = fill(segment, 0, 4)
    size = len(written[0])
    result = segment.read(0, 10_000, max_position=2 * size, min_one_batch=True)
    assert result is not None
    assert result.slice.length == 2 * size
    nothing = segment.read(4, 10_000, max_position=2 * size, min_one_batch=True)
    assert nothing is not None and nothing.slice.length == 0


def test_truncate_removes_the_whole_straddling_batch(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    written = fill(segment, 0, 10)
    removed = segment.truncate_to(7)  # batch 6-7 holds 7
    assert removed == 7 * len(written[0])
    assert segment.read_next_offset() == 6
    assert segment.offset_index.last_offset < 6
    assert segment.time_index.last_entry.offset < 6
    # Batch 4-5 (the third, timestamps 1002 and 1003) is now the last one.
    assert segment.max_timestamp_so_far == TimestampOffset(1003, 5)


def test_recover_rebuilds_identical_indexes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    fill(segment, 0, 30)
    segment.on_become_inactive()
    offset_index = segment.offset_index_path.read_bytes()
    time_index = segment.time_index_path.read_bytes()
    seen: list[int] = []
    result = segment.recover(lambda header: seen.append(header.base_offset))
    assert result.truncated_bytes == 0
    assert result.next_offset == 60
    assert seen == list(range(0, 60, 2))
    assert segment.offset_index_path.read_bytes() == offset_index
    assert segment.time_index_path.read_bytes() == time_index


def test_recover_cuts_a_torn_tail(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    written = fill(segment, 0, 5)
    segment.close_handler()
    with segment.log_path.open("r+b") as file:
        file.truncate(4 * len(written[0]) + 30)
    reopened = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    result = reopened.recover(lambda header: None)
    assert result.truncated_bytes == 30
    assert result.next_offset == 8
    assert reopened.size == 4 * len(written[0])


def test_recover_rejects_a_batch_whose_offsets_go_back(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    append(segment, make_batch(0, 4))
    append(segment, make_batch(2, 2))  # overlaps offsets 2-3
    result = segment.recover(lambda header: None)
    assert result.next_offset == 4
    assert result.error is not None and "baseOffset" in result.error


def test_recover_accepts_the_gaps_compaction_leaves(tmp_path: Path) -> None:
    """Kafka's LogSegment.recover checks no contiguity: the log cleaner removes batches."""
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    append(segment, make_batch(0, 2))
    append(segment, make_batch(5, 2))  # a gap: offsets 2-4 were cleaned away
    result = segment.recover(lambda header: None)
    assert (result.next_offset, result.error, result.truncated_bytes) == (7, None, 0)


def test_find_offset_by_timestamp_decodes_the_batch(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    append(segment, make_batch(0, 5, timestamp=100))  # timestamps 100..104
    append(segment, make_batch(5, 5, timestamp=200))
    assert segment.find_offset_by_timestamp(102, 0) == (2, 102)
    assert segment.find_offset_by_timestamp(150, 0) == (5, 200)
    assert segment.find_offset_by_timestamp(102, 4) == (4, 104)
    assert segment.find_offset_by_timestamp(205, 0) is None


def test_becoming_inactive_records_the_max_timestamp_and_trims(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    append(segment, make_batch(0, 3, timestamp=500))
    segment.on_become_inactive()
    assert segment.time_index.last_entry == TimestampOffset(502, 2)
    assert segment.offset_index_path.stat().st_size == 0
    assert segment.time_index_path.stat().st_size == 12


def test_largest_timestamp_falls_back_to_the_file_time(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    mtime_ms = int(segment.log_path.stat().st_mtime * 1000)
    assert segment.largest_timestamp_ms() == mtime_ms
    append(segment, make_batch(0, 1, timestamp=42))
    assert segment.largest_timestamp_ms() == 42


def test_time_waited_for_roll_uses_the_first_batch_timestamp(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=1_000)
    assert segment.time_waited_for_roll_ms(now_ms=5_000, max_timestamp_in_messages=0) == 4_000
    append(segment, make_batch(0, 1, timestamp=10_000))
    assert segment.time_waited_for_roll_ms(now_ms=5_000, max_timestamp_in_messages=12_000) == 2_000


# ------------------------------------------------------------------ should_roll (pure)

ROLL = LogConfig(segment_bytes=1000, segment_ms=100)


@pytest.mark.parametrize(
    ("size", "messages", "waited", "full", "relative", "expected"),
    [
        (0, 5000, 0, False, 0, False),  # an empty segment takes even an oversized append
        (500, 500, 0, False, 10, False),  # exactly fills segment.bytes
        (501, 500, 0, False, 10, True),  # would pass segment.bytes
        (10, 10, 100, False, 10, False),  # segment.ms not yet passed
        (10, 10, 101, False, 10, True),  # segment.ms passed
        (10, 10, 0, True, 10, True),  # an index is full
        (10, 10, 0, False, 2**31, True),  # relative offset would overflow int32
        # even empty: Kafka LogSegment.shouldRoll puts no size condition on
        # canConvertToRelativeOffset (a follower's first batch far past the base)
        (0, 10, 10_000, True, 2**31, True),
    ],
)
def test_should_roll(
    size: int, messages: int, waited: int, full: bool, relative: int, expected: bool
) -> None:
    decision = should_roll(
        segment_size=size,
        messages_size=messages,
        config=ROLL,
        time_waited_ms=waited,
        indexes_full=full,
        relative_offset=relative,
    )
    assert decision is expected


def test_config_changes_apply(tmp_path: Path) -> None:
    config = attrs.evolve(CONFIG, index_interval_bytes=0)
    segment = LogSegment(tmp_path, 0, config, now_ms=0)
    fill(segment, 0, 5)
    # index.interval.bytes = 0: every batch after the first gets an entry.
    assert segment.offset_index.entries == 4


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 60), st.integers(0, 50)),
        min_size=1,
        max_size=40,
    ),
    cuts=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_bulk_index_entries_equal_one_batch_at_a_time(
    batches: list[tuple[int, int, int]], cuts: list[bool]
) -> None:
    """An append indexes its batches in one go (issue 18); what it writes must equal what
    recovery's batch-by-batch ``_after_batch`` rebuilds: the same entries, timestamps going
    back and forth, and a small index that fills up."""
    data, offset = [], 0
    for number, (count, value_size, jitter) in enumerate(batches):
        # Mostly later and later, sometimes earlier: the max timestamp moves in steps.
        timestamp = 1000 + 10 * number - jitter
        data.append(make_batch(offset, count, timestamp=timestamp, value_size=value_size))
        offset += count
    # An interval the first two batches fill exactly: the boundary case of "more than".
    interval = len(data[0]) + len(data[1]) if len(data) > 1 else 150
    config = LogConfig(index_interval_bytes=interval, segment_index_bytes=48)
    with tempfile.TemporaryDirectory() as directory:
        segment = LogSegment(Path(directory), 0, config, now_ms=0)
        pending = b""
        for batch, cut in zip(data, cuts, strict=False):
            pending += batch
            if cut:
                append(segment, pending)
                pending = b""
        if pending:
            append(segment, pending)
        appended = (segment.max_timestamp_so_far, segment.offset_index.entries)
        segment.on_become_inactive()
        offset_index = segment.offset_index_path.read_bytes()
        time_index = segment.time_index_path.read_bytes()
        segment.recover(lambda header: None)
        assert (segment.max_timestamp_so_far, segment.offset_index.entries) == appended
        assert segment.offset_index_path.read_bytes() == offset_index
        assert segment.time_index_path.read_bytes() == time_index
        segment.close()


def test_reads_on_from_where_the_last_ended_find_what_a_scan_finds(tmp_path: Path) -> None:
    # Followers read on from each read's next offset (the segment remembers where that is);
    # batches of every size, read in bounded steps, give what a scan of the batches gives.
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    batches: list[tuple[int, int, bytes]] = []  # (base offset, last offset, bytes)
    offset = 0
    for number in range(40):
        base = batches[-1][1] + 1 if batches else 0
        data = make_batch(base, 1 + number % 4, value_size=10 + 7 * number)
        append(segment, data)
        batches.append((base, base + number % 4, data))
        for max_bytes in (1, 150, 10_000):
            result = segment.read(offset, max_bytes, segment.size, min_one_batch=False)
            # The scan: from the first batch holding ``offset``, whole batches within max_bytes.
            following = [batch for batch in batches if batch[1] >= offset]
            taken: list[bytes] = []
            for _, _, whole in following:
                if sum(map(len, taken)) + len(whole) > max_bytes:
                    break
                taken.append(whole)
            if not following:  # all read: no batch holds the offset yet
                assert result is None
                continue
            assert result is not None
            assert result.slice.read_bytes() == b"".join(taken)
            start = sum(len(whole) for _, last, whole in batches if last < offset)
            assert result.slice.position == start
            assert result.next_offset == (
                following[len(taken) - 1][1] + 1 if taken else following[0][0]
            )
            offset = result.next_offset


def test_a_read_after_truncation_and_new_batches_finds_the_new_ones(tmp_path: Path) -> None:
    # A replica truncating after a leader change, then appending the new leader's batches of
    # other sizes: what a read ended at before the truncation is no batch boundary any more.
    segment = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    fill(segment, 0, 6)
    first = segment.read(0, 10_000, segment.size, min_one_batch=True)
    assert first is not None and first.next_offset == 12
    segment.truncate_to(4)
    new = [make_batch(4 + 3 * n, 3, value_size=33) for n in range(4)]
    for data in new:
        append(segment, data)
    result = segment.read(12, 10_000, segment.size, min_one_batch=True)
    assert result is not None
    assert result.slice.read_bytes() == b"".join(new[-2:])  # batch 10-12 holds 12
    assert result.next_offset == 16
