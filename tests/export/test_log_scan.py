"""Split planning and filter pushdown for pykraft-log (pure; no Spark)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pykraft.export.log_dirs import LogScanError, ReplicaSize, parse_log_dirs, replica_sizes
from pykraft.export.log_scan import (
    LogFilter,
    Op,
    PartitionLocation,
    Predicate,
    discover_partitions,
    parse_offset_ranges,
    plan_splits,
)
from pykraft.export.segment_reader import LogRow, read_segment_rows
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import CompressionType
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.export.fixtures import LogFixture, build_log_dirs, expected_log_rows


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> LogFixture:
    return build_log_dirs(tmp_path_factory.mktemp("logs"))


def check(predicates: list[Predicate], expected: LogFilter | None) -> None:
    log_filter: LogFilter | None = LogFilter()
    for predicate in predicates:
        assert log_filter is not None
        log_filter = log_filter.push(predicate)
    assert log_filter == expected


def test_pushdown_decisions() -> None:
    check([Predicate("topic", Op.EQ, ("a",))], LogFilter(topics=frozenset({"a"})))
    check(
        [Predicate("topic", Op.IN, ("a", "b")), Predicate("topic", Op.EQ, ("b",))],
        LogFilter(topics=frozenset({"b"})),
    )
    check([Predicate("partition", Op.IN, (0, 2))], LogFilter(partitions=frozenset({0, 2})))
    check(
        [Predicate("offset", Op.GE, (5,)), Predicate("offset", Op.LT, (9,))],
        LogFilter(min_offset=5, max_offset=9),
    )
    check(
        [Predicate("offset", Op.GT, (5,)), Predicate("offset", Op.LE, (9,))],
        LogFilter(min_offset=6, max_offset=10),
    )
    check(
        [Predicate("offset", Op.EQ, (7,)), Predicate("offset", Op.GE, (3,))],
        LogFilter(min_offset=7, max_offset=8),
    )
    # Not exact here: Spark must evaluate these itself.
    check([Predicate("value", Op.EQ, (b"x",))], None)
    check([Predicate("offset", Op.IN, (1, 2))], None)
    check([Predicate("topic", Op.GT, ("a",))], None)
    check([Predicate("partition", Op.EQ, ("0",))], None)


def test_log_dirs_syntax() -> None:
    assert parse_log_dirs(" /a , /b,") == [Path("/a"), Path("/b")]
    with pytest.raises(LogScanError, match="no log dirs"):
        parse_log_dirs(" , ")


def test_discovery_reads_checkpoints_and_skips_deleted_dirs(logs: LogFixture) -> None:
    found = {
        p.topic_partition: (p.directory, p.log_start_offset, p.high_watermark)
        for p in discover_partitions(logs.log_dirs)
    }
    assert found == {tp: (d, start, hw) for tp, (d, start, hw, _) in logs.partitions.items()}


def test_replica_sizes_are_segment_bytes_as_kafka_log_dirs_reports(logs: LogFixture) -> None:
    # DescribeLogDirs' PartitionSize is the log's size: its segment files, not the indexes.
    expected = []
    for tp, (directory, *_) in logs.partitions.items():
        size = sum(p.stat().st_size for p in directory.glob("*.log"))
        node_id = 1 if directory.parent == logs.log_dirs[0] else None  # b has no meta.properties
        expected.append(ReplicaSize(tp.topic, tp.partition, node_id, str(directory.parent), size))
    assert replica_sizes(logs.log_dirs) == sorted(expected, key=lambda r: (r.topic, r.partition))
    assert all(r.size > 0 for r in expected)
    with pytest.raises(LogScanError, match="is given twice"):
        replica_sizes([logs.log_dirs[0], logs.log_dirs[0]])


def test_missing_log_dir_and_log_dir_given_twice(tmp_path: Path, logs: LogFixture) -> None:
    with pytest.raises(LogScanError, match="does not exist"):
        discover_partitions([tmp_path / "nope"])
    # Kafka's LogManager refuses a duplicate log dir; a partition in two log dirs is the
    # replica rule's business (tests/export/test_replica_choice.py).
    with pytest.raises(LogScanError, match="is given twice"):
        discover_partitions([logs.log_dirs[0], logs.log_dirs[0]])


def test_one_split_per_segment_and_rows_match_storage_reader(logs: LogFixture) -> None:
    splits = plan_splits(discover_partitions(logs.log_dirs), LogFilter())
    # orders-0 has many segments: one split each, except those wholly above the high watermark.
    directory, _, hw, _ = logs.partitions[TopicPartition("orders", 0)]
    orders0 = [s.path for s in splits if (s.topic, s.partition) == ("orders", 0)]
    below_hw = sorted(str(p) for p in directory.glob("*.log") if int(p.stem) < hw)
    assert orders0 == below_hw and len(orders0) > 2
    rows = [row for split in splits for row in read_segment_rows(split)]
    assert [_tuple(r) for r in rows] == expected_log_rows(logs)


def test_default_stops_at_high_watermark_and_option_reads_to_end(logs: LogFixture) -> None:
    partitions = discover_partitions(logs.log_dirs)
    everything = plan_splits(partitions, LogFilter(), ignore_high_watermark=True)
    rows = [_tuple(r) for split in everything for r in read_segment_rows(split)]
    assert rows == expected_log_rows(logs, ignore_high_watermark=True)
    # audit-log-0 has no checkpoint entry: high watermark 0, so nothing by default.
    default = plan_splits(partitions, LogFilter())
    assert not [s for s in default if s.topic == "audit-log"]


def test_pruning_by_topic_partition_and_offsets(logs: LogFixture) -> None:
    partitions = discover_partitions(logs.log_dirs)
    log_filter = LogFilter(
        topics=frozenset({"orders"}), partitions=frozenset({0}), min_offset=10, max_offset=14
    )
    splits = plan_splits(partitions, log_filter)
    assert {(s.topic, s.partition) for s in splits} == {("orders", 0)}
    all_segments = plan_splits(
        partitions, LogFilter(topics=frozenset({"orders"}), partitions=frozenset({0}))
    )
    assert len(splits) < len(all_segments)
    offsets = [r.offset for s in splits for r in read_segment_rows(s)]
    assert offsets == list(range(10, 14))


def test_kafka_style_offset_ranges(logs: LogFixture) -> None:
    ranges = parse_offset_ranges('{"orders": {"1": -2, "2": 4}}', '{"orders": {"2": 6}}')
    assert ranges == {TopicPartition("orders", 1): (0, None), TopicPartition("orders", 2): (4, 6)}
    splits = plan_splits(discover_partitions(logs.log_dirs), LogFilter(), offset_ranges=ranges)
    got = sorted((r.partition, r.offset) for s in splits for r in read_segment_rows(s))
    wanted = {(1, offset) for offset in range(100)} | {(2, 4), (2, 5)}
    expected = sorted(
        (row[1], row[2])
        for row in expected_log_rows(logs)
        if row[0] == "orders" and (row[1], row[2]) in wanted
    )
    assert got == expected
    for bad in ('{"t": {"x": 1}}', "[1]", "nope", '{"t": {"0": -1}}'):
        with pytest.raises(LogScanError):
            parse_offset_ranges(bad, None)


def test_splits_do_not_overlap_when_the_cleaner_merges_segments(tmp_path: Path) -> None:
    # The cleaner merges segments [A, B] into one file named after A (storage/cleaner.py);
    # when task B has read B before the swap and task A reads A after it, split A must
    # still stop at B's base offset, or B's records are exported twice.
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig(segment_bytes=2000))
    for n in range(30):
        batch = build_batch([SimpleRecord(key=b"k%d" % n, value=b"v" * 40, timestamp=n)] * 3)
        log.append_as_leader(bytearray(batch), 0, 0)
    log.flush()
    log.close()
    location = PartitionLocation(TopicPartition("t", 0), directory, 0, 90)
    for ranges in (None, {TopicPartition("t", 0): (0, 90)}):
        split_a, split_b, *rest = plan_splits([location], LogFilter(), offset_ranges=ranges)
        assert split_a.end_offset == split_b.base_offset
        offsets_b = [r.offset for r in read_segment_rows(split_b)]
        merged = Path(split_a.path)
        original = merged.read_bytes()
        merged.write_bytes(original + Path(split_b.path).read_bytes())
        offsets_a = [r.offset for r in read_segment_rows(split_a)]
        merged.write_bytes(original)
        offsets_rest = [r.offset for s in rest for r in read_segment_rows(s)]
        assert offsets_a + offsets_b + offsets_rest == list(range(90))


def _tuple(row: LogRow) -> tuple[object, ...]:
    return attrs.astuple(row, recurse=False)


def test_fixture_holds_every_codec_and_a_transaction(logs: LogFixture) -> None:
    # So the row-equality tests above cover gzip, snappy, lz4 and zstd decoding and the
    # skipping of control batches (KIP-98 commit markers).
    from pykraft.storage.record_batch import iter_batches

    codecs, control = set(), 0
    for directory, *_ in logs.partitions.values():
        for segment in directory.glob("*.log"):
            for _, header in iter_batches(segment.read_bytes()):
                codecs.add(header.compression)
                control += header.is_control
    assert codecs == set(CompressionType) and control == 1
