"""The controller's retained metadata log, read from its Raft journal on disk.

A controller (``quorum/raft.py``) keeps under ``<metadata.log.dir>/raft/``: ``dump.bin`` (the
state as of a snapshot: a JSON header line with ``nextOffset``, ``lastRaftIndex`` and the name
of the checkpoint in ``snapshots/``), ``journal.bin`` (pysyncobj's journal of the Raft entries
since) and ``journal.bin.meta`` (pysyncobj's commit index). Each journal record is
``size uint32le, index uint64le, term uint64le, command, size uint32le``; a regular command is
byte 0 then pysyncobj's pickle (protocol 2) of ``(function id, [blob])``, where ``blob`` is one
atomic metadata batch in ``quorum/raft_batch.py``'s format (magic ``PKMB``; format 1: JSON lines
of ``metadata.codec``, format 2: one ``metadata.compact_codec`` payload).

Pickle is never trusted: ``_RestrictedUnpickler`` resolves no global but ``_codecs.encode``
(how protocol 2 spells ``bytes``), so a hostile journal cannot run code (the Python docs'
"Restricting Globals" recipe).

Metadata offsets are not Raft indexes: they are counted when an entry is applied. ``replay``
repeats the controller's rules (``quorum.raft_state.apply_entry``, which export may not import:
DESIGN.md §2) and the tests check both agree: an entry at or below the dump's ``lastRaftIndex``
was applied before; pysyncobj's own entries (no-op, membership) carry no batch; a blob that does
not decode, or whose records do not decode or replay onto the image, is rejected; a batch whose
``expected_last_offset`` is not the log's last offset is stale; every other batch's records get
the next offsets. Entries above the stored commit index are not committed and are not read.
"""

from __future__ import annotations

import codecs
import io
import itertools
import json
import pickle
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import crc32c

from pykraft.metadata.codec import MetadataCodecError, decode_record
from pykraft.metadata.delta import apply_records
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import MetadataRecord
from pykraft.metadata.snapshot import SnapshotError, load_snapshot

RAFT_SUBDIR = "raft"
JOURNAL_FILE = "journal.bin"
DUMP_FILE = "dump.bin"
META_SUFFIX = ".meta"
# pysyncobj's journal header: app name (24), version (8), format version u32, last record u32.
_JOURNAL_HEADER = struct.Struct("<24s8sII")
_RECORD_SIZE = struct.Struct("<I")
_INDEX_TERM = struct.Struct("<QQ")
_REGULAR_COMMAND = 0
# quorum/raft_batch.py's entry layout.
_BATCH_MAGIC = b"PKMB"
_JSON_LINES_FORMAT = 1
_COMPACT_FORMAT = 2
_BATCH_HEADER = struct.Struct(">4sbqiqi")
_INT32 = struct.Struct(">i")
_CRC = struct.Struct(">I")
MAX_DUMP_HEADER_BYTES = 1 << 20


class JournalError(ValueError):
    """The journal, its meta file or the dump is malformed; names the file (and the byte)."""


@attrs.frozen
class LogRecord:
    """A committed metadata record of the retained log."""

    offset: int
    epoch: int
    append_time_ms: int
    raft_index: int
    record: MetadataRecord


@attrs.frozen
class ProposedBatch:
    """A decoded entry: format 1 carries one JSON line per record (``records``), format 2 one
    compact payload (``metadata.compact_codec``) of ``record_count`` records."""

    format_version: int
    expected_last_offset: int
    epoch: int
    append_time_ms: int
    record_count: int
    records: tuple[bytes, ...] = ()
    payload: bytes = b""


@attrs.frozen
class JournalEntry:
    index: int
    term: int
    command: bytes
    position: int


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("_codecs", "encode"):
            return codecs.encode
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")


def _restricted_loads(data: bytes) -> Any:
    return _RestrictedUnpickler(io.BytesIO(data), encoding="latin1").load()


def read_journal(path: Path) -> Iterator[JournalEntry]:
    """The records of a pysyncobj journal file, in order."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise JournalError(f"journal {path}: cannot read: {error.strerror}") from None
    if len(data) < _JOURNAL_HEADER.size or not data.startswith(b"PYSYNCOBJ"):
        raise JournalError(f"journal {path}: not a pysyncobj journal")
    _, _, _, last_record_end = _JOURNAL_HEADER.unpack_from(data)
    position = _JOURNAL_HEADER.size
    if last_record_end > len(data):
        raise JournalError(
            f"journal {path}: header says records end at byte "
            f"{last_record_end}, the file has {len(data)} bytes"
        )
    while position < last_record_end:
        (size,) = _RECORD_SIZE.unpack_from(data, position)
        end = position + 4 + size
        if size < _INDEX_TERM.size or end + 4 > last_record_end:
            raise JournalError(
                f"journal {path} at byte {position}: record of {size} bytes "
                "runs past the end of the journal"
            )
        index, term = _INDEX_TERM.unpack_from(data, position + 4)
        yield JournalEntry(index, term, data[position + 4 + _INDEX_TERM.size : end], position)
        position = end + 4


def batch_blob(command: bytes) -> bytes | None:
    """The metadata batch a regular command carries, or None (pysyncobj's own entries)."""
    if not command or command[0] != _REGULAR_COMMAND:
        return None
    try:
        call = _restricted_loads(command[1:])
    except Exception:  # any malformed pickle: not one of our batches
        return None
    args = call[1] if type(call) is tuple and len(call) >= 2 else ()
    for arg in args if type(args) in (list, tuple) else ():
        if type(arg) is bytes and arg.startswith(_BATCH_MAGIC):
            return arg
    return None


def decode_proposed_batch(blob: bytes) -> ProposedBatch | None:
    """The batch in ``blob``, or None when it is malformed (the controller rejects those)."""
    if len(blob) < _BATCH_HEADER.size + _CRC.size:
        return None
    body = memoryview(blob)[: len(blob) - _CRC.size]
    if crc32c.crc32c(body) != _CRC.unpack_from(blob, len(body))[0]:
        return None
    magic, version, expected, epoch, append_time_ms, count = _BATCH_HEADER.unpack_from(body)
    if magic != _BATCH_MAGIC or count <= 0:
        return None
    if version == _COMPACT_FORMAT:
        payload = bytes(body[_BATCH_HEADER.size :])
        if not payload:
            return None
        return ProposedBatch(version, expected, epoch, append_time_ms, count, payload=payload)
    if version != _JSON_LINES_FORMAT:
        return None
    records, position = [], _BATCH_HEADER.size
    for _ in range(count):
        if position + 4 > len(body):
            return None
        (length,) = _INT32.unpack_from(body, position)
        position += 4
        if length < 0 or position + length > len(body):
            return None
        records.append(bytes(body[position : position + length]))
        position += length
    if position != len(body):
        return None
    return ProposedBatch(version, expected, epoch, append_time_ms, count, tuple(records))


def decode_batch_records(batch: ProposedBatch) -> tuple[MetadataRecord, ...]:
    """The batch's records; MetadataCodecError when one does not decode."""
    if batch.format_version == _COMPACT_FORMAT:
        # Imported here: only journals written by format-2 controllers need it.
        from pykraft.metadata.compact_codec import decode_records

        return decode_records(batch.payload, batch.record_count)
    return tuple(decode_record(raw) for raw in batch.records)


@attrs.frozen
class DumpState:
    """Where the journal continues from: the dump's counters and its checkpoint's image."""

    next_offset: int
    last_raft_index: int
    image: MetadataImage


def read_dump_state(raft_dir: Path, snapshot_dir: Path) -> DumpState:
    """The state ``dump.bin`` records (empty when there is no dump yet)."""
    path = raft_dir / DUMP_FILE
    try:
        with open(path, "rb") as file:
            line = file.readline(MAX_DUMP_HEADER_BYTES)
    except FileNotFoundError:
        return DumpState(0, 0, MetadataImage.EMPTY)
    except OSError as error:
        raise JournalError(f"dump {path}: cannot read: {error.strerror}") from None
    try:
        header = json.loads(line)
        next_offset, last_index = int(header["nextOffset"]), int(header["lastRaftIndex"])
        name = header["checkpoint"]
    except (ValueError, KeyError, TypeError):
        raise JournalError(f"dump {path}: malformed header line {line[:80]!r}") from None
    image = MetadataImage.EMPTY
    if name is not None:
        try:
            image = load_snapshot(snapshot_dir / str(name))
        except SnapshotError as error:
            raise JournalError(f"dump {path} names checkpoint {name}: {error}") from None
    return DumpState(next_offset, last_index, image)


def read_commit_index(journal_path: Path) -> int:
    """pysyncobj's stored commit index (saved about once a second; 1 when never saved)."""
    path = journal_path.with_name(journal_path.name + META_SUFFIX)
    try:
        meta = _restricted_loads(path.read_bytes())
    except FileNotFoundError:
        return 1
    except Exception as error:
        raise JournalError(f"journal meta {path}: unreadable: {error}") from None
    index = meta.get("raftCommitIndex", 1) if type(meta) is dict else None
    if type(index) is not int:
        raise JournalError(f"journal meta {path}: no integer raftCommitIndex")
    return index


def replay(
    entries: Iterator[JournalEntry], state: DumpState, commit_index: int
) -> Iterator[LogRecord]:
    """Committed records after the dump, with the offsets the controller gave them."""
    image, next_offset = state.image, state.next_offset
    for entry in entries:
        if entry.index <= state.last_raft_index:
            continue
        if entry.index > commit_index:
            break
        blob = batch_blob(entry.command)
        batch = None if blob is None else decode_proposed_batch(blob)
        if batch is None or batch.expected_last_offset != next_offset - 1:
            continue  # pysyncobj's own entry, a rejected blob, or a stale proposal
        try:
            records = decode_batch_records(batch)
            image = apply_records(
                image, records, offset=next_offset + len(records) - 1, epoch=batch.epoch
            )
        except (MetadataCodecError, MetadataReplayError):
            continue  # the controller rejects the whole batch (INVALID)
        for i, record in enumerate(records):
            yield LogRecord(next_offset + i, batch.epoch, batch.append_time_ms, entry.index, record)
        next_offset += len(records)


def read_retained_log(metadata_dir: Path, snapshot_dir: Path) -> list[LogRecord]:
    """The committed records retained in ``metadata_dir/raft`` (empty when there is none)."""
    raft_dir = metadata_dir / RAFT_SUBDIR
    journal = raft_dir / JOURNAL_FILE
    if not journal.exists():
        return []
    state = read_dump_state(raft_dir, snapshot_dir)
    return list(replay(read_journal(journal), state, read_commit_index(journal)))


def retained_image(metadata_dir: Path, snapshot_dir: Path) -> MetadataImage | None:
    """The image at the end of the retained log: the dump's checkpoint image with every
    committed record after it applied, entry by entry as the controller applied them; None
    without a journal. What the views read on a fresh cluster, before any snapshot exists."""
    raft_dir = metadata_dir / RAFT_SUBDIR
    journal = raft_dir / JOURNAL_FILE
    if not journal.exists():
        return None
    state = read_dump_state(raft_dir, snapshot_dir)
    image = state.image
    records = replay(read_journal(journal), state, read_commit_index(journal))
    for _, entry in itertools.groupby(records, key=lambda log_record: log_record.raft_index):
        batch = list(entry)
        image = apply_records(
            image, [r.record for r in batch], offset=batch[-1].offset, epoch=batch[-1].epoch
        )
    return image
