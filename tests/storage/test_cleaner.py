"""The log cleaner on a real log: Kafka's ``LogCleanerTest`` cases (each names its source) and
a Hypothesis model of the keep/drop decision (latest value per key, tombstones until
``delete.retention.ms`` after the cleaning that first kept them, order preserved)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import attrs
import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from pykraft.storage.cleaner import Cleaner
from pykraft.storage.cleaner_batches import delete_horizon_ms
from pykraft.storage.log_config import CleanupPolicy
from pykraft.storage.record_batch import CompressionType, iter_batches
from pykraft.storage.records import iter_records
from tests.storage.cleaner_support import (
    CONFIG,
    Row,
    append,
    append_marker,
    batches,
    clean,
    open_log,
    rows,
)

T0 = 1_000_000


def test_latest_value_per_key_survives(tmp_path: Path) -> None:
    """LogCleanerTest.testCleanSegments: only the last record of each key stays."""
    log = open_log(tmp_path / "t-0")
    for i in range(60):
        append(log, [(b"k%d" % (i % 3), b"v%d" % i)], T0 + i)
    append(log, [(b"x", b"active")], T0 + 100)  # keeps earlier segments inactive
    log.roll(T0 + 100)
    stats = clean(log, T0 + 200)
    assert stats is not None and stats.groups_swapped > 0
    assert rows(log) == [
        (57, b"k0", b"v57"),
        (58, b"k1", b"v58"),
        (59, b"k2", b"v59"),
        (60, b"x", b"active"),
    ]


def test_active_segment_is_never_cleaned(tmp_path: Path) -> None:
    """LogCleanerManagerTest: the active segment bounds the first uncleanable offset."""
    log = open_log(tmp_path / "t-0")
    for i in range(5):
        append(log, [(b"k", b"v%d" % i)], T0 + i)
    assert len(log.segments) == 1
    assert clean(log, T0 + 10) is None
    assert [value for _, _, value in rows(log)] == [b"v%d" % i for i in range(5)]


def test_tombstone_kept_until_delete_retention_passes(tmp_path: Path) -> None:
    """LogCleanerTest.testCleaningWithDeletes / KIP-534: the first cleaning sets the delete
    horizon (now + delete.retention.ms); a cleaning after it removes the tombstone."""
    log = open_log(tmp_path / "t-0")
    for i in range(30):
        append(log, [(b"k%d" % (i % 2), b"v%d" % i)], T0)
    append(log, [(b"k0", None)], T0)
    log.roll(T0)
    append(log, [(b"other", b"o")], T0)
    log.roll(T0)
    clean(log, T0)
    assert (30, b"k0", None) in rows(log)
    horizons = [delete_horizon_ms(h) for h, _ in batches(log) if h.base_offset == 30]
    assert horizons == [T0 + CONFIG.delete_retention_ms]
    clean(log, T0 + CONFIG.delete_retention_ms - 1, checkpoint=0)
    assert (30, b"k0", None) in rows(log), "still within delete.retention.ms"
    clean(log, T0 + CONFIG.delete_retention_ms, checkpoint=0)
    assert [row for row in rows(log) if row[1] == b"k0"] == []
    assert (29, b"k1", b"v29") in rows(log)


def test_keyless_records_are_removed(tmp_path: Path) -> None:
    """Cleaner.shouldRetainRecord: a record without a key in a compacted log is invalid. A
    compacted log refuses keyless appends (LogValidator.validateKey), so it got this one while
    its topic was still cleanup.policy=delete."""
    log = open_log(
        tmp_path / "t-0", attrs.evolve(CONFIG, cleanup_policy=frozenset({CleanupPolicy.DELETE}))
    )
    append(log, [(None, b"no key"), (b"k", b"v")], T0)
    log.update_config(CONFIG)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    clean(log, T0)
    assert rows(log) == [(1, b"k", b"v"), (2, b"z", b"z")]


def test_aborted_records_and_their_marker_go(tmp_path: Path) -> None:
    """LogCleanerTest.testAbortMarkerRemoval: aborted data goes at once; the abort marker stays
    while the cleaning saw a batch of its transaction (and is indexed in the new segment), then,
    needed by no record, gets a delete horizon and goes after delete.retention.ms."""
    log = open_log(tmp_path / "t-0")
    txn = {"producer_id": 7, "producer_epoch": 0, "is_transactional": True}
    append(log, [(b"k", b"aborted")], T0, base_sequence=0, **txn)
    append_marker(log, 7, commit=False, now_ms=T0)
    append(log, [(b"c", b"committed")], T0, base_sequence=1, **txn)
    append_marker(log, 7, commit=True, now_ms=T0)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    clean(log, T0)
    assert rows(log) == [(2, b"c", b"committed"), (4, b"z", b"z")]
    assert [h.base_offset for h, _ in batches(log) if h.is_control] == [1, 3]
    assert [(t.producer_id, t.last_offset) for s in log.segments for t in s.aborted_txns] == [
        (7, 1)
    ]
    clean(log, T0, checkpoint=0)
    abort = [h for h, _ in batches(log) if h.base_offset == 1]
    assert [delete_horizon_ms(h) for h in abort] == [T0 + CONFIG.delete_retention_ms]
    clean(log, T0 + CONFIG.delete_retention_ms, checkpoint=0)
    assert [h.base_offset for h, _ in batches(log) if h.is_control] == [3]


def test_commit_marker_kept_while_its_records_remain(tmp_path: Path) -> None:
    """LogCleanerTest.testCommitMarkerRemoval: a commit marker stays while records of its
    transaction are in the log."""
    log = open_log(tmp_path / "t-0")
    txn = {"producer_id": 9, "producer_epoch": 0, "is_transactional": True}
    append(log, [(b"a", b"committed")], T0, base_sequence=0, **txn)
    append_marker(log, 9, commit=True, now_ms=T0)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    clean(log, T0 + 10 * CONFIG.delete_retention_ms)
    assert rows(log) == [(0, b"a", b"committed"), (2, b"z", b"z")]
    assert [h.base_offset for h, _ in batches(log) if h.is_control] == [1]


def test_producer_last_batch_kept_as_empty_header(tmp_path: Path) -> None:
    """LogCleanerTest.testEmptyBatchRemovalWithSequence: the batch holding a live producer's
    last sequence stays, emptied, so the producer's state survives."""
    log = open_log(tmp_path / "t-0")
    append(log, [(b"k", b"old")], T0, producer_id=5, producer_epoch=0, base_sequence=0)
    append(log, [(b"k", b"new")], T0)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    clean(log, T0)
    assert rows(log) == [(1, b"k", b"new"), (2, b"z", b"z")]
    first = batches(log)[0][0]
    assert (first.base_offset, first.records_count, first.producer_id) == (0, 0, 5)
    assert first.base_sequence == 0 and first.last_offset == 0


def test_partial_cleaning_when_the_map_is_full(tmp_path: Path) -> None:
    """LogCleanerTest.testPartialSegmentClean: a full offset map ends the cleaning early;
    the records past it stay and the next dirty offset is the map's end."""
    log = open_log(tmp_path / "t-0")
    for i in range(40):
        append(log, [(b"k%d" % i, b"v")], T0)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    stats = clean(log, T0, capacity=10)
    assert stats is not None and stats.end_offset == 10
    assert len(rows(log)) == 41


def test_segments_stay_contiguous_and_reopen(tmp_path: Path) -> None:
    """A cleaned log reopens with nothing to repair (its segments continue each other)."""
    directory = tmp_path / "t-0"
    log = open_log(directory)
    for i in range(80):
        append(log, [(b"k%d" % (i % 4), b"v%d" % i)], T0)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    clean(log, T0)
    before = rows(log)
    log.close()
    reopened = open_log(directory)
    assert rows(reopened) == before
    assert reopened.load_report.rebuilt_indexes == ()
    assert reopened.load_report.deleted_segments == ()


KEYS = st.sampled_from([b"a", b"b", b"c", b"d", b"e"])
RECORD = st.tuples(KEYS, st.one_of(st.none(), st.binary(min_size=1, max_size=40)))
BATCH = st.lists(RECORD, min_size=1, max_size=4)
ROUND = st.lists(BATCH, min_size=1, max_size=25)
# delete.retention.ms is 1,000: pauses on both sides of it and exactly at it.
PAUSE_MS = st.sampled_from([0, 1, 999, 1_000, 1_001, 2_500])
Written = tuple[int, bytes | None, bytes | None]


class Model:
    """What the log should hold: every write, and when each tombstone was first kept by a
    cleaning (its batch's delete horizon is that time plus delete.retention.ms)."""

    def __init__(self) -> None:
        self.written: list[Written] = []
        self.first_kept_ms: dict[int, int] = {}

    def check(
        self,
        before: dict[int, tuple[bytes | None, bytes | None]],
        after: list[Row],
        start: int,
        end: int,
        now_ms: int,
    ) -> None:
        assert all(before.get(o) == (k, v) for o, k, v in after), "kept records unchanged"
        assert [o for o, _, _ in after] == sorted(o for o, _, _ in after), "order preserved"
        latest = {key: (offset, value) for offset, key, value in self.written}
        last_seen = {key: (offset, value) for offset, key, value in after}
        for key, (offset, value) in latest.items():
            kept_since = self.first_kept_ms.get(offset)
            expired = (
                value is None
                and offset < end  # at or below the last offset this cleaning mapped
                and kept_since is not None
                and now_ms >= kept_since + CONFIG.delete_retention_ms
            )
            assert last_seen.get(key) == (None if expired else (offset, value))
        mapped = {key: offset for offset, key, _ in self.written if start <= offset < end}
        for offset, row_key, _ in after:
            if offset < end and row_key in mapped:
                assert offset == mapped[row_key], f"{offset} is not the latest of {row_key!r}"

    def cleaned(self, after: list[Row], processed_end: int, now_ms: int) -> None:
        for offset, _, value in after:
            if value is None and offset < processed_end:
                self.first_kept_ms.setdefault(offset, now_ms)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rounds=st.lists(st.tuples(ROUND, PAUSE_MS), min_size=1, max_size=3),
    capacity=st.integers(2, 50),
)
def test_model(
    rounds: list[tuple[list[list[tuple[bytes, bytes | None]]], int]], capacity: int
) -> None:
    """Against a model: after each cleaning, every record kept is unchanged and in order; each
    key's last record is its latest write; a record below the cleaning's end stays only if it
    is its key's latest write there; a tombstone goes only once ``delete.retention.ms`` has
    passed since the first cleaning that kept it."""
    model = Model()
    now, checkpoint = T0, 0
    with tempfile.TemporaryDirectory() as directory:
        log = open_log(Path(directory) / "t-0")
        for batches_of_round, pause_ms in rounds:
            tail: list[tuple[bytes, bytes | None]] = [(b"tail", b"t")]
            for records in [*batches_of_round, tail]:
                if records is tail:
                    log.roll(now)  # the tail keeps the round's segments inactive
                offset = log.log_end_offset
                append(log, records, now)
                model.written.extend((offset + i, k, v) for i, (k, v) in enumerate(records))
            before = {offset: (key, value) for offset, key, value in rows(log)}
            bases = [s.base_offset for s in log.segments]
            stats = clean(log, now, checkpoint, capacity=capacity)
            end = -1 if stats is None else stats.end_offset
            model.check(before, rows(log), checkpoint, end, now)
            if stats is not None:
                # Every segment below the end was rewritten, the last one whole.
                processed_end = min((b for b in bases if b >= end), default=end)
                model.cleaned(rows(log), max(end, processed_end), now)
                checkpoint = end
            now += pause_ms
        log.close()


def test_cleaner_reads_its_throttle_and_can_stop(tmp_path: Path) -> None:
    """Kafka's checkDone: the cleaner reports every batch it moves and stops when told."""
    log = open_log(tmp_path / "t-0")
    for i in range(30):
        append(log, [(b"k", b"v%d" % i)], T0)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    moved: list[int] = []
    stats = clean(log, T0, cleaner=Cleaner(100, check_done=moved.append))
    assert stats is not None and sum(moved) == stats.bytes_read + stats.bytes_written


def test_a_fetch_into_a_gap_serves_the_next_kept_batch(tmp_path: Path) -> None:
    """Kafka's LocalLog.read on a compacted log: a fetch at a removed offset starts at the next
    batch kept; the read path's corruption check (below the recovery point) accepts the gaps."""
    log = open_log(tmp_path / "t-0")
    for i in range(40):
        append(log, [(b"k%d" % (i % 2), b"v%d" % i)], T0)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    clean(log, T0)
    log.flush()  # everything is below the recovery point: every read is verified
    data = log.read(0, 10**6, log.log_end_offset).read_bytes()
    served = [
        (record.offset, record.key, record.value)
        for position, _ in iter_batches(data)
        for record in iter_records(data, position)
    ]
    assert served == rows(log) == [(38, b"k0", b"v38"), (39, b"k1", b"v39"), (40, b"z", b"z")]
    assert log.corruptions.count == 0


def test_compressed_batches_keep_their_offsets_and_clean_again(tmp_path: Path) -> None:
    """MemoryRecords.filterTo: a rebuilt batch keeps the original compression and each kept
    record's own offset; a second cleaning reads those gaps back."""
    log = open_log(tmp_path / "t-0")
    for i in range(0, 60, 4):
        records = [(b"k%d" % ((i + j) % 3), b"v%d" % (i + j)) for j in range(4)]
        append(log, records, T0, compression=CompressionType.LZ4)
    log.roll(T0)
    append(log, [(b"z", b"z")], T0)
    first = clean(log, T0)
    assert first is not None
    kept = [h for h, _ in batches(log) if h.records_count and h.last_offset < 60]
    assert all(h.compression is CompressionType.LZ4 for h in kept)
    append(log, [(b"k0", b"newest")], T0)
    log.roll(T0)
    append(log, [(b"y", b"y")], T0)
    clean(log, T0, checkpoint=first.end_offset)
    assert rows(log) == [
        (58, b"k1", b"v58"),
        (59, b"k2", b"v59"),
        (60, b"z", b"z"),
        (61, b"k0", b"newest"),
        (62, b"y", b"y"),
    ]
