"""Crash recovery (Kafka's LogLoaderTest behaviour): torn and corrupt tails are cut back to the
last valid batch, missing or corrupt indexes are rebuilt, and reads come back identical."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from pykraft.storage import leader_epoch_cache
from pykraft.storage.leader_epoch_cache import EpochEntry
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import SimpleRecord, build_batch, iter_records
from pykraft.storage.recovery import first_unflushed_segment

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128, segment_index_bytes=4096)


def batch(value: bytes, count: int = 2, timestamp: int = 1000, **fields: int) -> bytearray:
    records = [
        SimpleRecord(value=value + bytes([i]), timestamp=timestamp + i) for i in range(count)
    ]
    return bytearray(build_batch(records, **fields))  # type: ignore[arg-type]


def open_log(directory: Path, recovery_point: int = 0, clean: bool = False) -> PartitionLog:
    return PartitionLog.open(
        directory, CONFIG, recovery_point=recovery_point, had_clean_shutdown=clean
    )


def contents(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    data = log.read(log.log_start_offset, 10**8, log.log_end_offset).read_bytes()
    return [
        (r.offset, r.value)
        for position, _ in iter_batches(data)
        for r in iter_records(data, position)
    ]


def written_log(
    directory: Path, batches: int = 40, epoch: int = 0
) -> tuple[PartitionLog, list[int]]:
    """A log of ``batches`` two-record batches; returns it and each batch's size."""
    log = open_log(directory)
    sizes = []
    for n in range(batches):
        data = batch(b"v%03d-" % n)
        sizes.append(len(data))
        log.append_as_leader(data, leader_epoch=epoch, now_ms=0)
    return log, sizes


def crash(log: PartitionLog) -> None:
    """The process dies: no trimming, no snapshot, no clean-shutdown marker."""
    log.close_handlers()


# ------------------------------------------------------------------ torn and corrupt tails


def test_a_truncated_last_batch_is_cut_and_nothing_else_is_lost(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, sizes = written_log(directory)
    expected = contents(log)
    active = log.local_log.active_segment.log_path
    crash(log)
    with active.open("r+b") as file:
        file.truncate(active.stat().st_size - sizes[-1] // 2)
    recovered = open_log(directory)
    assert recovered.log_end_offset == 78
    assert contents(recovered) == expected[:-2]
    report = recovered.load_report
    assert report.truncated_bytes == sizes[-1] - sizes[-1] // 2
    assert report.problems and "00000000000000000" in report.problems[0]


def test_a_bit_flipped_last_batch_is_cut(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, sizes = written_log(directory)
    expected = contents(log)
    active = log.local_log.active_segment.log_path
    crash(log)
    data = bytearray(active.read_bytes())
    data[-5] ^= 0x10
    active.write_bytes(bytes(data))
    recovered = open_log(directory)
    assert contents(recovered) == expected[:-2]
    assert recovered.load_report.truncated_bytes == sizes[-1]
    assert "crc" in recovered.load_report.problems[0]


def test_damage_in_an_older_unflushed_segment_drops_the_later_segments(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory, batches=80)
    segments = log.local_log.segments
    assert len(segments) >= 3
    damaged, later = segments[1], [segment.base_offset for segment in segments[2:]]
    crash(log)
    data = bytearray(damaged.log_path.read_bytes())
    data[-5] ^= 0x01
    damaged.log_path.write_bytes(bytes(data))
    recovered = open_log(directory)
    assert recovered.load_report.deleted_segments == tuple(later)
    assert [s.base_offset for s in recovered.local_log.segments] == [0, damaged.base_offset]
    assert not any((directory / f"{base:020d}.log").exists() for base in later)
    assert recovered.log_end_offset < later[0]


def test_data_below_the_recovery_point_is_not_revalidated(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory)
    log.flush_rolled()
    point = log.recovery_point
    crash(log)
    recovered = open_log(directory, recovery_point=point)
    assert recovered.load_report.recovered_segments == (recovered.active_segment.base_offset,)
    assert recovered.recovery_point == point  # only a flush moves it


def test_a_clean_shutdown_skips_recovery(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory)
    expected = contents(log)
    log.close()
    reopened = open_log(directory, recovery_point=0, clean=True)
    assert reopened.load_report.recovered_segments == ()
    assert reopened.recovery_point == reopened.log_end_offset == 80
    assert contents(reopened) == expected


def test_recovery_truncates_the_epoch_cache(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory, batches=3, epoch=1)
    log.append_as_leader(batch(b"late"), leader_epoch=2, now_ms=0)
    assert log.leader_epoch_cache.entries == (EpochEntry(1, 0), EpochEntry(2, 6))
    active = log.local_log.active_segment.log_path
    crash(log)
    with active.open("r+b") as file:
        file.truncate(active.stat().st_size - 10)
    recovered = open_log(directory)
    assert recovered.log_end_offset == 6
    assert recovered.leader_epoch_cache.entries == (EpochEntry(1, 0),)


def test_producer_state_is_rebuilt_by_replay_after_a_crash(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    retry = batch(b"idem", producer_id=9, producer_epoch=0, base_sequence=0)
    log.append_as_leader(bytearray(retry), leader_epoch=0, now_ms=0)
    crash(log)  # no snapshot was taken
    recovered = open_log(directory)
    assert recovered.append_as_leader(bytearray(retry), leader_epoch=0, now_ms=0).duplicate


# ------------------------------------------------------------------ indexes


def index_files(log: PartitionLog) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for segment in log.local_log.segments
        for path in (segment.offset_index_path, segment.time_index_path)
    }


def closed_log(
    directory: Path,
) -> tuple[list[tuple[int, bytes | None]], dict[str, bytes], list[int]]:
    log, _ = written_log(directory)
    expected = contents(log)
    log.close()
    reopened = open_log(directory, clean=True)
    indexes = index_files(reopened)
    bases = [segment.base_offset for segment in reopened.local_log.segments]
    reopened.close()
    return expected, indexes, bases


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_a_deleted_index_is_rebuilt_even_after_a_clean_shutdown(
    tmp_path: Path, suffix: str
) -> None:
    directory = tmp_path / "t-0"
    expected, indexes, bases = closed_log(directory)
    (directory / f"{bases[1]:020d}{suffix}").unlink()
    reopened = open_log(directory, clean=True)
    assert [base for base, _ in reopened.load_report.rebuilt_indexes] == [bases[1]]
    assert contents(reopened) == expected
    reopened.close()
    assert index_files(open_log(directory, clean=True)) == indexes


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data + b"\x01\x02\x03", id="wrong-size"),
        pytest.param(lambda data: bytes(reversed(data)), id="garbage-out-of-order"),
        pytest.param(lambda data: b"\x7f\xff\xff\xff" * 4, id="points-past-the-log"),
    ],
)
def test_a_corrupt_index_is_rebuilt(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    directory = tmp_path / "t-0"
    expected, indexes, bases = closed_log(directory)
    path = directory / f"{bases[0]:020d}.index"
    assert len(path.read_bytes()) >= 16  # the segment has entries to damage
    path.write_bytes(damage(path.read_bytes()))
    reopened = open_log(directory, clean=True)
    assert [base for base, _ in reopened.load_report.rebuilt_indexes] == [bases[0]]
    assert contents(reopened) == expected
    reopened.close()
    assert index_files(open_log(directory, clean=True)) == indexes


def test_an_untrimmed_index_left_by_a_crash_is_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory)
    expected = contents(log)
    active = log.local_log.active_segment
    crash(log)
    assert active.offset_index_path.stat().st_size == CONFIG.segment_index_bytes
    recovered = open_log(directory)
    assert contents(recovered) == expected
    assert recovered.local_log.active_segment.offset_index.entries > 0


def test_stray_files_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory, batches=2)
    log.close()
    for name in [
        "00000000000000000000.log.cleaned",
        "00000000000000000000.log.swap",
        "00000000000000000099.index",
        "00000000000000000099.timeindex",
        "00000000000000000000.log.deleted",
    ]:
        (directory / name).write_bytes(b"junk")
    reopened = open_log(directory, clean=True)
    assert len(reopened.load_report.removed_files) == 5
    assert sorted(p.name for p in directory.iterdir() if "0000" in p.name) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "00000000000000000004.snapshot",
    ]


def test_log_start_offset_beyond_the_data_empties_the_log(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory, batches=2)
    log.close()
    reopened = PartitionLog.open(directory, CONFIG, log_start_offset=100, had_clean_shutdown=True)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (100, 100)
    assert [segment.base_offset for segment in reopened.local_log.segments] == [100]


# ------------------------------------------------------------------ the pure decision


@pytest.mark.parametrize(
    ("bases", "recovery_point", "clean", "expected"),
    [
        ([0, 100, 200], 150, False, 1),  # the segment holding the recovery point onwards
        ([0, 100, 200], 100, False, 1),
        ([0, 100, 200], 99, False, 0),
        ([0, 100, 200], 500, False, 2),  # the active segment is always checked
        ([100, 200], 0, False, 0),  # a recovery point below the log: everything
        ([0, 100, 200], 0, True, 3),  # clean shutdown: nothing
        ([], 0, False, 0),
    ],
)
def test_first_unflushed_segment(
    bases: list[int], recovery_point: int, clean: bool, expected: int
) -> None:
    assert first_unflushed_segment(bases, recovery_point, clean) == expected


# ------------------------------------------------------------------ damage after a clean shutdown
# Issue 9: any inconsistency found while loading is an unclean shutdown of that partition.


def cut(path: Path, size: int) -> None:
    with path.open("r+b") as file:
        file.truncate(size)


def test_a_torn_active_segment_after_a_clean_shutdown_is_recovered(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory)
    expected = contents(log)
    active = log.local_log.active_segment.log_path
    log.close()
    cut(active, active.stat().st_size - 30)  # the reproduction: 30 bytes off
    reopened = open_log(directory, recovery_point=80, clean=True)
    assert reopened.log_end_offset == 78  # only the torn last batch is gone
    assert contents(reopened) == expected[:78]
    assert reopened.load_report.recovered_segments == (reopened.active_segment.base_offset,)
    assert reopened.load_report.rebuilt_indexes[0][1].startswith(active.name)


def test_a_torn_older_segment_after_a_clean_shutdown_cuts_the_log_there(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory)
    expected = contents(log)
    first = log.local_log.segments[0]
    first_end = log.local_log.segments[1].base_offset
    log.close()
    cut(first.log_path, first.log_path.stat().st_size - 30)
    reopened = open_log(directory, recovery_point=80, clean=True)
    assert len(reopened.local_log.segments) == 1
    assert reopened.log_end_offset == first_end - 2  # the last batch of segment 0 went
    assert contents(reopened) == expected[: first_end - 2]
    assert reopened.load_report.deleted_segments  # they no longer continued the log
    reopened.append_as_leader(batch(b"next"), leader_epoch=0, now_ms=0)
    assert reopened.log_end_offset == first_end


def test_a_segment_cut_at_a_batch_boundary_reads_as_a_gap_and_the_rest_stays(
    tmp_path: Path,
) -> None:
    """A whole batch gone from the end of a segment cannot be told from a gap compaction makes
    (see the next test): Kafka's LogLoader keeps the later segments, and so do we."""
    directory = tmp_path / "t-0"
    log, sizes = written_log(directory)
    expected = contents(log)
    first = log.local_log.segments[0]
    first_end = log.local_log.segments[1].base_offset
    log.close()
    cut(first.log_path, first.log_path.stat().st_size - sizes[0])
    reopened = open_log(directory, recovery_point=80, clean=True)
    assert reopened.load_report.deleted_segments == ()
    gone = {first_end - 2, first_end - 1}
    assert contents(reopened) == [row for row in expected if row[0] not in gone]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_a_followers_segments_with_compaction_gaps_are_kept_on_every_start(
    tmp_path: Path, clean: bool
) -> None:
    """A follower of a compacted leader rolls at the first offset of the batch it appends, past
    the offsets the leader's cleaner removed: its segments have gaps between them. Recovery once
    read such a gap as damage and deleted every later segment (the live compaction test's
    follower lost all but its first segment on a restart)."""
    directory = tmp_path / "t-0"
    log = open_log(directory)
    offset, placed = 0, []
    for n in range(120):
        data = bytearray(batch(b"v%03d-" % n))
        struct.pack_into(">q", data, 0, offset)  # baseOffset lies outside the CRC
        log.append_as_follower(bytes(data), 0)
        placed.append(offset)
        offset += 2 + 97 * (n % 3 > 0)  # two records, then what the leader's cleaner removed
    ends = [s.read_next_offset() for s in log.local_log.segments[:-1]]
    bases = [s.base_offset for s in log.local_log.segments[1:]]
    assert any(end < base for end, base in zip(ends, bases, strict=True))  # gaps between them
    expected = contents(log)
    if clean:
        log.close()
    else:
        crash(log)
    reopened = open_log(directory, recovery_point=0, clean=clean)
    assert reopened.load_report.deleted_segments == ()
    assert contents(reopened) == expected
    assert [row[0] for row in expected][::2] == placed


def test_a_corrupt_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = written_log(directory, epoch=3)
    expected = contents(log)
    log.close()
    (directory / "leader-epoch-checkpoint").write_bytes(b"0\n1\nnot an epoch\n")
    reopened = open_log(directory, recovery_point=80, clean=True)
    assert reopened.leader_epoch_cache.entries == (EpochEntry(3, 0),)
    assert contents(reopened) == expected


def test_an_empty_epoch_checkpoint_is_torn_and_rebuilt_from_the_batches(tmp_path: Path) -> None:
    # An unsynced rewrite renamed over the synced copy can come back empty after a power loss;
    # read as "no history" it would answer OffsetsForLeaderEpoch wrongly (KAFKA-16541).
    directory = tmp_path / "t-0"
    log = open_log(directory)
    for n in range(30):
        log.append_as_leader(batch(b"a%02d" % n), leader_epoch=0, now_ms=0)
    for n in range(30):
        log.append_as_leader(batch(b"b%02d" % n), leader_epoch=1, now_ms=0)
    log.close()
    (directory / "leader-epoch-checkpoint").write_bytes(b"")
    reopened = open_log(directory, recovery_point=120, clean=True)
    assert reopened.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(1, 60))


def test_epochs_recovered_on_a_clean_start_are_synced_before_the_point_passes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clean start recovers a torn active segment and re-assigns an epoch below the log end,
    # where the recovery point then stands: that entry must be durable before it is.
    directory = tmp_path / "t-0"
    log, _ = written_log(directory, epoch=0)
    log.append_as_leader(batch(b"e1"), leader_epoch=1, now_ms=0)
    log.append_as_leader(batch(b"e1-tail"), leader_epoch=1, now_ms=0)
    active = log.local_log.active_segment.log_path
    log.close()
    cut(active, active.stat().st_size - 30)  # the last batch is torn
    checkpoint = directory / "leader-epoch-checkpoint"
    checkpoint.write_bytes(b"0\n1\n0 0\n")  # the epoch-1 entry never reached the disk
    synced: list[bool] = []
    flush = leader_epoch_cache.LeaderEpochCache.flush

    def recording_flush(self: leader_epoch_cache.LeaderEpochCache) -> None:
        synced.append(self._unsynced)
        flush(self)

    monkeypatch.setattr(leader_epoch_cache.LeaderEpochCache, "flush", recording_flush)
    reopened = open_log(directory, recovery_point=84, clean=True)
    assert reopened.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(1, 80))
    assert reopened.recovery_point == reopened.log_end_offset == 82
    assert synced and synced[-1], "the recovered entry was not synced"
    assert not reopened.leader_epoch_cache._unsynced
