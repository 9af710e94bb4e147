"""Benchmark the Spark data sources against plain baselines, in one run on this machine.

1. pykraft-log: records/s exported to Parquet by ``spark.read.format("pykraft-log")`` next to a
   plain single-process Python read (``storage`` batch walk + ``decode_records``) of the same
   segments, all four codecs.
2. pykraft-kafka (through a live cluster's brokers) next to pykraft-log over the same brokers'
   segment files and a plain confluent-kafka consumer: ``bench/spark_kafka.py``.
3. pykraft-metadata on a 100,000-partition snapshot next to ``spark.read.json`` (explicit schema)
   of the same file: the same query (partitions per leader) over both, results checked equal.
4. ``export-topic``'s fixed overhead (issue 15): a full run over ``records`` records in one
   1 GiB segment per partition (Kafka's ``segment.bytes`` default, so every run reads the active
   segment), then incremental runs after 4 new records (1 per partition), after 10,000, and
   with nothing new; each time and its ratio to the full run. Runs share the bench's session
   (its start-up, timed apart, is what a ``pykraft spark export-topic`` process adds).

Ends with one JSON line of every figure. Run from the repository root (``bench/storage.py``
would shadow the ``storage`` package if run as a script): ``.venv/bin/python -m
bench.spark_export [--records N] [--partitions N] [--master URL]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.spark_kafka import bench_kafka
from pykraft.export.export_topic_job import export_topic
from pykraft.export.session import build_session
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    uuid_to_kafka_string,
)
from pykraft.metadata.snapshot import write_snapshot
from pykraft.storage.checkpoints import (
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import BATCH_HEADER_SIZE, CompressionType, iter_batches
from pykraft.storage.records import SimpleRecord, build_batch, decode_records
from pykraft.storage.topic_partition import TopicPartition

TOPIC = "bench"
LOG_PARTITIONS = 4
RECORDS_PER_BATCH = 100
NOW_MS = 1_700_000_000_000


def write_logs(
    log_dir: Path, records: int, segment_bytes: int = 4 << 20, first_batch: int = 0
) -> None:
    """``records`` more records in each of the topic's partitions' logs (batches of 100, the
    codecs in turn), committed: the high watermark checkpoint moves to the log end."""
    per_partition = records // LOG_PARTITIONS
    codecs = list(CompressionType)
    high_watermarks = read_offset_checkpoint(log_dir / REPLICATION_CHECKPOINT)
    for partition in range(LOG_PARTITIONS):
        tp = TopicPartition(TOPIC, partition)
        log = PartitionLog.open(log_dir / tp.dir_name(), LogConfig(segment_bytes=segment_bytes))
        batches = max(per_partition // RECORDS_PER_BATCH, 1)
        size = min(RECORDS_PER_BATCH, per_partition)
        for n in range(first_batch, first_batch + batches):
            batch = build_batch(
                [
                    SimpleRecord(
                        key=f"k{i % 97}".encode(),
                        value=f'{{"n": {n}, "i": {i}, "pad": "{"x" * 60}"}}'.encode(),
                        timestamp=NOW_MS + n,
                    )
                    for i in range(size)
                ],
                compression=codecs[n % len(codecs)],
            )
            log.append_as_leader(bytearray(batch), 0, NOW_MS + n)
        log.update_high_watermark(log.log_end_offset)
        high_watermarks[tp] = log.high_watermark
        log.flush()
        log.close()
    write_offset_checkpoint(log_dir / REPLICATION_CHECKPOINT, high_watermarks)


def plain_python_read(log_dir: Path) -> int:
    """The baseline: one process walks every segment and decodes every record."""
    count = 0
    for segment in sorted(log_dir.glob("*/*.log")):
        data = segment.read_bytes()
        for position, header in iter_batches(data):
            payload = memoryview(data)[
                position + BATCH_HEADER_SIZE : position + header.size_in_bytes
            ]
            count += len(decode_records(header, payload, position))
    return count


def timed(action: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def bench_log(spark: Any, root: Path, records: int) -> dict[str, Any]:
    log_dir = root / "logs"
    write_logs(log_dir, records)
    plain_count, plain_s = timed(lambda: plain_python_read(log_dir))
    df = spark.read.format("pykraft-log").load(str(log_dir))
    out = str(root / "parquet")
    # The first job in a session pays for JIT and Python worker start-up: report it apart.
    times = [timed(lambda: df.write.mode("overwrite").parquet(out))[1] for _ in range(3)]
    spark_count = spark.read.parquet(out).count()
    assert spark_count == plain_count == records, (spark_count, plain_count, records)
    return {
        "records": records,
        "plain_python_read_records_per_s": round(plain_count / plain_s),
        "spark_export_parquet_records_per_s": round(spark_count / min(times[1:])),
        "spark_export_parquet_first_run_records_per_s": round(spark_count / times[0]),
        "plain_python_read_s": round(plain_s, 2),
        "spark_export_s": round(min(times[1:]), 2),
        "splits": df.rdd.getNumPartitions(),
    }


GIB = 1 << 30


def bench_incremental(spark: Any, root: Path, records: int) -> dict[str, Any]:
    """export-topic's full run, then incremental ones (see the module doc)."""
    log_dir, out = root / "incremental-logs", root / "incremental-out"
    write_logs(log_dir, records, segment_bytes=GIB)

    def run(expected: int) -> float:
        result, seconds = timed(
            lambda: export_topic(spark, str(log_dir), TOPIC, out, wall_clock_ms=lambda: NOW_MS)
        )
        assert result.records == expected, (result.records, expected)
        return seconds

    full_s = run(records)
    figures: dict[str, Any] = {"records": records, "full_run_s": round(full_s, 2)}
    batch = records // LOG_PARTITIONS // RECORDS_PER_BATCH
    for name, new in (("few", LOG_PARTITIONS), ("10k", 10_000)):
        write_logs(log_dir, new, segment_bytes=GIB, first_batch=batch)
        batch += max(new // LOG_PARTITIONS // RECORDS_PER_BATCH, 1)
        seconds = run(new)
        figures[f"incremental_{name}_records"] = new
        figures[f"incremental_{name}_s"] = round(seconds, 2)
        figures[f"incremental_{name}_to_full_ratio"] = round(seconds / full_s, 3)
    figures["nothing_new_s"] = round(run(0), 3)
    return figures


def snapshot_records(partitions: int) -> list[MetadataRecord]:
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(
            broker_id=b,
            incarnation_id=uuid_to_kafka_string(bytes([b]) * 16),
            broker_epoch=b,
            fenced=False,
        )
        for b in range(1, 7)
    ]
    per_topic = 1000
    for t in range(partitions // per_topic):
        topic_id = uuid_to_kafka_string(t.to_bytes(16, "big"))
        records.append(TopicRecord(name=f"topic-{t}", topic_id=topic_id))
        for p in range(per_topic):
            replicas = tuple(1 + (t + p + i) % 6 for i in range(3))
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=topic_id,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                )
            )
    return records


JSON_SCHEMA = (
    "type STRING, partitionId INT, topicId STRING, replicas ARRAY<INT>, isr ARRAY<INT>, leader INT"
)


def bench_metadata(spark: Any, root: Path, partitions: int) -> dict[str, Any]:
    records = snapshot_records(partitions)
    image = apply_records(MetadataImage.EMPTY, records, offset=len(records) - 1, epoch=1)
    directory = root / "snapshots"
    directory.mkdir()
    path = write_snapshot(directory, image, NOW_MS)
    ours = (
        spark.read.format("pykraft-metadata")
        .load(str(directory))
        .where("record_type = 'PartitionRecord'")
        .groupBy("partition.leader")
        .count()
    )
    theirs = (
        spark.read.schema(JSON_SCHEMA)
        .json(str(path))
        .where("type = 'PartitionRecord'")
        .groupBy("leader")
        .count()
    )
    view = spark.read.format("pykraft-metadata").option("view", "partitions").load(str(directory))
    # Each query twice, the faster kept: neither side pays the other's warm-up.
    ours_rows, ours_s = min(
        (timed(lambda: sorted(tuple(r) for r in ours.collect())) for _ in range(2)),
        key=lambda pair: pair[1],
    )
    theirs_rows, theirs_s = min(
        (timed(lambda: sorted(tuple(r) for r in theirs.collect())) for _ in range(2)),
        key=lambda pair: pair[1],
    )
    view_rows, view_s = min(
        (timed(lambda: view.groupBy("leader").count().collect()) for _ in range(2)),
        key=lambda pair: pair[1],
    )
    assert ours_rows == theirs_rows == sorted(tuple(r) for r in view_rows), "results differ"
    assert sum(count for _, count in ours_rows) == partitions
    return {
        "partitions": partitions,
        "snapshot_bytes": path.stat().st_size,
        "pykraft_metadata_records_s": round(ours_s, 2),
        "spark_read_json_s": round(theirs_s, 2),
        "pykraft_metadata_partitions_view_s": round(view_s, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    spark, session_s = timed(lambda: build_session(args.master, "pykraft bench"))
    try:
        with tempfile.TemporaryDirectory(prefix="pykraft-bench-") as scratch:
            log = bench_log(spark, Path(scratch), args.records)
            print(
                f"pykraft-log: {log['records']} records; plain Python read "
                f"{log['plain_python_read_records_per_s']:,} records/s; Spark export to "
                f"Parquet {log['spark_export_parquet_records_per_s']:,} records/s "
                f"({log['spark_export_parquet_first_run_records_per_s']:,} on a cold "
                f"session), {log['splits']} splits"
            )
            kafka = bench_kafka(spark, Path(scratch), args.records)
            print(
                f"pykraft-kafka: {kafka['records']} records ({kafka['payload_mb']} MB) via "
                f"{kafka['splits']} splits: plain confluent-kafka consumer "
                f"{kafka['plain_confluent_consumer_records_per_s']:,} records/s "
                f"({kafka['plain_confluent_consumer_mb_per_s']} MB/s); pykraft-kafka to Parquet "
                f"{kafka['pykraft_kafka_parquet_records_per_s']:,} records/s "
                f"({kafka['pykraft_kafka_parquet_mb_per_s']} MB/s); pykraft-log to Parquet "
                f"{kafka['pykraft_log_parquet_records_per_s']:,} records/s "
                f"({kafka['pykraft_log_parquet_mb_per_s']} MB/s)"
            )
            incremental = bench_incremental(spark, Path(scratch), args.records)
            print(
                f"export-topic fixed overhead: full run of {incremental['records']:,} records "
                f"{incremental['full_run_s']} s; incremental run of "
                f"{incremental['incremental_few_records']} new records "
                f"{incremental['incremental_few_s']} s "
                f"({incremental['incremental_few_to_full_ratio']:.1%} of the full run), of "
                f"{incremental['incremental_10k_records']:,} new "
                f"{incremental['incremental_10k_s']} s "
                f"({incremental['incremental_10k_to_full_ratio']:.1%}); nothing new "
                f"{incremental['nothing_new_s']} s; a new Spark session {session_s:.1f} s more"
            )
            meta = bench_metadata(spark, Path(scratch), args.partitions)
            print(
                f"pykraft-metadata: {meta['partitions']:,}-partition snapshot "
                f"({meta['snapshot_bytes']:,} bytes): partitions per leader in "
                f"{meta['pykraft_metadata_records_s']} s (records view), "
                f"{meta['pykraft_metadata_partitions_view_s']} s (partitions view); "
                f"spark.read.json {meta['spark_read_json_s']} s"
            )
    finally:
        spark.stop()
    print(
        json.dumps(
            {
                "bench": "spark_export",
                "master": args.master,
                "log": log,
                "kafka": kafka,
                "incremental": {**incremental, "session_start_s": round(session_s, 2)},
                "metadata": meta,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
