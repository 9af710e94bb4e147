"""Log cleaner benchmark: MB/s cleaned next to the plain segment read rate, in one run.

    .venv/bin/python bench/cleaner.py            # 128 MiB of updates
    .venv/bin/python bench/cleaner.py --quick    # 16 MiB: a smoke run

Builds one compacted log (``cleanup.policy=compact``, 16 MiB segments) on a temp dir under /tmp:
small records (24-byte values) over 10,000 keys in 16 KiB batches, uncompressed, then lz4 —
the shape of a changelog topic. Then, on the same warm page cache:

* read: the whole log in 1 MiB fetches through ``PartitionLog.read``, slices copied into memory
  (what a consumer reading from the start costs the broker);
* clean: one cleaning of everything below the active segment (``storage.cleaner.Cleaner``: the
  offset map over the dirty section, then every group rewritten and swapped in), MB/s of the
  log's bytes before cleaning; the offset map build and the rewrite each read the log once.

Prints a table, then one JSON line; ``ratio = clean_mb_s / read_mb_s``. MB means 10^6 bytes.
Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pykraft.storage.cleaner import Cleaner, segment_summary
from pykraft.storage.cleaner_offset_map import DEFAULT_DEDUPE_BUFFER_SIZE, offset_map_capacity
from pykraft.storage.cleaner_policy import LogSummary, grab_filthiest_compacted_log
from pykraft.storage.log_config import CleanupPolicy, LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import CompressionType
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition

MIB = 1024 * 1024
KEYS = 10_000
BATCH_RECORDS = 300  # ~16 KiB of 55-byte records
FETCH_BYTES = MIB
NOW_MS = 1_700_000_000_000
CONFIG = LogConfig(
    segment_bytes=16 * MIB,
    cleanup_policy=frozenset({CleanupPolicy.COMPACT}),
    min_cleanable_dirty_ratio=0.0,
)
TP = TopicPartition("bench", 0)


def build_log(directory: Path, total_bytes: int, compression: CompressionType) -> PartitionLog:
    log = PartitionLog.open(directory, CONFIG)
    update = 0
    while log.size_in_bytes < total_bytes:
        records = [
            SimpleRecord(b"value-%018d" % (update + i), b"key-%05d" % ((update + i) % KEYS), NOW_MS)
            for i in range(BATCH_RECORDS)
        ]
        update += BATCH_RECORDS
        log.append_as_leader(bytearray(build_batch(records, compression=compression)), 0, NOW_MS)
    log.roll(NOW_MS)
    log.append_as_leader(bytearray(build_batch([SimpleRecord(b"end", b"end", NOW_MS)])), 0, NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log


def read_mb_s(log: PartitionLog) -> tuple[float, int]:
    offset, total = log.log_start_offset, 0
    start = time.perf_counter()
    while offset < log.log_end_offset:
        result = log.read(offset, FETCH_BYTES, log.log_end_offset)
        total += len(result.read_bytes())
        offset = result.next_offset
    return total / (time.perf_counter() - start) / 1e6, total


def clean_mb_s(log: PartitionLog) -> tuple[float, int, int]:
    summary = LogSummary(
        TP,
        log.config,
        log.log_start_offset,
        log.log_end_offset,
        log.last_stable_offset,
        tuple(segment_summary(s) for s in log.local_log.segments),
    )
    chosen = grab_filthiest_compacted_log([summary], {}, NOW_MS).chosen
    assert chosen is not None, "the log is dirty"
    before = chosen.cleanable_bytes
    cleaner = Cleaner(offset_map_capacity(DEFAULT_DEDUPE_BUFFER_SIZE))
    start = time.perf_counter()
    stats = cleaner.clean(log, chosen, NOW_MS)
    elapsed = time.perf_counter() - start
    return before / elapsed / 1e6, stats.records_read, stats.records_kept


def measure(root: Path, total_bytes: int, compression: CompressionType) -> dict[str, float]:
    directory = root / f"bench-{compression.name.lower()}"
    log = build_log(directory, total_bytes, compression)
    read, read_bytes = read_mb_s(log)
    read = max(read, read_mb_s(log)[0])  # best of two: the first may meet a cold cache
    cleaned, records, kept = clean_mb_s(log)
    log.close()
    shutil.rmtree(directory)
    return {
        "log_bytes": read_bytes,
        "records": records,
        "kept": kept,
        "read_mb_s": round(read, 1),
        "clean_mb_s": round(cleaned, 2),
        "ratio": round(cleaned / read, 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 MiB instead of 128 MiB")
    args = parser.parse_args(argv)
    total = 16 * MIB if args.quick else 128 * MIB
    root = Path(tempfile.mkdtemp(prefix="pykraft-bench-", dir="/tmp"))
    figures: dict[str, object] = {"quick": args.quick, "keys": KEYS}
    try:
        for compression in (CompressionType.NONE, CompressionType.LZ4):
            result = measure(root, total, compression)
            name = compression.name.lower()
            figures.update({f"{name}_{key}": value for key, value in result.items()})
            print(
                f"{name:>5}: {result['log_bytes'] / 1e6:.0f} MB, {result['records']} records read "
                f"by the filter, {result['kept']} kept; read {result['read_mb_s']} MB/s, "
                f"clean {result['clean_mb_s']} MB/s (ratio {result['ratio']})"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
