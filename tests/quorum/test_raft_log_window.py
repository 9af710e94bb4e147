"""The retained window of committed batches that brokers long-poll (KIP-630 style answers)."""

import pytest

from pykraft.metadata.codec import encode_record
from pykraft.metadata.compact_codec import encode_records
from pykraft.metadata.records import ProducerIdsRecord
from pykraft.quorum.log_window import CommittedBatch, LogWindow, LogWindowError, ReadStatus


def record(offset: int) -> ProducerIdsRecord:
    """A record that says which offset it was committed at."""
    return ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=offset)


def committed(base_offset: int, count: int, epoch: int = 1) -> CommittedBatch:
    return CommittedBatch(
        base_offset=base_offset,
        epoch=epoch,
        append_time_ms=0,
        record_count=count,
        payload=encode_records([record(base_offset + i) for i in range(count)]),
    )


def lines(*offsets: int) -> tuple[bytes, ...]:
    return tuple(encode_record(record(offset)).encode() for offset in offsets)


def window_with(max_records: int, *sizes: int, snapshot_at: int | None = None) -> LogWindow:
    """A window holding batches of ``sizes``; by default a snapshot covers all of them."""
    window = LogWindow(max_records)
    for size in sizes:
        window.append(committed(window.next_offset, size))
    window.retain_from(window.next_offset if snapshot_at is None else snapshot_at)
    return window


def offsets(window: LogWindow, from_offset: int, max_records: int = 1000) -> list[int]:
    read = window.read(from_offset, max_records)
    assert read.status is ReadStatus.OK
    return [b.base_offset + i for b in read.batches for i in range(b.record_count)]


def test_empty_window_reads_nothing_at_its_end() -> None:
    read = LogWindow(10).read(0, 100)
    assert (read.status, read.batches, read.next_offset) == (ReadStatus.OK, (), 0)


def test_reads_whole_batches_from_a_boundary() -> None:
    window = window_with(100, 3, 2, 4)
    assert offsets(window, 0) == list(range(9))
    assert offsets(window, 3) == [3, 4, 5, 6, 7, 8]
    assert window.read(0, 1000).next_offset == 9


def test_a_read_inside_a_batch_gets_its_tail() -> None:
    window = window_with(100, 3, 2, 4)
    read = window.read(6, 1000)
    assert read.batches[0].base_offset == 6
    assert (read.batches[0].record_count, read.batches[0].last_offset) == (3, 8)
    assert read.batches[0].records == lines(6, 7, 8)
    assert window.read(7, 1000).batches[0].tail_from(8).records == lines(8)


def test_json_lines_are_transcoded_once_per_batch_and_shared_with_tails() -> None:
    batch = committed(0, 3)
    first = batch.records
    assert first == lines(0, 1, 2)
    assert batch.records is first
    tail = batch.tail_from(1)
    assert tail.records == lines(1, 2)
    assert tail.json_cache is batch.json_cache
    # The cache is not part of the value.
    assert batch == committed(0, 3)


def test_max_records_stops_at_a_batch_boundary_but_returns_at_least_one_batch() -> None:
    window = window_with(100, 3, 2, 4)
    assert offsets(window, 0, max_records=4) == [0, 1, 2]
    assert offsets(window, 0, max_records=5) == [0, 1, 2, 3, 4]
    assert offsets(window, 5, max_records=1) == [5, 6, 7, 8]


def test_old_batches_are_evicted_whole_and_answer_snapshot_required() -> None:
    window = window_with(5, 3, 2, 4)
    assert window.start_offset == 5
    assert window.record_count == 4
    assert window.read(4, 10).status is ReadStatus.SNAPSHOT_REQUIRED
    assert offsets(window, 5) == [5, 6, 7, 8]


def test_a_batch_larger_than_the_window_is_still_kept() -> None:
    window = window_with(2, 1, 10)
    assert (window.start_offset, window.next_offset) == (1, 11)
    assert offsets(window, 1) == list(range(1, 11))


def test_beyond_the_end_is_out_of_range() -> None:
    window = window_with(10, 2)
    assert window.read(3, 10).status is ReadStatus.OFFSET_OUT_OF_RANGE


def test_append_must_continue_the_log() -> None:
    window = window_with(10, 2)
    with pytest.raises(LogWindowError, match="does not continue"):
        window.append(committed(5, 1))


def test_reset_after_loading_a_snapshot() -> None:
    window = window_with(10, 2)
    window.reset(1000)
    assert window.read(999, 10).status is ReadStatus.SNAPSHOT_REQUIRED
    window.append(committed(1000, 2))
    assert offsets(window, 1000) == [1000, 1001]


def test_nothing_after_the_latest_snapshot_is_evicted() -> None:
    window = window_with(2, 3, 2, 4, snapshot_at=3)
    # Over the bound, but a broker loading the snapshot at 3 must be able to read from 3.
    assert (window.start_offset, window.record_count) == (3, 6)
    assert offsets(window, 3) == list(range(3, 9))
    window.retain_from(9)
    assert (window.start_offset, window.record_count) == (5, 4)


def test_without_any_snapshot_everything_is_kept() -> None:
    window = LogWindow(2)
    for size in (3, 2, 4):
        window.append(committed(window.next_offset, size))
    assert offsets(window, 0) == list(range(9))


def test_long_logs_compact_their_index() -> None:
    window = LogWindow(50)
    for _ in range(5000):
        window.append(committed(window.next_offset, 1))
        window.retain_from(window.next_offset)
    assert window.record_count == 50
    assert offsets(window, 4950) == list(range(4950, 5000))
    assert window.read(4949, 1).status is ReadStatus.SNAPSHOT_REQUIRED
