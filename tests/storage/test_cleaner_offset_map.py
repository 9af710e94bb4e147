"""The cleaner's offset map is bounded in bytes (``log.cleaner.dedupe.buffer.size``), keys
counted at their length: Kafka's SkimpyOffsetMap bounds memory by its buffer; a map bounded by
key count alone would grow without limit on long keys."""

from __future__ import annotations

from pathlib import Path

from pykraft.storage.cleaner_offset_map import (
    ENTRY_OVERHEAD_BYTES,
    OffsetMap,
    entry_bytes,
    offset_map_capacity,
)
from tests.storage.cleaner_support import append, clean, open_log, rows

T0 = 1_000_000


def test_capacity_is_kafkas_max_desired_map_size_in_bytes() -> None:
    """Cleaner.buildOffsetMap: dedupe buffer / threads * load factor."""
    assert offset_map_capacity(128 * 1024 * 1024, 2, 0.9) == int(64 * 1024 * 1024 * 0.9)
    assert offset_map_capacity(1, 4, 0.5) == 1


def test_long_keys_fill_the_map_sooner() -> None:
    budget = 10 * entry_bytes(b"k")
    short, long = OffsetMap(budget), OffsetMap(budget)
    for i in range(10):
        assert short.has_room_for(b"%d" % i)
        short.put(b"%d" % i, i)
    assert not short.has_room_for(b"x")
    long.put(b"a" * 1_000, 0)  # one key always fits, however long
    assert long.used_bytes == 1_000 + ENTRY_OVERHEAD_BYTES
    assert not long.has_room_for(b"b")
    assert long.has_room_for(b"a" * 1_000), "a key already mapped costs nothing more"


def test_a_cleaning_of_long_keys_stops_at_the_byte_budget(tmp_path: Path) -> None:
    """LogCleanerTest.testPartialSegmentClean with keys of 500 bytes: a budget of 10 short
    keys (1,030 bytes) maps one of them (600), and the cleaning ends there."""
    log = open_log(tmp_path / "t-0")
    for i in range(6):
        append(log, [(b"%03d" % i + b"x" * 497, b"v")], T0)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    stats = clean(log, T0, capacity=10)
    assert stats is not None and stats.end_offset == 1
    assert len(rows(log)) == 7
