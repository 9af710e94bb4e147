"""Spark jobs over files written by pykraft's own storage and metadata code.

Builds, in a scratch directory:

* a controller's snapshot (``metadata.snapshot.write_snapshot``) of a 3-broker cluster with two
  topics, one partition under-replicated and one offline;
* a broker's log dir: the ``clicks`` topic's partitions written by ``storage.PartitionLog``
  (several segments each, all four compression codecs) and its high-watermark checkpoint;

then runs both jobs in one local Spark session — ``report`` (Parquet tables, a summary, PNG
charts and ``report.html`` holding them all) and ``export-topic`` twice, the second time after
more records were committed, to show that a rerun exports only the new offsets. The same
jobs from the command line:

    pykraft spark report DATA/metadata --out DATA/report --log-dirs DATA/logs
    pykraft spark export-topic --log-dirs DATA/logs --topic clicks --out DATA/clicks

No process runs here: the files are written directly. ``examples/spark_live_cluster.py`` runs
the same jobs over the files of a real cluster (``pykraft dev``) it starts, produces to and stops.

Run: ``.venv/bin/python examples/spark_report.py [--data-dir DIR] [--master URL]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pykraft.export.export_topic_job import export_topic, print_result
from pykraft.export.report_job import run_report
from pykraft.export.session import DEFAULT_MASTER, build_session
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    uuid_to_kafka_string,
)
from pykraft.metadata.snapshot import write_snapshot
from pykraft.storage.checkpoints import REPLICATION_CHECKPOINT, write_offset_checkpoint
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import CompressionType
from pykraft.storage.records import Header, SimpleRecord, build_batch
from pykraft.storage.system_clock import SystemClock
from pykraft.storage.topic_partition import TopicPartition

TOPIC = "clicks"
PARTITIONS = 3
NOW_MS = 1_700_000_000_000


def cluster_records() -> list[MetadataRecord]:
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(
            broker_id=b,
            incarnation_id=uuid_to_kafka_string(bytes([b]) * 16),
            broker_epoch=10 + b,
            fenced=False,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + b),),
        )
        for b in (1, 2, 3)
    ]
    for name, count in ((TOPIC, PARTITIONS), ("orders", 6)):
        topic_id = uuid_to_kafka_string(name.encode().ljust(16, b"-"))
        records.append(TopicRecord(name=name, topic_id=topic_id))
        for p in range(count):
            replicas = tuple(1 + (p + i) % 3 for i in range(3))
            isr, leader = replicas, replicas[0]
            if name == "orders" and p == 4:
                isr = replicas[:2]  # a follower fell behind: under-replicated
            if name == "orders" and p == 5:
                isr, leader = (), -1  # every replica lost: offline
            records.append(
                PartitionRecord(
                    partition_id=p, topic_id=topic_id, replicas=replicas, isr=isr, leader=leader
                )
            )
    records.append(
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name=TOPIC,
            name="retention.ms",
            value="86400000",
        )
    )
    return records


def write_metadata(directory: Path) -> Path:
    snapshots = directory / "snapshots"
    snapshots.mkdir(parents=True, exist_ok=True)
    records = cluster_records()
    image = apply_records(MetadataImage.EMPTY, records, offset=len(records) - 1, epoch=1)
    return write_snapshot(snapshots, image, NOW_MS)


def produce(log_dir: Path, batches: int, first_batch: int) -> None:
    """Append ``batches`` batches to every partition and commit them (high watermark)."""
    codecs = list(CompressionType)
    high_watermarks = {}
    for partition in range(PARTITIONS):
        tp = TopicPartition(TOPIC, partition)
        log = PartitionLog.open(log_dir / tp.dir_name(), LogConfig(segment_bytes=16 * 1024))
        for n in range(first_batch, first_batch + batches):
            records = [
                SimpleRecord(
                    key=f"user-{(n * 7 + i) % 50}".encode(),
                    value=f'{{"page": "/p/{n}/{i}", "ms": {i}}}'.encode(),
                    timestamp=NOW_MS + n * 100 + i,
                    headers=(Header("source", b"example"),),
                )
                for i in range(20)
            ]
            batch = build_batch(records, compression=codecs[n % len(codecs)])
            log.append_as_leader(bytearray(batch), 0, NOW_MS + n)
        log.update_high_watermark(log.log_end_offset)
        high_watermarks[tp] = log.high_watermark
        log.flush()
        log.close()
    write_offset_checkpoint(log_dir / REPLICATION_CHECKPOINT, high_watermarks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where to write (default: a new temporary directory)",
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master URL")
    args = parser.parse_args()
    data = args.data_dir or Path(tempfile.mkdtemp(prefix="pykraft-spark-"))
    snapshot = write_metadata(data / "metadata")
    produce(data / "logs", batches=60, first_batch=0)
    print(f"wrote {snapshot} and {PARTITIONS} partitions of {TOPIC!r} under {data / 'logs'}")
    spark = build_session(args.master, "pykraft example")
    clock = SystemClock()
    try:
        started = time.monotonic()
        run_report(spark, data / "metadata", data / "report", log_dirs=str(data / "logs"))
        print()
        first = export_topic(
            spark, str(data / "logs"), TOPIC, data / TOPIC, wall_clock_ms=clock.wall_clock_ms
        )
        print_result(first, TOPIC, data / TOPIC)
        produce(data / "logs", batches=5, first_batch=60)  # more records get committed
        second = export_topic(
            spark, str(data / "logs"), TOPIC, data / TOPIC, wall_clock_ms=clock.wall_clock_ms
        )
        print_result(second, TOPIC, data / TOPIC)
        total = spark.read.parquet(str(data / TOPIC)).count()
        print(
            f"\n{data / TOPIC} now holds {total} records "
            f"({first.records} + {second.records}); jobs took "
            f"{time.monotonic() - started:.1f} s"
        )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
