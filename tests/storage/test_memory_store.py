"""The in-memory segment store: same answers as the files, the simulation's crash rule, and
slices the network layer can send (storage.memory_store, storage.segment_store)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from pykraft.protocol.segments import FileSliceLike, Segments, segment_length
from pykraft.storage.fetch_data import MemorySlice
from pykraft.storage.file_slice import FileSlice
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_reader import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from pykraft.storage.log_validator import CorruptLogError
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import CompressionType, iter_batches
from pykraft.storage.records import SimpleRecord, build_batch, iter_records
from tests.storage.bombs import zstd_zeros_frame
from tests.storage.test_bounded_decompression import GIB, huge_record_prefix
from tests.storage.test_record_validation import batch_of

CONFIG = LogConfig(segment_bytes=300, index_interval_bytes=64, segment_index_bytes=96)


def batch(*timestamps: int) -> bytearray:
    records = [SimpleRecord(value=b"t%d" % t, timestamp=t) for t in timestamps]
    return bytearray(build_batch(records))


def values(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    data = log.read(log.log_start_offset, 10**8, log.log_end_offset).read_bytes()
    return [(r.offset, r.value) for p, _ in iter_batches(data) for r in iter_records(data, p)]


def no_file_reads(part: FileSliceLike) -> bytes:
    raise AssertionError(f"{part} is not a buffer")


@pytest.fixture
def both(tmp_path: Path) -> Iterator[tuple[PartitionLog, PartitionLog]]:
    on_files = PartitionLog.open(tmp_path / "t-0", CONFIG)
    in_memory = PartitionLog.open(MemoryDisk(Path("memory/t-0")), CONFIG)
    for n in range(12):
        data = batch(100 + 10 * n, 95 + 10 * n, 500 if n == 7 else 101 + 10 * n)
        for log in (on_files, in_memory):
            log.append_as_leader(bytearray(data), leader_epoch=n // 4, now_ms=0)
    yield on_files, in_memory
    on_files.close_handlers()


def test_both_stores_give_the_same_reads_segments_and_list_offsets(
    both: tuple[PartitionLog, PartitionLog],
) -> None:
    on_files, in_memory = both
    assert values(in_memory) == values(on_files) and len(values(on_files)) == 36
    bases = [segment.base_offset for segment in on_files.segments]
    assert [segment.base_offset for segment in in_memory.segments] == bases and len(bases) > 2
    for offset, max_bytes, upper in [(0, 0, 36), (4, 200, 36), (7, 10**6, 20), (35, 1, 36)]:
        expected = on_files.read(offset, max_bytes, upper)
        got = in_memory.read(offset, max_bytes, upper)
        assert (got.read_bytes(), got.next_offset) == (expected.read_bytes(), expected.next_offset)
        assert got.fetch_offset_metadata == expected.fetch_offset_metadata
    for timestamp in [EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, 0, 96, 150, 499, 501]:
        expected_found = on_files.fetch_offset_for_timestamp(timestamp)
        assert in_memory.fetch_offset_for_timestamp(timestamp) == expected_found, timestamp
    assert in_memory.leader_epoch_cache.entries == on_files.leader_epoch_cache.entries


def test_a_memory_read_is_a_buffer_the_network_writes_and_file_slices_stay_file_slices(
    both: tuple[PartitionLog, PartitionLog],
) -> None:
    on_files, in_memory = both
    read = in_memory.read(0, 10**6, in_memory.log_end_offset)
    assert read.slices and all(isinstance(piece, MemorySlice) for piece in read.slices)
    body = Segments.of([b"head", *read.slices])
    assert body.length == 4 + read.size_in_bytes
    assert body.to_bytes(no_file_reads) == b"head" + read.read_bytes()
    file_read = on_files.read(0, 10**6, on_files.log_end_offset)
    assert all(isinstance(piece, FileSlice) for piece in file_read.slices)  # sendfile path
    with pytest.raises(AssertionError, match="is not a buffer"):
        Segments.of(file_read.slices).to_bytes(no_file_reads)
    assert [segment_length(piece) for piece in read.slices] == [
        piece.length for piece in file_read.slices
    ]


def test_a_crash_keeps_the_flushed_batches_only() -> None:
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, CONFIG)
    for n in range(6):
        log.append_as_leader(batch(n), leader_epoch=0, now_ms=0)
    log.flush()
    for n in range(6, 30):  # rolls: later segments are unflushed too
        log.append_as_leader(batch(n), leader_epoch=1, now_ms=0)
    assert len(log.segments) > 2
    recovery_point = log.recovery_point
    log.close_handlers()
    disk.crash()
    reopened = PartitionLog.open(disk, CONFIG, recovery_point=recovery_point)
    assert reopened.log_end_offset == 6
    assert [offset for offset, _ in values(reopened)] == list(range(6))
    assert reopened.leader_epoch_cache.latest_epoch == 0  # epoch 1's entry went with its data
    assert reopened.append_as_leader(batch(99), leader_epoch=2, now_ms=0).first_offset == 6


def test_a_crash_loses_an_unsynced_epoch_and_recovery_rebuilds_it_from_the_batches() -> None:
    # A new epoch is written without fsync (KAFKA-15046); only the log's flush syncs it.
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, CONFIG)
    log.append_as_leader(batch(0), leader_epoch=0, now_ms=0)
    log.flush()
    assert disk.synced_epoch_entries == log.leader_epoch_cache.entries
    log.append_as_leader(batch(1), leader_epoch=3, now_ms=0)
    assert disk.synced_epoch_entries != log.leader_epoch_cache.entries  # epoch 3 not synced
    for segment in disk.segments:  # its data reached the disk, its epoch entry did not
        segment.flushed_size = segment.size
    recovery_point = log.recovery_point
    log.close_handlers()
    disk.crash()
    assert [e.epoch for e in disk.epoch_entries] == [0]
    reopened = PartitionLog.open(disk, CONFIG, recovery_point=recovery_point)
    assert [(e.epoch, e.start_offset) for e in reopened.leader_epoch_cache.entries] == [
        (0, 0),
        (3, 1),
    ]


def test_a_flush_syncs_the_epoch_before_moving_the_recovery_point() -> None:
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, CONFIG)
    log.append_as_leader(batch(0), leader_epoch=2, now_ms=0)
    log.flush()
    log.close_handlers()
    disk.crash()
    reopened = PartitionLog.open(disk, CONFIG, recovery_point=1)  # nothing left to re-read
    assert reopened.leader_epoch_cache.latest_epoch == 2


def test_a_rolled_flush_syncs_the_epoch_it_lets_the_recovery_point_pass() -> None:
    # The epoch's sync runs with the segments' (on the flusher thread, for files).
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, attrs.evolve(CONFIG, segment_bytes=200))
    for n in range(3):
        log.append_as_leader(batch(n), leader_epoch=2, now_ms=0)
    flush = log.prepare_rolled_flush()
    assert flush is not None
    assert disk.synced_epoch_entries == ()  # not yet: prepared, not run
    flush.run()
    log.complete_rolled_flush(flush)
    assert log.recovery_point == flush.target > 0
    log.close_handlers()
    disk.crash()
    reopened = PartitionLog.open(disk, CONFIG, recovery_point=flush.target)
    assert reopened.leader_epoch_cache.latest_epoch == 2


def test_an_inline_flush_syncs_the_new_epoch_of_the_batch_it_makes_durable() -> None:
    # flush.messages=1: the leader's append flushes inside the write, so its new epoch must be
    # recorded (and synced by before_flush) before the write, as Kafka's UnifiedLog.append does.
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, attrs.evolve(CONFIG, flush_messages=1))
    log.append_as_leader(batch(0), leader_epoch=4, now_ms=0)
    assert log.recovery_point == 1
    log.close_handlers()
    disk.crash()
    reopened = PartitionLog.open(disk, CONFIG, recovery_point=1)  # nothing left to re-read
    assert [(e.epoch, e.start_offset) for e in reopened.leader_epoch_cache.entries] == [(4, 0)]


def test_a_history_read_after_a_kill_is_synced_by_the_first_flush() -> None:
    # The replication sim's seed 3 (KIP-966 crash rule): a kill -9 leaves an unsynced epoch in
    # the page cache; the restarted process read it back and, taking it as durable, flushed
    # that epoch's batches without syncing it; a power loss then dropped the entry below the
    # recovery point and the follower truncated below its high watermark.
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, CONFIG)
    log.append_as_leader(batch(0), leader_epoch=1, now_ms=0)
    log.close_handlers()  # kill -9: the page cache (the unsynced entry) survives
    restarted = PartitionLog.open(disk, CONFIG)
    assert restarted.leader_epoch_cache.latest_epoch == 1
    assert not disk.synced_epoch_entries
    restarted.flush()
    assert disk.synced_epoch_entries == restarted.leader_epoch_cache.entries
    restarted.close_handlers()
    disk.crash()
    reopened = PartitionLog.open(disk, CONFIG, recovery_point=1)
    assert reopened.leader_epoch_cache.latest_epoch == 1


def test_an_assign_that_drops_entries_is_synced_at_once() -> None:
    # Only additions wait for the flush: after a power loss the history is then always the
    # synced one plus some added entries, which recovery re-derives from the batches.
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, CONFIG)
    log.leader_epoch_cache.assign(2, 0)  # a leader with no batch yet
    assert not disk.synced_epoch_entries
    log.leader_epoch_cache.assign(5, 0)  # replaces (2, 0): synced with the drop
    assert [(e.epoch, e.start_offset) for e in disk.synced_epoch_entries] == [(5, 0)]


def test_a_crash_keeps_flushed_segments_behind_one_the_log_start_passed_unflushed() -> None:
    # Found by the Hypothesis machine: DeleteRecords moves the recovery point with the log start
    # (as Kafka does) past a segment never flushed; the flushed segment after it must survive.
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, CONFIG)
    for n in range(4):  # one segment of 280 bytes, never flushed
        log.append_as_leader(batch(n), leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(4)  # the active segment stays, unflushed, below the log start
    log.append_as_leader(batch(7), leader_epoch=0, now_ms=0)  # rolls: offset 4, a new segment
    assert [segment.base_offset for segment in log.segments] == [0, 4]
    log.close()  # flushes from the recovery point (4) on: the new segment only
    disk.crash()
    reopened = PartitionLog.open(disk, CONFIG, log_start_offset=4, recovery_point=5)
    assert values(reopened) == [(4, b"t7")]


def test_a_kill_without_power_loss_keeps_everything() -> None:
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, CONFIG)
    for n in range(10):
        log.append_as_leader(batch(n), leader_epoch=0, now_ms=0)
    log.close_handlers()  # the process dies; the disk (page cache) does not
    reopened = PartitionLog.open(disk, CONFIG)
    assert [offset for offset, _ in values(reopened)] == list(range(10))
    assert reopened.load_report.recovered_segments  # unclean: recovered from the start


def test_faults_fire_in_order_and_only_for_their_operation() -> None:
    disk = MemoryDisk(Path("memory/t-0"))
    log = PartitionLog.open(disk, CONFIG)
    disk.faults.fail("flush", 5)
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=0)  # a write: not armed
    with pytest.raises(OSError) as raised:
        log.flush()
    assert (raised.value.errno, log.recovery_point, disk.faults.fired) == (5, 0, 1)
    log.flush()
    assert log.recovery_point == 1


def test_a_timestamp_lookup_over_a_stored_bomb_is_a_corrupt_log_error_in_memory_too() -> None:
    log = PartitionLog.open(MemoryDisk(Path("memory/t-0")), CONFIG)
    bomb = batch_of(zstd_zeros_frame(huge_record_prefix(GIB), GIB), 1, CompressionType.ZSTD)
    log.append_as_follower(bomb)
    for timestamp in (0, MAX_TIMESTAMP):
        with pytest.raises(CorruptLogError, match="longer than the limit"):
            log.fetch_offset_for_timestamp(timestamp)
