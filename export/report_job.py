"""``report``: a cluster health report from a controller's metadata snapshot.

From the typed views of ``pykraft-metadata`` at one snapshot (default: the latest) it computes,
with Spark SQL, and writes as Parquet under ``OUT/``:

* ``broker_load``: leaders, replicas and preferred leaders per broker, and Kafka's leader
  imbalance ratio (partitions whose preferred replica — the first — is the broker but whose leader
  is not, over the partitions it is preferred for: ``KafkaController``'s auto-rebalance check);
* ``broker_skew``: min, max, mean and max/mean of leaders and replicas over unfenced brokers;
* ``under_replicated`` (a leader but fewer ISR members than replicas) and ``offline`` (no leader,
  or a leader that is fenced or not registered: Kafka's OfflinePartitionsCount);
* ``topics``: partitions, replication factor, under-replicated, offline and config overrides;
* ``isr_changes``: the retained metadata log's PartitionChange records, each with the ISR it
  replaced and whether it shrank or expanded it;
* ``partition_sizes`` (with ``--log-dirs``): each replica's segment bytes, as
  ``kafka-log-dirs --describe`` reports them (``export.log_dirs.replica_sizes``).

``OUT`` is a directory or any Hadoop URI (``hdfs://``, ``s3a://``, ``file:``): the tables go
through Spark's writers, the small files (the charts, ``report.html`` — summary, charts and
every small table on one page — and ``summary.txt``, the printed summary) through the driver's
``export.output_store``. What to show is ``export.report_content``'s (pure); each step is
announced on stderr as it starts, under Spark's console progress bar when the CLI runs it.
Runs as ``pykraft spark report SNAPSHOT_DIR --out DIR`` or with ``spark-submit
export/report_job.py SNAPSHOT_DIR --out DIR``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from pykraft.export.job_args import add_report_arguments, run_job
from pykraft.export.log_dirs import parse_log_dirs, replica_sizes
from pykraft.export.output_store import OutputStore
from pykraft.export.report_content import (
    CHART_FILE,
    HTML_FILE,
    SIZES_CHART_FILE,
    SIZES_TABLE,
    SUMMARY_FILE,
    page,
    position_text,
    report_charts,
    summary,
)
from pykraft.export.spark_sources import METADATA_FORMAT

TABLES = (
    "broker_load",
    "broker_skew",
    "partitions",
    "under_replicated",
    "offline",
    "topics",
    "isr_changes",
)
# Tables small enough to collect (one row per broker, topic, unhealthy partition or change).
SMALL_TABLES = (
    "broker_load",
    "broker_skew",
    "topics",
    "under_replicated",
    "offline",
    "isr_changes",
)
SIZES_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("broker_id", IntegerType(), True),
        StructField("log_dir", StringType(), False),
        StructField("size", LongType(), False),
    ]
)

add_arguments = add_report_arguments
__all__ = ["CHART_FILE", "HTML_FILE", "SIZES_TABLE", "SUMMARY_FILE", "TABLES", "run_report"]


def _view(spark: SparkSession, root: Path, view: str, snapshot: str) -> DataFrame:
    reader = spark.read.format(METADATA_FORMAT).option("view", view).option("snapshot", snapshot)
    return reader.load(str(root))


def compute(spark: SparkSession, root: Path, snapshot: str = "latest") -> dict[str, DataFrame]:
    """The report's tables (lazy DataFrames)."""
    partitions = _view(spark, root, "partitions", snapshot).cache()
    brokers = _view(spark, root, "brokers", snapshot).select("broker_id", "fenced").cache()
    live = brokers.where(~F.col("fenced")).select(F.col("broker_id").alias("leader"))
    has_live_leader = partitions.join(live, "leader", "left_semi")
    offline = partitions.join(
        has_live_leader.select("topic", "partition"), ["topic", "partition"], "left_anti"
    )
    under = has_live_leader.where(F.size("isr") < F.size("replicas"))
    load = _broker_load(partitions, brokers)
    return {
        "broker_load": load,
        "broker_skew": _skew(load.where(~F.col("fenced"))),
        "partitions": partitions,
        "under_replicated": under,
        "offline": offline,
        "topics": _topics(spark, root, snapshot, partitions, under, offline),
        "isr_changes": _isr_changes(spark, root, snapshot),
    }


def _broker_load(partitions: DataFrame, brokers: DataFrame) -> DataFrame:
    replicas = (
        partitions.select(F.explode("replicas").alias("broker_id"))
        .groupBy("broker_id")
        .agg(F.count("*").alias("replicas"))
    )
    leaders = (
        partitions.where(F.col("leader") >= 0)
        .groupBy(F.col("leader").alias("broker_id"))
        .agg(F.count("*").alias("leaders"))
    )
    preferred = (
        partitions.select(
            F.col("replicas")[0].alias("broker_id"),
            (F.col("leader") != F.col("replicas")[0]).alias("moved"),
        )
        .groupBy("broker_id")
        .agg(
            F.count("*").alias("preferred_leaders"),
            F.sum(F.col("moved").cast("int")).alias("not_preferred_leader"),
        )
    )
    # Brokers that are registered, plus any replica placed on one that is not.
    ids = brokers.select("broker_id").union(replicas.select("broker_id")).distinct()
    load = (
        ids.join(brokers, "broker_id", "left")
        .join(leaders, "broker_id", "left")
        .join(replicas, "broker_id", "left")
        .join(preferred, "broker_id", "left")
        .fillna(0, ["leaders", "replicas", "preferred_leaders", "not_preferred_leader"])
        .withColumn("registered", F.col("fenced").isNotNull())
        .fillna(True, ["fenced"])
    )
    imbalance = F.when(
        F.col("preferred_leaders") > 0, F.col("not_preferred_leader") / F.col("preferred_leaders")
    )
    return (
        load.withColumn("leader_imbalance", imbalance)
        .select(
            "broker_id",
            "registered",
            "fenced",
            "leaders",
            "replicas",
            "preferred_leaders",
            "leader_imbalance",
        )
        .orderBy("broker_id")
    )


def _skew(load: DataFrame) -> DataFrame:
    rows = [
        load.agg(
            F.lit(metric).alias("metric"),
            F.min(metric).alias("min"),
            F.max(metric).alias("max"),
            F.avg(metric).alias("mean"),
        )
        for metric in ("leaders", "replicas")
    ]
    skew = rows[0].union(rows[1])
    return skew.withColumn("max_over_mean", F.when(F.col("mean") > 0, F.col("max") / F.col("mean")))


def _topics(
    spark: SparkSession,
    root: Path,
    snapshot: str,
    partitions: DataFrame,
    under: DataFrame,
    offline: DataFrame,
) -> DataFrame:
    topics = (
        _view(spark, root, "topics", snapshot)
        .select("topic", "topic_id", "partitions", "replication_factor")
        .cache()
    )
    configs = (
        _view(spark, root, "configs", snapshot)
        .where("resource_type_name = 'topic'")
        .groupBy(F.col("resource_name").alias("topic"))
        .agg(F.count("*").alias("config_overrides"))
    )
    counts = [
        frame.groupBy("topic").agg(F.count("*").alias(name))
        for frame, name in ((under, "under_replicated"), (offline, "offline"))
    ]
    result = topics
    for frame in (*counts, configs):
        result = result.join(frame, "topic", "left")
    return result.fillna(0, ["under_replicated", "offline", "config_overrides"]).orderBy("topic")


def _isr_changes(spark: SparkSession, root: Path, snapshot: str) -> DataFrame:
    """The retained log's PartitionChangeRecords, each with the ISR it replaced (from the
    partition's previous PartitionRecord or change, in the snapshot or the log) and whether
    it removed members (Kafka's IsrShrinksPerSec) or added them (IsrExpandsPerSec)."""
    records = (
        spark.read.format(METADATA_FORMAT)
        .option("snapshot", snapshot)
        .option("includeLog", "true")
        .load(str(root))
        .where("record_type IN ('PartitionRecord', 'PartitionChangeRecord')")
    )
    history = records.select(
        "source",
        "offset",
        "epoch",
        "timestamp",
        "record_index",
        "record_type",
        F.coalesce("partition.topic_id", "partition_change.topic_id").alias("topic_id"),
        F.coalesce("partition.partition_id", "partition_change.partition_id").alias("partition"),
        F.coalesce("partition.isr", "partition_change.isr").alias("isr"),
        F.col("partition_change.leader").alias("leader"),
    )
    # A snapshot's records (no offset) come before the log's; an absent ISR means unchanged.
    before = (
        Window.partitionBy("topic_id", "partition")
        .orderBy(F.coalesce("offset", F.lit(-1)), "record_index")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    isr_before = F.last("isr", ignorenulls=True).over(before)
    changes = history.withColumn("isr_before", isr_before).where(
        "source = 'log' AND record_type = 'PartitionChangeRecord'"
    )
    names = _view(spark, root, "topics", snapshot).select("topic", "topic_id")
    changed = F.col("isr").isNotNull() & F.col("isr_before").isNotNull()
    return (
        changes.select(
            "offset",
            "epoch",
            "timestamp",
            "topic_id",
            "partition",
            "isr_before",
            "isr",
            "leader",
            (changed & (F.size(F.array_except("isr_before", "isr")) > 0)).alias("shrink"),
            (changed & (F.size(F.array_except("isr", "isr_before")) > 0)).alias("expand"),
        )
        .join(names, "topic_id", "left")
        .orderBy("offset")
    )


def write_tables(
    spark: SparkSession,
    tables: dict[str, DataFrame],
    collected: dict[str, list[Any]],
    store: OutputStore,
) -> None:
    """Write every table with Spark's writer; the small ones from their collected rows (no
    second computation)."""
    for name, frame in tables.items():
        if name in collected:
            frame = spark.createDataFrame(collected[name], frame.schema)
        frame.coalesce(1).write.mode("overwrite").parquet(store.location(name))


def _quiet(line: str) -> None:
    pass


def run_report(
    spark: SparkSession,
    root: Path,
    out: str | Path,
    snapshot: str = "latest",
    *,
    log_dirs: str | None = None,
    progress: Callable[[str], None] = _quiet,
) -> dict[str, list[Any]]:
    """Compute, write and summarise; returns the small tables as collected rows. ``out`` is
    a directory or any Hadoop URI (``export.output_store``); ``log_dirs`` (``log.dirs``
    syntax) adds the replicas' sizes; ``progress`` is told each step as it starts."""
    store = OutputStore(spark, str(out))
    try:
        return _run(spark, root, store, snapshot, log_dirs, progress)
    finally:
        store.close()


def _run(
    spark: SparkSession,
    root: Path,
    store: OutputStore,
    snapshot: str,
    log_dirs: str | None,
    progress: Callable[[str], None],
) -> dict[str, list[Any]]:
    tables = compute(spark, root, snapshot)
    steps = len(SMALL_TABLES) + 3 + (log_dirs is not None)
    step = iter(range(1, steps + 1))
    collected = {}
    for name in SMALL_TABLES:
        progress(f"[{next(step)}/{steps}] computing {name}")
        collected[name] = tables[name].collect()
    if log_dirs is not None:
        progress(f"[{next(step)}/{steps}] measuring partition sizes in {log_dirs}")
        sizes = replica_sizes(parse_log_dirs(log_dirs))  # the driver reads the log dirs
        collected[SIZES_TABLE] = [Row(**attrs.asdict(size)) for size in sizes]
        tables[SIZES_TABLE] = spark.createDataFrame(collected[SIZES_TABLE], SIZES_SCHEMA)
    progress(f"[{next(step)}/{steps}] writing the tables as Parquet to {store.uri}")
    store.mkdirs()
    if log_dirs is None:  # no sizes from an earlier run with --log-dirs left beside these
        store.delete(SIZES_TABLE)
        store.delete(SIZES_CHART_FILE)
    write_tables(spark, tables, collected, store)
    progress(f"[{next(step)}/{steps}] drawing the charts")
    charts = report_charts(collected)
    for chart in charts:
        if chart.file_name is not None and chart.png is not None:
            store.write_replacing(chart.file_name, chart.png)
    progress(f"[{next(step)}/{steps}] writing {HTML_FILE} and {SUMMARY_FILE}")
    position = tables["partitions"].select("snapshot_id", "end_offset").first()
    heading = f"pykraft report: {position_text(position)}"
    files = [*tables, *(c.file_name for c in charts if c.file_name), HTML_FILE, SUMMARY_FILE]
    text = summary(heading, collected, f"wrote {', '.join(files)} to {store.uri}")
    store.write_replacing(HTML_FILE, page(heading, collected, charts).encode())
    store.write_replacing(SUMMARY_FILE, text.encode() + b"\n")
    print(text)
    return collected


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    run_report(
        spark,
        args.snapshot_dir,
        args.out,
        args.snapshot,
        log_dirs=args.log_dirs,
        progress=_progress,
    )
    return 0


def _progress(line: str) -> None:
    print(f"report: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point."""
    return run_job(
        argv,
        prog="report_job",
        description=__doc__,
        add_arguments=add_arguments,
        app_name="pykraft report",
        run=run,
    )


if __name__ == "__main__":
    sys.exit(main())
