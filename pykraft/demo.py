"""``pykraft demo``: append to a partition log, crash it mid-write, recover, read it back.

Everything happens under ``DATA_DIR/demo-logs`` (removed and recreated on every run, so the
demo can run again and again); nothing else in the data dir is touched. The steps are the real
storage code paths: ``LogManager`` start-up, leader appends, the recovery-point checkpoint, a
crash that tears the active segment in the middle of its last batch (and, for good measure, an
older segment's index deleted), then start-up recovery with the clean-shutdown marker absent.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import LogManager
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import Record, SimpleRecord, build_batch, iter_records
from pykraft.storage.recovery import CLEAN_SHUTDOWN_FILE
from pykraft.storage.system_clock import SystemClock
from pykraft.storage.topic_partition import TopicPartition

DEMO_SUBDIR = "demo-logs"
TOPIC_PARTITION = TopicPartition("demo-orders", 0)
# Small segments so the demo log has several, each with index entries.
DEMO_CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=512)
LEADER_EPOCH = 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", type=Path, required=True, help="directory for the demo's log dir"
    )
    parser.add_argument("--batches", type=int, default=6, help="batches to append (2-1000)")
    parser.add_argument("--records", type=int, default=25, help="records per batch (1-1000)")


def run(args: argparse.Namespace) -> int:
    if not 2 <= args.batches <= 1000 or not 1 <= args.records <= 1000:
        print("error: --batches must be 2..1000 and --records 1..1000")
        return 2
    log_dir = Path(args.data_dir) / DEMO_SUBDIR
    try:
        return _demo(log_dir, args.batches, args.records, SystemClock().wall_clock_ms)
    except BrokenPipeError:
        # The reader went away (``pykraft demo | head``): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        print(f"error: {error}")
        return 1


def _demo(
    log_dir: Path, batches: int, records_per_batch: int, wall_clock_ms: Callable[[], int]
) -> int:
    if log_dir.exists():
        shutil.rmtree(log_dir)
        print(f"Starting fresh: removed the previous demo in {log_dir}")
    manager = LogManager.open([log_dir], DEMO_CONFIG, wall_clock_ms())
    log = manager.get_or_create_log(TOPIC_PARTITION, wall_clock_ms())
    print(f"Created partition {TOPIC_PARTITION} in {log.directory}")
    print(
        f"  segment.bytes={DEMO_CONFIG.segment_bytes}, index.interval.bytes="
        f"{DEMO_CONFIG.index_interval_bytes}\n"
    )
    appended = _append(log, batches, records_per_batch, wall_clock_ms)
    # Everything but the last batch is flushed and checkpointed; the last one is not.
    log.flush(log.log_end_offset - records_per_batch)
    log.update_high_watermark(log.log_end_offset)
    manager.checkpoint_all()
    print(
        f"\nFlushed up to offset {log.recovery_point} (the recovery point, checkpointed); "
        f"offsets {log.recovery_point}..{log.log_end_offset - 1} are only in the page cache."
    )
    _read_back(log, appended)
    lost = _crash(manager, log, log_dir)
    return _recover(log_dir, appended, lost, wall_clock_ms)


def _append(
    log: PartitionLog, batches: int, records_per_batch: int, wall_clock_ms: Callable[[], int]
) -> list[Record]:
    appended: list[Record] = []
    for number in range(batches):
        now_ms = wall_clock_ms()
        records = [
            SimpleRecord(
                key=f"customer-{(number * records_per_batch + i) % 7}".encode(),
                value=f"order {number * records_per_batch + i}: {i + 1} x widget".encode(),
                timestamp=now_ms,
            )
            for i in range(records_per_batch)
        ]
        batch = bytearray(build_batch(records))
        info = log.append_as_leader(batch, LEADER_EPOCH, now_ms)
        print(
            f"Appended batch {number + 1}: offsets {info.first_offset}..{info.last_offset} "
            f"({info.records_count} records, {info.valid_bytes} bytes)"
        )
        appended.extend(_decode(bytes(batch)))
    print(
        f"Log end offset {log.log_end_offset}, {len(log.local_log.segments)} segments: "
        + ", ".join(segment.log_path.name for segment in log.local_log.segments)
    )
    return appended


def _decode(data: bytes) -> list[Record]:
    return [record for position, _ in iter_batches(data) for record in iter_records(data, position)]


def _read_back(log: PartitionLog, appended: list[Record]) -> None:
    result = log.read(0, 10**8, log.high_watermark)
    records = _decode(result.read_bytes())
    assert records == appended, "the log must read back exactly what was appended"
    first, last = records[0], records[-1]
    print(
        f"Read back {len(records)} records from {len(result.slices)} file slices "
        f"({result.size_in_bytes} bytes):"
    )
    for record in (first, last):
        print(f"  offset {record.offset}: key={record.key!r} value={record.value!r}")


def _crash(manager: LogManager, log: PartitionLog, log_dir: Path) -> int:
    """Kill the log without a clean shutdown and tear its last batch; returns records lost."""
    active = log.local_log.active_segment
    older = log.local_log.segments[0]
    last_batch = list(active.iter_headers())[-1]
    log.close_handlers()
    (log_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    cut = last_batch.header.size_in_bytes // 2
    with active.log_path.open("r+b") as file:
        file.truncate(active.size - cut)
    if older is not active:
        older.offset_index_path.unlink()
    print(f"\nCRASH: the process dies without a clean shutdown ({CLEAN_SHUTDOWN_FILE} absent).")
    print(
        f"  {active.log_path.name} loses its last {cut} bytes, tearing the batch at offsets "
        f"{last_batch.header.base_offset}..{last_batch.header.last_offset} in half."
    )
    if older is not active:
        print(f"  {older.offset_index_path.name} is deleted as well.")
    del manager
    return last_batch.header.records_count


def _recover(
    log_dir: Path, appended: list[Record], lost: int, wall_clock_ms: Callable[[], int]
) -> int:
    print("\nRestarting: loading the log dir ...")
    manager = LogManager.open([log_dir], DEMO_CONFIG, wall_clock_ms())
    log = manager.get_log(TOPIC_PARTITION)
    assert log is not None
    report = manager.load_reports[TOPIC_PARTITION]
    print(
        f"  clean shutdown: {'yes' if manager.had_clean_shutdown[log_dir] else 'no'}; "
        f"recovery starts at the checkpointed recovery point {report.recovery_point}"
    )
    rebuilt = {base for base, _ in report.rebuilt_indexes}
    unflushed = [base for base in report.recovered_segments if base not in rebuilt]
    print(
        "  re-validated from the recovery point (CRC of every batch): "
        + ", ".join(f"{base:020d}.log" for base in unflushed)
    )
    for problem in report.problems:
        print(f"  found damage: {problem}")
    print(f"  truncated {report.truncated_bytes} bytes: what was left of the torn batch")
    for base, reason in report.rebuilt_indexes:
        print(f"  rebuilt the indexes of segment {base:020d} from its log ({reason})")
    survivors = _decode(log.read(0, 10**8, log.log_end_offset).read_bytes())
    intact = survivors == appended[: len(appended) - lost]
    print(
        f"\nAfter recovery: log end offset {log.log_end_offset} (was {len(appended)}); "
        f"{len(survivors)} records survived, {lost} from the torn batch were lost."
    )
    print(f"  survivors identical to what was appended: {'yes' if intact else 'NO'}")
    manager.shutdown()
    print(f"Clean shutdown written; the files are in {log_dir}")
    return 0 if intact else 1
