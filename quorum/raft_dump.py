"""pysyncobj's full-dump file, in our own format (never pickle).

pysyncobj compacts its journal by writing a "full dump" of the state machine together with the
last two applied Raft entries; it loads the dump on restart and ships it to a follower that fell
behind the journal (install snapshot). We plug our own ``serializer``/``deserializer`` in, so the
dump is:

    line 1      a small JSON header: format, version, the state machine's counters, the index,
                term and size of the two Raft entries pysyncobj needs back, the voter list, and
                the name and size of the embedded checkpoint
    then        the last entry's command bytes, the previous entry's command bytes (an entry
                holds a whole batch: megabytes for a big topic, so never inside the JSON line)
    the rest    the metadata checkpoint file (metadata/snapshot.py format) byte for byte

Embedding the checkpoint makes the dump self-contained for pysyncobj's transfer; the same
checkpoint also sits in ``<metadata.log.dir>/snapshots/`` for brokers to download.

Writes are fsync'd before pysyncobj renames the temporary file into place; the caller fsyncs
the directory before pysyncobj truncates the journal (``serializeChecker``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from pykraft.quorum.voter_changes import Voter, voter_from_json, voter_to_json

DUMP_FORMAT = "pykraft-raft-dump"
DUMP_VERSION = 1
# A header line longer than this is not ours (bounds the search before parsing).
MAX_HEADER_BYTES = 64 * 1024


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
    # KIP-853 (quorum/raft_voters.py): who the voters are, and whether the set has changed
    # since the static configuration (then the dump's ``voters`` are the members). Optional
    # in the header: dumps written before them have neither.
    voter_set: tuple[Voter, ...] = ()
    dynamic_voters: bool = False


def _entry_json(entry: RaftEntry) -> dict[str, int]:
    return {"index": entry.index, "term": entry.term, "size": len(entry.command)}


def _entry_fields(value: Any, path: Path) -> tuple[int, int, int]:
    if type(value) is not dict or any(
        type(value.get(k)) is not int or value[k] < 0 for k in ("index", "term", "size")
    ):
        raise DumpError(f"{path}: malformed Raft entry in dump header: {value!r:.80}")
    return value["index"], value["term"], value["size"]


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
        "voterSet": [voter_to_json(voter) for voter in header.voter_set],
        "dynamicVoters": header.dynamic_voters,
    }
    line = json.dumps(document, separators=(",", ":")).encode("ascii") + b"\n"
    with open(path, "wb") as out:
        out.write(line)
        out.write(header.last_entry.command)
        out.write(header.prev_entry.command)
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
    fields = _header_fields(document, path)
    last_index, last_term, last_size = _entry_fields(document["lastEntry"], path)
    prev_index, prev_term, prev_size = _entry_fields(document["prevEntry"], path)
    position = end + 1
    expected = position + last_size + prev_size + fields["checkpointSize"]
    if len(data) != expected:
        raise DumpError(
            f"{path}: the dump is {len(data)} bytes, its header says {expected} (truncated file)"
        )
    last = RaftEntry(
        command=data[position : position + last_size], index=last_index, term=last_term
    )
    position += last_size
    prev = RaftEntry(
        command=data[position : position + prev_size], index=prev_index, term=prev_term
    )
    position += prev_size
    header = DumpHeader(
        next_offset=fields["nextOffset"],
        last_raft_index=fields["lastRaftIndex"],
        epoch=fields["epoch"],
        last_entry=last,
        prev_entry=prev,
        voters=fields["voters"],
        checkpoint_name=fields["checkpoint"],
        checkpoint_size=fields["checkpointSize"],
        voter_set=fields["voterSet"],
        dynamic_voters=fields["dynamicVoters"],
    )
    return header, data[position:]


_REQUIRED = (
    "nextOffset",
    "lastRaftIndex",
    "epoch",
    "checkpointSize",
    "voters",
    "checkpoint",
    "lastEntry",
    "prevEntry",
)


def _header_fields(document: Any, path: Path) -> dict[str, Any]:
    if type(document) is not dict or document.get("format") != DUMP_FORMAT:
        raise DumpError(f"{path}: not a {DUMP_FORMAT} file")
    if document.get("version") != DUMP_VERSION:
        raise DumpError(f"{path}: unsupported dump version {document.get('version')!r}")
    missing = [key for key in _REQUIRED if key not in document]
    if missing:
        raise DumpError(f"{path}: dump header lacks {', '.join(missing)}")
    integers = {
        key: document[key] for key in ("nextOffset", "lastRaftIndex", "epoch", "checkpointSize")
    }
    voters, name = document["voters"], document["checkpoint"]
    if any(type(value) is not int for value in integers.values()):
        raise DumpError(f"{path}: dump header counters must be integers: {integers}")
    if name is not None and (
        type(name) is not str or "/" in name or not name.endswith(".checkpoint")
    ):
        raise DumpError(f"{path}: bad checkpoint name {name!r}")
    if type(voters) is not list or not all(type(voter) is str for voter in voters):
        raise DumpError(f"{path}: voters must be a list of host:port strings")
    dynamic = document.get("dynamicVoters", False)
    if type(dynamic) is not bool or type(document.get("voterSet", [])) is not list:
        raise DumpError(f"{path}: malformed voterSet / dynamicVoters")
    try:
        voter_set = tuple(voter_from_json(item) for item in document.get("voterSet", []))
    except ValueError as error:
        raise DumpError(f"{path}: {error}") from None
    return {
        **integers,
        "voters": tuple(voters),
        "checkpoint": name,
        "voterSet": voter_set,
        "dynamicVoters": dynamic,
    }
