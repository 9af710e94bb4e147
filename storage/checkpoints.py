"""Kafka's text checkpoint files (``CheckpointFile``), byte-compatible with Kafka's.

Layout::

    0            <- format version
    2            <- number of entries
    pet 0 1042   <- one entry per line (offset checkpoints: topic partition offset;
    pet 1 977       leader-epoch-checkpoint: epoch startOffset)

Reading follows ``CheckpointFile.CheckpointReadBuffer.read``: an empty file, or one holding
only the version line, reads as no entries (Kafka creates the file empty before the first
write); an unknown version, a line that does not parse, or an entry count different from the
count line is an error. Here that error is a ``CheckpointError`` naming the file and the
1-based line. Writes replace the file atomically (see ``storage.atomic_file``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from pykraft.storage.atomic_file import write_atomically
from pykraft.storage.topic_partition import TopicPartition

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0  # the only version Kafka writes for all four files

# Java's Integer.parseInt / Long.parseLong accept an optional sign and ASCII digits only
# (Python's int() would also take spaces, underscores and non-ASCII digits).
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_WHITESPACE = re.compile(r"\s+")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

T = TypeVar("T")


class CheckpointError(ValueError):
    """A checkpoint file is malformed. ``line`` is 1-based; 0 means the file as a whole."""

    def __init__(self, path: Path, line: int, message: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"checkpoint file {where}: {message}")
        self.path = path
        self.line = line
        self.message = message


def _parse_java_int(text: str, low: int, high: int) -> int | None:
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


def parse_int32(text: str) -> int | None:
    """Java ``Integer.parseInt``: None where Java would throw NumberFormatException."""
    return _parse_java_int(text, _INT32_MIN, _INT32_MAX)


def parse_int64(text: str) -> int | None:
    """Java ``Long.parseLong``: None where Java would throw NumberFormatException."""
    return _parse_java_int(text, _INT64_MIN, _INT64_MAX)


def encode_checkpoint(lines: Iterable[str]) -> bytes:
    entries = list(lines)
    text = f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(f"{line}\n" for line in entries)
    return text.encode("utf-8")


def decode_checkpoint(path: Path, text: str, parse_entry: Callable[[str], T | None]) -> list[T]:
    """Parse checkpoint ``text`` (read from ``path``, named in errors) into entries."""
    lines = text.splitlines()
    if not lines:
        return []
    version = parse_int32(lines[0])
    if version is None:
        raise CheckpointError(path, 1, f"malformed version line {lines[0]!r}")
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(path, 1, f"unrecognised version {version}, expected 0")
    if len(lines) == 1:
        return []
    expected = parse_int32(lines[1])
    if expected is None or expected < 0:
        raise CheckpointError(path, 2, f"malformed entry count line {lines[1]!r}")
    entries: list[T] = []
    for number, line in enumerate(lines[2:], start=3):
        entry = parse_entry(line)
        if entry is None:
            raise CheckpointError(path, number, f"malformed entry line {line!r}")
        entries.append(entry)
    if len(entries) != expected:
        raise CheckpointError(
            path, 2, f"expected {expected} entries but found {len(entries)} (truncated file?)"
        )
    return entries


def read_checkpoint(path: Path, parse_entry: Callable[[str], T | None]) -> list[T]:
    """Read a checkpoint file; a missing file has no entries."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CheckpointError(path, 0, f"not UTF-8 text: {error}") from None
    return decode_checkpoint(path, text, parse_entry)


def _parse_offset_entry(line: str) -> tuple[TopicPartition, int] | None:
    parts = _WHITESPACE.split(line.strip())
    if len(parts) != 3:
        return None
    topic, partition_text, offset_text = parts
    partition = parse_int32(partition_text)
    offset = parse_int64(offset_text)
    if partition is None or offset is None or partition < 0:
        return None
    return TopicPartition(topic, partition), offset


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Write ``topic partition offset`` lines, sorted so the file is deterministic."""
    lines = (f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items()))
    write_atomically(path, encode_checkpoint(lines))


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Missing file -> {}; malformed -> CheckpointError naming the file and the line."""
    entries = read_checkpoint(path, _parse_offset_entry)
    result: dict[TopicPartition, int] = {}
    for tp, offset in entries:
        result[tp] = offset
    return result


def _parse_epoch_entry(line: str) -> tuple[int, int] | None:
    parts = _WHITESPACE.split(line.strip())
    if len(parts) != 2:
        return None
    epoch = parse_int32(parts[0])
    start_offset = parse_int64(parts[1])
    if epoch is None or start_offset is None:
        return None
    return epoch, start_offset


def write_leader_epoch_checkpoint(
    path: Path, entries: Iterable[tuple[int, int]], *, durable: bool = True
) -> None:
    """Write ``epoch startOffset`` lines in the given (ascending) order."""
    lines = encode_checkpoint(f"{epoch} {start}" for epoch, start in entries)
    write_atomically(path, lines, durable=durable)


def read_leader_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """``(epoch, start_offset)`` pairs in file order; missing file -> []."""
    return read_checkpoint(path, _parse_epoch_entry)
