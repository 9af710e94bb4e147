"""What a ``pykraft-log`` scan reads from log dirs besides segments: whose they are, and where
a replica's log ends.

A log dir's ``meta.properties`` (Kafka's, written by ``pykraft broker`` at first start) names
the broker (``node.id``) and the cluster (``cluster.id``). Both tell the scan what it was given:
log dirs of one broker, where a partition may live once, or of several, where a partition has
one replica per broker (``export.replica_choice``); and never log dirs of two clusters, whose
same-named topics are different data. A log dir without ``meta.properties`` (copied without
it, or written by a tool) is still readable: it just cannot be placed on a broker.

``replica_sizes`` is what ``kafka-log-dirs --describe`` reports as each replica's ``size``: the
bytes of its segment files (Kafka's ``UnifiedLog.size``, the DescribeLogDirs response's
``PartitionSize``), read from the directory listing alone.

``measure_log_end_offset`` reads only batch headers of the last segment, from its last offset
index entry on: a replica's log end offset is the next offset after its last whole batch (a
torn tail ends the log there, as recovery would truncate it).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import attrs

from pykraft.storage.batch_scan import read_batch_header
from pykraft.storage.record_batch import CorruptRecordError
from pykraft.storage.topic_partition import TopicPartition, is_deleted_dir, is_future_dir

META_PROPERTIES = "meta.properties"
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position (KAFKA_FORMATS.md)
# meta.properties is a handful of lines; anything larger is not one.
META_PROPERTIES_BYTES_MAX = 64 * 1024


class LogScanError(ValueError):
    """The log dirs or the scan options cannot be used; the message names the path or option."""


@attrs.frozen
class ReplicaSize:
    """One partition replica's bytes on disk; ``broker_id`` is None without meta.properties."""

    topic: str
    partition: int
    broker_id: int | None
    log_dir: str
    size: int


@attrs.frozen
class LogDirIdentity:
    """A log dir's ``meta.properties``: None where the file or the property is absent."""

    node_id: int | None = None
    cluster_id: str | None = None


def parse_log_dirs(text: str) -> list[Path]:
    """``log.dirs`` syntax: comma-separated paths (Kafka's property), blanks ignored."""
    dirs = [Path(part.strip()) for part in text.split(",") if part.strip()]
    if not dirs:
        raise LogScanError("no log dirs given: pass a comma-separated list of log.dirs paths")
    return dirs


def check_log_dirs(log_dirs: Sequence[Path]) -> list[LogDirIdentity]:
    """Each log dir's identity, after checking the dirs exist, are distinct (Kafka's
    LogManager refuses "Duplicate log directory found") and belong to one cluster."""
    seen: dict[Path, Path] = {}
    clusters: dict[str, Path] = {}
    identities = []
    for log_dir in log_dirs:
        if not log_dir.is_dir():
            raise LogScanError(f"log dir {log_dir} does not exist or is not a directory")
        canonical = log_dir.resolve()
        if canonical in seen:
            raise LogScanError(f"log dir {log_dir} is given twice (also as {seen[canonical]})")
        seen[canonical] = log_dir
        identity = read_identity(log_dir)
        if identity.cluster_id is not None:
            clusters.setdefault(identity.cluster_id, log_dir)
        identities.append(identity)
    if len(clusters) > 1:
        named = ", ".join(f"{path} is in cluster {cid}" for cid, path in clusters.items())
        raise LogScanError(f"the log dirs belong to different clusters: {named}")
    return identities


def read_identity(log_dir: Path) -> LogDirIdentity:
    path = log_dir / META_PROPERTIES
    try:
        with path.open("rb") as file:
            data = file.read(META_PROPERTIES_BYTES_MAX + 1)
    except FileNotFoundError:
        return LogDirIdentity()
    except OSError as error:
        raise LogScanError(f"{path}: cannot read: {error.strerror}") from None
    if len(data) > META_PROPERTIES_BYTES_MAX:
        raise LogScanError(
            f"{path} is over {META_PROPERTIES_BYTES_MAX} bytes: not a meta.properties file"
        )
    values = _properties(data.decode("utf-8", errors="replace"))
    # KRaft writes node.id; a log dir formatted by a ZooKeeper-era broker has broker.id.
    node_text = values.get("node.id", values.get("broker.id"))
    node_id = None
    if node_text is not None:
        if not (node_text.isascii() and node_text.isdigit()):
            raise LogScanError(f"{path}: node.id {node_text!r} is not a non-negative integer")
        node_id = int(node_text)
    return LogDirIdentity(node_id, values.get("cluster.id"))


def _properties(text: str) -> dict[str, str]:
    """``key=value`` / ``key: value`` lines of a Java properties file, comments skipped
    (meta.properties never uses line continuations or escapes)."""
    values = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        cuts = [i for i in (stripped.find("="), stripped.find(":")) if i >= 0]
        if cuts:
            values[stripped[: min(cuts)].strip()] = stripped[min(cuts) + 1 :].strip()
    return values


def partition_dir(path: Path) -> TopicPartition | None:
    """The partition a log dir's entry holds; None for anything else and for ``-delete`` and
    ``-future`` directories (being deleted / a replica being moved), as Kafka's LogManager
    skips them."""
    if not path.is_dir() or is_deleted_dir(path.name) or is_future_dir(path.name):
        return None
    try:
        return TopicPartition.parse_dir_name(path.name)
    except ValueError:
        return None


def replica_sizes(log_dirs: Sequence[Path]) -> list[ReplicaSize]:
    """Every live replica's segment bytes, per log dir (checked as a scan checks them)."""
    sizes = []
    for log_dir, identity in zip(log_dirs, check_log_dirs(log_dirs), strict=True):
        for path in sorted(log_dir.iterdir()):
            tp = partition_dir(path)
            if tp is None:
                continue
            try:
                size = sum(segment.stat().st_size for _, segment in list_segments(path))
            except OSError as error:
                raise LogScanError(f"{path}: cannot read: {error.strerror}") from None
            sizes.append(ReplicaSize(tp.topic, tp.partition, identity.node_id, str(log_dir), size))
    return sorted(sizes, key=lambda r: (r.topic, r.partition, r.log_dir))


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """``(base offset, path)`` of the ``.log`` segments in a partition directory, in order."""
    segments = []
    for path in directory.iterdir():
        stem = path.name.removesuffix(LOG_SUFFIX)
        if stem != path.name and len(stem) == 20 and stem.isascii() and stem.isdigit():
            segments.append((int(stem), path))
    return sorted(segments)


def measure_log_end_offset(directory: Path, log_start_offset: int) -> int:
    """The replica's log end offset: after the last whole batch of its last segment; the
    segment's base offset when it is empty (Kafka rolls at the log end); the log start offset
    when there is no segment."""
    segments = list_segments(directory)
    if not segments:
        return log_start_offset
    base_offset, path = segments[-1]
    end = base_offset
    try:
        with path.open("rb") as file:
            fd, size = file.fileno(), path.stat().st_size
            position = _last_indexed_position(path, base_offset, fd, size)
            while position < size:
                header = read_batch_header(fd, position, size)
                end = header.next_offset
                position += header.size_in_bytes
    except CorruptRecordError:
        pass  # a torn tail: the log ends after the last whole batch
    except OSError as error:
        raise LogScanError(f"segment {path}: cannot read: {error.strerror}") from None
    return end


def _last_indexed_position(path: Path, base_offset: int, fd: int, size: int) -> int:
    """Where to start walking headers: the batch of the segment's last ``.index`` entry
    (``relative last offset, position``, written every index.interval.bytes), so a 1 GiB
    segment costs a few header reads, not one per batch. The index is only a hint: 0 (walk
    the whole segment) when it is missing or does not name a batch ending at its offset."""
    try:
        # Preallocated indexes end in zeros; no entry is all zeros (position 0 is never
        # indexed: an entry follows index.interval.bytes of batches).
        entries = path.with_suffix(INDEX_SUFFIX).read_bytes().rstrip(b"\0")
    except OSError:
        return 0
    if not entries:
        return 0
    # The stripped zeros may include the last entry's own trailing zero bytes: pad them back.
    start = (len(entries) - 1) // _INDEX_ENTRY.size * _INDEX_ENTRY.size
    entry = entries[start:].ljust(_INDEX_ENTRY.size, b"\0")
    relative_offset, position = _INDEX_ENTRY.unpack(entry)
    if not 0 < position < size:
        return 0
    try:
        header = read_batch_header(fd, position, size)
    except CorruptRecordError:
        return 0
    return position if header.last_offset == base_offset + relative_offset else 0
