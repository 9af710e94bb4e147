"""pysyncobj's full-dump file, in our own format (never pickle).

pysyncobj compacts its journal by writing a "full dump" of the state machine together with the
last two applied Raft entries; it loads the dump on restart and ships it to a follower that fell
behind the journal (install snapshot). We plug our own ``serializer``/``deserializer`` in, so the
dump is:

    line 1      a JSON header: format, version, the state machine's counters, the two Raft
                entries pysyncobj needs back (command bytes in base64), the voter list, and the
                name and size of the embedded checkpoint
    the rest    the metadata checkpoint file (metadata/snapshot.py format) byte for byte

Embedding the checkpoint makes the dump self-contained for pysyncobj's transfer; the same
checkpoint also sits in ``<metadata.log.dir>/snapshots/`` for brokers to download.

Writes are fsync'd before pysyncobj renames the temporary file into place; the caller fsyncs
the directory before pysyncobj truncates the journal (``serializeChecker``).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from typing import Any, BinaryIO

import attrs

DUMP_FORMAT = "pykraft-raft-dump"
DUMP_VERSION = 1
# A header line longer than this is not ours (bounds the read before parsing).
MAX_HEADER_BYTES = 1 << 20


class DumpError(ValueError):
    """A dump file is unreadable or malformed; the message names the file."""


@attrs.frozen(kw_only=True)
class RaftEntry:
    """One pysyncobj journal entry: (command bytes, Raft index, Raft term)."""

    command: bytes
    index: int
    term: int

    def as_tuple(self) -> tuple[bytes, int, int]:
        return (self.command, self.index, self.term)

    @classmethod
    def from_tuple(cls, entry: Any) -> RaftEntry:
        command, index, term = entry
        return cls(command=bytes(command), index=int(index), term=int(term))


@attrs.frozen(kw_only=True)
class DumpHeader:
    next_offset: int
    last_raft_index: int
    epoch: int
    last_entry: RaftEntry
    prev_entry: RaftEntry
    voters: tuple[str, ...]
    # None while nothing has been applied (an empty image has no checkpoint).
    checkpoint_name: str | None
    checkpoint_size: int


def _entry_json(entry: RaftEntry) -> list[Any]:
    return [base64.b64encode(entry.command).decode("ascii"), entry.index, entry.term]


def _entry_from_json(value: Any, path: Path) -> RaftEntry:
    try:
        command, index, term = value
        if type(index) is not int or type(term) is not int:
            raise TypeError("index and term must be integers")
        return RaftEntry(command=base64.b64decode(command, validate=True), index=index, term=term)
    except (TypeError, ValueError, binascii.Error) as error:
        raise DumpError(f"{path}: malformed Raft entry in dump header: {error}") from None


def write_dump(path: Path, header: DumpHeader, checkpoint: Path | None) -> None:
    """Write header + checkpoint bytes (if any) to ``path`` and fsync it."""
    document = {
        "format": DUMP_FORMAT,
        "version": DUMP_VERSION,
        "nextOffset": header.next_offset,
        "lastRaftIndex": header.last_raft_index,
        "epoch": header.epoch,
        "lastEntry": _entry_json(header.last_entry),
        "prevEntry": _entry_json(header.prev_entry),
        "voters": list(header.voters),
        "checkpoint": header.checkpoint_name,
        "checkpointSize": header.checkpoint_size,
    }
    line = json.dumps(document, separators=(",", ":")).encode("ascii") + b"\n"
    with open(path, "wb") as out:
        out.write(line)
        copied = 0 if checkpoint is None else _copy(checkpoint, out)
        if copied != header.checkpoint_size:
            raise DumpError(f"{checkpoint}: size changed while copying ({copied} bytes)")
        out.flush()
        os.fsync(out.fileno())


def _copy(source_path: Path, out: BinaryIO) -> int:
    copied = 0
    with open(source_path, "rb") as source:
        while chunk := source.read(1 << 20):
            out.write(chunk)
            copied += len(chunk)
    return copied


def read_dump(path: Path) -> tuple[DumpHeader, bytes]:
    """The header and the embedded checkpoint bytes."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DumpError(f"{path}: cannot read dump: {error.strerror}") from None
    end = data.find(b"\n", 0, MAX_HEADER_BYTES)
    if end < 0:
        raise DumpError(f"{path}: no header line (not a {DUMP_FORMAT} file)")
    try:
        document = json.loads(data[:end])
    except ValueError as error:
        raise DumpError(f"{path}: header is not JSON: {error}") from None
    header = _header_from_json(document, path)
    checkpoint = data[end + 1 :]
    if len(checkpoint) != header.checkpoint_size:
        raise DumpError(
            f"{path}: embedded checkpoint is {len(checkpoint)} bytes, header says "
            f"{header.checkpoint_size} (truncated file)"
        )
    return header, checkpoint


def _header_from_json(document: Any, path: Path) -> DumpHeader:
    if type(document) is not dict or document.get("format") != DUMP_FORMAT:
        raise DumpError(f"{path}: not a {DUMP_FORMAT} file")
    if document.get("version") != DUMP_VERSION:
        raise DumpError(f"{path}: unsupported dump version {document.get('version')!r}")
    try:
        integers = {key: document[key] for key in
                    ("nextOffset", "lastRaftIndex", "epoch", "checkpointSize")}
        voters, name = document["voters"], document["checkpoint"]
        last_entry, prev_entry = document["lastEntry"], document["prevEntry"]
    except KeyError as missing:
        raise DumpError(f"{path}: dump header lacks {missing}") from None
    if any(type(value) is not int for value in integers.values()):
        raise DumpError(f"{path}: dump header counters must be integers: {integers}")
    if name is not None and (
        type(name) is not str or "/" in name or not name.endswith(".checkpoint")
    ):
        raise DumpError(f"{path}: bad checkpoint name {name!r}")
    if type(voters) is not list or not all(type(voter) is str for voter in voters):
        raise DumpError(f"{path}: voters must be a list of host:port strings")
    return DumpHeader(
        next_offset=integers["nextOffset"],
        last_raft_index=integers["lastRaftIndex"],
        epoch=integers["epoch"],
        last_entry=_entry_from_json(last_entry, path),
        prev_entry=_entry_from_json(prev_entry, path),
        voters=tuple(voters),
        checkpoint_name=name,
        checkpoint_size=integers["checkpointSize"],
    )
