"""``pykraft dump-log``: Kafka's ``kafka-dump-log.sh`` output (kafka.tools.DumpLogSegments).

Expected lines follow ``DumpLogSegments.printBatchLevel`` / ``dumpLog`` / ``dumpIndex`` /
``dumpTimeIndex``; damaged files must print what is valid, name the damage and exit 1.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from pykraft import cli, dump_log
from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.record_batch import CompressionType, validate_batch
from pykraft.storage.records import (
    ControlRecordType,
    Header,
    SimpleRecord,
    build_batch,
    build_control_batch,
)
from tests.storage.test_records import raw_batch, record

T0 = 1_700_000_000_000
SEGMENT = "00000000000000000000"
BATCH_1 = build_batch(
    [
        SimpleRecord(b"hello", b"abc", T0),
        SimpleRecord(b"world", None, T0 + 1, (Header("h1", b"x"), Header("h2", None))),
        SimpleRecord(None, b"k", T0 + 2),
    ],
    partition_leader_epoch=0,
)
BATCH_2 = build_batch(
    [SimpleRecord(b"v" * 20, b"z", T0 + 5)] * 2,
    base_offset=3,
    compression=CompressionType.GZIP,
    producer_id=7,
    producer_epoch=1,
    base_sequence=2147483646,
    partition_leader_epoch=4,
)
COMMIT = build_control_batch(
    ControlRecordType.COMMIT,
    producer_id=7,
    producer_epoch=1,
    timestamp=T0 + 9,
    base_offset=5,
    coordinator_epoch=3,
)


@pytest.fixture
def dump(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run ``pykraft dump-log ARGS`` through the real CLI; return (exit code, stdout, stderr)."""
    # Other subcommand modules are imported when the parser is built; keep this test about ours.
    monkeypatch.setattr(cli, "SUBCOMMANDS", {"dump-log": cli.SUBCOMMANDS["dump-log"]})

    def run(*args: str | Path) -> tuple[int, list[str], str]:
        code = cli.main(["dump-log", *map(str, args)])
        captured = capsys.readouterr()
        return code, captured.out.splitlines(), captured.err

    return run


def write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


def crc(batch: bytes) -> int:
    return validate_batch(batch).crc


def test_log_batches_print_like_kafka(dump, tmp_path: Path) -> None:
    log = write(tmp_path, f"{SEGMENT}.log", BATCH_1 + BATCH_2)
    code, out, err = dump(log)
    assert (code, err) == (0, "")
    assert out == [
        f"Dumping {log}",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000002 "
        f"size: {len(BATCH_1)} magic: 2 compresscodec: none crc: {crc(BATCH_1)} isvalid: true",
        # lastSequence wraps at Int32.MAX like DefaultRecordBatch.incrementSequence.
        "baseOffset: 3 lastOffset: 4 count: 2 baseSequence: 2147483646 lastSequence: 2147483647 "
        "producerId: 7 producerEpoch: 1 partitionLeaderEpoch: 4 isTransactional: false "
        "isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: {len(BATCH_1)} CreateTime: 1700000000005 size: {len(BATCH_2)} magic: 2 "
        f"compresscodec: gzip crc: {crc(BATCH_2)} isvalid: true",
    ]


def test_print_data_prints_each_record(dump, tmp_path: Path) -> None:
    log = write(tmp_path, "00000000000000000000.log", BATCH_1 + BATCH_2 + COMMIT)
    code, out, _ = dump("--print-data", log)
    assert code == 0
    records = [line for line in out if line.startswith("|")]
    assert records == [
        "| offset: 0 CreateTime: 1700000000000 keySize: 3 valueSize: 5 sequence: -1 "
        "headerKeys: [] key: abc payload: hello",
        "| offset: 1 CreateTime: 1700000000001 keySize: -1 valueSize: 5 sequence: -1 "
        "headerKeys: [h1,h2] payload: world",
        "| offset: 2 CreateTime: 1700000000002 keySize: 1 valueSize: -1 sequence: -1 "
        "headerKeys: [] key: k",
        "| offset: 3 CreateTime: 1700000000005 keySize: 1 valueSize: 20 sequence: 2147483646 "
        f"headerKeys: [] key: z payload: {'v' * 20}",
        "| offset: 4 CreateTime: 1700000000005 keySize: 1 valueSize: 20 sequence: 2147483647 "
        f"headerKeys: [] key: z payload: {'v' * 20}",
        # Control records show the marker, never key/payload (DumpLogSegments.dumpLog).
        "| offset: 5 CreateTime: 1700000000009 keySize: 4 valueSize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3",
    ]
    assert "isTransactional: true isControl: true" in out[-2]


def test_deep_iteration_without_data_and_skipped_metadata(dump, tmp_path: Path) -> None:
    log = write(tmp_path, f"{SEGMENT}.log", BATCH_1)
    _, out, _ = dump("--deep-iteration", log)
    assert out[3] == (
        "| offset: 0 CreateTime: 1700000000000 keySize: 3 valueSize: 5 sequence: -1 headerKeys: []"
    )
    _, out, _ = dump("--print-data-log", "--skip-record-metadata", log)
    assert out[3:] == ["| key: abc payload: hello", "| payload: world", "| key: k"]


def test_non_utf8_data_is_replaced_like_string_decoder(dump, tmp_path: Path) -> None:
    log = write(tmp_path, f"{SEGMENT}.log", build_batch([SimpleRecord(b"\xff\xfeok", b"\xc3")]))
    _, out, _ = dump("--print-data", log)
    assert out[-1].endswith("key: \ufffd payload: \ufffd\ufffdok")


def test_empty_log_prints_only_the_preamble(dump, tmp_path: Path) -> None:
    log = write(tmp_path, "00000000000000000042.log", b"")
    assert dump(log) == (0, [f"Dumping {log}", "Log starting offset: 42"], "")


def test_offset_index_prints_absolute_offsets_and_stops_at_preallocated_zeros(
    dump, tmp_path: Path
) -> None:
    write(
        tmp_path,
        "00000000000000000100.log",
        build_batch([SimpleRecord(b"a")] * 3, base_offset=100)
        + build_batch([SimpleRecord(b"b")] * 2, base_offset=103),
    )
    first_size = 61 + 3 * 8
    index = write(
        tmp_path,
        "00000000000000000100.index",
        struct.pack(">ii", 2, 0) + struct.pack(">ii", 4, first_size) + bytes(800),
    )
    assert dump(index) == (
        0,
        [f"Dumping {index}", "offset: 102 position: 0", f"offset: 104 position: {first_size}"],
        "",
    )


def test_empty_index(dump, tmp_path: Path) -> None:
    index = write(tmp_path, f"{SEGMENT}.index", b"")
    assert dump(index) == (0, [f"Dumping {index}", f"{index} is empty."], "")


def test_index_entry_that_does_not_match_the_log_is_reported(dump, tmp_path: Path) -> None:
    write(tmp_path, f"{SEGMENT}.log", BATCH_1)
    index = write(tmp_path, f"{SEGMENT}.index", struct.pack(">ii", 1, 0))
    code, out, err = dump(index)
    assert code == 1
    assert out[-1] == "offset: 1 position: 0"
    assert err.splitlines() == [
        f"Mismatches in :{index.resolve()}",
        "  Index offset: 1, log offset: 2",
    ]


def test_torn_index_is_reported(dump, tmp_path: Path) -> None:
    index = write(tmp_path, f"{SEGMENT}.index", struct.pack(">ii", 0, 0) + b"\x00\x01\x02")
    code, out, _ = dump(index)
    assert code == 1
    assert out[1:] == [
        "offset: 0 position: 0",
        f"Found corrupt index at position 8: {index.name} is 11 bytes, "
        "not a multiple of the 8-byte entry",
    ]


def test_time_index_prints_and_checks_against_the_log(dump, tmp_path: Path) -> None:
    write(tmp_path, f"{SEGMENT}.log", BATCH_1 + BATCH_2)
    good = struct.pack(">qi", T0 + 2, 2) + struct.pack(">qi", T0 + 5, 4)
    time_index = write(tmp_path, f"{SEGMENT}.timeindex", good + bytes(120))
    assert dump(time_index) == (
        0,
        [
            f"Dumping {time_index}",
            "timestamp: 1700000000002 offset: 2",
            "timestamp: 1700000000005 offset: 4",
        ],
        "",
    )
    # Wrong timestamp for offset 2, and offset 3 is not the end of a batch.
    write(
        tmp_path,
        f"{SEGMENT}.timeindex",
        struct.pack(">qi", T0 + 1, 2) + struct.pack(">qi", T0 + 5, 3),
    )
    code, _, err = dump(time_index)
    assert code == 1
    assert err.splitlines() == [
        f"Found timestamp mismatch in :{time_index.resolve()}",
        "  Index timestamp: 1700000000001, log timestamp: 1700000000002",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 3, found log offset: 4",
    ]


# ---------------------------------------------------------------------------- damaged files


def test_bad_crc_prints_valid_batches_then_the_damage(dump, tmp_path: Path) -> None:
    damaged = bytearray(BATCH_2)
    damaged[-1] ^= 0x01
    log = write(tmp_path, f"{SEGMENT}.log", BATCH_1 + bytes(damaged) + COMMIT)
    code, out, _ = dump("--print-data", log)
    assert code == 1
    assert out[2].startswith("baseOffset: 0 ") and out[2].endswith("isvalid: true")
    assert out[6].startswith("baseOffset: 3 ") and out[6].endswith("isvalid: false")
    assert out[7].startswith(f"Found corrupt batch at position {len(BATCH_1)}: crc: stored ")
    assert " but computed " in out[7]
    assert out[8:] == [f"Found {len(BATCH_2) + len(COMMIT)} invalid bytes at the end of {log.name}"]


def test_torn_tail_is_reported_with_its_position(dump, tmp_path: Path) -> None:
    log = write(tmp_path, f"{SEGMENT}.log", BATCH_1 + BATCH_2[:70])
    code, out, err = dump(log)
    assert code == 1
    assert out[3:] == [
        f"Found corrupt batch at position {len(BATCH_1)}: batchLength: batch claims "
        f"{len(BATCH_2)} bytes but only 70 remain (at byte {len(BATCH_1)})",
        f"Found 70 invalid bytes at the end of {log.name}",
    ]
    assert "Traceback" not in err


def test_garbage_file(dump, tmp_path: Path) -> None:
    log = write(
        tmp_path,
        f"{SEGMENT}.log",
        b"this is not a kafka log segment at all, sorry!!!!!!!!!!!!!!!!!!!!",
    )
    code, out, _ = dump(log)
    assert code == 1
    assert out[2].startswith("Found corrupt batch at position 0: ")


def test_malformed_record_with_valid_crc_is_named(dump, tmp_path: Path) -> None:
    # keyLength says 10 bytes, but the record ends first.
    bad = raw_batch(record(b"\x00\x00\x00\x14k1\x04v1\x00"), 1)
    log = write(tmp_path, f"{SEGMENT}.log", BATCH_1 + bad)
    code, out, _ = dump("--print-data", log)
    assert code == 1
    assert out[-2] == (
        f"Found corrupt batch at position {len(BATCH_1)}: keyLength: 10 bytes run "
        f"4 past the record (at byte {len(BATCH_1) + 61 + 4})"
    )


def test_non_consecutive_offsets_are_reported_on_stderr(dump, tmp_path: Path) -> None:
    log = write(
        tmp_path, f"{SEGMENT}.log", BATCH_1 + build_batch([SimpleRecord(b"x")], base_offset=10)
    )
    code, _, err = dump("--deep-iteration", log)
    assert code == 0  # gaps are legal after compaction; Kafka only reports them
    assert err.splitlines() == [
        f"Non-consecutive offsets in {log.resolve()}",
        "  2 is followed by 10",
    ]


def test_missing_and_unknown_files_fail_but_others_are_dumped(dump, tmp_path: Path) -> None:
    log = write(tmp_path, f"{SEGMENT}.log", BATCH_1)
    other = write(tmp_path, "notes.txt", b"hi")
    missing = tmp_path / "00000000000000000099.log"
    code, out, err = dump(missing, other, "--files", f"{log}")
    assert code == 1
    assert out[0] == f"Dumping {missing}"
    assert out[1] == f"Dumping {other}"
    assert out[2:4] == [f"Dumping {log}", "Log starting offset: 0"]
    assert f"{missing} does not exist" in err
    assert f"Ignoring unknown file {other}" in err


def test_directory_and_no_arguments(dump, tmp_path: Path) -> None:
    code, _, err = dump(tmp_path)
    assert code == 1 and "is not a regular file" in err
    code, _, err = dump()
    assert code == 1 and "at least one file" in err


def test_a_decompression_bomb_is_reported_not_inflated(dump, tmp_path: Path) -> None:
    from pykraft.storage.varint import encode_varint
    from tests.storage.bombs import zstd_zeros_frame
    from tests.storage.test_record_validation import batch_of

    # One record claiming a 1 GiB value, inside 32 KB of zstd: the bound stops it at once.
    body = b"\x00\x00\x00\x01" + encode_varint(1 << 30)
    prefix = encode_varint(len(body) + (1 << 30) + 1) + body
    bomb = batch_of(zstd_zeros_frame(prefix, 1 << 30), 1, CompressionType.ZSTD)
    log = write(tmp_path, f"{SEGMENT}.log", BATCH_1 + bomb)
    code, out, _ = dump("--deep-iteration", log)
    assert code == 1
    assert out[-2].startswith(
        f"Found corrupt batch at position {len(BATCH_1)}: length: record 0 "
        "is longer than the limit of 67109632"
    )


def test_transaction_index_prints_each_aborted_transaction(dump, tmp_path: Path) -> None:
    # DumpLogSegments.dumpTxnIndex
    entries = [AbortedTxn(7, 0, 29, 8), AbortedTxn(9, 8, 74, 36)]
    index = write(tmp_path, f"{SEGMENT}.txnindex", b"".join(e.encode() for e in entries))
    assert dump(index) == (
        0,
        [
            f"Dumping {index}",
            "version: 0 producerId: 7 firstOffset: 0 lastOffset: 29 lastStableOffset: 8",
            "version: 0 producerId: 9 firstOffset: 8 lastOffset: 74 lastStableOffset: 36",
        ],
        "",
    )
    torn = write(tmp_path, f"{'1'.zfill(20)}.txnindex", entries[0].encode() + b"\x00" * 5)
    code, out, _ = dump(torn)
    assert code == 1
    assert out[-1] == (
        f"Found corrupt index at position 34: {torn.name} is 39 bytes, not a multiple of the "
        "34-byte entry"
    )
    future = write(tmp_path, f"{'2'.zfill(20)}.txnindex", struct.pack(">hqqqq", 1, 7, 0, 9, 10))
    code, out, _ = dump(future)
    assert code == 1 and out[-1].startswith("Found corrupt transaction index at position 0")


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a console's stderr does."""

    def isatty(self) -> bool:
        return True


def test_a_progress_bar_only_for_big_segments_on_a_terminal_stderr() -> None:
    big, small = dump_log.PROGRESS_MIN_BYTES, dump_log.PROGRESS_MIN_BYTES - 1
    assert dump_log.wants_progress(big, stdout_is_terminal=False, stderr_is_terminal=True)
    assert not dump_log.wants_progress(small, stdout_is_terminal=False, stderr_is_terminal=True)
    # Lines printed to the terminal would be torn by a bar drawn between them.
    assert not dump_log.wants_progress(big, stdout_is_terminal=True, stderr_is_terminal=True)
    assert not dump_log.wants_progress(big, stdout_is_terminal=False, stderr_is_terminal=False)


def test_the_progress_bar_follows_the_bytes_read_and_leaves_stdout_alone(
    dump, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = BATCH_1 + BATCH_2 + COMMIT
    log = write(tmp_path, f"{SEGMENT}.log", data)
    _, expected, _ = dump(log)
    monkeypatch.setattr(dump_log, "PROGRESS_MIN_BYTES", 1)
    monkeypatch.setattr(dump_log, "PROGRESS_STEP_BYTES", 1)
    positions: list[int] = []
    args = cli.build_parser().parse_args(["dump-log", str(log)])
    out = io.StringIO()
    with dump_log._mapped(log) as buf:
        dump_log._dump_batches(buf, args, False, [], out, positions.append)
    # Every batch start past the first, then the end.
    assert positions == [len(BATCH_1), len(BATCH_1) + len(BATCH_2), len(data)]
    out, err = io.StringIO(), Terminal()
    assert dump_log._dump_log(log, args, out, err)
    assert out.getvalue().splitlines() == expected[1:]  # "Dumping ..." is run()'s line
    assert f"Dumping {log.name}" in err.getvalue()
