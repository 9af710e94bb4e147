"""Planning and reading a ``pykraft-metadata`` scan of snapshot files.

Snapshot files are JSON lines (DESIGN.md §3.2, ``metadata/snapshot.py``): a header, the
records, a footer with the CRC32C of everything before it. A big snapshot (100,000 partitions is
~100,000 lines) is read in parallel: ``plan_snapshot_splits`` verifies the whole file once on
the driver — checksum, header, record count, the name against the header — and cuts the record
lines into splits of at most ``records_per_split`` lines at line boundaries. Each split then
decodes only its lines with ``metadata.codec`` (the same decoder ``read_snapshot`` uses), and a
line that does not decode raises ``SnapshotError`` naming the file and the 1-based line.

Verification is a fast path: when anything is off, ``metadata.snapshot.read_snapshot`` is run on
the file so the error is exactly the one the project's own reader gives (file and line).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import attrs
import crc32c

from pykraft.export.metadata_rows import SOURCE_SNAPSHOT, RecordPosition, record_row
from pykraft.metadata.codec import MetadataCodecError, decode_record
from pykraft.metadata.records import MetadataRecord
from pykraft.metadata.snapshot import SnapshotError, SnapshotId, list_snapshots, read_snapshot

DEFAULT_RECORDS_PER_SPLIT = 50_000
SNAPSHOTS_SUBDIR = "snapshots"  # <metadata.log.dir>/snapshots/ (quorum/snapshots.py)


class MetadataScanError(ValueError):
    """The metadata path or the scan options cannot be used; the message says which."""


@attrs.frozen(order=True)
class SnapshotSplit:
    """Record lines ``[start_byte, end_byte)`` of one snapshot; the first is record ``first_index``.

    Record ``i`` of a snapshot is on line ``i + 2`` (line 1 is the header).
    """

    path: str
    snapshot_id: str
    end_offset: int
    epoch: int
    created_ms: int
    first_index: int
    start_byte: int
    end_byte: int


def snapshot_directory(path: Path) -> Path:
    """A controller's ``metadata.log.dir`` (holding ``snapshots/``) or a snapshot directory."""
    if not path.is_dir():
        raise MetadataScanError(f"metadata path {path} does not exist or is not a directory")
    nested = path / SNAPSHOTS_SUBDIR
    return nested if nested.is_dir() else path


def select_snapshots(directory: Path, selector: str) -> list[Path]:
    """Snapshots of ``directory`` chosen by ``selector``, oldest first.

    ``all``; ``latest``; a snapshot id ``<end offset 20 digits>-<epoch 10 digits>``; or an end
    offset (the latest epoch's snapshot ending there).
    """
    snapshots = list_snapshots(directory)
    if not snapshots:
        raise MetadataScanError(
            f"no snapshot files (<end offset>-<epoch>.checkpoint) in {directory}"
        )
    if selector == "all":
        return snapshots
    if selector == "latest":
        return snapshots[-1:]
    if selector.isdigit():
        chosen = [p for p in snapshots if _snapshot_id(p).end_offset == int(selector)]
    else:
        chosen = [p for p in snapshots if p.name == f"{selector}.checkpoint"]
    if not chosen:
        available = ", ".join(p.name.removesuffix(".checkpoint") for p in snapshots)
        raise MetadataScanError(f"no snapshot {selector!r} in {directory}; have {available}")
    return chosen[-1:]


def _snapshot_id(path: Path) -> SnapshotId:
    snapshot_id = SnapshotId.parse(path.name)
    assert snapshot_id is not None, path  # list_snapshots only returns parseable names
    return snapshot_id


def plan_snapshot_splits(
    path: Path, records_per_split: int = DEFAULT_RECORDS_PER_SPLIT
) -> list[SnapshotSplit]:
    """Verify ``path`` and cut its record lines into splits; raises SnapshotError if corrupt."""
    if records_per_split < 1:
        raise MetadataScanError(f"recordsPerSplit must be at least 1, got {records_per_split}")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SnapshotError(str(path), 0, f"cannot read: {error.strerror}") from None
    verified = _verify(path, data)
    if verified is None:
        read_snapshot(path)  # raises the project's own error, naming the file and line
        raise SnapshotError(str(path), 0, "failed verification")  # unreachable in practice
    header, body_start, body_end = verified
    splits = []
    position, index = body_start, 0
    while position < body_end:
        end = position
        for _ in range(records_per_split):
            end = data.index(b"\n", end, body_end) + 1
            if end >= body_end:
                break
        splits.append(
            SnapshotSplit(
                str(path),
                path.name.removesuffix(".checkpoint"),
                header["endOffset"],
                header["epoch"],
                header["createdMs"],
                index,
                position,
                end,
            )
        )
        index += data.count(b"\n", position, end)
        position = end
    return splits


def _verify(path: Path, data: bytes) -> tuple[dict[str, int], int, int] | None:
    """Header fields and the byte range of the record lines, or None when anything is off."""
    if not data.endswith(b"\n"):
        return None
    header_end = data.find(b"\n") + 1
    footer_start = data.rfind(b"\n", 0, len(data) - 1) + 1
    if header_end <= 0 or footer_start < header_end:
        return None
    try:
        header = json.loads(data[:header_end])
        footer = json.loads(data[footer_start:])
    except ValueError:
        return None
    if type(header) is not dict or type(footer) is not dict:
        return None
    if header.get("type") != "SnapshotHeader" or footer.get("type") != "SnapshotFooter":
        return None
    if footer.get("crc32c") != crc32c.crc32c(memoryview(data)[:footer_start]):
        return None
    fields = ("endOffset", "epoch", "recordCount", "createdMs")
    if any(type(header.get(field)) is not int for field in fields):
        return None
    if data.count(b"\n", header_end, footer_start) != header["recordCount"]:
        return None
    named = SnapshotId.parse(path.name)
    if named is not None and named != SnapshotId(header["endOffset"], header["epoch"]):
        return None
    return header, header_end, footer_start


def read_snapshot_split(split: SnapshotSplit) -> Iterator[tuple[int, MetadataRecord]]:
    """``(record index, record)`` for the split's lines; SnapshotError names file and line."""
    try:
        with open(split.path, "rb") as file:
            file.seek(split.start_byte)
            data = file.read(split.end_byte - split.start_byte)
    except OSError as error:
        raise SnapshotError(split.path, 0, f"cannot read: {error.strerror}") from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for offset, line in enumerate(lines):
        index = split.first_index + offset
        try:
            yield index, decode_record(line)
        except MetadataCodecError as error:
            raise SnapshotError(split.path, index + 2, str(error)) from None


def snapshot_split_rows(split: SnapshotSplit) -> Iterator[tuple[object, ...]]:
    """``records`` view rows of one split (timestamps in milliseconds)."""
    for index, record in read_snapshot_split(split):
        position = RecordPosition(
            SOURCE_SNAPSHOT,
            split.snapshot_id,
            split.end_offset,
            None,
            split.epoch,
            split.created_ms,
            index,
        )
        yield record_row(record, position)
