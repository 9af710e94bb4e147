"""Batches the cleaner rebuilt keep their records' offsets, so their offset deltas have gaps;
every reader takes a record's offset as base offset + offsetDelta, as Kafka's
``DefaultRecord.readFrom`` does (issue 14: dump-log and the Spark file export refused compressed
ones, whose records go through the record walk).

Kafka's ``MemoryRecords.filterTo`` rebuilds a batch with the original base offset, compression
and lastOffsetDelta (``LogCleanerTest.testCleanSegmentsWithConcurrentSegmentDeletion`` and
friends read such batches back); ``storage.cleaner_batches.rebuild_batch`` does the same here.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pykraft import cli
from pykraft.export.segment_reader import SegmentSplit, read_segment_rows
from pykraft.storage.cleaner_batches import rebuild_batch
from pykraft.storage.record_batch import (
    BATCH_HEADER_SIZE,
    CompressionType,
    CorruptRecordError,
    validate_batch,
)
from pykraft.storage.records import (
    SimpleRecord,
    build_batch,
    decode_records,
    iter_records,
    validate_records,
)

T0 = 1_700_000_000_000
COMPRESSIONS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4]


def compacted_batch(compression: CompressionType, keep: tuple[int, ...] = (1, 4, 6)) -> bytes:
    """Offsets 10..17 in one batch, of which only ``keep`` (deltas) survived cleaning."""
    records = [SimpleRecord(b"v%d" % i, b"k%d" % i, T0 + i) for i in range(8)]
    original = build_batch(records, base_offset=10, compression=compression)
    header = validate_batch(original)
    kept = [r for r in iter_records(original) if r.offset - 10 in keep]
    return rebuild_batch(header, kept, horizon_ms=None)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_compacted_batch_reads_back_at_its_records_own_offsets(
    compression: CompressionType,
) -> None:
    batch = compacted_batch(compression)
    header = validate_batch(batch)
    assert (header.records_count, header.last_offset_delta) == (3, 7)
    records = list(iter_records(batch))
    assert [(r.offset, r.key, r.value) for r in records] == [
        (11, b"k1", b"v1"),
        (14, b"k4", b"v4"),
        (16, b"k6", b"v6"),
    ]
    payload = memoryview(batch)[BATCH_HEADER_SIZE:]
    assert decode_records(header, payload) == records
    validate_records(header, payload, max_bytes=1 << 20)


@pytest.mark.parametrize("compression", [CompressionType.GZIP, CompressionType.LZ4])
def test_deltas_that_go_back_or_past_last_offset_delta_are_still_corrupt(
    compression: CompressionType,
) -> None:
    batch = compacted_batch(compression, keep=(1, 7))
    header = validate_batch(batch)
    records = list(iter_records(batch))
    # lastOffsetDelta 7 -> 5: the record at delta 7 lies past the batch's last offset.
    past_end = rebuild_batch(attrs.evolve(header, last_offset_delta=5), records, None)
    with pytest.raises(CorruptRecordError, match="offsetDelta 7"):
        list(iter_records(past_end))
    # The same two records in the wrong order: deltas 7 then 1 go back.
    backwards = rebuild_batch(header, records[::-1], None)
    with pytest.raises(CorruptRecordError, match="record 1 has offsetDelta 1"):
        list(iter_records(backwards))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_the_spark_file_export_reads_a_compacted_segment(
    tmp_path: Path, compression: CompressionType
) -> None:
    segment = tmp_path / "00000000000000000010.log"
    segment.write_bytes(compacted_batch(compression))
    rows = list(read_segment_rows(SegmentSplit(str(segment), "t", 0, 10, 12, None)))
    # From offset 12, inside the gap after 11: the next kept records.
    assert [(row.offset, row.key) for row in rows] == [(14, b"k4"), (16, b"k6")]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_dump_log_deep_iteration_prints_a_compacted_segment(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    compression: CompressionType,
) -> None:
    monkeypatch.setattr(cli, "SUBCOMMANDS", {"dump-log": cli.SUBCOMMANDS["dump-log"]})
    segment = tmp_path / "00000000000000000010.log"
    segment.write_bytes(compacted_batch(compression))
    code = cli.main(["dump-log", "--deep-iteration", str(segment)])
    captured = capsys.readouterr()
    assert code == 0, captured.out
    lines = captured.out.splitlines()
    offsets = [line.split()[2] for line in lines if line.startswith("| offset")]
    assert offsets == ["11", "14", "16"]
    # DumpLogSegments names the gaps a compacted log has, as Kafka does.
    assert "11 is followed by 14" in captured.err
