"""``pykraft dump-log``: print segment files the way Kafka's ``kafka-dump-log.sh`` does.

Output lines follow ``kafka.tools.DumpLogSegments`` so operators can diff ours against Kafka's:
``.log`` files print one line per batch (and with ``--print-data`` or ``--deep-iteration`` one
``| offset: ...`` line per record; a marker's as ``endTxnMarker: COMMIT coordinatorEpoch: N``),
``.index`` files ``offset: N position: P``, ``.timeindex`` files ``timestamp: T offset: O`` and
``.txnindex`` files one ``version: V producerId: P firstOffset: F lastOffset: L
lastStableOffset: S`` line per aborted transaction (``dumpTxnIndex``). Unlike Kafka, a damaged
file is never a stack trace: we print everything valid up to the damage, then one
``Found corrupt ...`` line naming the position and the field, and the command exits with
status 1. Status 1 also covers missing or unknown files.

A ``.log`` file of ``PROGRESS_MIN_BYTES`` or more shows a ``rich`` progress bar (bytes read) on
stderr, only when stderr is a terminal and stdout is not (the output goes to a file or a pipe;
a bar drawn between the lines it prints would garble them).
"""

from __future__ import annotations

import argparse
import bisect
import mmap
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import attrs

from pykraft.storage.aborted_txn import ABORTED_TXN_SIZE, TXN_INDEX_SUFFIX, decode_entries
from pykraft.storage.record_batch import (
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_MASK,
    BatchHeader,
    CorruptRecordError,
    compute_crc,
    parse_header,
)
from pykraft.storage.records import ControlRecordType, Record, decode_records

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_INDEX_ENTRY = struct.Struct(">ii")  # relativeOffset, position
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relativeOffset
# ControlRecordType ids beyond end-transaction markers (KRaft), for display only.
_OTHER_CONTROL_TYPES = {
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_TIMESTAMP_TYPE_NAMES = ("CreateTime", "LogAppendTime")
EXIT_OK = 0
EXIT_DAMAGED = 1
# Segments from this size show a progress bar; it moves at most once per step.
PROGRESS_MIN_BYTES = 64 * 1024 * 1024
PROGRESS_STEP_BYTES = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="segment files: .log, .index, .timeindex or .txnindex",
    )
    parser.add_argument(
        "--files", default="", help="comma separated files, as kafka-dump-log.sh takes them"
    )
    parser.add_argument(
        "--print-data",
        "--print-data-log",
        dest="print_data",
        action="store_true",
        help="print each record's key and payload",
    )
    parser.add_argument(
        "--deep-iteration",
        action="store_true",
        help="print one line per record (implied by --print-data)",
    )
    parser.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="leave offsets, sizes and headers out of record lines",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the log without printing them",
    )


def run(args: argparse.Namespace) -> int:
    paths = [*args.paths, *(name for name in args.files.split(",") if name)]
    if not paths:
        print("pykraft dump-log: give at least one file to dump", file=sys.stderr)
        return EXIT_DAMAGED
    status = EXIT_OK
    for name in paths:
        path = Path(name)
        print(f"Dumping {path}")
        try:
            clean = _dump_file(path, args, sys.stdout, sys.stderr)
        except OSError as error:
            print(
                f"pykraft dump-log: cannot read {path}: {error.strerror or error}", file=sys.stderr
            )
            clean = False
        if not clean:
            status = EXIT_DAMAGED
    return status


def _dump_file(path: Path, args: argparse.Namespace, out: TextIO, err: TextIO) -> bool:
    """Dump one file; False when it is damaged or cannot be dumped."""
    if not path.is_file():
        what = "is not a regular file" if path.exists() else "does not exist"
        print(f"pykraft dump-log: {path} {what}", file=err)
        return False
    if path.suffix == LOG_SUFFIX:
        return _dump_log(path, args, out, err)
    if path.suffix == TXN_INDEX_SUFFIX:
        return _dump_txn_index(path, out)
    if path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        base_offset = _base_offset(path)
        if base_offset is None:
            print(f"pykraft dump-log: {path.name} does not start with a base offset", file=err)
            return False
        if path.suffix == INDEX_SUFFIX:
            return _dump_index(path, base_offset, args.verify_index_only, out, err)
        return _dump_time_index(path, base_offset, args.verify_index_only, out, err)
    print(f"Ignoring unknown file {path}", file=err)
    return False


def _base_offset(path: Path) -> int | None:
    stem = path.name.split(".")[0]
    return int(stem) if stem.isdigit() else None


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes without reading a (possibly 1 GiB) segment into memory."""
    with path.open("rb") as file:
        size = path.stat().st_size
        if size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                yield view
            finally:
                view.release()


# ------------------------------------------------------------------------------------ .log


def _dump_log(path: Path, args: argparse.Namespace, out: TextIO, err: TextIO) -> bool:
    base_offset = _base_offset(path)
    if base_offset is not None:
        out.write(f"Log starting offset: {base_offset}\n")
    deep = args.deep_iteration or args.print_data
    gaps: list[tuple[int, int]] = []
    with _mapped(path) as buf, _byte_progress(path.name, len(buf), out, err) as advance:
        position, problem = _dump_batches(buf, args, deep, gaps, out, advance)
        size = len(buf)
    if problem is not None:
        out.write(f"Found corrupt batch at position {position}: {problem}\n")
    if position < size:
        out.write(f"Found {size - position} invalid bytes at the end of {path.name}\n")
    if gaps:
        err.write(f"Non-consecutive offsets in {path.resolve()}\n")
        err.writelines(f"  {first} is followed by {second}\n" for first, second in gaps)
    return problem is None and position == size


def wants_progress(size: int, stdout_is_terminal: bool, stderr_is_terminal: bool) -> bool:
    return size >= PROGRESS_MIN_BYTES and stderr_is_terminal and not stdout_is_terminal


@contextmanager
def _byte_progress(
    name: str, size: int, out: TextIO, err: TextIO
) -> Iterator[Callable[[int], None]]:
    """A function that moves a progress bar to a byte position (a no-op when not wanted)."""
    if not wants_progress(size, out.isatty(), err.isatty()):
        yield lambda position: None
        return
    # Imported here: every pykraft process builds this parser, few dump big segments.
    from rich.console import Console
    from rich.progress import Progress

    console = Console(file=err)
    with Progress(console=console, transient=True, redirect_stdout=False) as progress:
        task = progress.add_task(f"Dumping {name}", total=size)
        yield lambda position: progress.update(task, completed=position)


def _dump_batches(
    buf: memoryview,
    args: argparse.Namespace,
    deep: bool,
    gaps: list[tuple[int, int]],
    out: TextIO,
    advance: Callable[[int], None] = lambda position: None,
) -> tuple[int, str | None]:
    """Print batches until the end or the first damage; return where we stopped and why.
    ``advance`` hears the position every ``PROGRESS_STEP_BYTES`` and at the end.

    Damage comes back as text, not as the exception: a live traceback would pin slices of
    the memory map and make closing it fail.
    """
    position = 0
    reported = 0
    last_offset = -1
    while position < len(buf):
        if position - reported >= PROGRESS_STEP_BYTES:
            advance(position)
            reported = position
        try:
            header = parse_header(buf, position)
        except CorruptRecordError as error:
            return position, str(error)
        computed = compute_crc(buf, position, header)
        out.write(format_batch(header, position, computed == header.crc) + "\n")
        if computed != header.crc:
            return position, f"crc: stored {header.crc:#010x} but computed {computed:#010x}"
        if deep:
            try:
                records = decode_records(
                    header,
                    buf[position + BATCH_HEADER_SIZE : position + header.size_in_bytes],
                    position,
                )
            except CorruptRecordError as error:
                return position, str(error)
            for record in records:
                if last_offset != -1 and record.offset != last_offset + 1:
                    gaps.append((last_offset, record.offset))
                last_offset = record.offset
                out.write(
                    format_record(header, record, args.print_data, args.skip_record_metadata) + "\n"
                )
        position += header.size_in_bytes
    advance(position)
    return position, None


def format_batch(header: BatchHeader, position: int, crc_valid: bool) -> str:
    """One batch, exactly as ``DumpLogSegments.printBatchLevel`` prints a v2 batch."""
    delete_horizon = (
        f"OptionalLong[{header.base_timestamp}]"
        if header.attributes & DELETE_HORIZON_MASK
        else "OptionalLong.empty"
    )
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
        f"count: {header.records_count} baseSequence: {header.base_sequence} "
        f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
        f"producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {_java_bool(header.is_transactional)} "
        f"isControl: {_java_bool(header.is_control)} deleteHorizonMs: {delete_horizon} "
        f"position: {position} {_TIMESTAMP_TYPE_NAMES[header.timestamp_type]}: "
        f"{header.max_timestamp} size: {header.size_in_bytes} magic: {header.magic} "
        f"compresscodec: {header.compression.name.lower()} crc: {header.crc} "
        f"isvalid: {_java_bool(crc_valid)}"
    )


def format_record(
    header: BatchHeader, record: Record, print_data: bool, skip_metadata: bool = False
) -> str:
    """One record, as ``DumpLogSegments.dumpLog`` prints it in deep iteration."""
    parts = ["|"]
    if not skip_metadata:
        sequence = -1
        if header.base_sequence != -1:
            sequence = (header.base_sequence + record.offset - header.base_offset) % 2**31
        parts.append(
            f"offset: {record.offset} {_TIMESTAMP_TYPE_NAMES[header.timestamp_type]}: "
            f"{record.timestamp} keySize: {_size(record.key)} valueSize: {_size(record.value)} "
            f"sequence: {sequence} headerKeys: [{','.join(h.key for h in record.headers)}]"
        )
        if header.is_control:
            parts.append(_describe_control(record))
    if print_data and not header.is_control:
        if record.key is not None:
            parts.append(f"key: {_text(record.key)}")
        if record.value is not None:
            parts.append(f"payload: {_text(record.value)}")
    return " ".join(parts)


def _describe_control(record: Record) -> str:
    key, value = record.key or b"", record.value or b""
    if len(key) < 4:
        return "controlType: UNKNOWN(-1)"
    (type_id,) = struct.unpack_from(">h", key, 2)
    if type_id in (ControlRecordType.ABORT, ControlRecordType.COMMIT) and len(value) >= 6:
        (coordinator_epoch,) = struct.unpack_from(">i", value, 2)
        return (
            f"endTxnMarker: {ControlRecordType(type_id).name} coordinatorEpoch: {coordinator_epoch}"
        )
    return f"controlType: {_OTHER_CONTROL_TYPES.get(type_id, 'UNKNOWN')}({type_id})"


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _text(data: bytes) -> str:
    # Kafka's default StringDecoder: UTF-8, malformed input replaced.
    return data.decode("utf-8", errors="replace")


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


# ------------------------------------------------------------------------- .index, .timeindex


def _dump_txn_index(path: Path, out: TextIO) -> bool:
    """``DumpLogSegments.dumpTxnIndex``; a torn or unknown entry ends the dump as damage."""
    data = path.read_bytes()
    for position in range(0, len(data) - len(data) % ABORTED_TXN_SIZE, ABORTED_TXN_SIZE):
        try:
            (entry,) = decode_entries(data[position : position + ABORTED_TXN_SIZE])
        except ValueError as error:
            out.write(f"Found corrupt transaction index at position {position}: {error}\n")
            return False
        out.write(
            f"version: {entry.version} producerId: {entry.producer_id} "
            f"firstOffset: {entry.first_offset} lastOffset: {entry.last_offset} "
            f"lastStableOffset: {entry.last_stable_offset}\n"
        )
    return _check_entry_size(path, len(data), ABORTED_TXN_SIZE, out)


def _dump_index(path: Path, base_offset: int, verify_only: bool, out: TextIO, err: TextIO) -> bool:
    data = path.read_bytes()
    entries = len(data) // _INDEX_ENTRY.size
    if entries == 0 and not data:
        out.write(f"{path} is empty.\n")
        return True
    log_offsets = _last_offsets_by_position(path.with_suffix(LOG_SUFFIX))
    mismatches: list[tuple[int, int]] = []
    for index in range(entries):
        relative, position = _INDEX_ENTRY.unpack_from(data, index * _INDEX_ENTRY.size)
        # Preallocated index files end in zeros; the first zero entry after entry 0 ends them.
        if relative == 0 and index > 0:
            break
        offset = base_offset + relative
        if log_offsets is not None and log_offsets.get(position, -1) != offset:
            mismatches.append((offset, log_offsets.get(position, -1)))
        if not verify_only:
            out.write(f"offset: {offset} position: {position}\n")
    if mismatches:
        err.write(f"Mismatches in :{path.resolve()}\n")
        err.writelines(
            f"  Index offset: {index_offset}, log offset: {log_offset}\n"
            for index_offset, log_offset in mismatches
        )
    return _check_entry_size(path, len(data), _INDEX_ENTRY.size, out) and not mismatches


def _dump_time_index(
    path: Path, base_offset: int, verify_only: bool, out: TextIO, err: TextIO
) -> bool:
    data = path.read_bytes()
    headers = _log_headers(path.with_suffix(LOG_SUFFIX))
    last_offsets = [header.last_offset for _, header in headers or []]
    errors = _TimeIndexErrors()
    previous = -1
    for index in range(len(data) // _TIME_INDEX_ENTRY.size):
        timestamp, relative = _TIME_INDEX_ENTRY.unpack_from(data, index * _TIME_INDEX_ENTRY.size)
        if relative == 0 and index > 0:
            break
        offset = base_offset + relative
        if headers is not None:
            # Kafka: the first batch ending at or after the offset must end exactly there.
            found = bisect.bisect_left(last_offsets, offset)
            if found == len(headers) or last_offsets[found] != offset:
                log_offset = last_offsets[found] if found < len(headers) else -1
                errors.not_found.append((offset, log_offset))
            else:
                log_timestamp = headers[found][1].max_timestamp
                if log_timestamp != timestamp:
                    errors.mismatches.append((timestamp, log_timestamp))
                if previous >= timestamp:
                    errors.out_of_order.append((timestamp, previous))
        if not verify_only:
            out.write(f"timestamp: {timestamp} offset: {offset}\n")
        previous = timestamp
    errors.write(path, err)
    return _check_entry_size(path, len(data), _TIME_INDEX_ENTRY.size, out) and errors.empty


@attrs.define
class _TimeIndexErrors:
    """What ``DumpLogSegments.TimeIndexDumpErrors`` collects, printed in its words."""

    mismatches: list[tuple[int, int]] = attrs.Factory(list)
    out_of_order: list[tuple[int, int]] = attrs.Factory(list)
    not_found: list[tuple[int, int]] = attrs.Factory(list)

    @property
    def empty(self) -> bool:
        return not (self.mismatches or self.out_of_order or self.not_found)

    def write(self, path: Path, err: TextIO) -> None:
        if self.mismatches:
            err.write(f"Found timestamp mismatch in :{path.resolve()}\n")
            err.writelines(
                f"  Index timestamp: {index}, log timestamp: {log}\n"
                for index, log in self.mismatches
            )
        if self.out_of_order:
            err.write(f"Found out of order timestamp in :{path.resolve()}\n")
            err.writelines(
                f"  Index timestamp: {index}, Previously indexed timestamp: {prev}\n"
                for index, prev in self.out_of_order
            )
        if self.not_found:
            err.write("The following indexed offsets are not found in the log.\n")
            err.writelines(
                f"Indexed offset: {index}, found log offset: {log}\n"
                for index, log in self.not_found
            )


def _check_entry_size(path: Path, size: int, entry_size: int, out: TextIO) -> bool:
    if size % entry_size == 0:
        return True
    out.write(
        f"Found corrupt index at position {size - size % entry_size}: "
        f"{path.name} is {size} bytes, not a multiple of the {entry_size}-byte entry\n"
    )
    return False


def _last_offsets_by_position(log_path: Path) -> dict[int, int] | None:
    """position -> lastOffset of each readable batch of the segment's log, if it exists."""
    headers = _log_headers(log_path)
    return None if headers is None else {pos: h.last_offset for pos, h in headers}


def _log_headers(log_path: Path) -> list[tuple[int, BatchHeader]] | None:
    if not log_path.is_file():
        return None
    headers = []
    with _mapped(log_path) as buf:
        position = 0
        while position < len(buf):
            try:
                header = parse_header(buf, position)
            except CorruptRecordError:
                break  # the .log dump reports damage; the index check stops where it starts
            headers.append((position, header))
            position += header.size_in_bytes
    return headers
