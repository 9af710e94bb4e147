"""PartitionLog: appends as leader and follower, reads, rolls, truncation, DeleteRecords,
idempotent producers and ListOffsets (Kafka's UnifiedLogTest / LogSegmentTest behaviour).

Every case runs on both segment stores (``storage.segment_store``): segment files and memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from pykraft.storage.leader_epoch_cache import EpochEntry
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import (
    AppendOrigin,
    InvalidProducerEpochError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StaleLeaderEpochError,
    UnexpectedAppendOffsetError,
)
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.partition_log import OffsetAndTimestamp, PartitionLog
from pykraft.storage.record_batch import CorruptRecordError, iter_batches
from pykraft.storage.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_control_batch,
    iter_records,
)

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=128, segment_index_bytes=4096)


def batch(*values: bytes, timestamp: int = 1000, base_offset: int = 0, **fields: int) -> bytearray:
    records = [SimpleRecord(value=v, timestamp=timestamp + i) for i, v in enumerate(values)]
    return bytearray(build_batch(records, base_offset=base_offset, **fields))  # type: ignore[arg-type]


Opener = Callable[..., PartitionLog]
# Modules that import ``open_log`` without the ``store`` fixture get files.
OPENERS: dict[str, Opener] = {"current": PartitionLog.open}


@pytest.fixture(autouse=True, params=["files", "memory"])
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which store ``open_log`` opens: a test's reopen finds the same directory or disk."""
    disks: dict[Path, MemoryDisk] = {}

    def in_memory(directory: Path, config: LogConfig, **kwargs: int | bool) -> PartitionLog:
        disk = disks.setdefault(directory, MemoryDisk(directory))
        return PartitionLog.open(disk, config, **kwargs)  # type: ignore[arg-type]

    OPENERS["current"] = PartitionLog.open if request.param == "files" else in_memory
    yield str(request.param)
    OPENERS["current"] = PartitionLog.open


def open_log(tmp_path: Path, config: LogConfig = CONFIG, **kwargs: int | bool) -> PartitionLog:
    return OPENERS["current"](tmp_path / "topic-0", config, **kwargs)


def records(data: bytes) -> list[tuple[int, bytes | None]]:
    return [
        (r.offset, r.value)
        for position, _ in iter_batches(data)
        for r in iter_records(data, position)
    ]


def read_all(log: PartitionLog, start: int = 0) -> list[tuple[int, bytes | None]]:
    return records(log.read(start, 10**8, log.log_end_offset).read_bytes())


def headers(log: PartitionLog) -> list[tuple[int, int]]:
    """(base offset, partition leader epoch) of every batch."""
    data = log.read(log.log_start_offset, 10**8, log.log_end_offset).read_bytes()
    return [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batches(data)]


# ------------------------------------------------------------------ leader appends


def test_leader_append_assigns_offsets_and_stamps_the_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(batch(b"a", b"b", base_offset=77), leader_epoch=3, now_ms=0)
    second = log.append_as_leader(batch(b"c"), leader_epoch=3, now_ms=0)
    assert (first.first_offset, first.last_offset, first.records_count) == (0, 1, 2)
    assert (second.first_offset, second.last_offset) == (2, 2)
    assert log.log_end_offset == 3
    assert headers(log) == [(0, 3), (2, 3)]
    assert read_all(log) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_a_new_leader_epoch_is_recorded_at_the_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"a", b"b"), leader_epoch=1, now_ms=0)
    log.append_as_leader(batch(b"c"), leader_epoch=4, now_ms=0)
    assert log.leader_epoch_cache.entries == (EpochEntry(1, 0), EpochEntry(4, 2))


def test_an_append_below_the_latest_epoch_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"a"), leader_epoch=5, now_ms=0)
    with pytest.raises(StaleLeaderEpochError):
        log.append_as_leader(batch(b"b"), leader_epoch=4, now_ms=0)
    assert log.log_end_offset == 1


def test_a_batch_over_max_message_bytes_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path, attrs.evolve(CONFIG, max_message_bytes=100))
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes"):
        log.append_as_leader(batch(b"x" * 200), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 0
    assert log.active_segment.size == 0


def test_an_append_over_segment_bytes_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(RecordBatchTooLargeError, match=r"segment\.bytes"):
        log.append_as_leader(batch(b"x" * 2000), leader_epoch=0, now_ms=0)


def test_one_corrupt_batch_means_nothing_is_written(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    good = batch(b"good")
    bad = batch(b"bad")
    bad[-1] ^= 0xFF  # breaks the CRC
    with pytest.raises(CorruptRecordError, match="crc"):
        log.append_as_leader(good + bad, leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 0
    assert log.active_segment.size == 0
    assert log.leader_epoch_cache.entries == ()


def test_trailing_garbage_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch(b"a") + b"\x00\x01", leader_epoch=0, now_ms=0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytearray(), leader_epoch=0, now_ms=0)


def test_clients_may_not_write_control_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    marker = bytearray(
        build_control_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, timestamp=5)
    )
    with pytest.raises(InvalidRecordError, match="control"):
        log.append_as_leader(marker, leader_epoch=0, now_ms=0)
    info = log.append_as_leader(marker, leader_epoch=0, now_ms=0, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 0


def test_several_batches_in_one_append(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(batch(b"a", b"b") + batch(b"c"), leader_epoch=0, now_ms=0)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 2, 3)
    assert headers(log) == [(0, 0), (2, 0)]


# ------------------------------------------------------------------ idempotent producers


def idempotent(value: bytes, sequence: int, epoch: int = 0) -> bytearray:
    return batch(value, producer_id=42, producer_epoch=epoch, base_sequence=sequence)


def test_a_producer_retry_returns_the_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"other"), leader_epoch=0, now_ms=0)
    original = log.append_as_leader(idempotent(b"a", 0), leader_epoch=0, now_ms=0)
    retry = log.append_as_leader(idempotent(b"a", 0), leader_epoch=0, now_ms=0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (original.first_offset, original.last_offset)
    assert log.log_end_offset == 2


def test_a_sequence_gap_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idempotent(b"a", 0), leader_epoch=0, now_ms=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent(b"c", 2), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 1


def test_two_batches_of_one_producer_in_one_append_are_checked_in_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(idempotent(b"a", 0) + idempotent(b"b", 1), leader_epoch=0, now_ms=0)
    assert info.last_offset == 1


def test_a_fenced_producer_epoch_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idempotent(b"a", 0, epoch=2), leader_epoch=0, now_ms=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idempotent(b"b", 1, epoch=1), leader_epoch=0, now_ms=0)


def test_producer_state_survives_a_clean_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idempotent(b"a", 0), leader_epoch=0, now_ms=0)
    log.close()
    again = open_log(tmp_path, had_clean_shutdown=True)
    assert again.append_as_leader(idempotent(b"a", 0), leader_epoch=0, now_ms=0).duplicate


# ------------------------------------------------------------------ follower appends


def test_follower_append_keeps_the_leaders_offsets_and_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = batch(b"a", b"b", partition_leader_epoch=2) + batch(
        b"c", base_offset=2, partition_leader_epoch=5
    )
    info = log.append_as_follower(bytes(data))
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert headers(log) == [(0, 2), (2, 5)]
    assert log.leader_epoch_cache.entries == (EpochEntry(2, 0), EpochEntry(5, 2))


def test_follower_append_may_not_start_below_the_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_follower(bytes(batch(b"a", b"b", base_offset=0)))
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(bytes(batch(b"c", base_offset=1)))


def test_follower_append_must_go_forward(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = batch(b"a", b"b", base_offset=0) + batch(b"c", base_offset=1)
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(bytes(data))
    assert log.log_end_offset == 0


def test_follower_keeps_the_gaps_of_a_compacted_leader(tmp_path: Path) -> None:
    """Kafka's UnifiedLog.append without offset assignment: only an offset below the log end,
    or going back, is refused; the gaps the leader's cleaner left are replicated as they are."""
    log = open_log(tmp_path)
    data = batch(b"a", base_offset=0) + batch(b"b", base_offset=5)
    info = log.append_as_follower(bytes(data))
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 5, 6)
    info = log.append_as_follower(bytes(batch(b"c", base_offset=9)))
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (9, 9, 10)
    assert headers(log) == [(0, -1), (5, -1), (9, -1)]


def test_follower_ignores_an_incomplete_last_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    whole = batch(b"a")
    partial = batch(b"b", base_offset=1)[:30]
    info = log.append_as_follower(bytes(whole + partial))
    assert info.valid_bytes == len(whole)
    assert log.log_end_offset == 1


def test_follower_data_larger_than_a_segment_is_split(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = b"".join(bytes(batch(b"x" * 300, base_offset=n)) for n in range(8))
    log.append_as_follower(data)
    assert log.log_end_offset == 8
    assert all(segment.size <= CONFIG.segment_bytes for segment in log.segments)
    assert len(log.segments) > 1


# ------------------------------------------------------------------ reads


def fill(log: PartitionLog, count: int, value_size: int = 100) -> None:
    for n in range(count):
        log.append_as_leader(batch(bytes([n % 256]) * value_size), leader_epoch=0, now_ms=0)


def test_reads_outside_the_log_are_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 3)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1000, log.log_end_offset)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000, log.log_end_offset)
    assert log.read(3, 1000, log.log_end_offset).is_empty  # the log end itself is fine


def test_consumers_read_up_to_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    log.update_high_watermark(2)
    result = log.read(0, 10**6, log.high_watermark)
    assert [offset for offset, _ in records(result.read_bytes())] == [0, 1]
    assert result.next_offset == 2
    assert log.read(3, 10**6, log.high_watermark).is_empty


def test_reads_span_segments_in_whole_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 30)
    assert len(log.segments) > 2
    result = log.read(0, 10**6, log.log_end_offset)
    assert len(result.slices) == len(log.segments)
    assert [offset for offset, _ in records(result.read_bytes())] == list(range(30))


def test_max_bytes_and_min_one_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 3, value_size=300)
    one = log.read(0, 10, log.log_end_offset, min_one_batch=True)
    none = log.read(0, 10, log.log_end_offset, min_one_batch=False)
    assert [offset for offset, _ in records(one.read_bytes())] == [0]
    assert none.is_empty
    assert one.fetch_offset_metadata.message_offset == 0


def test_high_watermark_is_clamped_to_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 3)
    assert log.update_high_watermark(10) == 3
    assert log.update_high_watermark(-5) == 0


# ------------------------------------------------------------------ rolling


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 20)
    bases = [segment.base_offset for segment in log.segments]
    assert len(bases) > 1
    assert all(segment.size <= CONFIG.segment_bytes for segment in log.segments)
    # Each rolled segment starts where the previous one ended.
    assert bases == sorted(bases) and bases[0] == 0


def test_roll_on_segment_ms_uses_record_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, attrs.evolve(CONFIG, segment_ms=1000, segment_bytes=10**6))
    log.append_as_leader(batch(b"a", timestamp=5000), leader_epoch=0, now_ms=0)
    log.append_as_leader(batch(b"b", timestamp=5900), leader_epoch=0, now_ms=0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(b"c", timestamp=6001), leader_epoch=0, now_ms=0)
    assert [segment.base_offset for segment in log.segments] == [0, 2]


# Files only: the in-memory store's index (its list of batch headers) never fills.
@pytest.mark.parametrize("store", ["files"], indirect=True)
def test_roll_when_the_index_is_full(tmp_path: Path, store: str) -> None:
    assert store == "files"
    config = attrs.evolve(
        CONFIG, segment_bytes=10**6, index_interval_bytes=0, segment_index_bytes=24
    )
    log = open_log(tmp_path, config)
    fill(log, 6)
    assert len(log.segments) > 1


def test_explicit_roll_and_empty_roll(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.roll(now_ms=0)  # empty active segment: nothing to do
    assert len(log.segments) == 1
    fill(log, 2)
    log.roll(now_ms=0)
    assert [segment.base_offset for segment in log.segments] == [0, 2]
    assert log.producer_state.last_snapshot_offset == 2


# ------------------------------------------------------------------ truncation


def test_truncate_to_removes_later_batches_and_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    log.append_as_leader(batch(b"new"), leader_epoch=2, now_ms=0)
    log.update_high_watermark(11)
    assert log.truncate_to(6)
    assert log.log_end_offset == 6
    assert log.high_watermark == 6
    assert [offset for offset, _ in read_all(log)] == list(range(6))
    assert log.leader_epoch_cache.entries == (EpochEntry(0, 0),)
    assert not log.truncate_to(8)  # at or past the end: nothing to do
    log.append_as_leader(batch(b"again"), leader_epoch=3, now_ms=0)
    assert log.log_end_offset == 7


def test_truncate_inside_a_batch_removes_the_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0, now_ms=0)
    log.truncate_to(1)
    assert log.log_end_offset == 0


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 20)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert [segment.base_offset for segment in log.segments] == [500]
    assert log.leader_epoch_cache.entries == ()
    log.append_as_follower(bytes(batch(b"x", base_offset=500)))
    assert read_all(log, 500) == [(500, b"x")]


# ------------------------------------------------------------------ DeleteRecords


def test_delete_records_moves_the_log_start_and_retention_deletes_segments(
    tmp_path: Path,
) -> None:
    # UnifiedLogTest.testDeleteRecords...: maybeIncrementLogStartOffset, then
    # deleteOldSegments removes the segments the new log start breached.
    log = open_log(tmp_path)
    fill(log, 30)
    log.update_high_watermark(30)
    bases = [segment.base_offset for segment in log.segments]
    second_base, third_base = bases[1], bases[2]
    assert log.delete_records(third_base + 1) == third_base + 1
    assert [segment.base_offset for segment in log.segments] == bases  # nothing deleted yet
    with pytest.raises(OffsetOutOfRangeError):
        log.read(second_base, 1000, 30)
    log.delete_old_segments(now_ms=0)
    assert log.segments[0].base_offset == third_base  # segments wholly below are gone
    assert second_base not in [segment.base_offset for segment in log.segments]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(third_base, 1000, 30)
    assert read_all(log, third_base + 1)[0][0] == third_base + 1


def test_delete_records_beyond_the_high_watermark_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    log.update_high_watermark(3)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(4)


# ------------------------------------------------------------------ flush


def test_flush_moves_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 20)
    assert log.recovery_point == 0
    assert log.flush_rolled()  # rolled segments are flushed later, as Kafka does
    assert log.recovery_point == log.active_segment.base_offset
    log.flush()
    assert log.recovery_point == 20


def test_a_rolled_flush_moves_the_recovery_point_only_once_it_ran(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 20)
    flush = log.prepare_rolled_flush()
    assert flush is not None and flush.target == log.active_segment.base_offset
    assert log.recovery_point == 0  # prepared on the loop, not run yet
    flush.run()
    log.complete_rolled_flush(flush)
    assert log.recovery_point == flush.target
    assert log.prepare_rolled_flush() is None  # nothing rolled since


def test_a_truncation_while_a_rolled_flush_runs_keeps_the_recovery_point(tmp_path: Path) -> None:
    """The flushed range may hold other bytes after a truncation (a follower's): the flush
    that ran before them cannot vouch for them."""
    log = open_log(tmp_path)
    fill(log, 20)
    flush = log.prepare_rolled_flush()
    assert flush is not None and flush.target > 4
    log.truncate_to(4)
    fill(log, 20)  # new batches from offset 4 on, rolled again, not synced
    flush.run()
    log.complete_rolled_flush(flush)
    assert log.recovery_point <= 4


def test_a_log_restarted_while_a_rolled_flush_runs_keeps_the_recovery_point(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    fill(log, 20)
    flush = log.prepare_rolled_flush()
    assert flush is not None
    log.truncate_fully_and_start_at(5, now_ms=0)  # a follower's restart below the leader
    fill(log, 20)
    flush.run()
    log.complete_rolled_flush(flush)
    assert log.recovery_point == 5


def test_flush_messages_forces_a_flush(tmp_path: Path) -> None:
    log = open_log(tmp_path, attrs.evolve(CONFIG, flush_messages=3))
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 3


# ------------------------------------------------------------------ ListOffsets


def test_fetch_offset_for_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for n in range(20):
        log.append_as_leader(
            batch(b"x" * 100, b"y", timestamp=1000 + 10 * n), leader_epoch=1, now_ms=0
        )
    assert len(log.segments) > 1
    assert log.fetch_offset_for_timestamp(1000) == OffsetAndTimestamp(0, 1000, 1)
    assert log.fetch_offset_for_timestamp(1001) == OffsetAndTimestamp(1, 1001, 1)
    assert log.fetch_offset_for_timestamp(1095) == OffsetAndTimestamp(20, 1100, 1)
    assert log.fetch_offset_for_timestamp(5000) is None
    assert log.fetch_offset_for_timestamp(-2) == OffsetAndTimestamp(0, -1, 1)
    assert log.fetch_offset_for_timestamp(-1) == OffsetAndTimestamp(40, -1, 1)
    assert log.fetch_offset_for_timestamp(-3) == OffsetAndTimestamp(39, 1191, 1)
