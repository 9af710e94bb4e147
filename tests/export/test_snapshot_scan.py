"""Snapshot split planning and reading for pykraft-metadata (pure; no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.export.metadata_rows import RECORD_COLUMNS, SOURCE_SNAPSHOT, record_fields
from pykraft.export.snapshot_scan import (
    MetadataScanError,
    plan_snapshot_splits,
    read_snapshot_split,
    select_snapshots,
    snapshot_directory,
    snapshot_split_rows,
)
from pykraft.metadata.records import PartitionRecord
from pykraft.metadata.snapshot import SnapshotError, read_snapshot
from tests.export.fixtures import MetadataFixture, build_metadata_dir


@pytest.fixture(scope="module")
def meta(tmp_path_factory: pytest.TempPathFactory) -> MetadataFixture:
    return build_metadata_dir(tmp_path_factory.mktemp("meta"))


@pytest.mark.parametrize("records_per_split", [1, 3, 7, 50_000])
def test_splits_read_exactly_what_read_snapshot_reads(
    meta: MetadataFixture, records_per_split: int
) -> None:
    for path in meta.snapshot_paths:
        header, records = read_snapshot(path)
        splits = plan_snapshot_splits(path, records_per_split)
        assert len(splits) == -(-len(records) // records_per_split)
        got = [pair for split in splits for pair in read_snapshot_split(split)]
        assert got == list(enumerate(records))
        assert {(s.end_offset, s.epoch, s.created_ms) for s in splits} == {
            (header.end_offset, header.epoch, header.created_ms)
        }


def test_rows_carry_position_and_one_struct(meta: MetadataFixture) -> None:
    path = meta.snapshot_paths[-1]
    header, records = read_snapshot(path)
    rows = [row for split in plan_snapshot_splits(path, 4) for row in snapshot_split_rows(split)]
    assert len(rows) == len(records)
    for index, (row, record) in enumerate(zip(rows, records, strict=True)):
        named = dict(zip(RECORD_COLUMNS, row, strict=True))
        assert (named["source"], named["end_offset"], named["epoch"], named["offset"]) == (
            SOURCE_SNAPSHOT,
            header.end_offset,
            header.epoch,
            None,
        )
        assert (named["record_index"], named["record_type"], named["timestamp"]) == (
            index,
            type(record).__name__,
            header.created_ms,
        )
        structs = [value for value in row[10:] if value is not None]
        assert structs == [record_fields(record)]
    partition = next(r for r in records if isinstance(r, PartitionRecord))
    assert record_fields(partition)[:4] == (
        partition.partition_id,
        partition.topic_id,
        list(partition.replicas),
        list(partition.isr),
    )


def test_selecting_snapshots(meta: MetadataFixture) -> None:
    directory = snapshot_directory(meta.metadata_dir)
    first, last = meta.snapshot_paths
    assert select_snapshots(directory, "all") == [first, last]
    assert select_snapshots(directory, "latest") == [last]
    assert select_snapshots(directory, first.name.removesuffix(".checkpoint")) == [first]
    assert select_snapshots(directory, str(int(first.name[:20]))) == [first]
    with pytest.raises(MetadataScanError, match="no snapshot '99'"):
        select_snapshots(directory, "99")


def test_empty_and_missing_directories(tmp_path: Path) -> None:
    with pytest.raises(MetadataScanError, match="no snapshot files"):
        select_snapshots(snapshot_directory(tmp_path), "all")
    with pytest.raises(MetadataScanError, match="does not exist"):
        snapshot_directory(tmp_path / "nope")


def corrupt(tmp_path: Path, meta: MetadataFixture, line: int, replace: bytes) -> Path:
    source = meta.snapshot_paths[-1]
    lines = source.read_bytes().split(b"\n")
    lines[line - 1] = lines[line - 1].replace(b'"leader":', replace, 1)
    target = tmp_path / source.name
    target.write_bytes(b"\n".join(lines))
    return target


def test_corrupt_snapshot_names_file_and_line_like_read_snapshot(
    tmp_path: Path, meta: MetadataFixture
) -> None:
    # Line 8 is a PartitionRecord; a flipped field name breaks the checksum and the record.
    path = corrupt(tmp_path, meta, 8, b'"leadex":')
    with pytest.raises(SnapshotError) as ours:
        plan_snapshot_splits(path)
    with pytest.raises(SnapshotError) as reference:
        read_snapshot(path)
    assert str(ours.value) == str(reference.value)
    assert ours.value.source == str(path) and ours.value.line == 8


def test_truncated_snapshot(tmp_path: Path, meta: MetadataFixture) -> None:
    path = tmp_path / meta.snapshot_paths[-1].name
    path.write_bytes(meta.snapshot_paths[-1].read_bytes()[:-30])
    with pytest.raises(SnapshotError, match=f"snapshot {path}, line"):
        plan_snapshot_splits(path)
