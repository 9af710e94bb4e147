"""Crash injection into every step of the cleaned-segment swap (Kafka's LogCleanerTest
``testRecoveryAfterCrash`` and LogLoaderTest's ``.cleaned`` / ``.swap`` / ``.deleted`` cases): a
crash at any step leaves a log that opens, reads whole, and holds the same latest value for
every key — the old segments before the swap is decided, the cleaned one after."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.storage.cleaner import Cleaner
from pykraft.storage.cleaner_swap import SwapStep
from pykraft.storage.partition_log import PartitionLog
from tests.storage.cleaner_support import CONFIG, Row, append, clean, open_log, rows

T0 = 1_000_000
TEMP_SUFFIXES = (".cleaned", ".swap", ".deleted")


class Crash(Exception):
    pass


def crash_at(step: SwapStep, occurrence: int = 1) -> Cleaner:
    seen = {"count": 0}

    def crash_point(reached: SwapStep) -> None:
        if reached is step:
            seen["count"] += 1
            if seen["count"] == occurrence:
                raise Crash(step.value)

    return Cleaner(10_000, crash_point=crash_point)


def filled_log(directory: Path) -> PartitionLog:
    """Four keys rewritten 120 times over segments of 5 batches (so that groups hold several
    segments), and an active tail."""
    log = open_log(directory)
    for i in range(120):
        if i % 5 == 0:
            log.roll(T0 + i)
        append(log, [(b"k%d" % (i % 4), b"v%d" % i)], T0 + i)
    append(log, [(b"k0", None)], T0 + 200)  # a tombstone: latest "value" of k0 is none
    log.roll(T0 + 200)
    append(log, [(b"tail", b"t")], T0 + 200)
    return log


def latest(rows_of_log: list[Row]) -> dict[bytes | None, bytes | None]:
    return {key: value for _, key, value in rows_of_log}


def crash_and_reopen(directory: Path, cleaner: Cleaner) -> tuple[list[Row], PartitionLog]:
    log = filled_log(directory)
    original = rows(log)
    with pytest.raises(Crash):
        clean(log, T0 + 1_000, cleaner=cleaner)
    log.flush()
    end = log.log_end_offset
    log.close_handlers()  # the process dies: nothing more is written
    # Recovery starts at the checkpointed recovery point: the whole log was flushed, so only
    # the swap's own repairs can put the cleaned segment right.
    reopened = PartitionLog.open(directory, CONFIG, recovery_point=end, had_clean_shutdown=False)
    return original, reopened


CASES = [
    (SwapStep.CLEANED, 1, "old"),
    (SwapStep.SWAP, 1, "cleaned"),
    (SwapStep.OLD_RENAMED, 1, "cleaned"),
    (SwapStep.OLD_DELETED, 1, "cleaned"),
    (SwapStep.REPLACED, 1, "cleaned"),
    (SwapStep.CLEANED, 2, "mixed"),  # the second group's crash: the first is swapped already
]


@pytest.mark.parametrize(("step", "occurrence", "expect"), CASES)
def test_crash_at_each_step(tmp_path: Path, step: SwapStep, occurrence: int, expect: str) -> None:
    directory = tmp_path / "compacted-0"
    original, log = crash_and_reopen(directory, crash_at(step, occurrence))
    after = rows(log)
    assert latest(after) == latest(original), "every key keeps its latest value"
    kept = {offset: (key, value) for offset, key, value in original}
    assert all(kept[offset] == (key, value) for offset, key, value in after)
    if expect == "old":
        assert after == original
    elif expect == "cleaned":
        assert len(after) < len(original)
    assert not [p.name for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIXES)]
    # The log goes on: it cleans again and reopens cleanly.
    clean(log, T0 + 2_000, cleaner=Cleaner(10_000))
    again = rows(log)
    log.close()
    reopened = PartitionLog.open(directory, CONFIG)
    assert rows(reopened) == again and latest(again) == latest(original)
    assert reopened.load_report.truncated_bytes == 0


def test_torn_cleaned_file_is_discarded(tmp_path: Path) -> None:
    """LogLoaderTest: a ``.cleaned`` file is a cleaning that never swapped; it is deleted."""
    directory = tmp_path / "compacted-0"
    log = filled_log(directory)
    original = rows(log)
    with pytest.raises(Crash):
        clean(log, T0 + 1_000, cleaner=crash_at(SwapStep.CLEANED))
    log.close_handlers()
    (cleaned,) = directory.glob("*.log.cleaned")
    cleaned.write_bytes(cleaned.read_bytes()[:-7])  # torn mid-batch
    reopened = PartitionLog.open(directory, CONFIG, had_clean_shutdown=False)
    assert rows(reopened) == original
    assert any(name.endswith(".cleaned") for name in reopened.load_report.removed_files)


def test_unreadable_swap_file_rolls_the_swap_back(tmp_path: Path) -> None:
    """A swap file that does not read back cannot complete: the ``.deleted`` logs come back."""
    directory = tmp_path / "compacted-0"
    log = filled_log(directory)
    original = rows(log)
    with pytest.raises(Crash):
        clean(log, T0 + 1_000, cleaner=crash_at(SwapStep.OLD_DELETED))
    log.close_handlers()
    (swap,) = directory.glob("*.swap")
    data = swap.read_bytes()
    swap.write_bytes(data[:8] + b"\xff\xff\xff\xff" + data[12:])  # batchLength past the end
    reopened = PartitionLog.open(directory, CONFIG, had_clean_shutdown=False)
    assert rows(reopened) == original
    assert any("rolled back" in line for line in reopened.load_report.removed_files)


def test_swap_file_with_a_bad_crc_rolls_the_swap_back(tmp_path: Path) -> None:
    """A swap file whose last batch fails its CRC (its length intact) is not trusted either
    (Kafka's LogLoader validates a .swap segment's batches before completing it)."""
    directory = tmp_path / "compacted-0"
    log = filled_log(directory)
    original = rows(log)
    with pytest.raises(Crash):
        clean(log, T0 + 1_000, cleaner=crash_at(SwapStep.OLD_DELETED))
    log.close_handlers()
    (swap,) = directory.glob("*.swap")
    data = bytearray(swap.read_bytes())
    data[-1] ^= 0xFF  # the last batch's last record byte: the CRC no longer matches
    swap.write_bytes(bytes(data))
    reopened = PartitionLog.open(directory, CONFIG, had_clean_shutdown=False)
    assert any("rolled back" in line for line in reopened.load_report.removed_files)
    assert rows(reopened) == original


def test_swapped_indexes_equal_the_ones_recovery_builds(tmp_path: Path) -> None:
    """The cleaned segment's indexes, written beside it on the worker, are exactly what
    ``LogSegment.recover`` rebuilds from its batches (index.interval.bytes is 128 here)."""
    directory = tmp_path / "compacted-0"
    log = filled_log(directory)
    for i in range(200):  # big enough cleaned segments to hold index entries
        append(log, [(b"u%d" % i, b"unique" * 10)], T0 + 300)
    log.roll(T0 + 300)
    append(log, [(b"tail", b"t")], T0 + 300)
    clean(log, T0 + 1_000)
    suffixes = (".index", ".timeindex", ".txnindex")
    written = {
        path.name: path.read_bytes()
        for path in sorted(directory.iterdir())
        if path.suffix in suffixes and path.stat().st_size
    }
    assert any(name.endswith(".index") for name in written), "some index has entries"
    log.close_handlers()
    reopened = PartitionLog.open(directory, CONFIG, recovery_point=0, had_clean_shutdown=False)
    reopened.close()
    rebuilt = {
        path.name: path.read_bytes()
        for path in sorted(directory.iterdir())
        if path.suffix in suffixes and path.stat().st_size
    }
    active = [name for name in written if name.startswith(f"{log.active_segment.base_offset:020d}")]
    assert {k: v for k, v in written.items() if k not in active} == {
        k: v for k, v in rebuilt.items() if k not in active
    }
