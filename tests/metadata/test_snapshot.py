"""Snapshot files (DESIGN.md §3.2): naming, round trips, and corruption detection."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import attrs
import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.metadata.snapshot import (
    SnapshotError,
    SnapshotId,
    decode_snapshot,
    encode_snapshot,
    image_to_records,
    latest_snapshot,
    list_snapshots,
    load_snapshot,
    read_snapshot,
    snapshot_to_image,
    write_snapshot,
)
from tests.metadata.strategies import record_sequences

FOO = "ThIaNwRnSM2Nt9Mx1v0RvA"
IMAGE = apply_records(
    MetadataImage.EMPTY,
    [
        FeatureLevelRecord(name="metadata.version", feature_level=7),
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id="inc",
            broker_epoch=10,
            fenced=False,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),),
        ),
        TopicRecord(name="foo", topic_id=FOO),
        PartitionRecord(topic_id=FOO, partition_id=1, replicas=(1,), isr=(1,), leader=1),
        PartitionRecord(topic_id=FOO, partition_id=0, replicas=(1,), isr=(1,), leader=1),
        ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value="1000"),
        ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=2000),
    ],
    offset=1042,
    epoch=3,
)


def test_file_names_follow_kafkas_snapshot_naming() -> None:
    snapshot_id = SnapshotId(end_offset=1043, epoch=3)
    assert snapshot_id.file_name() == "00000000000000001043-0000000003.checkpoint"
    assert SnapshotId.parse(snapshot_id.file_name()) == snapshot_id
    for name in [
        "1043-3.checkpoint",
        "00000000000000001043-0000000003.checkpoint.partial",
        "00000000000000001043-0000000003.log",
        "x0000000000000001043-0000000003.checkpoint",
    ]:
        assert SnapshotId.parse(name) is None


def test_layout_is_header_records_footer_and_jq_readable(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, IMAGE, created_ms=1_700_000_000_000)
    assert path.name == "00000000000000001043-0000000003.checkpoint"
    data = path.read_bytes()
    lines = data.decode("utf-8").splitlines()
    header, *records, footer = (json.loads(line) for line in lines)
    assert header == {
        "type": "SnapshotHeader",
        "version": 0,
        "endOffset": 1043,
        "epoch": 3,
        "recordCount": 7,
        "createdMs": 1_700_000_000_000,
    }
    assert [r["type"] for r in records] == [
        "FeatureLevelRecord",
        "RegisterBrokerRecord",
        "TopicRecord",
        "PartitionRecord",
        "PartitionRecord",
        "ConfigRecord",
        "ProducerIdsRecord",
    ]
    assert [r["partitionId"] for r in records if r["type"] == "PartitionRecord"] == [0, 1]
    footer_start = data.rindex(b"\n", 0, len(data) - 1) + 1
    assert footer == {
        "type": "SnapshotFooter",
        "version": 0,
        "crc32c": crc32c.crc32c(data[:footer_start]),
    }
    assert list(tmp_path.iterdir()) == [path]  # no partial file left behind


def test_write_then_read_and_load(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, IMAGE, created_ms=5)
    header, records = read_snapshot(path)
    assert (header.end_offset, header.epoch, header.record_count, header.created_ms) == (
        1043,
        3,
        7,
        5,
    )
    assert records == image_to_records(IMAGE)
    assert load_snapshot(path) == IMAGE


def test_an_empty_image_cannot_be_snapshotted(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nothing has been applied"):
        write_snapshot(tmp_path, MetadataImage.EMPTY, created_ms=0)


@settings(max_examples=200, deadline=None)
@given(records=record_sequences(), offset=st.integers(0, 10**12), epoch=st.integers(0, 10**6))
def test_snapshot_bytes_rebuild_exactly_the_same_image(records, offset, epoch) -> None:
    image = apply_records(MetadataImage.EMPTY, records, offset=offset, epoch=epoch)
    header, decoded = decode_snapshot(encode_snapshot(image, created_ms=1), "memory")
    assert snapshot_to_image(header, decoded, "memory") == image


@settings(max_examples=25, deadline=None)
@given(records=record_sequences(), offset=st.integers(0, 10**6))
def test_snapshot_files_rebuild_exactly_the_same_image(records, offset) -> None:
    image = apply_records(MetadataImage.EMPTY, records, offset=offset, epoch=1)
    with tempfile.TemporaryDirectory() as directory:
        path = write_snapshot(Path(directory), image, created_ms=1)
        assert load_snapshot(path) == image
        assert latest_snapshot(Path(directory)) == path


def snapshot_bytes() -> bytes:
    return encode_snapshot(IMAGE, created_ms=1)


def reseal(lines: list[bytes]) -> bytes:
    """Header and record lines with a correct footer: corruption the checksum cannot see."""
    body = joined(lines)
    footer = json.dumps({"type": "SnapshotFooter", "version": 0, "crc32c": crc32c.crc32c(body)})
    return body + footer.encode() + b"\n"


def joined(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def body_lines() -> list[bytes]:
    return snapshot_bytes().split(b"\n")[:-2]


def check_corrupt(data: bytes, line: int, fragment: str) -> None:
    with pytest.raises(SnapshotError) as error:
        header, records = decode_snapshot(data, "snap.checkpoint")
        snapshot_to_image(header, records, "snap.checkpoint")
    assert (error.value.source, error.value.line) == ("snap.checkpoint", line)
    assert fragment in str(error.value)
    assert str(error.value).startswith(f"snapshot snap.checkpoint, line {line}: ")


def test_corrupt_snapshots_name_the_line() -> None:
    data = snapshot_bytes()
    lines = body_lines()
    record_line = lines[3]  # file line 4: the TopicRecord
    # Truncated: no final newline, mid-record, header only, nothing at all.
    check_corrupt(data[:-1], 9, "truncated: the last line is incomplete")
    check_corrupt(data[: data.index(record_line) + 5], 4, "truncated")
    check_corrupt(lines[0] + b"\n", 1, "truncated: a snapshot needs a header and a footer")
    check_corrupt(joined(lines[:4]), 4, "expected the SnapshotFooter line")
    check_corrupt(b"", 1, "truncated")
    # A bit flip that breaks a record's JSON: the checksum fails and the line is named.
    flipped = data.replace(record_line, record_line.replace(b'"name"', b'"nam\xe5"'))
    check_corrupt(flipped, 4, "checksum mismatch")
    # A bit flip that still parses (a digit): only the checksum sees it; the footer is named.
    check_corrupt(data.replace(b'"port":9092', b'"port":9093'), 9, "checksum mismatch")
    # Bad footers.
    check_corrupt(joined([*lines, b"garbage"]), 9, "expected the SnapshotFooter")
    footer = b'{"type":"SnapshotFooter","version":0,"crc32c":"x"}'
    check_corrupt(joined([*lines, footer]), 9, "malformed footer")
    footer = b'{"type":"SnapshotFooter","version":1,"crc32c":0}'
    check_corrupt(joined([*lines, footer]), 9, "version 1")
    # Content the checksum vouches for but that is still wrong.
    check_corrupt(reseal(lines[:-1]), 1, "header says 7 records, found 6")
    check_corrupt(reseal([b"{}", *lines[1:]]), 1, "expected the SnapshotHeader line")
    bad_header = lines[0].replace(b'"epoch":3', b'"epoch":-3')
    check_corrupt(reseal([bad_header, *lines[1:]]), 1, "malformed header")
    check_corrupt(
        reseal([*lines[:4], b'{"type":"Mystery","version":0}', *lines[5:]]),
        5,
        "unknown metadata record type 'Mystery'",
    )
    # A record the image cannot apply (a partition before its topic) is named too.
    check_corrupt(
        reseal([lines[0], *lines[1:3], lines[4], lines[3], *lines[5:]]),
        4,
        "topic id ThIaNwRnSM2Nt9Mx1v0RvA is unknown",
    )


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_single_bit_flip_is_detected(data) -> None:
    original = snapshot_bytes()
    position = data.draw(st.integers(0, len(original) * 8 - 1))
    corrupted = bytearray(original)
    corrupted[position // 8] ^= 1 << (position % 8)
    with pytest.raises(SnapshotError):
        decode_snapshot(bytes(corrupted), "flip")


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="cannot read"):
        read_snapshot(tmp_path / "00000000000000000001-0000000001.checkpoint")
    path = write_snapshot(tmp_path, IMAGE, created_ms=1)
    renamed = path.rename(tmp_path / SnapshotId(9, 3).file_name())
    with pytest.raises(SnapshotError, match="line 1: header says SnapshotId"):
        read_snapshot(renamed)
    corrupt = tmp_path / "00000000000000001043-0000000003.checkpoint"
    corrupt.write_bytes(snapshot_bytes()[:-10])
    with pytest.raises(SnapshotError) as error:
        load_snapshot(corrupt)
    assert str(corrupt) in str(error.value)


def test_list_and_latest_snapshots(tmp_path: Path) -> None:
    assert list_snapshots(tmp_path) == []
    assert latest_snapshot(tmp_path) is None
    newer = write_snapshot(tmp_path, IMAGE, created_ms=1)
    older = write_snapshot(tmp_path, attrs.evolve(IMAGE, offset=99, epoch=2), created_ms=1)
    same_offset_older_epoch = write_snapshot(tmp_path, attrs.evolve(IMAGE, epoch=2), created_ms=1)
    (tmp_path / (newer.name + ".partial")).write_bytes(b"half")
    (tmp_path / "notes.txt").write_text("not a snapshot")
    assert list_snapshots(tmp_path) == [older, same_offset_older_epoch, newer]
    assert latest_snapshot(tmp_path) == newer
