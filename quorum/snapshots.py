"""The controller's checkpoint files: ``<metadata.log.dir>/snapshots/<id>.checkpoint``.

A snapshot id is the file name without ``.checkpoint``: ``<end offset, 20 digits>-<epoch, 10
digits>`` (metadata/snapshot.py names the files; DESIGN.md §3.2). The Raft thread writes and
prunes them; the HTTP service lists and serves them. A file can disappear between a listing and
an open (pruned meanwhile): readers treat that as "not found".
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.snapshot import SNAPSHOT_SUFFIX, SnapshotId, write_snapshot

SUFFIX = SNAPSHOT_SUFFIX


@attrs.frozen(kw_only=True)
class SnapshotInfo:
    snapshot_id: str
    end_offset: int
    epoch: int
    size_bytes: int


def parse_snapshot_id(snapshot_id: str) -> tuple[int, int] | None:
    """(end offset, epoch) of a well-formed id, else None (ids never contain a path)."""
    parsed = SnapshotId.parse(snapshot_id + SUFFIX)
    return None if parsed is None else (parsed.end_offset, parsed.epoch)


class SnapshotStore:
    def __init__(self, directory: Path, retained: int) -> None:
        self.directory = directory
        self.retained = max(1, retained)
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, image: MetadataImage, created_ms: int) -> Path:
        return write_snapshot(self.directory, image, created_ms)

    def ensure(self, name: str, content: bytes) -> Path:
        """The checkpoint ``name`` with ``content`` (a dump received from the leader)."""
        if parse_snapshot_id(name.removesuffix(SUFFIX)) is None or not name.endswith(SUFFIX):
            raise ValueError(f"bad checkpoint name {name!r}")
        path = self.directory / name
        if path.exists() and path.stat().st_size == len(content):
            return path
        temp = path.with_name(name + ".tmp")
        with open(temp, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
        _fsync_directory(self.directory)
        return path

    def list(self) -> list[SnapshotInfo]:
        infos = []
        for path in self.directory.glob("*" + SUFFIX):
            parsed = parse_snapshot_id(path.name.removesuffix(SUFFIX))
            if parsed is None:
                continue
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            infos.append(
                SnapshotInfo(
                    snapshot_id=path.name.removesuffix(SUFFIX),
                    end_offset=parsed[0],
                    epoch=parsed[1],
                    size_bytes=size,
                )
            )
        return sorted(infos, key=lambda info: (info.end_offset, info.epoch))

    def latest(self) -> SnapshotInfo | None:
        infos = self.list()
        return infos[-1] if infos else None

    def path_for(self, snapshot_id: str) -> Path | None:
        if parse_snapshot_id(snapshot_id) is None:
            return None
        path = self.directory / (snapshot_id + SUFFIX)
        return path if path.is_file() else None

    def prune(self) -> None:
        for info in self.list()[: -self.retained]:
            (self.directory / (info.snapshot_id + SUFFIX)).unlink(missing_ok=True)


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
